"""The branch views (issue 11, items 3-4): the tree of a session's branches, two branches side
by side, a thought's tokens by probability; the pure functions under them; snapshots at
80x24 and 120x40. Branches are made with the session's own calls (rewrite, as the person
would with w), no model needed."""

from __future__ import annotations

import math

import pytest
from textual.pilot import Pilot
from textual.widgets import Tree
from ui_helpers import SIZE, make_app, steady_frame, thought, wait_for

from bbm_tui.core import llm
from bbm_tui.core.records import TokenLogprob
from bbm_tui.core.store import Store
from bbm_tui.core.trace.branches import band, confidence, leaves, other_branch, segments
from bbm_tui.core.trace.session import NewTrace, TraceSession
from bbm_tui.ui.screens.branch_tree import BranchTreeScreen
from bbm_tui.ui.screens.compare import CompareScreen
from bbm_tui.ui.screens.tokens import (
    BAND_STYLES,
    BAND_WORDS,
    PICKED_MARKS,
    TokenScreen,
    percent,
    quoted,
    token_row,
    token_text,
)
from bbm_tui.ui.screens.trace import TraceScreen

QUESTION, TARGET = "((2 + 2) * 1) =", "4"
ORIGINAL = ["Let me work it out.", "2 + 2 = 5", "5 * 1 = 5", "So the answer is 5"]


async def branched(store: Store) -> tuple[TraceSession, list[int]]:
    """The original (wrong) and two rewrites from Thought 2: one right, one unfinished."""
    trace = TraceSession.create(store, NewTrace("multistep_arithmetic", QUESTION, TARGET),
                                llm.ModelSpec("openai/test", "http://127.0.0.1:9"))
    trace.load_recorded(ORIGINAL)
    original = [step.id for step in trace.steps]
    async for _ in trace.rewrite(2, "2 + 2 = 22", generate=False):
        pass
    async for _ in trace.rewrite(2, "2 + 2 = 4", generate=False):
        pass
    for text in ("4 * 1 = 4", "So the answer is 4"):
        trace.append_typed(text)
    return trace, original


async def test_segments_leaves_and_the_other_branch(store: Store) -> None:
    trace, original = await branched(store)
    [root] = segments(trace.tree)
    assert (root.first, root.last, len(root.children)) == (1, 1, 3)
    ends = leaves(trace.tree, trace.head_id, TARGET)
    assert [(leaf.answer, leaf.correct, leaf.on_show) for leaf in ends] == [
        ("5", False, False), (None, None, False), ("4", True, True)]
    # The other version of Thought 2, newest first; at Thought 1 (one version) the newest
    # other branch.
    other = other_branch(trace.tree, trace.steps, 2)
    assert trace.tree.path(other)[1].text == "2 + 2 = 22"
    assert other_branch(trace.tree, trace.steps, 1) == max(
        leaf.step.id for leaf in ends if not leaf.on_show)
    diff = trace.tree.diff(trace.steps[-1].id, original[-1])
    assert [s.text for s in diff.shared] == ["Let me work it out."]


def test_token_bands_and_confidence() -> None:
    assert [band(math.log(p)) for p in (0.95, 0.8, 0.5, 0.2, 0.01)] == [0, 1, 2, 3, 4]
    tokens = [TokenLogprob("a", math.log(0.5)), TokenLogprob("b", math.log(0.125))]
    assert confidence(tokens) == 0.25
    assert confidence(None) is None and confidence([]) is None


async def open_trace(pilot: Pilot) -> TraceScreen:
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, TraceScreen)
                   and pilot.app.screen.is_mounted)
    await pilot.pause()
    screen = pilot.app.screen
    assert isinstance(screen, TraceScreen)
    return screen


async def test_the_tree_shows_every_branch_and_enter_shows_one(store: Store) -> None:
    trace, original = await branched(store)
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_trace(pilot)
        await pilot.press("t")
        await wait_for(pilot, lambda: isinstance(app.screen, BranchTreeScreen))
        tree = app.screen.query_one(Tree)
        labels = [str(node.label) for node in tree.root.children[0].children]
        assert len(labels) == 3
        assert "✗ 5" in labels[0] and "no answer yet" in labels[1]
        assert labels[2].startswith("● ") and "✓ 4" in labels[2]
        # Each says what it is, and where its Thought 2 parts from the others.
        assert "original · recorded" in labels[0] and "your rewrite" in labels[2]
        assert labels[1].endswith("“…22”") and labels[2].endswith("“…4”")
        tree.move_cursor(tree.root.children[0].children[0])
        await pilot.press("enter")
        await wait_for(pilot, lambda: [s.id for s in screen.view.trace.steps] == original)
        assert screen.view.trace.answer == "5"


async def test_compare_folds_the_shared_thoughts(store: Store) -> None:
    trace, _ = await branched(store)
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_trace(pilot)
        screen.view.selected = 2
        await pilot.press("v")
        await wait_for(pilot, lambda: isinstance(app.screen, CompareScreen))
        dialog = app.screen
        assert [s.text for s in dialog.diff.left] == ["2 + 2 = 4", "4 * 1 = 4",
                                                      "So the answer is 4"]
        assert [s.text for s in dialog.diff.right] == ["2 + 2 = 22"]
        text = " ".join(str(w.render()) for w in dialog.query(".compare-end"))
        assert "answer 4 ✓ right" in text and "no answer yet" in text
        assert "they part at Thought 2" in str(dialog.query_one("#compare-folded").render())
        heads = [str(head.render()) for head in dialog.query(".compare-head")]
        assert heads == ["On show: your rewrite of Thought 2",
                         "The other: your rewrite of Thought 2"]
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is screen)


async def test_the_token_view_shades_and_picks_tokens(store: Store) -> None:
    """Each token as written: " +" keeps its space (the view once showed "2+2"); the picked
    token is marked; a shows the most likely tokens at its place, as recorded, or says that
    none were."""
    trace = TraceSession.create(store, NewTrace("multistep_arithmetic", QUESTION, TARGET),
                                llm.ModelSpec("openai/test", "http://127.0.0.1:9"))
    tokens = [TokenLogprob("2", -0.01), TokenLogprob(" +", -0.5),
              TokenLogprob(" 2", -3.0, ((" 3", -0.2), (" 2", -3.0), (" two", -4.0)))]
    store.add_step(trace.id, parent_id=None, number=1, text="2 + 2", tokens=tokens)
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        await open_trace(pilot)
        await pilot.press("l")
        await wait_for(pilot, lambda: isinstance(app.screen, TokenScreen))
        dialog = app.screen
        assert [t.text for t in dialog.tokens] == ["2", " +", " 2"]
        shown = lambda name: str(dialog.query_one(name).render())  # noqa: E731
        assert shown("#token-text") == "‹2› + 2"
        assert "token 1 of 3: '2'" in shown("#token-detail")
        assert "probability 99.0%" in shown("#token-detail")
        assert not dialog.query_one("#token-alternatives").display
        assert "a shows the most likely tokens here" in shown("#token-hint")
        await pilot.press("right")
        assert shown("#token-text") == "2‹ +› 2"
        assert "token 2 of 3: ' +'" in shown("#token-detail")
        await pilot.press("a")
        await wait_for(pilot, lambda: dialog.query_one("#token-alternatives").display)
        assert "No alternatives were recorded" in shown("#token-alternatives")
        await pilot.press("right")
        assert "token 3 of 3" in shown("#token-detail")
        assert "probability 5.0%" in shown("#token-detail")
        rows = shown("#token-alternatives").splitlines()
        assert rows[0] == "The 3 most likely tokens here, as the provider ranked them:"
        assert rows[1].split() == ["1.", "81.9%", "log-prob", "-0.200", "'", "3'"]
        assert rows[2].endswith("' 2'  ← the one written") and "5.0%" in rows[2]
        assert "a hides the alternatives" in shown("#token-hint")
        await pilot.press("a")
        await wait_for(pilot, lambda: not dialog.query_one("#token-alternatives").display)


def test_a_token_is_shown_as_written_and_safely() -> None:
    """Spaces kept, a line break and control characters as visible stand-ins, markup as
    text; the picked token marked by more than a background colour."""
    tokens = [TokenLogprob(" leading", -0.01), TokenLogprob("  two\n", -0.01),
              TokenLogprob("\x1b[31m[bold]", -0.01)]
    assert token_text("  two\n") == "  two␤"
    row = token_row(tokens, picked=2)
    assert row.plain == " leading  two␤‹␛[31m[bold]›"
    assert "\x1b" not in row.plain and "\n" not in row.plain
    picked = [span for span in row.spans if "on $accent" in str(span.style)]
    assert len(picked) == 1 and row.plain[picked[0].start:picked[0].end] == "␛[31m[bold]"
    assert str(quoted("a\tb\n")) == "'a\\tb\\n'"
    assert [percent(v) for v in (-0.2, -3.0, -8.0, -float("inf"))] == [
        "81.9%", "5.0%", "<0.1%", "0.0%"]


def test_the_shading_bands_read_without_colour() -> None:
    """Each band of the token scale differs from every other in its attributes, not only its
    colour (16 colours, or none: NO_COLOR); the picked token's marks are characters."""
    from textual.style import Style

    def attributes(style: str) -> tuple[bool, ...]:
        # The theme's colours ($warning) resolve in a running app only; they are not what
        # is asked about here.
        parsed = Style.parse(" ".join(w for w in style.split() if not w.startswith("$")))
        return (bool(parsed.bold), bool(parsed.italic), bool(parsed.underline),
                bool(parsed.reverse))

    seen = [attributes(style) for style in BAND_STYLES]
    assert len(set(seen)) == len(BAND_STYLES) == len(BAND_WORDS)
    assert all(mark.strip() for mark in PICKED_MARKS)


async def with_tokens(store: Store) -> tuple[TraceSession, list[int]]:
    trace = TraceSession.create(store, NewTrace("multistep_arithmetic", QUESTION, TARGET),
                                llm.ModelSpec("openai/test", "http://127.0.0.1:9"))
    store.add_step(trace.id, parent_id=None, number=1, text="Let me work it out.")
    parent = store.steps_of(trace.id)[0].id
    pieces = [("2", -0.01), (" +", -0.2), (" 2", -0.05), (" =", -0.6), (" 5", -2.9)]
    # What the model weighed in place of " 5": " 4" far more likely.
    weighed = ((" 4", -0.07), (" 5", -2.9), (" 3", -4.1), (" four", -5.2), ("\n", -6.0))
    store.add_step(trace.id, parent_id=parent, number=2, text="2 + 2 = 5",
                   tokens=[TokenLogprob(text, value, weighed if text == " 5" else ())
                           for text, value in pieces])
    return TraceSession.load(store, trace.id), []


async def test_the_thought_list_shows_each_thoughts_confidence(store: Store) -> None:
    """Issue 11, item 4: a thought with log-probabilities shows its confidence in its dim
    line, the same figure the token view gives, from the bulk load (no tokens read); one
    without shows none; presenter mode hides it with the other figures."""
    trace, _ = await with_tokens(store)
    assert all(step.tokens is None for step in trace.steps)
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_trace(pilot)
        sure = confidence(store.step(trace.steps[1].id).tokens)
        assert f"{sure:.0%}" == "47%"
        assert thought(screen, 2).meta == "log-prob -3.76 · confidence 47%"
        assert "confidence" not in thought(screen, 1).meta
        await pilot.press("P")
        await pilot.pause()
        assert thought(screen, 2).meta == ""
        await pilot.press("P")


def _snapshot(snap_compare, size: tuple[int, int], key: str, dialog: type,
              setup=branched, then: tuple[str, ...] = ()) -> bool:
    import asyncio

    async def make() -> int:
        with Store.open() as store:
            trace, _ = await setup(store)
            return trace.id

    session_id = asyncio.run(make())

    async def run_before(pilot: Pilot) -> None:
        screen = await open_trace(pilot)
        screen.view.selected = 2
        await pilot.press(key)
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, dialog))
        await pilot.press(*then)
        await steady_frame(pilot)

    return snap_compare(make_app(session_id=session_id), terminal_size=size,
                        run_before=run_before)


def test_tree_view_at_80x24(snap_compare) -> None:
    assert _snapshot(snap_compare, (80, 24), "t", BranchTreeScreen)


def test_tree_view_at_120x40(snap_compare) -> None:
    assert _snapshot(snap_compare, (120, 40), "t", BranchTreeScreen)


def test_compare_view_at_80x24(snap_compare) -> None:
    assert _snapshot(snap_compare, (80, 24), "v", CompareScreen)


def test_compare_view_at_120x40(snap_compare) -> None:
    assert _snapshot(snap_compare, (120, 40), "v", CompareScreen)


# The token view on its least likely token (" 5"), its alternatives shown (a).
ON_THE_FIVE = ("left", "a")


def test_token_view_at_80x24(snap_compare) -> None:
    assert _snapshot(snap_compare, (80, 24), "l", TokenScreen, with_tokens, ON_THE_FIVE)


def test_token_view_at_120x40(snap_compare) -> None:
    assert _snapshot(snap_compare, (120, 40), "l", TokenScreen, with_tokens, ON_THE_FIVE)


async def backtracked_story(pilot: Pilot) -> TraceScreen:
    """The README's story, offline: replay/bbm's trace of arithmetic #7, Thought 2 flagged,
    backtracked (solver/bbm samples it 8 times and goes on), the new branch on show."""
    from bbm_tui.ui.screens.backtrack import CandidatesScreen

    app = pilot.app
    screen = await open_trace(pilot)
    await pilot.press("r")
    await wait_for(pilot, lambda: screen.view.trace.finished and not screen.view.running,
                   timeout=30)
    await pilot.press("2", "enter", "x", "b")
    await wait_for(pilot, lambda: isinstance(app.screen, CandidatesScreen)
                   and app.screen.all_arrived, timeout=30)
    await pilot.press("enter")
    await wait_for(pilot, lambda: screen.view.trace.correct and not screen.view.running, timeout=30)
    return screen


@pytest.mark.parametrize("size", [(80, 24), SIZE])
async def test_compare_columns_move_together_and_say_what_each_branch_is(size) -> None:
    """v after the story: a row per thought number (both versions start on one line), one
    scroll for both columns (pgdn moved only the left one), j/k move a row, each column says
    what its branch is, and the words that differ between two versions are marked."""
    from bbm_tui.ui.screens.compare import DIFFERS, Rows

    app = make_app(task="multistep_arithmetic", question=7)
    async with app.run_test(size=size) as pilot:
        screen = await backtracked_story(pilot)
        chosen = next(c for c in screen.view.trace.candidates_for(2)
                      if c.step_id == screen.view.trace.steps[1].id)
        place = [c.id for c in screen.view.trace.candidates_for(2)].index(chosen.id) + 1
        await pilot.press("2", "enter", "v")
        await wait_for(pilot, lambda: isinstance(app.screen, CompareScreen))
        await pilot.pause()
        dialog = app.screen
        heads = [str(head.render()) for head in dialog.query(".compare-head")]
        assert heads == [f"On show: backtracked from Thought 2, sample {place} of 8 · "
                         "solver/bbm", "The other: original · replay/bbm"]
        rows = list(dialog.query(".compare-row"))
        for row in rows:
            left, right = row.query(".compare-cell")
            assert left.region.y == right.region.y
        # Thought 2's two versions: what differs is marked, what they share is not.
        left, right = rows[0].query(".compare-cell")
        for cell in (left, right):
            content = cell.render()
            marked = [content.plain[span.start:span.end] for span in content.spans
                      if str(span.style) == DIFFERS]
            assert marked and not any("calculate" in words for words in marked)
        pane = dialog.query_one(Rows)
        assert dialog.selected == 0 and rows[0].has_class("-selected")
        await pilot.press("j")
        assert dialog.selected == 1 and rows[1].has_class("-selected")
        await pilot.press("k")
        assert dialog.selected == 0
        if pane.max_scroll_y > 0:
            before = [row.query(".compare-cell").first().region.y for row in rows]
            await pilot.press("pagedown")
            await pilot.pause()
            assert pane.scroll_y > 0 and dialog.selected > 0
            for row in rows:  # both columns moved, together
                left, right = row.query(".compare-cell")
                assert left.region.y == right.region.y
            assert [row.query(".compare-cell").first().region.y for row in rows] != before
        await pilot.press("G")
        await pilot.pause()
        end = dialog.query_one("#compare-end")
        assert end.has_class("-selected") and pane.content_region.contains_region(end.region)
        assert "answer -7 ✓ right" in str(end.query(".compare-cell").first().render())


def test_what_a_branch_is_in_words() -> None:
    from bbm_tui.core.trace.branches import BranchHow, BranchOrigin
    from bbm_tui.ui.viewmodels.branches import origin_words

    assert origin_words(BranchOrigin(BranchHow.ORIGINAL, 1, models=("replay/bbm",))) == \
        "original · replay/bbm"
    assert origin_words(BranchOrigin(BranchHow.ORIGINAL, 1, recorded=True)) == \
        "original · recorded in the dataset"
    assert origin_words(BranchOrigin(BranchHow.BACKTRACK, 2, 3, 8, models=("solver/bbm",))) \
        == "backtracked from Thought 2, sample 3 of 8 · solver/bbm"
    assert origin_words(BranchOrigin(BranchHow.REWRITE, 5, models=("openai/x",))) == \
        "your rewrite of Thought 5 · then openai/x"
    assert origin_words(BranchOrigin(BranchHow.VERSION, 4, models=("a/b", "c/d"))) == \
        "another version of Thought 4 · a/b, then c/d"
    assert origin_words(None) == "no thoughts of its own"


@pytest.mark.parametrize("size", [(80, 24), SIZE])
async def test_tree_rows_fit_and_keep_the_verdict_and_what_differs(size) -> None:
    """Word sorting #15, Thought 2 flagged, backtracked: the answers are long (every word
    sorted). Each row fits the tree's width (no sideways scrolling), each branch's end shows
    ✓ or ✗ and its answer's start, and no two rows read the same."""
    from bbm_tui.ui.screens.backtrack import CandidatesScreen, EditThoughtScreen

    app = make_app(task="word_sorting", question=15)
    async with app.run_test(size=size) as pilot:
        screen = await open_trace(pilot)
        await pilot.press("r")
        await wait_for(pilot, lambda: screen.view.trace.finished and not screen.view.running,
                       timeout=30)
        original = screen.view.trace.steps[1].text
        await pilot.press("2", "enter", "b")
        await wait_for(pilot, lambda: isinstance(app.screen, CandidatesScreen)
                       and app.screen.all_arrived, timeout=30)
        await pilot.press("enter")
        await wait_for(pilot, lambda: len(screen.view.trace.alternatives(2)) == 2
                       and not screen.view.running and screen.view.trace.finished, timeout=90)
        # A rewrite of the original Thought 2 that differs only in its last words.
        await pilot.press("2", "enter", "less_than_sign")
        await wait_for(pilot, lambda: screen.view.trace.steps[1].text == original)
        await pilot.press("w")
        await wait_for(pilot, lambda: isinstance(app.screen, EditThoughtScreen))
        app.screen.query_one("#edit-input").value = original.replace('"wisdom"', '"wisdoms"')
        await pilot.press("enter")
        await wait_for(pilot, lambda: len(screen.view.trace.alternatives(2)) == 3
                       and not screen.view.running, timeout=90)
        await pilot.press("t")
        await wait_for(pilot, lambda: isinstance(app.screen, BranchTreeScreen))
        await pilot.pause()
        await pilot.pause()
        tree = app.screen.query_one(Tree)
        assert tree.max_scroll_x == 0 and tree.virtual_size.width <= tree.size.width
        nodes, stack = [], list(tree.root.children)
        while stack:
            node = stack.pop()
            nodes.append(node)
            stack.extend(node.children)
        labels = [node.label.plain for node in nodes]
        assert len(set(labels)) == len(labels), labels
        ends = [node.label.plain for node in nodes if not node.children]
        assert len(ends) == 3
        for label in ends:
            assert ("✓ accommodate" in label or "✗ accommodate" in label
                    or "no answer yet" in label), label
        assert sum("✓ accommodate" in label for label in ends) == 1  # the backtracked one
        assert sum("backtracked, sample" in label for label in labels) == 1
        [rewrite] = [label for label in labels if "your rewrite" in label]
        assert "wisdoms" in rewrite or size[0] < 100  # where it parts, where there is room
