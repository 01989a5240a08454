"""The command palette (ctrl+p) and the help screen (?), from what the app, a screen and the
widget with the focus there (a trace view) declare next to their bindings.

A `PALETTE` class attribute maps a binding id to the command's title; the command's help is
the binding's tooltip, and it runs the binding's action on the node that declares it, so that a
command on a trace acts on the trace that has the focus. The help lists the same bindings, as
the user's keymap binds them."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual.actions import parse
from textual.app import App, SystemCommand
from textual.binding import Binding

from bbm_tui.ui.keys import NO_KEY, binding_owners, bindings_as_bound, declared_bindings, key_for

if TYPE_CHECKING:
    from textual.dom import DOMNode
    from textual.screen import Screen

    from bbm_tui.ui.dialogs import KeyHelp


def declared_commands(screen: Screen, app: DOMNode) -> Iterator[SystemCommand]:
    """The commands declared by the focused widget on `screen` and the widgets around it,
    `screen` itself, then the app: innermost first, each in the order it declares them."""
    node = screen.focused or screen
    for owner in node.ancestors_with_self:
        if owner is app:
            break
        yield from _commands_of(owner, node)
    yield from _commands_of(app, node)


def _commands_of(owner: DOMNode, focused: DOMNode) -> Iterator[SystemCommand]:
    """`owner`'s commands, each titled with its key as bound where the focus is ("Next trace
    · n"), so that the palette teaches the key (issue 34, item 16)."""
    titles: dict[str, str] = getattr(type(owner), "PALETTE", {})
    if not titles:
        return
    bindings = {binding.id: binding for binding in declared_bindings(type(owner)) if binding.id}
    for binding_id, title in titles.items():
        binding = bindings[binding_id]
        key = key_for(focused, binding_id)
        shown = title if key == NO_KEY else f"{title} · {key}"
        yield SystemCommand(shown, binding.tooltip, _action(owner, binding.action))


def _action(node: DOMNode, action: str) -> Callable[[], object]:
    """The method `action` ("version(-1)", "app.agreement") names on `node` (or the app), with
    its arguments, to call now."""
    namespace, name, arguments = parse(action)
    method = getattr(node.app if namespace == "app" else node, f"action_{name}")
    return lambda: method(*arguments)


def app_commands(app: Any, screen: Screen) -> Iterator[SystemCommand]:
    """The app's own palette entries: ours in place of Textual's "Screenshot", the queues',
    the charts', then the keys' commands declared next to the bindings (PALETTE)."""
    yield SystemCommand("Screenshot", "Save an SVG of the screen in the data folder",
                        app.action_save_svg)
    yield from app.queues.commands()
    yield SystemCommand("Dataset view", "Charts of dataset files: where the first "
                        "mistakes are, trace lengths, a finder's or backtracking's "
                        "scores beside the paper's", app.action_dataset_view)
    yield SystemCommand("Agreement", "Cohen's kappa between the annotators, as a matrix; "
                        "Krippendorff's alpha", app.action_agreement)
    yield from declared_commands(screen, app)


async def screenshot_once_drawn(app: App[Any]) -> None:
    """Save a screenshot once the screen has its footer again. From the palette, the screen
    below has just come back and its footer recomposes a frame or two later: a screenshot
    taken at once (or after a fixed two refreshes, on a busy machine) had an empty footer
    row. Waits at most a second, then saves what there is."""
    for _ in range(50):
        if _footer_drawn(app.screen):
            break
        await asyncio.sleep(0.02)
    save_screenshot(app)


def _footer_drawn(screen: Screen) -> bool:
    """The screen's footer (if it has one) shows keys, laid out where they will be drawn."""
    from textual.widgets import Footer

    footers = screen.query(Footer)
    if not footers:
        return True
    return any(child.display and child.region.width for child in footers.first().children)


def save_screenshot(app: App[Any]) -> None:
    """An SVG of the screen in the data folder's screenshots/, said in a notification; only
    its owner can read it, as every file the project writes (a screen may show private
    text; Textual's own save_screenshot wrote it 0644)."""
    from datetime import datetime

    from bbm_tui.core.dataset import replacing

    folder = screenshot_folder()
    path = folder / f"bbm-tui_{datetime.now():%Y-%m-%dT%H_%M_%S_%f}.svg"
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        with replacing(path) as out:
            out.write(app.export_screenshot())
    except OSError as error:
        app.notify(f"The screenshot could not be saved in {folder}: {error.strerror}",
                   severity="error", markup=False)
        return
    app.notify(f"Screenshot saved: {path}", markup=False, timeout=6)


def screenshot_folder() -> Path:
    """Screenshots go beside the session store, in the platform's data folder."""
    from bbm_tui.core.store import default_path

    return default_path().parent / "screenshots"


def help_rows(app: App[Any], keymap: Mapping[str, str]) -> list[KeyHelp]:
    """The keys that act where the focus is on the app's screen (the focused widget's, such as
    a trace view's, its screen's, the app's), one row per action, as `keymap` has them: those
    greyed or hidden in the footer for now (esc while nothing runs) too. Textual's own
    scrolling and focus keys are left out; quit and the palette stay."""
    from bbm_tui.ui.dialogs import KeyHelp

    node = app.screen.focused or app.screen
    keys: dict[str, list[str]] = {}
    names: dict[str, tuple[str, str, str]] = {}
    for binding in bindings_as_bound(binding_owners(node), keymap):
        if binding.id is None and binding.action != "quit":
            continue
        display = app.get_key_display(binding)
        if display not in keys.setdefault(binding.action, []):
            keys[binding.action].append(display)
        if binding.id is not None or binding.action not in names:
            names[binding.action] = (binding.description, binding.tooltip, binding.id or "")
    rows = [KeyHelp(" / ".join(displays), *names[action]) for action, displays in keys.items()]
    if app.ENABLE_COMMAND_PALETTE:
        rows.append(KeyHelp(app.get_key_display(Binding(app.COMMAND_PALETTE_BINDING, "")),
                            "palette", "Every command by name"))
    return rows
