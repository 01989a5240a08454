"""Hostile text: Rich markup, ANSI CSI sequences, OSC 52 clipboard writes, OSC 8 links, BEL,
C1 controls, bidi overrides, NUL, lone surrogates and a 1 MB line, in model output (the local
HTTP server), in dataset files (import, run) and in typed input (the new-session screen).

What must hold: the text is shown literally or neutralised (a visible placeholder), never
interpreted, and never crashes a widget; it round-trips unchanged through the store and the
dataset JSONL export, and the ProcessBench / PRM800K JSON; the Markdown export escapes it (a
CommonMark parser finds no markup in it that we did not write) and is safe to `cat`. The
bytes that reach a real terminal (the app in a pseudo-terminal) carry none of the injected
sequences. Lone surrogates (a JSON "\\ud800" with no partner) cannot be stored as UTF-8: a
dataset file holding one is refused naming the file and line, the store refuses one with a
StoreError, and one in model output becomes U+FFFD.

Property-based tests (hypothesis) cover the render path (textsafe, and the app's screen via
Pilot), the store path and the export path.
"""

from __future__ import annotations

import asyncio
import io
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from rich.console import Console

from bbm_tui.cli import main
from bbm_tui.core import llm
from bbm_tui.core.annotation.export import LabelledTrace, export, load_traces, markdown
from bbm_tui.core.config import Config
from bbm_tui.core.dataset import DEFAULT_KEY_ORDER, TraceRow, bundled_rows, read_rows
from bbm_tui.core.generation.stepper import StepFinished, TraceFinished
from bbm_tui.core.store import DATABASE_NAME, Store, StoreError
from bbm_tui.core.tasks import extract_answer, get_task
from bbm_tui.core.textsafe import one_line, printable
from bbm_tui.core.trace.session import NewTrace, TraceSession
from tests.kill_targets import ForkServer, Terminal, errors_on_screen, query, screen_text
from tests.openai_server import FakeOpenAI, Reply

PAYLOADS = {
    "markup": "[bold]b[/bold] [/ [link=https://x]y[/link] [@click=app.quit]z[/] [red]",
    "csi": "\x1b[2J\x1b[31m\x1b[38;5;199mPWN",
    "osc52": "\x1b]52;c;SGVsbG8=\x07",
    "osc8": "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\",
    "bel": "ding\x07",
    "c1": "\x9b31m\x9d0;title\x9c",
    "bidi": "\u202eevil\u202c \u2066iso\u2069",
    "nul": "a\x00b",
}
HOSTILE = " ".join(PAYLOADS.values())
# The injected sequences, as they would reach a terminal if written raw (UTF-8).
INJECTED = [b"\x1b[2J", b"\x1b[31m", b"\x1b[38;5;199mPWN", b"\x1b]52;", b"\x1b]8;;https://evil",
            "\x9b".encode(), "\x9d".encode(), "\x9c".encode(), "\u202e".encode(),
            "\u2066".encode(), b"\x00", b"ding\x07"]
# What a terminal may act on: C0 (but newline), DEL, C1, bidi controls, line/paragraph
# separators, lone surrogates (unwritable).
UNSAFE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029"
                    "\ud800-\udfff]")
SIZE = (160, 50)

# Text to throw at every path: the payloads, pieces of them, Markdown and Rich syntax, line
# starts that open blocks, and arbitrary Unicode.
FRAGMENTS = [*PAYLOADS.values(), "[", "[/", "]", "\\", "[b]", "[/b]", "\x1b", "\x1b[", "\x1b]",
             "\x07", "\x00", "\r", "\t", "\x7f", "\x85", "\u2028", "\ufeff", "&amp;", "&#91;",
             "~~s~~", "$x$", "<b>", "`c`", "*e*", "_u_", "#", "|", "![i](u)", "<https://x.y>",
             "\n", "\n1. fake", "\n2) fake", "\n- item", "\n+ item", "\n# h", "\n    code",
             "\n---", "\n===", "\n> q", "\n```", "\r\n", "   ", "\u00a0", "99.", "-"]
free_text = st.text(max_size=12)
hostile_text = st.lists(st.one_of(st.sampled_from(FRAGMENTS), free_text), max_size=8).map(
    "".join)
surrogates = st.characters(categories=["Cs"])
text_with_surrogates = st.lists(
    st.one_of(st.sampled_from(FRAGMENTS), free_text, surrogates), max_size=8).map("".join)


def assert_safe(text: str) -> None:
    """Nothing in `text` a terminal would act on (newlines aside)."""
    found = UNSAFE.search(text)
    assert found is None, f"{found.group(0)!r} at {found.start()} in {text[:200]!r}"
    text.encode("utf-8")


def squash(text: str) -> str:
    return " ".join(text.split())


def assert_clean_terminal(output: bytes) -> None:
    """The app's own escape sequences are fine; none of the text's may be there."""
    for injected in INJECTED:
        assert injected not in output, f"{injected!r} reached the terminal"
    # The only OSC the app writes is 22 (the pointer's shape); every BEL ends one of those.
    for found in re.finditer(rb"\x1b\]", output):
        assert output[found.start():found.start() + 5] == b"\x1b]22;", output[
            found.start():found.start() + 40]
    assert output.count(b"\x07") == len(re.findall(rb"\x1b\]22;[a-z-]*\x07", output))
    assert re.search(rb"\xc2[\x80-\x9f]", output) is None, "a C1 control reached the terminal"


# ---------------------------------------------------------------------------- render path


@settings(max_examples=400, deadline=None)
@given(text_with_surrogates)
def test_printable_and_one_line_leave_nothing_for_a_terminal(text: str) -> None:
    shown = printable(text)
    assert_safe(shown)
    assert printable(shown) == shown  # the placeholders are themselves safe
    if UNSAFE.search(text) is None:
        assert shown == text.replace("\t", "    ")  # safe text is left alone
    line = one_line(text)
    assert_safe(line)
    assert "\n" not in line
    assert len(one_line(text, 20)) <= 20


def rendered(app) -> tuple[str, str]:
    """The app's screen as a terminal would get it (what export_screenshot draws): the text,
    and the escape sequences written for it."""
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True,
                      color_system="truecolor", record=True, legacy_windows=False)
    console.print(app.screen._compositor.render_update(
        full=True, screen_stack=app._background_screens))
    return console.export_text(styles=False), console.file.getvalue()


def assert_drawn_safely(raw: str) -> None:
    """Every escape sequence in the drawing is one of the compositor's own (colours, cursor
    moves); no character a terminal would act on besides."""
    for found in re.finditer("\x1b", raw):
        assert re.match(r"\x1b\[[0-9;]*[mHK]", raw[found.start():]), raw[
            found.start():found.start() + 30]
    assert_safe(re.sub(r"\x1b\[[0-9;]*[mHK]", "", raw).replace("\r", ""))


def assert_words_shown(text: str, screen: str, what: str) -> None:
    """Every word of the text, made safe, is on the screen literally (markup applied would
    have removed `[bold]`; an escape interpreted would have removed `␛[31m`). The words of
    `one_line` are those of `printable` or parts of them (it turns separators into spaces), so
    this holds whichever of the two a widget uses."""
    missing = [word for word in one_line(text).split() if word not in screen]
    assert not missing, f"{what}: {missing[:5]} not on the screen:\n{screen}"


# Short words (the panes are 60+ columns wide, so none is folded), no combining marks or
# unassigned/private code points (their cells are the terminal's business, not ours).
ui_free = st.text(alphabet=st.characters(exclude_categories=["Cs", "M", "Co", "Cn", "Cf"]),
                  max_size=10)
ui_text = st.lists(st.one_of(st.sampled_from([*PAYLOADS.values(), "[", "[/", "]", "\\",
                                              "\x1b[", "\x00", "\u2028"]), ui_free),
                   min_size=1, max_size=5).map(" ".join)


# An example starts the app (about a second): few of them, always the same ones, and no
# shrinking (a failure prints its example as drawn).
@settings(max_examples=20, deadline=None, derandomize=True,
          phases=[Phase.explicit, Phase.reuse, Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(question=ui_text, target=ui_text, steps=st.lists(ui_text, min_size=1, max_size=3),
       message=ui_text)
def test_the_app_draws_any_text_literally(isolated_home: Path, question: str, target: str,
                                          steps: list[str], message: str) -> None:
    """A thought, the question pane, the target and an error notification, through Pilot:
    drawn without an exception, every word literal, nothing a terminal would act on."""
    with Store.open() as store:
        trace = TraceSession.create(store, NewTrace("word_sorting", question, target),
                                    llm.ModelSpec("replay/bbm"))
        trace.load_recorded(steps)

    async def check() -> None:
        from bbm_tui.ui.app import BbmApp

        app = BbmApp(Config(), session_id=trace.id, warm_up=False, wall_clock=False)
        original = TraceSession.flag_mistake

        def failing(self, number):
            raise RuntimeError(message)

        TraceSession.flag_mistake = failing  # type: ignore[method-assign]
        try:
            async with app.run_test(size=SIZE, notifications=True) as pilot:
                await until(pilot, lambda: "Label:" in rendered(app)[0], "the trace")
                screen, raw = rendered(app)
                assert_drawn_safely(raw)
                for number, step in enumerate(steps, start=1):
                    assert_words_shown(step, screen, f"thought {number}")
                assert_words_shown(question, screen, "the question")
                assert_words_shown(target, screen, "the target")
                await pilot.press("x")  # the label fails with the message: a notification
                await until(pilot, lambda: "Saving the label failed" in rendered(app)[0],
                            "the notification")
                screen, raw = rendered(app)
                assert_drawn_safely(raw)
                assert_words_shown(message, screen, "the notification")
                assert app.is_running
        finally:
            TraceSession.flag_mistake = original  # type: ignore[method-assign]

    asyncio.run(check())


async def until(pilot, condition, what: str, timeout: float = 30) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await pilot.pause(0.02)


TYPED_MODEL = Config(model="openai/test-model", api_base="http://127.0.0.1:9/v1")


async def test_a_typed_question_is_stored_exactly_and_shown_literally(
    isolated_home: Path,
) -> None:
    """The new-session screen's typed question (ctrl+t), holding every payload."""
    from bbm_tui.ui.app import BbmApp

    # A model other than replay/bbm, which refuses a question of one's own at once.
    app = BbmApp(TYPED_MODEL, warm_up=False, wall_clock=False)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await until(pilot, lambda: "Question" in rendered(app)[0], "the new-session screen")
        await pilot.press("ctrl+t")
        await until(pilot, lambda: bool(app.screen.query("#typed-input")), "the typed question")
        app.screen.query_one("#typed-input").text = HOSTILE
        await pilot.press("ctrl+r")
        await until(pilot, lambda: "Label:" in rendered(app)[0], "the trace")
        screen, raw = rendered(app)
        assert_drawn_safely(raw)
        assert_words_shown(HOSTILE, screen, "the question")
        assert app.is_running
        assert app.store.session(app.screen.view.trace.id).input == HOSTILE
    with Store.open() as store:
        # Left with no step, the session was not kept (issue 10, item 11).
        assert store.sessions() == []


async def test_a_typed_lone_surrogate_is_refused_with_a_message(isolated_home: Path) -> None:
    """Not something a terminal can send (its bytes are decoded with replacement), but a
    widget could hold one: the store refuses it, the app says so and carries on."""
    from bbm_tui.ui.app import BbmApp

    # A model other than replay/bbm, which refuses a question of one's own at once.
    app = BbmApp(TYPED_MODEL, warm_up=False, wall_clock=False)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await until(pilot, lambda: "Question" in rendered(app)[0], "the new-session screen")
        await pilot.press("ctrl+t")
        await until(pilot, lambda: bool(app.screen.query("#typed-input")), "the typed question")
        app.screen.query_one("#typed-input").text = "pear \ud800 apple"
        await pilot.press("ctrl+r")
        await until(pilot, lambda: "not valid Unicode" in " ".join(
            str(note.message) for note in app._notifications), "the message")
        assert app.is_running
    with Store.open() as store:
        assert store.sessions() == []


# ---------------------------------------------------------------------------- store path


@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=text_with_surrogates)
def test_the_store_keeps_any_text_exactly_or_refuses_it_whole(tmp_path: Path,
                                                              text: str) -> None:
    with Store.open(tmp_path / DATABASE_NAME) as store:
        before = len(store.sessions())
        if re.search("[\ud800-\udfff]", text):
            with pytest.raises(StoreError, match=r"not valid Unicode .*nothing was saved"):
                store.create_session(task="word_sorting", input=text, model="m")
            assert len(store.sessions()) == before
            session = store.create_session(task="word_sorting", input="fine", model="m")
            with pytest.raises(StoreError, match="lone surrogate"):
                store.add_step(session.id, parent_id=None, number=1, text=text)
            assert store.branch(session.id) == []
            return
        session = store.create_session(task="word_sorting", input=text, model=text,
                                       target=text, name=text)
        step = store.add_step(session.id, parent_id=None, number=1, text=text, answer=text)
        run = store.create_finder_run(session.id, method="direct-trace", model=text,
                                      params={"note": text})
        store.add_finder_verdict(run, step_number=None, raw=text, verdict=None)
    with Store.open(tmp_path / DATABASE_NAME) as store:  # read back from the file
        saved = store.session(session.id)
        assert (saved.input, saved.model, saved.target, saved.name) == (text,) * 4
        assert [(s.text, s.answer) for s in store.branch(session.id)] == [(text, text)]
        assert store.step(step.id).text == text
        [finder] = store.finder_runs(session.id)
        assert finder.params == {"note": text} and finder.verdicts[0].raw == text
        assert store.integrity_check() == "ok"


# ---------------------------------------------------------------------------- export path


MD = MarkdownIt("commonmark").enable(["table", "strikethrough"])
FORBIDDEN = {"html_block", "html_inline", "link_open", "image", "code_block", "fence", "hr",
             "table_open", "s_open", "em_open", "heading_open", "blockquote_open",
             "bullet_list_open", "ordered_list_open", "strong_open", "code_inline"}


def inline_text(token) -> str:
    parts = []
    for child in token.children or []:
        if child.type in ("text", "code_inline"):
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append("\n")
    return "".join(parts)


def assert_markdown_is_ours(md: str, trace: LabelledTrace) -> None:
    """Parse the export as CommonMark (+ tables, strikethrough): exactly the structure we
    write, no markup from the text (links, HTML, emphasis, code, blocks), every text literal."""
    assert_safe(md)
    tokens = MD.parse(md)
    kinds = [token.type for token in tokens]
    assert kinds.count("heading_open") == 1 and kinds.count("blockquote_open") == 1
    assert kinds.count("bullet_list_open") == 1 and kinds.count("ordered_list_open") <= 1
    for unwanted in ("html_block", "code_block", "fence", "hr", "table_open"):
        assert unwanted not in kinds, (unwanted, md)
    heading = tokens[kinds.index("heading_open") + 1]
    assert squash(inline_text(heading)) == squash(one_line(trace.name))
    quote = [t for t in tokens[kinds.index("blockquote_open"):kinds.index("blockquote_close")]
             if t.type == "inline"]
    assert squash(" ".join(inline_text(t) for t in quote)) == squash(printable(trace.input))
    facts = tokens[kinds.index("bullet_list_open"):kinds.index("bullet_list_close")]
    codes = [child.content for t in facts if t.type == "inline" for child in t.children
             if child.type == "code_inline"]
    expected = [trace.model, *([trace.target] if trace.target is not None else []),
                *([trace.answer] if trace.answer is not None else [])]
    # Backquotes are kept (a code span as long as needed holds them: issue 33).
    assert codes == [one_line(text) or " " for text in expected]
    if not trace.steps:
        return
    start, end = kinds.index("ordered_list_open"), kinds.index("ordered_list_close")
    items = [t for t in tokens[start:end] if t.type == "inline"]
    assert len(items) == len(trace.steps), md
    assert kinds[start:end].count("list_item_open") == len(trace.steps)
    for index, (item, step) in enumerate(zip(items, trace.steps, strict=True)):
        children = [c for c in item.children or [] if c.type != "text" or c.content]
        if index == trace.mistake_index:  # our mark: " ✗ **first mistake**"
            assert [c.type for c in children[-3:]] == ["strong_open", "text", "strong_close"]
            children = children[:-3]
        for child in children:
            assert child.type in ("text", "softbreak", "hardbreak"), (child.type, md)
        item.children = children
        shown = inline_text(item)
        if index == trace.mistake_index:
            shown = shown.removesuffix("✗ ").rstrip()
        assert squash(shown) == (squash(printable(step)) or "(empty thought)"), (step, md)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=hostile_text, question=hostile_text, target=hostile_text,
       steps=st.lists(hostile_text, min_size=1, max_size=4), flag=st.integers(-1, 3))
def test_exports_round_trip_any_text(tmp_path: Path, name: str, question: str, target: str,
                                     steps: list[str], flag: int) -> None:
    mistake = flag if 0 <= flag < len(steps) else None
    with Store.open(tmp_path / DATABASE_NAME) as store:
        trace = TraceSession.create(store, NewTrace("word_sorting", question, target),
                                    llm.ModelSpec("replay/bbm"), name=name)
        trace.load_recorded(steps)
        if mistake is None:
            trace.mark_no_mistake()
        else:
            trace.flag_mistake(mistake + 1)
        [labelled] = load_traces(store, [trace.id])
    out = tmp_path / "out"

    export([labelled], out, "jsonl")
    assert out.read_bytes().isascii()  # every control and bidi character \u-escaped
    [row] = read_rows(out)
    assert (row.input, row.steps, row.target, row.mistake_index) == (
        question, steps, target, mistake)
    assert row.answer == extract_answer(steps[-1])

    export([labelled], out, "processbench")
    [bench] = [json.loads(line) for line in out.read_text().splitlines()]
    assert bench["steps"] == steps and bench["problem"] == get_task("word_sorting").question(
        question)
    assert bench["label"] == (-1 if mistake is None else mistake)

    export([labelled], out, "prm800k")
    [rated] = [json.loads(line) for line in out.read_text().splitlines()]
    texts = [step["completions"][0]["text"] for step in rated["label"]["steps"]]
    assert texts == (steps if mistake is None else steps[: mistake + 1])
    assert rated["question"]["ground_truth_answer"] == target

    export([labelled], out, "markdown")
    assert_markdown_is_ours(out.read_text(), labelled)


@settings(max_examples=150, deadline=None)
@given(name=hostile_text, question=hostile_text, model=hostile_text,
       target=st.none() | hostile_text, steps=st.lists(hostile_text, max_size=4),
       flag=st.integers(-1, 3))
def test_markdown_never_carries_markup_from_the_text(name: str, question: str, model: str,
                                                     target: str | None, steps: list[str],
                                                     flag: int) -> None:
    mistake = flag if 0 <= flag < len(steps) else None
    trace = LabelledTrace(1, name, "word_sorting", model, question, steps,
                          extract_answer(steps[-1]) if steps else None, target, True, mistake)
    assert_markdown_is_ours(markdown(trace), trace)


# ---------------------------------------------------------------------------- model output


@pytest.fixture
def hostile_model(openai_server: FakeOpenAI) -> Iterator[FakeOpenAI]:
    """Thought 1 is HOSTILE (streamed two characters a chunk: sequences split across
    chunks), thought 2 holds a lone surrogate, thought 3 answers."""

    def respond(path: str, body: dict) -> Reply:
        prompt = body["messages"][-1]["content"]
        number = int(re.search(r"Thought (\d+):$", prompt).group(1))
        text = {1: HOSTILE, 2: "half a pair \ud83d here", 3: "So the answer is [red]x[/red]."}
        return Reply(text=text[number] + "\nThought 9: never", chunk_chars=2)

    openai_server.responder = respond
    yield openai_server


async def test_hostile_model_output_is_stored_exactly_and_exported(
    hostile_model: FakeOpenAI, tmp_path: Path,
) -> None:
    spec = llm.ModelSpec("openai/test", hostile_model.base_url)
    with Store.open() as store:
        trace = TraceSession.create(store, NewTrace("word_sorting", HOSTILE, "t"), spec)
        events = [event async for event in trace.generate()]
        finished = [event.text for event in events if isinstance(event, StepFinished)]
        assert isinstance(events[-1], TraceFinished) and events[-1].reason == "answer"
    expected = [HOSTILE, "half a pair \ufffd here", "So the answer is [red]x[/red]."]
    assert finished == expected
    with Store.open() as store:
        saved = TraceSession.load(store, trace.id)
        assert saved.texts == expected and saved.session.input == HOSTILE
        assert saved.answer == "[red]x[/red]."
        [labelled] = load_traces(store, [trace.id])
    export([labelled], tmp_path / "out.jsonl", "jsonl")
    [row] = read_rows(tmp_path / "out.jsonl")
    assert row.steps == expected and row.input == HOSTILE


async def test_a_1mb_line_from_the_model_is_cut_at_the_token_limit(
    openai_server: FakeOpenAI,
) -> None:
    line = ("[bold]" + "\x1b[31m" + "x" * 1_000_000)
    openai_server.enqueue(Reply(text=line, honor_max_tokens=False, chunk_chars=65536))
    spec = llm.ModelSpec("openai/test", openai_server.base_url)
    with Store.open() as store:
        trace = TraceSession.create(store, NewTrace("word_sorting", "b a", "a b"), spec)
        events = [event async for event in trace.generate()]
        [step] = [event for event in events if isinstance(event, StepFinished)]
        assert step.truncated and events[-1].reason == "truncated"
        assert 0 < len(step.text) < 100_000 and line.startswith(step.text)
        assert TraceSession.load(store, trace.id).texts == [step.text]


# ---------------------------------------------------------------------------- dataset files


def dataset_line(input_text: str, steps: list[str], target: str, mistake: int | None) -> str:
    return TraceRow(input_text, steps, extract_answer(steps[-1]), target, mistake,
                    key_order=DEFAULT_KEY_ORDER).to_line()


MEGABYTE = "word " * 200_000


def hostile_file(tmp_path: Path) -> Path:
    path = tmp_path / "word_sorting.jsonl"
    lines = [
        dataset_line(HOSTILE, [HOSTILE, "two\n- item\n1. fake\n    code", f"So the answer is "
                               f"{PAYLOADS['osc52']}"], f"target {HOSTILE}", 1),
        dataset_line("pear apple", [MEGABYTE, "So the answer is apple pear"], "apple pear",
                     None),
    ]
    path.write_text("".join(line + "\n" for line in lines))
    return path


def test_a_hostile_dataset_file_round_trips_through_import_and_export(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    source = hostile_file(tmp_path)
    assert main(["import", str(source)]) == 0
    assert main(["sessions"]) == 0
    listed = capsys.readouterr().out
    assert_safe(listed)
    assert "[bold]b[/bold]" in listed  # the name, literally
    out = tmp_path / "again.jsonl"
    assert main(["export", "--out", str(out)]) == 0
    assert out.read_bytes() == source.read_bytes()  # exactly the same bytes
    for fmt in ("processbench", "prm800k", "markdown"):
        assert main(["export", "--format", fmt, "--out", str(tmp_path / fmt)]) == 0
    rows = read_rows(source)
    bench = [json.loads(line) for line in (tmp_path / "processbench").read_text().splitlines()]
    assert [b["steps"] for b in bench] == [row.steps for row in rows]
    rated = [json.loads(line) for line in (tmp_path / "prm800k").read_text().splitlines()]
    assert rated[0]["label"]["steps"][1]["completions"][0]["text"] == rows[0].steps[1]
    text = (tmp_path / "markdown").read_text()
    with Store.open() as store:
        traces = load_traces(store, None)
    parts = text.split("\n\n## ")
    assert len(parts) == 2
    assert_markdown_is_ours(parts[0], traces[0])
    assert_markdown_is_ours("## " + parts[1], traces[1])
    assert capsys.readouterr().err.count("\x1b") == 0


def test_run_over_a_hostile_dataset_with_a_hostile_model(
    hostile_model: FakeOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    source = tmp_path / "word_sorting.jsonl"
    source.write_text(dataset_line(HOSTILE, ["s"], HOSTILE, None) + "\n")
    out = tmp_path / "out.jsonl"
    code = main(["run", "--input", str(source), "--model", "openai/test", "--api-base",
                 hostile_model.base_url, "--out", str(out), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert_safe(err)
    [row] = read_rows(out)
    assert row.input == HOSTILE and row.target == HOSTILE
    assert row.steps == [HOSTILE, "half a pair \ufffd here", "So the answer is [red]x[/red]."]
    assert out.read_bytes().isascii()


@pytest.mark.parametrize("field", ["input", "steps", "target"])
def test_a_dataset_file_with_a_lone_surrogate_is_refused_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str,
) -> None:
    row = {"input": "pear apple", "steps": ["So the answer is apple pear"], "answer":
           "apple pear", "target": "apple pear", "mistake_index": None}
    row[field] = ["half \ud800 pair"] if field == "steps" else "half \ud800 pair"
    source = tmp_path / "word_sorting.jsonl"
    good = dataset_line("a", ["So the answer is a"], "a", None)
    source.write_text(good + "\n" + json.dumps(row) + "\n")
    before = source.read_bytes()
    for argv in (["import", str(source)], ["stats", str(source)],
                 ["run", "--input", str(source), "--out", str(tmp_path / "o.jsonl")]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert f"{source}:2:" in err and "lone surrogate \\ud800" in err, err
        assert "internal error" not in err and len(err.strip().splitlines()) == 1
    assert source.read_bytes() == before
    assert not (tmp_path / "o.jsonl").exists()
    with Store.open() as store:
        assert store.sessions() == []


# ---------------------------------------------------------------------------- a terminal


@pytest.fixture(scope="module")
def server() -> Iterator[ForkServer]:
    forks = ForkServer()
    yield forks
    forks.close()


def app_env(home: Path) -> dict[str, str | None]:
    return {"BBM_TUI_HOME": str(home), "BBM_TUI_CONFIG": str(home.parent / "none.toml"),
            "BBM_TUI_REPLAY_TPS": "0", "TERM": "xterm-256color", "BBM_TUI_DEBUG": None}


def run_app(server: ForkServer, home: Path, argv: list[str], keys: list[tuple[str, bytes]],
            before_last_key: Callable[[], None] | None = None) -> bytes:
    """The app in a pseudo-terminal: for each (text, key), wait for the text, then type the
    key (`before_last_key` runs just before the last one, e.g. to read the store while the
    app is still up). Returns everything the terminal received."""
    terminal = Terminal()
    try:
        app = server.spawn(argv, app_env(home), tty=terminal.name)
        for index, (wanted, key) in enumerate(keys):
            terminal.wait_for(wanted, alive=lambda: app.poll() is None)
            if before_last_key is not None and index == len(keys) - 1:
                before_last_key()
            terminal.send(key)
        assert app.wait(60) == 0, terminal.text()[-3000:]
        return terminal.output
    finally:
        terminal.close()


def test_the_terminal_gets_none_of_a_hostile_dataset(server: ForkServer, tmp_path: Path,
                                                     isolated_home: Path) -> None:
    assert main(["import", str(hostile_file(tmp_path))]) == 0
    for session, key in ((1, b"jjx"), (2, b"jjk")):  # (2: the 1 MB thought)
        output = run_app(server, isolated_home, ["--session", str(session)],
                         [("Label:", key), ("Label:", b"q")])
        assert_clean_terminal(output)
        shown = screen_text(output)
        assert not errors_on_screen(shown)
        if session == 1:
            assert "␛[38;5;199mPWN" in shown and "[bold]b[/bold]" in shown
            assert "<U+202E>evil" in shown


def test_the_terminal_gets_none_of_hostile_model_output(
    server: ForkServer, hostile_model: FakeOpenAI, isolated_home: Path,
) -> None:
    output = run_app(server, isolated_home,
                     ["--model", "openai/test", "--api-base", hostile_model.base_url,
                      "--task", "word_sorting", "--question", "0"],
                     [("n generates the next thought", b"r"), ("Finished with an answer", b"q")])
    assert_clean_terminal(output)
    shown = screen_text(output)
    assert not errors_on_screen(shown)
    assert "␛[38;5;199mPWN" in shown and "[link=https://x]y[/link]" in shown
    db = isolated_home / DATABASE_NAME
    [(session,)] = query(db, "SELECT id FROM sessions")
    texts = [row[0] for row in query(db, "SELECT text FROM steps WHERE session_id = ? "
                                         "ORDER BY number", (session,))]
    assert texts == [HOSTILE, "half a pair \ufffd here", "So the answer is [red]x[/red]."]


def test_typed_and_pasted_input_never_reaches_the_terminal(server: ForkServer,
                                                          isolated_home: Path) -> None:
    """A bracketed paste of every payload into the typed question (Textual turns a pasted
    escape sequence into '^[' text), and bytes that are not UTF-8 typed into it."""
    paste = b"\x1b[200~" + f"pear {HOSTILE}".encode() + b"\x1b[201~"
    # A model other than replay/bbm, which refuses a question of one's own at once.
    model = ["--model", "openai/test-model", "--api-base", "http://127.0.0.1:9/v1"]
    stored: list[str] = []

    def read_the_question() -> None:  # before q: a session left with no step is not kept
        stored.extend(row[0] for row in query(isolated_home / DATABASE_NAME,
                                              "SELECT input FROM sessions"))

    output = run_app(server, isolated_home, model, [
        ("Question", b"\x14"),  # ctrl+t: a question of one's own
        ("Sort the following words", paste + b" \xff\xfe\xc3 apple"),
        ("apple", b"\x12"),  # ctrl+r: start
        ("n generates the next thought", b"q"),
    ], before_last_key=read_the_question)
    assert_clean_terminal(output)
    shown = screen_text(output)
    assert not errors_on_screen(shown)
    [question] = stored
    assert "[link=https://x]y[/link]" in question and "\ufffd" in question
    assert question.endswith(" apple")


def test_the_bundled_dataset_has_no_unsafe_text() -> None:
    """The premise of the tests above: the hostile text is ours, not the dataset's."""
    for task in ("word_sorting", "dyck_languages"):
        for row in bundled_rows(task):
            assert UNSAFE.search(row.input + "".join(row.steps)) is None
