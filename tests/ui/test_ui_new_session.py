"""The new-session screen: a dataset question by number or by search, a typed question, the
recorded trace, and the command-line start (--task/--question, --session)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from textual.widgets import Checkbox, Input, OptionList, TextArea
from ui_helpers import SIZE, make_app, notifications, wait_for

from bbm_tui.core import llm
from bbm_tui.core.config import Config
from bbm_tui.core.dataset import bundled_rows
from bbm_tui.core.store import Store
from bbm_tui.ui.dialogs import ModelScreen, TypedQuestionScreen
from bbm_tui.ui.screens.new_session import Entry, NewSessionScreen, filter_entries
from bbm_tui.ui.screens.trace import TraceScreen
from bbm_tui.ui.widgets.thought import ThoughtView
from tests.openai_server import FakeOpenAI, Reply


async def new_session_screen(pilot) -> NewSessionScreen:
    app = pilot.app
    await wait_for(pilot, lambda: isinstance(app.screen, NewSessionScreen))
    screen = app.screen
    await wait_for(pilot, lambda: screen.query_one("#questions", OptionList).option_count > 0)
    return screen


async def opened_trace(pilot) -> TraceScreen:
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, TraceScreen))
    await pilot.pause()
    assert notifications(pilot.app) == []  # no worker failed on the way
    return pilot.app.screen


async def test_the_first_screen_lists_the_dataset_questions() -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        screen = await new_session_screen(pilot)
        questions = screen.query_one("#questions", OptionList)
        assert questions.option_count == len(bundled_rows("word_sorting"))
        first = str(questions.get_option_at_index(0).prompt)
        row = bundled_rows("word_sorting")[0]
        assert first.startswith("#0") and row.input[:20] in first and "→" in first
        await wait_for(pilot, lambda: app.store is not None)  # opened in its own worker


async def test_pick_a_question_by_number(store: Store) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await new_session_screen(pilot)
        # /17 enter opens question 17 at once (issue 10, item 11).
        await pilot.press("slash", "1", "7", "enter")
        screen = await opened_trace(pilot)
        session = screen.view.trace.session
        row = bundled_rows("word_sorting")[17]
        assert (session.task, session.dataset_index, session.input) == (
            "word_sorting", 17, row.input)
        assert session.target == row.target and session.model == "replay/bbm"
        assert store.session(session.id).gold_mistake_index == row.mistake_index
        assert screen.view.trace.steps == []


async def test_pick_a_question_by_search_in_another_task(store: Store) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        screen = await new_session_screen(pilot)
        # The task list: down three times from word sorting.
        screen.query_one("#tasks", OptionList).focus()
        await pilot.press("down", "down", "down")
        assert screen.task_name == "multistep_arithmetic"
        rows = bundled_rows("multistep_arithmetic")
        await wait_for(pilot, lambda: screen.query_one("#questions", OptionList).option_count
                       == len(rows))
        wanted = 42
        query = rows[wanted].input  # the whole expression matches only itself
        await pilot.press("slash")
        screen.query_one("#search", Input).value = query
        await pilot.pause()
        questions = screen.query_one("#questions", OptionList)
        matches = [i for i, row in enumerate(rows) if query.lower() in row.input.lower()]
        assert questions.option_count == len(matches)
        assert screen.selected_entry().index == wanted
        await pilot.press("ctrl+r")
        trace_screen = await opened_trace(pilot)
        assert trace_screen.view.trace.session.dataset_index == wanted
        assert trace_screen.view.trace.session.task == "multistep_arithmetic"


async def test_type_a_question_with_an_optional_target_and_another_model(
    store: Store,
) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await new_session_screen(pilot)
        # ctrl+e: the model for this session.
        await pilot.press("ctrl+e")
        await wait_for(pilot, lambda: isinstance(app.screen, ModelScreen))
        app.screen.query_one("#model", Input).value = "openai/some-model"
        app.screen.query_one("#api-base", Input).value = "http://127.0.0.1:9/v1"
        app.screen.query_one("#completion", Checkbox).value = True
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, NewSessionScreen))
        assert "openai/some-model" in str(app.screen.query_one("#model-line").render())
        # ctrl+t: a question of one's own.
        await pilot.press("ctrl+t")
        await wait_for(pilot, lambda: isinstance(app.screen, TypedQuestionScreen))
        assert "Sort the following words" in str(app.screen.query_one("#typed-hint").render())
        app.screen.query_one("#typed-input", TextArea).text = "pear apple fig"
        app.screen.query_one("#typed-target", Input).value = "apple fig pear"
        await pilot.press("ctrl+r")
        trace_screen = await opened_trace(pilot)
        saved = store.session(trace_screen.view.trace.id)
        assert (saved.input, saved.target, saved.dataset_index) == (
            "pear apple fig", "apple fig pear", None)
        assert (saved.model, saved.api_base, saved.mode) == (
            "openai/some-model", "http://127.0.0.1:9/v1", "completion")


async def test_typed_question_needs_text_and_esc_cancels() -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await new_session_screen(pilot)
        await pilot.press("ctrl+t")
        await wait_for(pilot, lambda: isinstance(app.screen, TypedQuestionScreen))
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert isinstance(app.screen, TypedQuestionScreen)
        assert any("Type a question" in note for note in notifications(app))
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, NewSessionScreen))


async def test_load_the_recorded_trace_to_label_it(store: Store) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        screen = await new_session_screen(pilot)
        screen.query_one("#recorded", Checkbox).value = True
        await pilot.press("slash", "5", "enter", "enter")
        trace_screen = await opened_trace(pilot)
        row = bundled_rows("word_sorting")[5]
        saved = store.branch(trace_screen.view.trace.id)
        assert [step.text for step in saved] == row.steps
        assert {step.origin for step in saved} == {"dataset"}
        views = list(trace_screen.query(ThoughtView))
        assert [view.text for view in views] == row.steps
        assert "recorded in the dataset" in views[0].meta


async def test_the_model_comes_from_the_config() -> None:
    config = Config(model="openai/gpt-4o-mini", api_base="http://localhost:8000/v1",
                    mode="completion")
    app = make_app(config)
    async with app.run_test(size=SIZE) as pilot:
        screen = await new_session_screen(pilot)
        assert screen.spec == llm.ModelSpec("openai/gpt-4o-mini", "http://localhost:8000/v1",
                                            "completion")
        line = str(screen.query_one("#model-line").render())
        assert "openai/gpt-4o-mini" in line and "completion" in line
        await pilot.press("ctrl+e")
        await wait_for(pilot, lambda: isinstance(app.screen, ModelScreen))
        assert app.screen.query_one("#model", Input).value == "openai/gpt-4o-mini"
        assert app.screen.query_one("#completion", Checkbox).value is True
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, NewSessionScreen))
        assert screen.spec.model == "openai/gpt-4o-mini"


async def test_command_line_question_opens_it_directly(store: Store) -> None:
    app = make_app(task="logical_deduction", question=3)
    async with app.run_test(size=SIZE) as pilot:
        screen = await opened_trace(pilot)
        assert (screen.view.trace.session.task, screen.view.trace.session.dataset_index) == (
            "logical_deduction", 3)
        # logical_deduction inputs hold their own options; the pane shows them.
        question = str(screen.query_one("#question").render())
        assert "Options:" in question


async def test_command_line_question_out_of_range_says_so() -> None:
    app = make_app(task="word_sorting", question=100_000)
    async with app.run_test(size=SIZE) as pilot:
        await new_session_screen(pilot)
        # Said once the dataset is read (a worker), which may be after the screen shows.
        await wait_for(pilot, lambda: any("not 100000" in note for note in notifications(app)),
                       timeout=30)


async def test_unknown_session_says_so_and_offers_a_new_one() -> None:
    app = make_app(session_id=999)
    async with app.run_test(size=SIZE) as pilot:
        await new_session_screen(pilot)
        assert any("no session 999" in note for note in notifications(app))


def test_filter_by_number_puts_that_question_first() -> None:
    rows = bundled_rows("multistep_arithmetic")
    entries = [Entry(i, row, row.input.lower()) for i, row in enumerate(rows)]
    found = filter_entries(entries, "#7")
    assert found[0].index == 7
    assert all("7" in entry.haystack for entry in found[1:])
    assert filter_entries(entries, "") == entries


def test_the_app_module_does_not_import_litellm() -> None:
    code = "import sys, bbm_tui.ui.app; print('litellm' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip() == "False"


async def test_a_typed_question_with_replay_is_refused_at_once(store: Store) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        screen = await new_session_screen(pilot)
        await pilot.press("ctrl+t")
        await wait_for(pilot, lambda: isinstance(app.screen, TypedQuestionScreen))
        app.screen.query_one("#typed-input", TextArea).text = "pear apple fig"
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: app.screen is screen)
        await wait_for(pilot, lambda: any("replays only the bundled questions" in note
                                          for note in notifications(app)))
        assert store.sessions() == []  # no session was made


# -- the model dialog: generation settings and a test of the connection (issue 10, item 13)

async def open_model_dialog(pilot) -> ModelScreen:
    await new_session_screen(pilot)
    await pilot.press("ctrl+e")
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, ModelScreen))
    return pilot.app.screen


def probe_result(dialog: ModelScreen) -> str:
    return str(dialog.query_one("#model-test-result").render())


async def test_the_model_dialog_sets_temperature_tokens_and_step_limit(
    store: Store, openai_server: FakeOpenAI
) -> None:
    openai_server.enqueue(Reply("So the answer is fig pear"))
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        dialog = await open_model_dialog(pilot)
        # The app's settings as they are: the paper's temperature, the config's limits.
        assert dialog.query_one("#temperature", Input).value == "0"
        assert dialog.query_one("#max-tokens", Input).value == "1024"
        assert dialog.query_one("#step-limit", Input).value == "160"
        dialog.query_one("#model", Input).value = "openai/test"
        dialog.query_one("#api-base", Input).value = openai_server.base_url
        # A temperature out of range is refused, naming the field; the dialog stays.
        dialog.query_one("#temperature", Input).value = "3"
        await pilot.press("enter")
        await pilot.pause()
        assert app.screen is dialog and dialog.query_one("#temperature").has_focus
        assert any("temperature is a number from 0 to 2" in n for n in notifications(app))
        dialog.query_one("#temperature", Input).value = "0.7"
        dialog.query_one("#max-tokens", Input).value = "256"
        dialog.query_one("#step-limit", Input).value = "0"
        await pilot.press("enter")
        await pilot.pause()
        assert app.screen is dialog and dialog.query_one("#step-limit").has_focus
        dialog.query_one("#step-limit", Input).value = "12"
        await pilot.press("enter")
        app.clear_notifications()
        screen = await new_session_screen(pilot)
        line = str(screen.query_one("#model-line").render())
        assert "openai/test" in line
        assert "temperature 0.7 · 256 tokens/step · 12 steps max" in line
        settings = app.stepper_settings
        assert (settings.call.temperature, settings.call.max_tokens, settings.step_limit) == (
            0.7, 256, 12)
        # The next step is asked with them.
        await pilot.press("ctrl+t")
        await wait_for(pilot, lambda: isinstance(app.screen, TypedQuestionScreen))
        app.screen.query_one("#typed-input", TextArea).text = "pear fig"
        await pilot.press("ctrl+r")
        trace_screen = await opened_trace(pilot)
        await pilot.press("n")
        # The first call of the process imports litellm (seconds; many under load).
        await wait_for(pilot, lambda: len(trace_screen.view.trace.steps) == 1, timeout=60)
        body = openai_server.requests[-1].body
        assert (body["temperature"], body["max_tokens"]) == (0.7, 256)


async def test_test_connection_reports_latency_or_the_error(openai_server: FakeOpenAI) -> None:
    openai_server.enqueue(Reply("OK", delay_s=0.2),
                          Reply(status=401, error_body={"error": {"message": "bad [b]key"}}))
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        dialog = await open_model_dialog(pilot)
        # An offline model needs no network: it says so without a call.
        await pilot.press("ctrl+t")
        await wait_for(pilot, lambda: "offline" in probe_result(dialog))
        assert "replay/bbm is offline" in probe_result(dialog)
        assert openai_server.requests == []
        dialog.query_one("#model", Input).value = "openai/test"
        dialog.query_one("#api-base", Input).value = openai_server.base_url
        await pilot.click("#model-test")
        await wait_for(pilot, lambda: "Answered in" in probe_result(dialog), timeout=30)
        shown = probe_result(dialog)
        assert "OK" in shown and " s: " in shown
        seconds = float(shown.split("Answered in ")[1].split(" s")[0])
        assert seconds >= 0.2  # the server's delay, measured
        [request] = openai_server.requests
        assert request.body["max_tokens"] == 5 and not request.body.get("stream")
        # An error: said in the dialog, as text, once (no retry hides it).
        await pilot.press("ctrl+t")
        await wait_for(pilot, lambda: "✗" in probe_result(dialog), timeout=30)
        assert "needs an API key" in probe_result(dialog)
        assert dialog.query_one("#model-test-result").has_class("-error")
        assert len(openai_server.requests) == 2
        # Nothing was kept: escape leaves the session's model as it was.
        await pilot.press("escape")
        screen = await new_session_screen(pilot)
        assert screen.spec.model == "replay/bbm"


# -- issue 10, item 11: the recorded-trace choice, the task list, empty sessions

async def test_the_recorded_trace_choice_says_on_or_off_and_is_remembered(store: Store) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        screen = await new_session_screen(pilot)
        recorded = screen.query_one("#recorded", Checkbox)
        assert str(recorded.label) == "Recorded trace: off" and recorded.value is False
        recorded.focus()
        await pilot.press("space")
        assert str(recorded.label) == "Recorded trace: on" and recorded.value is True
        await pilot.press("slash", "5", "enter")
        trace_screen = await opened_trace(pilot)
        assert len(trace_screen.view.trace.steps) == len(bundled_rows("word_sorting")[5].steps)
        # The next new session starts with the choice as it was left.
        await pilot.press("ctrl+n")
        again = await new_session_screen(pilot)
        assert again is not screen
        recorded = again.query_one("#recorded", Checkbox)
        assert recorded.value is True and str(recorded.label) == "Recorded trace: on"


async def test_arrowing_through_the_tasks_loads_only_where_it_rests(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from bbm_tui.core import dataset

    loaded: list[str] = []
    real = dataset.bundled_rows

    def counting(task: str):
        loaded.append(task)
        return real(task)

    monkeypatch.setattr(dataset, "bundled_rows", counting)
    # "Rests" means no key for TASK_SETTLE_S (0.15 s); under CI's load three key presses
    # through Pilot took longer than that apart, and the middle task loaded. A longer rest
    # here keeps the test about what loads, not about how fast the machine is.
    from bbm_tui.ui.screens import new_session

    monkeypatch.setattr(new_session, "TASK_SETTLE_S", 1.5)
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        screen = await new_session_screen(pilot)
        loaded.clear()
        screen.query_one("#tasks", OptionList).focus()
        await pilot.press("down", "down", "down")
        await wait_for(pilot, lambda: screen._entries and
                       screen._entries[0].row == real("multistep_arithmetic")[0])
        await pilot.pause(0.3)
        assert loaded == ["multistep_arithmetic"]
        assert screen.task_name == "multistep_arithmetic"


async def test_a_session_left_without_generating_is_not_left_behind(store: Store) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await new_session_screen(pilot)
        await pilot.press("slash", "3", "enter")
        first = (await opened_trace(pilot)).view.trace.id
        # Another session instead: the first, with nothing done in it, goes.
        await pilot.press("ctrl+n")
        await new_session_screen(pilot)
        await pilot.press("slash", "4", "enter")
        second_screen = await opened_trace(pilot)
        second = second_screen.view.trace.id
        await wait_for(pilot, lambda: first not in {s.session.id for s in store.sessions()})
        # One with a step stays, after leaving and after quitting.
        await pilot.press("n")
        await wait_for(pilot, lambda: len(second_screen.view.trace.steps) == 1)
        await pilot.press("ctrl+n")
        await new_session_screen(pilot)
        await pilot.press("slash", "6", "enter")
        third = (await opened_trace(pilot)).view.trace.id
    # Quitting with an empty session open deletes it too.
    kept = {s.session.id for s in store.sessions()}
    assert second in kept and third not in kept and first not in kept


async def test_an_empty_session_opened_from_the_list_is_kept(store: Store) -> None:
    from bbm_tui.core.trace.session import NewTrace, TraceSession

    older = TraceSession.create(store, NewTrace("word_sorting", "b a"), llm.ModelSpec())
    app = make_app(session_id=older.id)
    async with app.run_test(size=SIZE) as pilot:
        await opened_trace(pilot)
        await pilot.press("ctrl+n")
        await new_session_screen(pilot)
    # Made before this run: not this run's to delete.
    assert older.id in {s.session.id for s in store.sessions()}


async def test_one_call_is_a_tick_in_the_model_dialog_and_streams_each_thought(
    store: Store, openai_server: FakeOpenAI
) -> None:
    """One call for many steps (opt-in): the config's `one_call` shows ticked in the model
    dialog, the tick sets it for the next steps, and one call's labelled lines arrive as
    thoughts, each streamed into its own view."""
    openai_server.enqueue(Reply("Pear comes after fig.\nThought 2: So the order is fig, pear."
                                "\nThought 3: So the answer is fig pear", chunk_delay_s=0.01))
    app = make_app(Config(one_call=True))
    async with app.run_test(size=SIZE) as pilot:
        dialog = await open_model_dialog(pilot)
        tick = dialog.query_one("#one-call", Checkbox)
        assert tick.value is True
        tick.value = False
        dialog.query_one("#model", Input).value = "openai/test"
        dialog.query_one("#api-base", Input).value = openai_server.base_url
        await pilot.press("enter")
        screen = await new_session_screen(pilot)
        assert app.stepper_settings.one_call is False
        assert "one call for many steps" not in str(screen.query_one("#model-line").render())
        await pilot.press("ctrl+e")
        await wait_for(pilot, lambda: isinstance(app.screen, ModelScreen))
        app.screen.query_one("#one-call", Checkbox).value = True
        await pilot.press("enter")
        screen = await new_session_screen(pilot)
        assert app.stepper_settings.one_call is True
        assert "one call for many steps" in str(screen.query_one("#model-line").render())
        await pilot.press("ctrl+t")
        await wait_for(pilot, lambda: isinstance(app.screen, TypedQuestionScreen))
        app.screen.query_one("#typed-input", TextArea).text = "pear fig"
        await pilot.press("ctrl+r")
        trace_screen = await opened_trace(pilot)
        await pilot.press("r")
        # The first call imports litellm (seconds, more on a loaded machine).
        await wait_for(pilot, lambda: trace_screen.view.trace.answer is not None, timeout=60)
        assert trace_screen.view.trace.texts == [
            "Pear comes after fig.", "So the order is fig, pear.", "So the answer is fig pear"]
        [request] = openai_server.requests  # one call for the three thoughts
        assert "stop" not in request.body
        await pilot.pause()
        views = list(trace_screen.query(ThoughtView))
        assert [view.step.text for view in views if view.step] == trace_screen.view.trace.texts
        steps = store.branch(trace_screen.view.trace.id)
        assert len({step.one_call for step in steps}) == 1 and steps[0].one_call


async def test_the_model_dialog_keeps_its_test_result_in_view_at_80x24(store: Store) -> None:
    """At 80x24 the test's result line made the dialog scroll, its last line out of view: the
    buttons are one line each there, so that the result, the buttons and the hint all fit."""
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        dialog = await open_model_dialog(pilot)
        await pilot.press("ctrl+t")
        await wait_for(pilot, lambda: "offline" in probe_result(dialog))
        await pilot.pause()
        box = dialog.query_one("#model-dialog")
        assert box.max_scroll_y == 0
        for part in ("#model-test-result", "#model-keep", ".dialog-hint"):
            assert box.content_region.contains_region(dialog.query_one(part).region), part


async def test_at_80x24_every_task_the_search_hint_and_start_are_in_view() -> None:
    """Issue 34, item 15: at 80x24 with the two example tasks of one's own beside the
    paper's five, the task list showed 4½ of the 7 (a title wrapped), the search line's
    placeholder was cut, and Start sat behind the pane's scrollbar. Now all seven tasks
    show, one line each, the placeholder is whole and the pane does not scroll."""
    import shutil
    from pathlib import Path

    from rich.cells import cell_len
    from textual.widgets import Button

    from bbm_tui.core.config import tasks_folder
    from bbm_tui.core.tasks import use_tasks
    from bbm_tui.core.tasks.files import load_user_tasks

    folder = tasks_folder()
    folder.mkdir(parents=True)
    for example in (Path(__file__).resolve().parents[2] / "examples" / "tasks").iterdir():
        shutil.copy(example, folder)
    use_tasks(load_user_tasks(folder).tasks)
    try:
        app = make_app()
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, NewSessionScreen))
            screen = app.screen
            await pilot.pause()
            tasks = screen.query_one("#tasks", OptionList)
            assert tasks.option_count == 7
            assert tasks.max_scroll_y == 0 and tasks.scrollable_content_region.height >= 7
            side = screen.query_one("#model-side")
            assert side.max_scroll_y == 0
            start = screen.query_one("#start", Button)
            assert start.region.height > 0 and side.content_region.contains_region(
                start.region)
            search = screen.query_one("#search", Input)
            assert cell_len(search.placeholder) <= search.content_region.width
    finally:
        use_tasks([])


def row_cells(app, row: int) -> list[tuple[str, object]]:
    """A row of the screen as it is drawn now: each cell's character and style (without the
    mouse offsets Textual puts in a style, which are the widget's own)."""
    strip = app.screen._compositor.render_strips()[row]
    return [(char, segment.style and segment.style.clear_meta_and_links())
            for segment in strip for char in segment.text]


def footer_cells(app) -> list[tuple[str, object]]:
    """The screen's bottom row as it is drawn now."""
    return row_cells(app, -1)


@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
async def test_the_first_frame_draws_the_footer_keys_as_one_line(
        size: tuple[int, int]) -> None:
    """The first frame's footer is its keys drawn as one widget (KeysLine) beside the palette
    key, not a widget a key (bench/first_frame.py: ten keys were a third of the first
    screen's work); it looks exactly as the footer of keys does once the screen announces
    its bindings, keys left out where they do not fit (80 columns) included; then the keys
    themselves are there, each taking clicks."""
    from textual.widgets._footer import FooterKey
    from ui_helpers import footers_current, on_each_frame

    from bbm_tui.ui.widgets.chrome import KeysFooter, KeysLine

    app = make_app()
    first: list[tuple[int, list[tuple[str, object]]]] = []

    def noted(screen, update) -> None:
        if not first:
            footer = screen.query_one(KeysFooter)
            first.append((len(footer.children), footer_cells(app)))

    on_each_frame(app, noted)
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: bool(first))
        await wait_for(pilot, lambda: footers_current(app))
        await pilot.pause()
        footer = app.screen.query_one(KeysFooter)
        assert not footer.query(KeysLine)
        assert len(footer.query(FooterKey)) > 5
        widgets_at_first_frame, cells_at_first_frame = first[0]
        assert widgets_at_first_frame == 2  # the line and the palette key
        assert cells_at_first_frame == footer_cells(app)
        assert "? help" in "".join(char for char, _style in cells_at_first_frame)


@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
async def test_the_question_list_comes_after_the_first_frame_its_pane_drawn_focused(
        size: tuple[int, int]) -> None:
    """The question list, empty until the task's questions are read, is mounted after the
    app's first frame and gets the focus then (bench/first_frame.py: the list and its focus
    were ~10 ms of the first screen's ~50 ms of CPU). The first frame draws its pane as the
    focused one (heavy border, "▸ Question") exactly as it is once the list has the focus."""
    from ui_helpers import on_each_frame

    app = make_app()
    first: list[tuple[bool, list[tuple[str, object]]]] = []

    def noted(screen, update) -> None:
        if not first and isinstance(screen, NewSessionScreen):
            first.append((bool(screen.query("#questions")), row_cells(app, 1)))

    on_each_frame(app, noted)
    async with app.run_test(size=size) as pilot:
        screen = await new_session_screen(pilot)
        await pilot.pause()
        assert screen.focused is screen.query_one("#questions", OptionList)
        list_at_first_frame, pane_tops_at_first_frame = first[0]
        assert not list_at_first_frame
        assert pane_tops_at_first_frame == row_cells(app, 1)
        assert "┏" in "".join(char for char, _style in pane_tops_at_first_frame)
        assert "▸ Question" in "".join(char for char, _style in pane_tops_at_first_frame)


async def test_a_key_before_the_question_list_is_there_keeps_its_focus() -> None:
    """The search box focused (/) before the question list is mounted keeps the focus: the
    list takes it only where nothing has it, and its pane is marked as it really is."""
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, NewSessionScreen))
        screen = app.screen
        search = screen.query_one("#search", Input)
        search.focus()
        screen = await new_session_screen(pilot)
        await pilot.pause()
        assert screen.focused is search
        side = screen.query_one("#question-side")
        assert not side.has_class("-focus-coming")
        assert str(side.border_title).startswith("▸ ")
