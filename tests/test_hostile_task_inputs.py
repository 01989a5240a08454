"""Issue 33, items 1-5: no user-supplied pattern, step, router file or input file hangs a
command or fills the memory. What hung before runs here in a child process under a time limit
(a match in `re` runs in C: nothing in this process could stop it)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bbm_tui.core.batch.compare import compare_rows
from bbm_tui.core.dataset import TraceRow
from bbm_tui.core.records import Verdict
from bbm_tui.core.store.files import DATABASE_NAME
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
from bbm_tui.core.store.files import DATABASE_NAME
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


# --------------------------------------------------------------------------- 2. verifiers


VERIFY_IN_A_CHILD = """
import json, sys, time
from bbm_tui.core.tasks.verify import verify_trace
question = json.loads(sys.argv[2])
started = time.monotonic()
verdicts = verify_trace(sys.argv[1], question, [sys.stdin.read()])
print(json.dumps([[v.kind.value, v.reason] for v in verdicts]))
print(f"{time.monotonic() - started:.2f} s", file=sys.stderr)
"""


def _dataset_question(task: str) -> str:
    from bbm_tui.core.dataset import bundled_rows

    return bundled_rows(task)[0].input


@pytest.mark.parametrize(("task", "step"), [
    # The direction pattern tried every "from" against every " to " after it (cubic).
    ("logical_deduction", "from a to " * 10_000),
    ("logical_deduction", "from a " * 23_000),
    # The paper's answer regex tried every "the answer is" to its line's end.
    ("logical_deduction", "the answer is " * 11_500 + "\nx"),
    # An item of "Alice: x" ended at white space before "So": a long run backtracked (5 KB
    # of spaces took 198 s).
    ("tracking_shuffled_objects", "Alice: x" + " " * 100_000 + "y"),
    ("tracking_shuffled_objects", "Alice: x" + " " * 160_000 + "y"),
], ids=["from-to", "from", "answer-lines", "spaces-100k", "spaces-160k"])
def test_long_steps_verify_in_linear_time(task: str, step: str) -> None:
    done = child("-c", VERIFY_IN_A_CHILD, task, json.dumps(_dataset_question(task)),
                 stdin=step)
    assert done.returncode == 0, done.stderr
    [[kind, reason]] = json.loads(done.stdout)
    print(f"{task}, {len(step):,} characters: {done.stderr.strip()} ({kind}: {reason})")


def test_a_step_past_the_bound_is_too_long_to_verify() -> None:
    from bbm_tui.core.tasks.verify import verify_trace

    question = _dataset_question("tracking_shuffled_objects")
    verdicts = verify_trace("tracking_shuffled_objects", question,
                            ["x" * 300_000, "So the answer is (A)."])
    assert [(v.kind, v.reason) for v in verdicts] == [
        (Verdict.CANNOT_JUDGE, "too long to verify (300,000 characters; the verifiers read steps "
                         "of up to 200,000)"),
        (Verdict.CANNOT_JUDGE, "follows a step too long to verify")]


# --------------------------------------------------------------------------- 3. router files


def _laughs(levels: int) -> str:
    lines = ["l0: &l0 [a, a, a, a, a, a, a, a, a]"]
    lines += [f"l{n}: &l{n} [{', '.join([f'*l{n - 1}'] * 9)}]" for n in range(1, levels)]
    lines += ["model_list:", "  - model_name: g", "    litellm_params:",
              "      model: openai/test", f"      laughs: *l{levels - 1}"]
    return "\n".join(lines) + "\n"


def _limited(memory_bytes: int) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))


def test_a_router_files_aliases_may_not_expand_without_bound(tmp_path: Path) -> None:
    """400 bytes of YAML aliases expanding to 9^8 values took 62 s and 4 GB (here the child
    may take 2 GB at most, so a code that expands them fails)."""
    path = tmp_path / "laughs.yaml"
    path.write_text(_laughs(8), encoding="utf-8")
    assert len(path.read_bytes()) < 600
    questions = tmp_path / "q.jsonl"
    questions.write_text('{"input": "2 + 2", "target": "4"}\n', encoding="utf-8")
    try:
        done = subprocess.run(
            [sys.executable, "-m", "bbm_tui", "run", "--router", str(path), "--model", "g",
             "--input", str(questions), "--task", "word_sorting", "--out",
             str(tmp_path / "out.jsonl"), "--no-progress"],
            capture_output=True, text=True, timeout=TIME_LIMIT_S,
            preexec_fn=lambda: _limited(2 * 2**30))
    except subprocess.TimeoutExpired:
        pytest.fail(f"still running after {TIME_LIMIT_S} s")
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr == (f"bbm-tui: {path}: its aliases expand to more than 1,000,000 "
                           "values (or refer to themselves); a router file lists deployments: "
                           "write them out\n")
    # An alias inside its own anchor, the same.
    path.write_text("model_list: &a\n  - *a\n", encoding="utf-8")
    from bbm_tui.core.llm.router import RouterFileError, read_router_file

    with pytest.raises(RouterFileError, match="refer to themselves"):
        read_router_file(path)
    # Ordinary aliases (a shared params block) read as before.
    path.write_text("defaults: &p {model: openai/test, api_base: 'http://h/v1'}\n"
                    "model_list:\n  - {model_name: g, litellm_params: *p}\n"
                    "  - {model_name: g, litellm_params: *p, model_info: {id: two}}\n",
                    encoding="utf-8")
    assert [d.name for d in read_router_file(path).deployments] == ["http://h/v1", "two"]


def test_a_router_file_past_the_size_bound_is_refused_at_once(tmp_path: Path) -> None:
    from bbm_tui.core.llm.router import RouterFileError, read_router_file

    path = tmp_path / "big.yaml"
    entry = ("  - model_name: g\n    litellm_params:\n      model: openai/test\n"
             "      api_base: http://127.0.0.1:1/v1\n")
    path.write_text("model_list:\n" + entry * (10 * 2**20 // len(entry)), encoding="utf-8")
    started = time.monotonic()
    with pytest.raises(RouterFileError) as raised:
        read_router_file(path)
    assert str(raised.value) == (f"{path}: the router file is 10 MiB: larger than the 1 MiB "
                                 "a file of this kind may be")
    assert time.monotonic() - started < 5
    # One of 4,000 deployments (~0.5 MiB) reads.
    path.write_text("model_list:\n" + entry * 4000, encoding="utf-8")
    assert len(read_router_file(path).deployments) == 4000


# --------------------------------------------------------------------------- 4. what is read


def _fifo(folder: Path, name: str) -> Path:
    path = folder / name
    os.mkfifo(path)
    return path


def test_a_fifo_or_a_device_is_refused_where_a_file_is_read(tmp_path: Path) -> None:
    """A FIFO blocked the command for ever, /dev/zero filled the memory: as --task-file, as
    --router and as a merge input."""
    fifo = _fifo(tmp_path, "pipe")
    shard = tmp_path / "shard.jsonl"
    shard.write_text("", encoding="utf-8")
    for special, kind in ((fifo, "a FIFO (named pipe)"), (Path("/dev/zero"), "a device")):
        done = bbm("stats", "--task-file", str(special), str(shard))
        assert done.stderr == f"bbm-tui: {special}: the task file is {kind}, not a regular file\n"
        done = bbm("run", "--router", str(special), "--model", "g", "--input", str(shard),
                   "--out", str(tmp_path / "out.jsonl"), "--no-progress")
        assert f"{special}: the router file is {kind}, not a regular file" in done.stderr, \
            done.stderr
        done = bbm("merge", str(shard), str(special), "--out", str(tmp_path / "merged.jsonl"))
        assert done.returncode != 0
        assert f"{special}: is {kind}, not a regular file" in done.stderr, done.stderr
        assert not (tmp_path / "merged.jsonl").exists()


def _sparse(path: Path, size: int) -> Path:
    with path.open("wb") as handle:
        handle.truncate(size)
    return path


def test_a_huge_prompt_file_is_refused_from_its_size(tmp_path: Path,
                                                       openai_server: FakeOpenAI) -> None:
    """A 2 GB sparse prompt file was read whole (15 s, 4.2 GB): `run`, which uses it, refuses
    it from its size, before a call or a session."""
    prompt = _sparse(tmp_path / "prompt.txt", 2 * 2**30)
    path = task_file(tmp_path, extra='prompt = "prompt.txt"\n')
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"input": "x", "target": "1"}) + "\n", encoding="utf-8")
    done = bbm("run", "--model", "openai/test", "--api-base", openai_server.base_url,
               "--task-file", str(path), "--input", str(questions), "--out",
               str(tmp_path / "out.jsonl"), "--no-progress")
    assert done.returncode != 0
    assert (f"bbm-tui: {path}: line 5: 'prompt': {prompt} is 2048 MiB: larger than the 16 MiB "
            "a file of this kind may be\n") in done.stderr, done.stderr
    assert not openai_server.requests
    assert not (tmp_path / "out.jsonl").exists()


@pytest.mark.parametrize("kind", ["sparse", "fifo"])
def test_stats_never_reads_a_prompt_file(tmp_path: Path, kind: str) -> None:
    """`stats` uses no prompt: a task file's prompt and finding prompts are read when first
    needed, so a 2 GB sparse file or a FIFO there (which `run` refuses) does not stop it."""
    if kind == "fifo":
        _fifo(tmp_path, "prompt.txt")
        _fifo(tmp_path, "finding.json")
    else:
        _sparse(tmp_path / "prompt.txt", 2 * 2**30)
        _sparse(tmp_path / "finding.json", 2 * 2**30)
    path = task_file(tmp_path, extra='prompt = "prompt.txt"\nfinding_prompts = "finding.json"\n')
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"input": "x", "steps": ["answer: 1"], "answer": "1", "target": "1"}\n',
                    encoding="utf-8")
    done = bbm("stats", "--task-file", str(path), str(rows))
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert "hostile" in done.stdout


def test_a_prompt_file_is_checked_when_it_is_first_needed(tmp_path: Path) -> None:
    """A FIFO as a prompt file loads (nothing reads it yet); reading the prompt refuses it
    with the task file's message, without blocking."""
    fifo = _fifo(tmp_path, "prompt.txt")
    path = task_file(tmp_path, extra='prompt = "prompt.txt"\n')
    task = load_task_file(path)
    assert task.few_shot
    with pytest.raises(TaskFileError) as raised:
        task.prompt  # noqa: B018 (reading it is the point)
    assert str(raised.value) == (f"{path}: line 5: 'prompt': {fifo} is a FIFO (named pipe), "
                                 "not a regular file")


# --------------------------------------------------------------------------- 5. templates


@pytest.mark.parametrize("field", ["{steps:>2000000000}", "{steps:d}", "{input!r}",
                                   "{steps!s:>3}"])
def test_a_finding_template_takes_plain_fields_only(tmp_path: Path, field: str) -> None:
    template = f"Q: {{input}} {field} {{steps}}" if "steps" not in field else f"Q: {field}"
    (tmp_path / "finding.json").write_text(json.dumps({
        "DIRECT_TEMPLATE": template, "DIRECT_MESSAGES": []}), encoding="utf-8")
    path = task_file(tmp_path, extra='finding_prompts = "finding.json"\n')
    with pytest.raises(TaskFileError) as raised:
        load_task_file(path).read_files()
    name = field[1:].split("!")[0].split(":")[0]
    assert str(raised.value) == (
        f"{path}: line 5: 'finding_prompts': {tmp_path / 'finding.json'}: DIRECT_TEMPLATE: the "
        f"template's field {field} has a conversion or format spec; only plain fields such as "
        f"{{{name}}} are filled")


def test_plain_fields_and_doubled_braces_still_load(tmp_path: Path) -> None:
    (tmp_path / "finding.json").write_text(json.dumps({
        "DIRECT_TEMPLATE": "Q: {input}\n{steps}\nAnswer {{yes}} or {{no}}:",
        "DIRECT_MESSAGES": []}), encoding="utf-8")
    path = task_file(tmp_path, extra='finding_prompts = "finding.json"\n')
    assert load_task_file(path).finding_prompts is not None


def _steps_in_store(home: Path) -> int:
    """How many steps the store under `home` holds (0: no store yet)."""
    path = home / DATABASE_NAME
    if not path.exists():
        return 0
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True,
                                                timeout=5)) as connection:
            return connection.execute("SELECT count(*) FROM steps").fetchone()[0]
    except sqlite3.OperationalError:  # the schema not made yet
        return 0


@pytest.mark.parametrize("signal_number", [signal.SIGINT, signal.SIGTERM],
                         ids=["SIGINT", "SIGTERM"])
def test_a_signal_ends_run_while_it_matches_a_pattern(
        tmp_path: Path, isolated_home: Path, openai_server: FakeOpenAI,
        signal_number: int) -> None:
    """A signal sent while `run` compares a committed step with a pattern that backtracks for
    ever ends it: the signal goes the moment the step is in the store, which is when the
    comparison starts. With Python's `re` there, the match runs in C, holding the
    interpreter: Ctrl+C never ended `run` (checked by swapping `re` back into
    core/patterns.py: this test then fails at SIGINT)."""
    openai_server.responder = lambda path, body: Reply(f" answer: {HANGS_ON}\n")
    path = task_file(tmp_path, compare="regex")
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"input": "aaa", "target": HANGING_TARGET}) + "\n",
                         encoding="utf-8")
    process = subprocess.Popen(
        [sys.executable, "-m", "bbm_tui", "run", "--model", "openai/test", "--api-base",
         openai_server.base_url, "--task-file", str(path), "--input", str(questions), "--out",
         str(tmp_path / "out.jsonl"), "--no-progress"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + TIME_LIMIT_S
        while (not _steps_in_store(isolated_home) and process.poll() is None
               and time.monotonic() < deadline):
            time.sleep(0.02)
        assert _steps_in_store(isolated_home), "run never committed its step"
        process.send_signal(signal_number)
        try:
            _, stderr = process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail("run did not end within 60 s of the signal")
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode != 0
    assert "Traceback" not in stderr, stderr
