"""What each screen declares next to its bindings, and what the app reads from there: the help's
title, the palette's commands (their help the bindings' tooltips), and what each worker does
(the title of its failure's notification)."""

from __future__ import annotations

import ast
from pathlib import Path

from textual.worker import Worker
from ui_helpers import SIZE, make_app, notifications, palette_commands, wait_for

from bbm_tui.ui.app import BbmApp
from bbm_tui.ui.keymap import ui_screen_modules
from bbm_tui.ui.keys import declared_bindings
from bbm_tui.ui.screens.base import BbmScreen

UI = Path(__file__).resolve().parents[2] / "bbm_tui" / "ui"


def declared_classes() -> list[type]:
    """Every class the screens' and dialogs' modules define, and the app."""
    found: list[type] = [BbmApp]
    for module in ui_screen_modules():
        found.extend(thing for thing in vars(module).values()
                     if isinstance(thing, type) and thing.__module__ == module.__name__)
    return found


def test_every_screen_names_itself_for_the_help() -> None:
    screens = [cls for cls in declared_classes()
               if issubclass(cls, BbmScreen) and cls is not BbmScreen
               and cls.__module__ != BbmScreen.__module__]
    assert {cls.__name__ for cls in screens} >= {
        "TraceScreen", "SessionsScreen", "NewSessionScreen", "AnnotateScreen",
        "AdjudicateScreen"}
    for cls in screens:
        assert cls.HELP_TITLE != BbmScreen.HELP_TITLE, cls


def test_every_palette_entry_is_a_binding_with_a_tooltip() -> None:
    """A `PALETTE` names bindings by id; each exists on that class, with a tooltip (the
    command's help), and no two commands share a title."""
    titles: list[str] = []
    for cls in declared_classes():
        palette = cls.__dict__.get("PALETTE")
        if palette is None:
            continue
        bindings = {binding.id: binding for binding in declared_bindings(cls) if binding.id}
        for binding_id, title in palette.items():
            assert binding_id in bindings, (cls, binding_id)
            assert bindings[binding_id].tooltip, (cls, binding_id)
            titles.append(title)
    assert len(titles) == len(set(titles)) and "Flag the first mistake" in titles


def worker_calls() -> list[tuple[str, int, ast.Call]]:
    """Every `@work(...)` and `run_worker(...)` in bbm_tui/ui."""
    found = []
    for path in sorted(UI.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            decorator = isinstance(node.func, ast.Name) and node.func.id == "work"
            started = isinstance(node.func, ast.Attribute) and node.func.attr == "run_worker"
            if decorator or started:
                found.append((str(path.relative_to(UI)), node.lineno, node))
    return found


def test_every_worker_says_what_it_does() -> None:
    """Its description is the title of its failure ("Reading the dataset failed"): no table
    of titles keyed by method names."""
    calls = worker_calls()
    assert len(calls) > 30
    missing = [(path, line) for path, line, call in calls
               if not any(keyword.arg == "description" for keyword in call.keywords)]
    assert missing == []
    source = (UI / "app.py").read_text(encoding="utf-8")
    assert "_WORKER_TITLES" not in source and "sys.modules" not in source


async def test_a_worker_that_says_nothing_fails_as_something() -> None:
    """A worker with no description of its own (Textual names it by its function and
    arguments) fails as "Something failed", never with a function's name."""
    app = make_app()

    async def broken(text: str) -> None:
        raise RuntimeError("the disk is full")

    async with app.run_test(size=SIZE) as pilot:
        worker: Worker = app.run_worker(broken("a"), exit_on_error=False)
        await wait_for(pilot, lambda: bool(notifications(app)))
        described: Worker = app.run_worker(broken("b"), exit_on_error=False,
                                           description="Reading the moon")
        await wait_for(pilot, lambda: len(notifications(app)) == 2)
    assert notifications(app) == ["Something failed: the disk is full",
                                  "Reading the moon failed: the disk is full"]
    assert worker.is_finished and described.is_finished


def test_no_module_of_the_app_is_over_600_lines() -> None:
    """The app's modules stay a size one reads whole (docs/DESIGN.md §7)."""
    sizes = {str(path.relative_to(UI)): len(path.read_text(encoding="utf-8").splitlines())
             for path in UI.rglob("*.py")}
    assert len(sizes) > 40
    assert {path: lines for path, lines in sizes.items() if lines > 600} == {}


async def test_each_screen_offers_its_own_commands_in_the_palette(store) -> None:
    """The new-session and sessions screens' commands are in the palette while they are on
    show (and not elsewhere), and each runs its key's action: "Type a question" opens the
    question dialog, "Rename the session" the rename dialog on the highlighted session."""
    from textual.widgets import DataTable
    from ui_helpers import recorded_session

    from bbm_tui.ui.dialogs import RenameScreen, TypedQuestionScreen
    from bbm_tui.ui.screens.new_session import NewSessionScreen
    from bbm_tui.ui.screens.sessions import SessionsScreen

    recorded_session(store, name="kept")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, NewSessionScreen))
        new = app.screen
        commands = palette_commands(app, new)
        assert {"Start the session", "Type a question", "Change the model"} <= set(commands)
        assert "Rename the session" not in commands
        commands["Type a question"].callback()
        await wait_for(pilot, lambda: isinstance(app.screen, TypedQuestionScreen))
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is new)
        await pilot.press("s")
        await wait_for(pilot, lambda: isinstance(app.screen, SessionsScreen))
        sessions = app.screen
        await wait_for(pilot, lambda: sessions.query_one(DataTable).row_count == 1)
        commands = palette_commands(app, sessions)
        assert "Type a question" not in commands
        commands["Rename the session"].callback()
        await wait_for(pilot, lambda: isinstance(app.screen, RenameScreen))
