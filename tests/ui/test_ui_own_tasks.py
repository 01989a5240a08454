"""A new user's path with a task of their own, played with Pilot against the local server: the
manual's math task (docs/tasks.md) copied into the config folder is listed, a typed question
streams numbered thoughts, the first mistake is flagged, each zero-shot finder and the critic
find it, `b` backtracks, `t` shows both branches, and the session reopens, with its own prompt after
the file is edited. Snapshots of the new-session screen with the task at 80x24 and 120x40."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from textual.widgets import OptionList, TextArea, Tree
from ui_helpers import make_app, notifications, run_finder, steady_frame, wait_for

from bbm_tui.core.config import Config, tasks_folder
from bbm_tui.core.store import Store
from bbm_tui.core.tasks import use_tasks
from bbm_tui.core.tasks.files import load_user_tasks
from bbm_tui.ui.dialogs import FindScreen, TypedQuestionScreen
from bbm_tui.ui.screens.backtrack import CandidatesScreen, EditThoughtScreen
from bbm_tui.ui.screens.branch_tree import BranchTreeScreen
from bbm_tui.ui.screens.compare import CompareScreen
from bbm_tui.ui.screens.new_session import NewSessionScreen
from bbm_tui.ui.screens.tokens import TokenScreen
from bbm_tui.ui.screens.trace import TraceScreen
from tests.openai_server import FakeOpenAI, Reply

ROOT = Path(__file__).resolve().parents[2]
QUESTION = "A box holds 12 pens. How many pens are in 3 boxes?"
WRONG = "Each box holds 12 pens, so 3 boxes hold 3 + 12 = 15 pens."
RIGHT = "Each box holds 12 pens, so 3 boxes hold 3 * 12 = 36 pens."


def docs_example() -> tuple[str, str]:
    """The math task's TOML and prompt as the manual's "Your own tasks" (docs/tasks.md) shows
    them, before its first section."""
    text = (ROOT / "docs" / "tasks.md").read_text(encoding="utf-8")
    section = text.split("\n# Your own tasks\n", 1)[-1].split("\n## ", 1)[0]
    blocks = dict(re.findall(r"```(toml|text)\n(.*?)```", section, re.DOTALL))
    return blocks["toml"], blocks["text"]


def test_the_docs_show_the_shipped_example() -> None:
    toml, prompt = docs_example()
    example = ROOT / "examples" / "tasks"
    assert toml == (example / "school_math.toml").read_text(encoding="utf-8")
    assert prompt == (example / "school_math_prompt.txt").read_text(encoding="utf-8") + "\n"


@pytest.fixture
def math_task() -> str:
    """The manual's math task copied into the config folder, read as the command line reads
    it at start. Its prompt, as the manual shows it."""
    toml, prompt = docs_example()
    folder = tasks_folder()
    folder.mkdir(parents=True)
    (folder / "school_math.toml").write_text(toml, encoding="utf-8")
    (folder / "school_math_prompt.txt").write_text(prompt, encoding="utf-8")
    shutil.copy(ROOT / "examples" / "tasks" / "school_math_questions.jsonl", folder)
    use_user_tasks()
    return prompt.rstrip("\n")


def use_user_tasks() -> list[str]:
    loaded = load_user_tasks(tasks_folder())
    use_tasks(loaded.tasks)
    return [str(problem) for problem in loaded.problems]


def responder(path: str, body: dict) -> Reply:
    """A model that multiplies wrongly at first and rightly when resampled; finders that name
    Thought 1."""
    prompt = body["messages"][-1]["content"]
    if int(body.get("n") or 1) > 1:
        return Reply(choices=[RIGHT] * int(body["n"]), honor_stop=False)
    if prompt.endswith("Thought 1:"):
        return Reply(f" {WRONG}\n")
    if prompt.endswith("Thought 2:"):
        answer = "$36." if "= 36 pens" in prompt else "15."
        return Reply(f" So the answer is {answer}\n")
    if "\\boxed{}" in prompt:
        return Reply("Thought 1 adds where it should multiply. \\boxed{1}")
    if "Is there a mistake in this sequence?" in prompt:
        return Reply("1")
    return Reply("No")


def config_for(server: FakeOpenAI) -> Config:
    return Config(model="openai/test", api_base=server.base_url)


def tree_labels(tree: Tree) -> list[str]:
    found, todo = [], list(tree.root.children)
    while todo:
        node = todo.pop(0)
        found.append(str(node.label))
        todo.extend(node.children)
    return found


async def test_a_new_users_task_from_the_config_folder_end_to_end(
        math_task: str, store: Store, openai_server: FakeOpenAI) -> None:
    openai_server.responder = responder
    app = make_app(config_for(openai_server))
    async with app.run_test(size=(120, 40)) as pilot:
        # Listed after the paper's five, marked as the user's, its questions file listed.
        # The task list is mounted a frame after the screen (its first frame holds less).
        await wait_for(pilot, lambda: isinstance(app.screen, NewSessionScreen)
                       and bool(app.screen.query("#tasks")))
        screen = app.screen
        tasks = screen.query_one("#tasks", OptionList)
        assert tasks.option_count == 6
        assert str(tasks.get_option_at_index(5).prompt) == "Grade-school math · yours"
        tasks.focus()
        await pilot.press(*["down"] * 5)
        assert screen.task_name == "school_math"
        await wait_for(pilot, lambda: screen.query_one("#questions", OptionList)
                       .option_count == 7)
        # A question typed in, with its target.
        await pilot.press("ctrl+t")
        await wait_for(pilot, lambda: isinstance(app.screen, TypedQuestionScreen))
        assert str(app.screen.query_one("#typed-hint").render()) == (
            "The model is asked: Q: + your text")
        app.screen.query_one("#typed-input", TextArea).text = QUESTION
        app.screen.query_one("#typed-target").value = "36"
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen)
                       and app.screen.is_mounted)
        trace_screen = app.screen
        trace = trace_screen.view.trace
        assert trace.task.name == "school_math" and trace.session.task_digest
        assert trace_screen.query_one("#question-pane").border_title == (
            "Question · Grade-school math[$foreground 60%] · yours[/$foreground 60%]")
        # r: numbered thoughts stream from the server, the prompts the documented template.
        await pilot.press("r")
        await wait_for(pilot, lambda: trace.answer == "15." and not trace_screen.view.running,
                       timeout=30)
        assert trace.texts == [WRONG, "So the answer is 15."] and trace.correct is False
        assert [r.body["messages"][-1]["content"] for r in openai_server.requests] == [
            f"{math_task}\n\nQ: {QUESTION}\nThought 1:",
            f"{math_task}\n\nQ: {QUESTION}\nThought 1: {WRONG}\nThought 2:",
        ]
        # x: the first mistake, Thought 1.
        await pilot.press("1", "enter", "x")
        await wait_for(pilot, lambda: trace.mistake_number == 1)
        # f: every method the task has (no few-shot finding prompts: the zero-shot ones and
        # the critic; no task verifier), each finding Thought 1.
        await pilot.press("f")
        await wait_for(pilot, lambda: isinstance(app.screen, FindScreen))
        assert [judge.name for judge in app.screen._methods] == [
            "direct-trace-zero-shot", "direct-step-zero-shot", "critic"]
        assert app.screen.method.name == "direct-step-zero-shot"
        assert "offline models know the paper's tasks only" in str(
            app.screen.query_one("#find-hint").render())
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is trace_screen)
        for method in ("direct-trace-zero-shot", "direct-step-zero-shot", "critic"):
            await run_finder(pilot, method)
            await wait_for(pilot, lambda: not trace_screen.view.finding, timeout=30)
        runs = store.finder_runs(trace.id)
        assert [(run.method, run.model, run.mistake_number, run.parsed) for run in runs] == [
            ("direct-trace-zero-shot", "openai/test", 1, True),
            ("direct-step-zero-shot", "openai/test", 1, True),
            ("critic", "openai/test", 1, True)]
        critic_prompt = openai_server.requests[-1].body["messages"][-1]["content"]
        assert f"[Question]\n\nQ: {QUESTION}\n\n[Solution]\n\nThought 1: {WRONG}" in (
            critic_prompt)
        assert "[Task]\n\nGrade-school math word problems: a few quantities" in critic_prompt
        # b: Thought 1 sampled again, the new branch goes on to the right answer ("$36."
        # is the target 36 by the task's number comparison).
        await pilot.press("b")
        await wait_for(pilot, lambda: isinstance(app.screen, CandidatesScreen)
                       and app.screen.all_arrived, timeout=30)
        await pilot.press("enter")
        await wait_for(pilot, lambda: trace.answer == "$36." and not trace_screen.view.running,
                       timeout=30)
        assert trace.texts == [RIGHT, "So the answer is $36."] and trace.correct is True
        # t: both branches, each judged by the task's comparison.
        await pilot.press("t")
        await wait_for(pilot, lambda: isinstance(app.screen, BranchTreeScreen))
        labels = " | ".join(tree_labels(app.screen.query_one(Tree)))
        assert "✗ 15." in labels and "✓ $36." in labels
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is trace_screen)
        assert notifications(app) == []
        session_id = trace.id

    # The session reopens as it was.
    again = make_app(config_for(openai_server), session_id=session_id)
    async with again.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: isinstance(again.screen, TraceScreen)
                       and again.screen.is_mounted)
        reopened = again.screen.view.trace
        assert reopened.texts == [RIGHT, "So the answer is $36."] and reopened.correct
        assert reopened.task_change is None and notifications(again) == []


async def test_an_edited_task_file_leaves_the_session_its_prompt_and_says_so(
        math_task: str, store: Store, openai_server: FakeOpenAI) -> None:
    openai_server.responder = responder
    app = make_app(config_for(openai_server), task="school_math", question=0)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen)
                       and app.screen.is_mounted)
        trace = app.screen.view.trace
        assert trace.session.dataset_index == 0 and trace.session.target == "97"
        await pilot.press("n")
        await wait_for(pilot, lambda: len(trace.steps) == 1 and not app.screen.view.running,
                       timeout=30)
        session_id = trace.id
    prompt_file = tasks_folder() / "school_math_prompt.txt"
    prompt_file.write_text("Solve it, one thought a line.", encoding="utf-8")
    assert use_user_tasks() == []
    openai_server.requests.clear()
    again = make_app(config_for(openai_server), session_id=session_id)
    async with again.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: isinstance(again.screen, TraceScreen)
                       and again.screen.is_mounted)
        screen = again.screen
        assert screen.view.trace.task.prompt == math_task
        assert "file changed" in screen.query_one("#question-pane").border_title
        [said] = notifications(again)
        assert said.startswith("Your task school_math: Its task file (")
        assert "has changed since this session was made" in said
        await pilot.press("n")
        await wait_for(pilot, lambda: len(screen.view.trace.steps) == 2 and not screen.view.running,
                       timeout=30)
        [request] = openai_server.requests
        assert request.body["messages"][-1]["content"] == (
            f"{math_task}\n\nQ: {ROW_0}\nThought 1: {WRONG}\nThought 2:")


async def test_step_rewrite_compare_and_tokens_on_a_task_of_ones_own(
        math_task: str, store: Store, openai_server: FakeOpenAI) -> None:
    """n, w, v and l on the task's question 1 (Maria's bike, target 12): the rewritten thought
    goes on to "12 weeks.", right by the task's number comparison, beside the first branch."""
    def weeks(path: str, body: dict) -> Reply:
        prompt = body["messages"][-1]["content"]
        answer = "12 weeks." if "= 12 weeks" in prompt else "15."
        text = (" 180 + 15 = 195 dollars.\n" if prompt.endswith("Thought 1:")
                else f" So the answer is {answer}\n")
        return Reply(text, logprob_per_token=-0.25)

    openai_server.responder = weeks
    config = Config(model="openai/test", api_base=openai_server.base_url, logprobs=True)
    app = make_app(config, task="school_math", question=1)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen)
                       and app.screen.is_mounted)
        screen = app.screen
        trace = screen.view.trace
        assert trace.session.target == "12"
        await pilot.press("n")
        await wait_for(pilot, lambda: len(trace.steps) == 1 and not screen.view.running,
                       timeout=30)
        await pilot.press("n")
        await wait_for(pilot, lambda: trace.answer == "15." and not screen.view.running,
                       timeout=30)
        assert trace.correct is False
        # l: Thought 1's tokens, with the probabilities the server sent.
        await pilot.press("1", "enter", "l")
        await wait_for(pilot, lambda: isinstance(app.screen, TokenScreen))
        assert "".join(token.text for token in app.screen.tokens).strip() == (
            "180 + 15 = 195 dollars.")
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is screen)
        # w: Thought 1 rewritten; the model goes on from it on a new branch.
        await pilot.press("w")
        await wait_for(pilot, lambda: isinstance(app.screen, EditThoughtScreen))
        app.screen.query_one("#edit-input").value = "She needs 180 / 15 = 12 weeks."
        await pilot.press("enter")
        await wait_for(pilot, lambda: trace.answer == "12 weeks." and not screen.view.running,
                       timeout=30)
        assert trace.steps[0].origin == "edit" and trace.correct is True
        # v: the two branches side by side, each judged by the task's comparison.
        await pilot.press("v")
        await wait_for(pilot, lambda: isinstance(app.screen, CompareScreen))
        ends = " | ".join(str(end.render()) for end in app.screen.query(".compare-end"))
        assert "answer 12 weeks. ✓ right" in ends and "answer 15. ✗ wrong" in ends
        await pilot.press("escape")
        assert notifications(app) == []


ROW_0 = ("A school has 4 classes of 28 students each. 15 students are absent today. How many "
         "students are at school today?")


async def test_offline_models_are_refused_for_the_task_on_the_new_session_screen(
        math_task: str) -> None:
    # replay/bbm replays the traces recorded in the task's questions file (issue 34, item
    # 9): the solver, which knows only the paper's tasks, is the one refused.
    app = make_app(Config(model="solver/bbm"))
    async with app.run_test(size=(120, 40)) as pilot:
        # The task list is mounted a frame after the screen (its first frame holds less).
        await wait_for(pilot, lambda: isinstance(app.screen, NewSessionScreen)
                       and bool(app.screen.query("#tasks")))
        screen = app.screen
        screen.query_one("#tasks", OptionList).focus()
        await pilot.press(*["down"] * 5)
        await wait_for(pilot, lambda: "solver/bbm cannot write steps for your task "
                       "school_math" in str(screen.query_one("#new-status").render()))
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert isinstance(app.screen, NewSessionScreen)
        await wait_for(pilot, lambda: notifications(app) != [])
        assert any("choose another model (^e)" in note for note in notifications(app)), (
            notifications(app))


def _snapshot(snap_compare, size: tuple[int, int]) -> bool:
    async def pick_the_task(pilot) -> None:
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, NewSessionScreen)
                       and pilot.app.screen.query_one("#questions", OptionList)
                       .option_count > 0)
        screen = pilot.app.screen
        screen.query_one("#tasks", OptionList).focus()
        await pilot.press(*["down"] * 5)
        await wait_for(pilot, lambda: screen.query_one("#questions", OptionList)
                       .option_count == 7)
        await steady_frame(pilot)

    return snap_compare(make_app(Config(model="openai/gpt-4o-mini")), terminal_size=size,
                        run_before=pick_the_task)


def test_new_session_screen_with_a_task_of_ones_own_at_80x24(math_task, snap_compare) -> None:
    assert _snapshot(snap_compare, (80, 24))


def test_new_session_screen_with_a_task_of_ones_own_at_120x40(math_task, snap_compare) -> None:
    assert _snapshot(snap_compare, (120, 40))


async def test_task_files_that_did_not_load_are_named_in_the_app() -> None:
    problem = "/home/me/.config/bbm-tui/tasks/bad.toml: line 2: 'compare': unknown comparison"
    app = make_app(task_problems=[problem])
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: notifications(app) != [])
        assert notifications(app) == [
            f"A task file did not load: {problem}\nThe other tasks are listed."]


async def test_replay_replays_a_recorded_trace_of_ones_own_task_in_the_app(
        math_task: str) -> None:
    """With no key: replay/bbm (the default) on the task's first question writes the trace
    recorded in its questions file, thought by thought (issue 34, item 9)."""
    import json

    recorded = json.loads((ROOT / "examples" / "tasks" / "school_math_questions.jsonl")
                          .read_text(encoding="utf-8").splitlines()[0])
    app = make_app(task="school_math", question=0)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen)
                       and app.screen.is_mounted)
        screen = app.screen
        assert isinstance(screen, TraceScreen)
        await pilot.press("r")
        await wait_for(pilot, lambda: len(screen.view.trace.steps) == len(recorded["steps"])
                       and not screen.view.running)
        assert [step.text for step in screen.view.trace.steps] == recorded["steps"]
        assert screen.view.trace.correct


@pytest.mark.parametrize("method", ["critic", "direct-step-zero-shot"])
async def test_replay_finds_the_recorded_label_of_ones_own_trace_in_the_app(
        math_task: str, method: str) -> None:
    """With no key: f with replay/bbm on a replayed trace of one's own task answers from the
    label its questions file records (issue 34, item 9): Thought 1, as recorded."""
    app = make_app(task="school_math", question=3)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen)
                       and app.screen.is_mounted)
        screen = app.screen
        assert isinstance(screen, TraceScreen)
        await pilot.press("r")
        await wait_for(pilot, lambda: len(screen.view.trace.steps) == 2
                       and not screen.view.running)
        await run_finder(pilot, method, model="replay/bbm")
        finder = screen.view.finder
        assert finder is not None
        assert (finder.state, finder.mistake_number) == ("finished", 1), finder.error
