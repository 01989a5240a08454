"""Issue 33, items 1-5: no user-supplied pattern, step, router file or input file hangs a
command or fills the memory. What hung before runs here in a child process under a time limit
(a match in `re` runs in C: nothing in this process could stop it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bbm_tui.cli import main
from bbm_tui.core.batch.compare import compare_rows
from bbm_tui.core.dataset import TraceRow
from bbm_tui.core.tasks import Task
from bbm_tui.core.tasks.files import TaskFileError, load_task_file
from tests.openai_server import FakeOpenAI, Reply

# Backtracks for ever in `re` (and past any limit in `regex`) on a run of a's that ends
# otherwise; matches no empty text, so a task file may give it.
HANGING = r"^(a|a)+$"
HANGING_TARGET = r"(a|a)+"
HANGS_ON = "a" * 40 + "!"
# Far beyond what the fixed code takes (a few seconds, most of it importing litellm), short
# enough that a hang fails the test.
TIME_LIMIT_S = 120


def task_file(folder: Path, *, answer_regex: str = r"answer: (.*)$", compare: str = "exact",
              extra: str = "") -> Path:
    path = folder / "hostile.toml"
    path.write_text(f"name = \"hostile\"\nquestion = \"Q: {{input}}\"\n"
                    f"answer_regex = '{answer_regex}'\ncompare = '{compare}'\n{extra}",
                    encoding="utf-8")
    return path


def child(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """`python ARGS` in a child process, killed (and the test failed) past TIME_LIMIT_S."""
    try:
        return subprocess.run([sys.executable, *args], capture_output=True, text=True,
                              timeout=TIME_LIMIT_S, env=dict(os.environ), input=stdin)
    except subprocess.TimeoutExpired:
        pytest.fail(f"still running after {TIME_LIMIT_S} s: {' '.join(args[:3])} ...")


def bbm(*args: str) -> subprocess.CompletedProcess[str]:
    return child("-m", "bbm_tui", *args)


# --------------------------------------------------------------------------- 1. patterns


MATCH_IN_A_CHILD = """
import sys
from bbm_tui.core.patterns import PatternTimeout
from bbm_tui.core.tasks.files import load_task_file
task = load_task_file(sys.argv[1])
for what, call in (("extract", lambda: task.extract_answer(sys.argv[2])),
                   ("compare", lambda: task.is_correct(sys.argv[3], sys.argv[4]))):
    try:
        print(what, call())
    except PatternTimeout as error:
        print(what, "timeout:", error)
"""


def test_a_pattern_that_backtracks_for_ever_is_an_error_naming_it_and_its_file(
        tmp_path: Path) -> None:
    path = task_file(tmp_path, answer_regex=HANGING)
    started = time.monotonic()
    done = child("-c", MATCH_IN_A_CHILD, str(path), HANGS_ON, HANGS_ON, "x")
    assert done.returncode == 0, done.stderr
    extract, compare = done.stdout.splitlines()
    assert extract.startswith(f"extract timeout: {path}: 'answer_regex': the regular "
                              f"expression '{HANGING}' took more than 1 s"), extract
    assert compare == "compare False"
    # The row's target as the pattern of a `regex` comparison: the same.
    path = task_file(tmp_path, compare="regex")
    done = child("-c", MATCH_IN_A_CHILD, str(path), "answer: x", HANGS_ON, HANGING_TARGET)
    extract, compare = done.stdout.splitlines()
    assert extract == "extract x"
    assert compare.startswith(f"compare timeout: {path}: 'compare': the regular expression "
                              f"'{HANGING_TARGET}' took"), compare
    print(f"two stopped matches in {time.monotonic() - started:.1f} s")


def test_ordinary_patterns_match_as_before(tmp_path: Path) -> None:
    task = load_task_file(task_file(tmp_path, answer_regex=r"(?<=answer is) *(\d+|\w+)\.?$",
                                    compare=r"regex:\s*{target}\s*(apples)?"))
    assert task.extract_answer("So the answer is 42.") == "42"
    assert task.extract_answer("no answer here") is None
    assert task.is_correct("42 apples", "4[0-9]")
    assert not task.is_correct("52", "4[0-9]")
    assert not task.is_correct("42", "[unclosed")  # a target that is no pattern matches nothing


OPEN_IN_THE_APP = f"""
import asyncio, sys
sys.path.insert(0, {str(Path(__file__).parent / "ui")!r})
from ui_helpers import make_app, thought, wait_for
from bbm_tui.core.tasks import use_tasks
from bbm_tui.core.tasks.files import load_task_file
from bbm_tui.ui.screens.trace import TraceScreen

async def main():
    use_tasks([load_task_file(sys.argv[1])])
    app = make_app(session_id=int(sys.argv[2]))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, TraceScreen)
                       and pilot.app.screen.is_mounted, timeout=60)
        await wait_for(pilot, lambda: thought(pilot.app.screen, 1).text, timeout=60)
        print("opened:", thought(pilot.app.screen, 1).text)

asyncio.run(main())
"""


def test_run_the_app_export_and_stats_end_on_a_pattern_that_backtracks_for_ever(
        tmp_path: Path, openai_server: FakeOpenAI) -> None:
    """A `regex` comparison whose row's target backtracks for ever on the model's answer:
    `run` commits the step, then compares; it ends with the message naming the pattern and
    the file, and so does every later `run`; the app opens the session; `export` and `stats`
    of what it left end (before: 11.5 minutes at full CPU, deaf to Ctrl+C and SIGTERM)."""
    openai_server.responder = lambda path, body: Reply(f" answer: {HANGS_ON}\n")
    path = task_file(tmp_path, compare="regex")
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"input": "aaa", "target": HANGING_TARGET}) + "\n",
                         encoding="utf-8")
    out = tmp_path / "out.jsonl"
    run = ("run", "--model", "openai/test", "--api-base", openai_server.base_url,
           "--task-file", str(path), "--input", str(questions), "--out", str(out),
           "--no-progress")
    said = f"{path}: 'compare': the regular expression '{HANGING_TARGET}' took more than 1 s"
    done = bbm(*run)
    assert done.returncode != 0, (done.stdout, done.stderr)
    assert said in done.stderr, done.stderr
    # The next `run` meets the committed step: it ends too.
    done = bbm(*run)
    assert "Traceback" not in done.stderr, done.stderr
    # The app opens the session run left (it stores its task definition).
    done = child("-c", OPEN_IN_THE_APP, str(path), "1")
    assert done.stdout == f"opened: answer: {HANGS_ON}\n", (done.stdout, done.stderr[-2000:])
    for form in ("markdown", "processbench", "mr-ben", "prm800k"):
        done = bbm("export", "--task-file", str(path), "--format", form, "--out",
                   str(tmp_path / f"export-{form}"))
        assert "Traceback" not in done.stderr, (form, done.stderr)
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"input": "aaa", "steps": [f"answer: {HANGS_ON}"],
                                "answer": HANGS_ON, "target": HANGING_TARGET,
                                "mistake_index": None}) + "\n", encoding="utf-8")
    done = bbm("stats", "--task-file", str(path), str(rows))
    assert done.returncode != 0
    assert said in done.stderr, done.stderr


def _row(model: str, answer: str, target: str) -> tuple[str, TraceRow]:
    return "hostile", TraceRow("q", [f"answer: {answer}"], answer, target, None,
                               {"model": model})


def test_compare_never_reads_an_answer_as_a_pattern(tmp_path: Path) -> None:
    task = Task("hostile", "Hostile", "Q: {input}", "", compare="regex")
    from bbm_tui.core.tasks import use_tasks
    use_tasks([task])
    try:
        # `.*` as one model's answer agreed with anything.
        parted = compare_rows([_row("a", "banana", "ban.*"), _row("b", ".*", "ban.*")])
        assert [[(answer.model, answer.correct) for answer in parting.answers]
                for parting in parted.partings] == [[("a", True), ("b", False)]]
        # Two answers alike as text are one.
        assert compare_rows([_row("a", "7", "7"), _row("b", " 7 ", "7")]).partings == []
    finally:
        use_tasks([])


COMPARE_IN_A_CHILD = """
import sys
from bbm_tui.core.batch.compare import compare_rows
from bbm_tui.core.dataset import TraceRow
from bbm_tui.core.tasks import Task, use_tasks
use_tasks([Task("hostile", "Hostile", "Q: {input}", "", compare="regex")])
rows = [("hostile", TraceRow("q", ["x"], answer, "a+", None, {"model": model}))
        for model, answer in (("a", sys.argv[1]), ("b", sys.argv[2]))]
print(len(compare_rows(rows).partings))
"""


def test_compare_never_matches_one_answer_against_another(tmp_path: Path) -> None:
    """One model's answer as the pattern of another's backtracked for ever."""
    done = child("-c", COMPARE_IN_A_CHILD, HANGS_ON, HANGING_TARGET)
    assert (done.returncode, done.stdout) == (0, "1\n"), done.stderr
