"""Untrusted text stays text, and a store that cannot be opened is a clear message."""

from __future__ import annotations

import pytest
from textual.widgets import DataTable, Static
from ui_helpers import SIZE, make_app, notifications, thought, wait_for

from bbm_tui.core import llm
from bbm_tui.core.config import Config
from bbm_tui.core.store import Store
from bbm_tui.core.trace.session import NewTrace, TraceSession
from bbm_tui.ui.dialogs import StoreErrorScreen
from bbm_tui.ui.screens.new_session import NewSessionScreen
from bbm_tui.ui.screens.sessions import SessionsScreen
from bbm_tui.ui.screens.trace import TraceScreen
from bbm_tui.ui.widgets.thought import ThoughtView

HOSTILE = [
    "[bold]x[/",
    "[link=http://x]y[/link]",
    "\x1b[31mred",
    "\x1b]52;c;SGVsbG8=\x07",
    "\u202eevil",
    "[/]",
    "[@click=app.quit]q[/]",
]
NO_CONTROLS = ("\x1b", "\x07", "\u202e", "\x9b")


def shown(widget) -> str:
    """The text a widget puts on screen."""
    return str(widget.render())


def assert_literal(text: str) -> None:
    for bad in NO_CONTROLS:
        assert bad not in text
    assert "[bold]x[/" in text and "[link=http://x]y[/link]" in text and "[/]" in text
    assert "␛[31mred" in text and "␛]52;c;SGVsbG8=␇" in text and "<U+202E>evil" in text


def hostile_session(store: Store) -> TraceSession:
    text = " ".join(HOSTILE)
    trace = TraceSession.create(
        store,
        NewTrace("word_sorting", f"apple {text}", target=f"target {text}"),
        llm.ModelSpec(f"replay/{HOSTILE[0]}"),
        name=f"name {text}",
    )
    trace.load_recorded([f"step one {text}", f"So the answer is {text}"])
    return trace


async def test_hostile_text_renders_literally_everywhere(store: Store) -> None:
    trace = hostile_session(store)
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))
        await pilot.pause()
        screen = app.screen
        assert_literal(shown(screen.query_one("#question", Static)))
        assert_literal(shown(screen.query_one("#target", Static)))
        assert_literal(shown(screen.query_one("#answer", Static)))
        for view in screen.query(ThoughtView):
            assert_literal(str(view.render()))
        title = shown(screen.query_one("#title-bar .title-left"))
        assert "[bold]x[/" in title and "\x1b" not in title
        # The copy is the raw text: it leaves as base64 in OSC 52, never as raw bytes.
        await pilot.press("y")
        assert app.clipboard == trace.steps[0].text
        # The sessions list too.
        await pilot.press("s")
        await wait_for(pilot, lambda: isinstance(app.screen, SessionsScreen))
        table = app.screen.query_one(DataTable)
        await wait_for(pilot, lambda: table.row_count == 1)
        name = str(table.get_row_at(0)[0])
        # Literal, cut in the middle to the column (its start and its end kept); how much of
        # the start shows depends on the column's width (the Cost and Models columns share it).
        head, tail = name.split("…")
        from bbm_tui.core.textsafe import one_line

        whole = one_line(f"name {' '.join(HOSTILE)}")
        assert whole.startswith(head) and whole.endswith(tail) and head.startswith("name [bold]")
        assert not any(bad in name for bad in NO_CONTROLS)
        assert app.is_running


async def test_hostile_typed_question_and_error_message(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A model other than replay/bbm, which refuses a question of one's own at once.
    app = make_app(Config(model="openai/test-model", api_base="http://127.0.0.1:9/v1"))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, NewSessionScreen))
        await pilot.press("ctrl+t")
        await wait_for(pilot, lambda: app.screen.query("#typed-input"))
        app.screen.query_one("#typed-input").text = " ".join(HOSTILE)
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))
        await pilot.pause()
        trace_screen = app.screen
        assert_literal(shown(trace_screen.query_one("#question", Static)))

        # An error whose message carries markup and escapes (e.g. echoed by a server).
        async def failing(*args, **kwargs):
            raise llm.LLMError("bad_request", "server said: " + " ".join(HOSTILE))
            yield  # an async generator

        monkeypatch.setattr(llm, "stream_step", failing)
        monkeypatch.setattr(llm, "is_loaded", lambda: True)
        await pilot.press("n")
        await wait_for(pilot, lambda: not trace_screen.view.running
                       and "server said" in shown(trace_screen.query_one("#run-status")))
        status = shown(trace_screen.query_one("#run-status"))
        assert_literal(status)
        assert not any("server said" in n for n in notifications(app))  # said once


async def test_a_worker_failure_is_one_notification(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ui_helpers import recorded_session

    trace = recorded_session(store)
    app = make_app(session_id=trace.id)

    def broken(self, number):
        raise RuntimeError("disk says [bold]no[/")

    monkeypatch.setattr(TraceSession, "flag_mistake", broken)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))
        await pilot.press("x")
        await wait_for(pilot, lambda: bool(notifications(app)))
        assert notifications(app) == ["Saving the label failed: disk says [bold]no[/"]
        assert app.is_running


@pytest.mark.parametrize("content", [b"not a database at all, just text", "newer"])
async def test_a_store_that_cannot_be_opened_is_a_clear_message(
    isolated_home, content
) -> None:
    path = isolated_home / "bbm-tui.sqlite3"
    isolated_home.mkdir(parents=True, exist_ok=True)
    if content == "newer":
        import sqlite3

        with sqlite3.connect(path) as connection:
            connection.execute("PRAGMA user_version = 99")
        expected = "newer bbm-tui"
    else:
        path.write_bytes(content)
        expected = "not a SQLite file"
    before = path.read_bytes()
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        # The screen is pushed before it has composed: wait for its message, not just for it.
        await wait_for(pilot, lambda: isinstance(app.screen, StoreErrorScreen)
                       and bool(app.screen.query("#store-error-message")))
        message = shown(app.screen.query_one("#store-error-message"))
        assert expected in message and str(path) in message
        # Nothing else can be reached while the store is unusable.
        await pilot.press("s")
        assert isinstance(app.screen, StoreErrorScreen)
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 1
    assert path.read_bytes() == before  # left untouched


async def test_a_panic_exits_non_zero() -> None:
    """Textual's panic (its input thread dying, say) must not end the command with 0."""
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        app.panic("the input thread died")
    assert app.return_code == 1


async def test_a_huge_thought_is_cut_on_screen_but_copied_whole(store: Store) -> None:
    huge = "word " * 40_000  # 200,000 characters, no newline
    trace = TraceSession.create(store, NewTrace("word_sorting", "b a", "a b"),
                                llm.ModelSpec("replay/bbm"))
    trace.load_recorded([huge.strip(), "So the answer is a b"])
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen)
                       and len(app.screen.query(ThoughtView)) == 2)
        view = thought(app.screen, 1)
        assert view.text == huge.strip()
        assert "179,999 more characters (y copies the whole thought)" in view.shown
        assert len(view.shown) < 21_000
        copied: list[str] = []
        app.copy_to_clipboard = copied.append  # type: ignore[method-assign]
        await pilot.press("y")
        await wait_for(pilot, lambda: bool(copied))
        assert huge.strip() in copied[0]
