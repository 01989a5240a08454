"""SIGKILL at random moments: a headless `bbm-tui run` and the app (in a real pseudo-terminal,
running to the answer with `r`), then the store and OUT checked, then a resume.

After each kill: `PRAGMA integrity_check` passes; every step that was committed before the
kill is still there, unchanged; every session's branch is a prefix of its question's recorded
trace, numbered 1..n, with no step stored twice and one call per step; one session per question;
OUT holds only whole rows, each the dataset's row. Resuming (`run` again with the same
arguments; the app with `--session ID` and `r`) keeps every step it found (same ids), adds the
rest, and ends with exactly the dataset's trace, nothing twice. The app is also killed while a
step-level mistake finder runs on its trace (answers from a local server): every answer
committed before the kill is kept, the run has no result, and the resumed session shows it
stopped and runs another to the end. `bbm-tui backtrack` is killed while its continuation
streams (the original branch whole, every committed step of the new one there, in one chain,
nothing half-written) and while its sampling call waits (the original untouched, nothing of a
new branch saved); run again, it finishes the branch without sampling twice.

The moments come from a seeded generator (BBM_TUI_KILL_SEED, printed); where the kill lands
still depends on the machine's speed, which is the point. The processes are forked from a
server that has imported litellm already (tests/kill_targets.py) so that twenty kills take
seconds, not minutes; `test_cold_*` kill fresh `python -m bbm_tui` processes the same way.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from bbm_tui.core.dataset import bundled_rows
from bbm_tui.core.store import DATABASE_NAME, Store
from bbm_tui.core.tasks import extract_answer
from tests.kill_targets import (
    Child,
    ColdChild,
    ForkServer,
    SavedStep,
    Terminal,
    check_sessions,
    committed_steps,
    errors_on_screen,
    integrity,
    query,
    screen_text,
    snapshot,
)
from tests.openai_server import FakeOpenAI, Reply, dataset_responder

SEED = int(os.environ.get("BBM_TUI_KILL_SEED", "20250611"))
RUN_KILLS = 12
APP_KILLS = 8
RUN_TASKS = ("word_sorting", "logical_deduction", "multistep_arithmetic",
             "tracking_shuffled_objects", "dyck_languages")
APP_TASKS = ("word_sorting", "logical_deduction", "dyck_languages")


@pytest.fixture(scope="module")
def server() -> Iterator[ForkServer]:
    forks = ForkServer()
    yield forks
    forks.close()


def environment(home: Path, pace: int) -> dict[str, str | None]:
    return {
        "BBM_TUI_HOME": str(home),
        "BBM_TUI_CONFIG": str(home.parent / "no-config.toml"),
        "BBM_TUI_REPLAY_TPS": str(pace),
        "TERM": "xterm-256color",
        "BBM_TUI_DEBUG": None,
    }


def kill_when(child: Child | ColdChild, db: Path, rng: random.Random, total: int,
              early: bool) -> tuple[dict[int, SavedStep], str]:
    """Kill the child at a random moment: `early`, a random time into its start (the store
    being created, the sessions made, the first step streaming), else once a random number of
    steps are committed, plus a few random milliseconds (mid-stream, mid-commit, mid-write of
    OUT). Returns the steps committed just before the kill, and where it was aimed."""
    if early:
        delay = rng.uniform(0.0, 0.25)
        aim = f"{delay * 1000:.0f} ms into it"
        time.sleep(delay)
        before = snapshot(db)
    else:
        target = rng.randint(1, max(1, int(total * 0.85)))
        delay = rng.uniform(0.0, 0.04)
        aim = f"{delay * 1000:.0f} ms after step {target} of {total}"
        deadline = time.monotonic() + 60
        while committed_steps(db) < target:
            if child.poll() is not None:
                # Over before the kill's moment, and well (a crash fails here): the caller
                # tries again. A run can end between two reads that counted fewer (this
                # process descheduled at load, or a read failing, counted 0, as the child
                # closes its store): ci59 saw a finished run of 26 steps "end first".
                assert child.poll() == 0, f"it ended ({child.poll()}) first: {child.stderr}"
                break
            assert time.monotonic() < deadline, "no progress in a minute"
            time.sleep(0.005)
        before = snapshot(db)
        time.sleep(delay)
    return before, aim


def assert_kept(before: dict[int, SavedStep], after: dict[int, SavedStep]) -> None:
    """Every step committed before is still there, exactly as it was (same id)."""
    lost = [step for step_id, step in before.items() if after.get(step_id) != step]
    assert not lost, f"{len(lost)} committed steps lost or changed, e.g. {lost[0]}"


# ---------------------------------------------------------------------------- run


@dataclass(frozen=True)
class RunPlan:
    index: int
    task: str
    limit: int
    concurrency: int
    pace: int
    early: bool = False

    @classmethod
    def draw(cls, rng: random.Random, index: int, early: bool) -> RunPlan:
        task = rng.choice(RUN_TASKS)
        limit = rng.randint(2, 3) if task == "dyck_languages" else rng.randint(3, 6)
        return cls(index, task, limit, rng.randint(2, 4), rng.choice((300, 600, 1000, 2000)),
                   early)

    def argv(self, out: Path) -> list[str]:
        return ["run", "--dataset", "--task", self.task, "--limit", str(self.limit),
                "--concurrency", str(self.concurrency), "--out", str(out), "--no-progress"]


def out_rows(out: Path) -> tuple[list[bytes], bytes]:
    """OUT's whole lines and what follows the last newline (a line cut off by the kill)."""
    data = out.read_bytes() if out.exists() else b""
    *lines, tail = data.split(b"\n")
    return lines, tail


def assert_dataset_row(line: bytes, by_input: dict, model: str = "replay/bbm") -> str:
    value = json.loads(line)
    row = by_input[value["input"]]
    assert value["steps"] == row.steps
    assert value["answer"] == extract_answer(row.steps[-1])
    assert value["target"] == row.target
    assert "mistake_index" not in value  # unlabelled: nobody has looked at it yet
    assert value["model"] == model
    where = {"dataset_index", "source_index"} & set(value)
    assert len(where) == 1
    assert set(value) == {"input", "steps", "answer", "target", "model", "latency_s", "usage",
                          "task", *where}
    return value["input"]


def kill_and_resume_run(server: ForkServer, root: Path, plan: RunPlan, attempt: int,
                        cold: bool = False) -> str | None:
    """One kill; None when the run finished before the kill landed (then try again)."""
    rng = random.Random(f"{SEED}-run-{plan.index}-{attempt}")
    home = root / f"run-{plan.index}-{attempt}" / "home"
    home.mkdir(parents=True)
    db, out = home / DATABASE_NAME, home.parent / "out.jsonl"
    rows = bundled_rows(plan.task)[: plan.limit]
    by_input = {row.input: row for row in rows}
    expected = {row.input: row.steps for row in rows}
    total = sum(len(row.steps) for row in rows)
    argv = plan.argv(out)
    stderr = home.parent / "stderr"
    if cold:
        child: Child | ColdChild = ColdChild(argv, environment(home, plan.pace), stderr=stderr)
    else:
        child = server.spawn(argv, environment(home, plan.pace), stderr=stderr)
    before, aim = kill_when(child, db, rng, total, plan.early)
    code = child.kill()
    if code != -9:
        assert code == 0, child.stderr
        return None

    # The store and OUT as the kill left them.
    after = snapshot(db)
    lines, tail = out_rows(out)
    where = (f"{plan} killed {aim}: {len(after)} steps saved, {len(lines)} rows in OUT"
             f"{', a cut line' if tail else ''} (seed {SEED})")
    if db.exists():
        assert integrity(db) == "ok", where
    assert_kept(before, after)
    if after:
        check_sessions(db, expected, complete=False)
        sources = query(db, "SELECT DISTINCT source, model FROM sessions")
        assert sources == [("run", "replay/bbm")], where
    written = [assert_dataset_row(line, by_input) for line in lines]
    assert len(set(written)) == len(written), f"a row twice in OUT: {where}"
    finished = check_sessions(db, expected, complete=False) if after else {}
    for input_text in written:  # a row is written only once its trace is saved in full
        assert len(finished[input_text]) == len(expected[input_text]), where

    # Resume: the same command again (instantly paced: the pace is not an argument).
    resume_err = home.parent / "stderr-resume"
    if cold:
        again: Child | ColdChild = ColdChild(argv, environment(home, 0), stderr=resume_err)
    else:
        again = server.spawn(argv, environment(home, 0), stderr=resume_err)
    assert again.wait(120) == 0, again.stderr
    summary = again.stderr
    resumed = plan.limit - len(written)
    assert f"{resumed} trace{'' if resumed == 1 else 's'} written" in summary, summary
    assert f"{len(written)} already there, 0 failed" in summary, summary
    assert "locked" not in summary and "internal error" not in summary
    assert integrity(db) == "ok", where
    final = snapshot(db)
    assert_kept(after, final)  # it went on from where it stopped: nothing redone
    sessions = check_sessions(db, expected, complete=True)
    assert set(sessions) == set(expected), where
    assert len(final) == total, where
    lines_after, tail_after = out_rows(out)
    assert tail_after == b"", where
    assert lines_after[: len(lines)] == lines, f"rows already in OUT were rewritten: {where}"
    assert sorted(assert_dataset_row(line, by_input) for line in lines_after) == sorted(
        expected), where
    return where


def run_until_killed(server: ForkServer, root: Path, plan: RunPlan, cold: bool = False) -> str:
    for attempt in range(4):
        where = kill_and_resume_run(server, root, plan, attempt, cold)
        if where is not None:
            return where
    raise AssertionError(f"{plan}: the run finished before every kill (seed {SEED})")


def test_run_killed_at_random_moments_resumes_exactly(server: ForkServer,
                                                        tmp_path: Path) -> None:
    rng = random.Random(SEED)
    # Two of them early: while the store is created and the sessions made.
    plans = [RunPlan.draw(rng, index, early=index % 6 == 5) for index in range(RUN_KILLS)]
    print(f"\nkill seed {SEED} (set BBM_TUI_KILL_SEED to replay another)")
    with ThreadPoolExecutor(3) as pool:
        killed = list(pool.map(lambda plan: run_until_killed(server, tmp_path, plan), plans))
    print("\n".join(killed))
    assert len(killed) == RUN_KILLS


def test_cold_run_killed_mid_trace_resumes_exactly(tmp_path: Path) -> None:
    """A fresh `python -m bbm_tui run` (it imports litellm itself), killed mid-run."""
    plan = RunPlan(100, "word_sorting", 4, 2, 600)
    print(run_until_killed(None, tmp_path, plan, cold=True))  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- the app


@dataclass(frozen=True)
class AppPlan:
    index: int
    task: str
    question: int
    pace: int
    early: bool = False

    @classmethod
    def draw(cls, rng: random.Random, index: int, early: bool) -> AppPlan:
        task = rng.choice(APP_TASKS)
        return cls(index, task, rng.randrange(40), rng.choice((150, 300, 600)), early)


PAINTED = ("n generates the next thought", "so far. n for", "The trace has its answer")


def wait_painted(terminal: Terminal, child: Child | ColdChild, since: int = 0) -> None:
    deadline = time.monotonic() + 60
    while not any(text.encode() in terminal.output[since:] for text in PAINTED):
        assert child.poll() is None, f"the app ended: {terminal.text()[-2000:]!r}"
        assert time.monotonic() < deadline, f"the app never painted: {terminal.text()[-2000:]!r}"
        time.sleep(0.02)


def assert_no_error_on_screen(terminal: Terminal, where: str) -> None:
    found = errors_on_screen(screen_text(terminal.output))
    assert not found, f"{found} on the screen: {where}"


def kill_and_resume_app(server: ForkServer | None, root: Path, plan: AppPlan, attempt: int
                        ) -> str | None:
    rng = random.Random(f"{SEED}-app-{plan.index}-{attempt}")
    home = root / f"app-{plan.index}-{attempt}" / "home"
    home.mkdir(parents=True)
    db = home / DATABASE_NAME
    row = bundled_rows(plan.task)[plan.question]
    expected = {row.input: row.steps}
    argv = ["--task", plan.task, "--question", str(plan.question)]
    terminal = Terminal()
    try:
        env = environment(home, plan.pace)
        if server is None:
            child: Child | ColdChild = ColdChild(argv, env, tty_fd=terminal.slave)
        else:
            child = server.spawn(argv, env, tty=terminal.name)
        wait_painted(terminal, child)
        terminal.send("r")
        before, aim = kill_when(child, db, rng, len(row.steps), plan.early)
        code = child.kill()
    finally:
        terminal.close()
    if code != -9:
        return None
    after = snapshot(db)
    where = f"{plan} killed {aim}: {len(after)} steps saved (seed {SEED})"
    assert_no_error_on_screen(terminal, where)
    assert integrity(db) == "ok", where
    assert_kept(before, after)
    [(session_id, source, index)] = query(db, "SELECT id, source, dataset_index FROM sessions")
    assert (source, index) == ("app", plan.question), where
    check_sessions(db, expected, complete=False)

    # Resume in the app: open the session, run to the answer, quit.
    terminal = Terminal()
    try:
        env = environment(home, 0)
        again = server.spawn(["--session", str(session_id)], env, tty=terminal.name) if (
            server is not None) else ColdChild(["--session", str(session_id)], env,
                                               tty_fd=terminal.slave)
        wait_painted(terminal, again)
        start = terminal.mark()
        terminal.send("r")
        # A few recorded traces never state an answer (one loops for 50 thoughts): the
        # replay model then falls silent, as the model that wrote them did.
        end = ("Finished with an answer" if extract_answer(row.steps[-1]) is not None
               else "The model returned nothing more")
        terminal.wait_for(end, since=start, alive=lambda: again.poll() is None)
        terminal.send("q")
        assert again.wait(30) == 0, terminal.text()[-2000:]
        assert_no_error_on_screen(terminal, where)
    finally:
        terminal.close()
    assert integrity(db) == "ok", where
    final = snapshot(db)
    assert_kept(after, final)
    check_sessions(db, expected, complete=True)
    assert len(final) == len(row.steps), where
    assert query(db, "SELECT COUNT(*) FROM sessions") == [(1,)], where
    return where


def app_until_killed(server: ForkServer | None, root: Path, plan: AppPlan) -> str:
    for attempt in range(4):
        where = kill_and_resume_app(server, root, plan, attempt)
        if where is not None:
            return where
    raise AssertionError(f"{plan}: the app finished before every kill (seed {SEED})")


def test_app_killed_at_random_moments_resumes_exactly(server: ForkServer,
                                                        tmp_path: Path) -> None:
    rng = random.Random(SEED + 1)
    # One of them early: "r" pressed, the first step streaming.
    plans = [AppPlan.draw(rng, index, early=index == 3) for index in range(APP_KILLS)]
    with ThreadPoolExecutor(2) as pool:
        killed = list(pool.map(lambda plan: app_until_killed(server, tmp_path, plan), plans))
    print("\n".join(killed))
    assert len(killed) == APP_KILLS


def test_cold_app_killed_mid_trace_resumes_exactly(tmp_path: Path) -> None:
    """A fresh `python -m bbm_tui` under a terminal: `r` waits for litellm to load first."""
    print(app_until_killed(None, tmp_path, AppPlan(100, "word_sorting", 7, 300)))


# ---------------------------------------------------------------------------- a finder in the app

FINDER_KILLS = 5
FINDER_LATENCY_S = 0.06


def finder_rows() -> list[tuple[str, int]]:
    """Questions whose direct-step run takes 6 to 12 calls (the oracle says Yes up to the gold
    mistake, then No; every thought when there is none) and whose trace states its answer."""
    found = []
    for task in APP_TASKS:
        for index, row in enumerate(bundled_rows(task)[:60]):
            calls = len(row.steps) if row.mistake_index is None else row.mistake_index + 1
            if 6 <= calls <= 12 and extract_answer(row.steps[-1]) is not None:
                found.append((task, index))
    return found


def oracle_verdicts(task: str, index: int) -> list[str]:
    row = bundled_rows(task)[index]
    if row.mistake_index is None:
        return ["Yes"] * len(row.steps)
    return ["Yes"] * row.mistake_index + ["No"]


@pytest.fixture(scope="module")
def finder_server() -> Iterator[FakeOpenAI]:
    """Generation answered at once from the dataset; each finder answer from the gold label,
    after FINDER_LATENCY_S, so that a run is long enough to be killed in the middle."""
    from bbm_tui.core.llm.offline.replay import engine, parse_generation_prompt

    def respond(path: str, body: dict) -> Reply:
        if parse_generation_prompt(body["messages"][-1]["content"]) is not None:
            return dataset_responder(path, body)
        return Reply(text=engine().respond("replay/bbm", body["messages"], {}),
                     delay_s=FINDER_LATENCY_S)

    server = FakeOpenAI().start()
    server.responder = respond
    yield server
    server.stop()


def finder_verdicts(db: Path) -> list[tuple]:
    return query(db, "SELECT id, run_id, step_number, raw, verdict FROM finder_verdicts "
                     "ORDER BY id")


def kill_finder_once(server: ForkServer, root: Path, base_url: str, task: str, index: int,
                     rng: random.Random, attempt: int) -> str | None:
    home = root / f"finder-{task}-{index}-{attempt}" / "home"
    home.mkdir(parents=True)
    db = home / DATABASE_NAME
    env = environment(home, 0)
    expected = oracle_verdicts(task, index)
    argv = ["--task", task, "--question", str(index), "--model", "openai/test",
            "--api-base", base_url]
    terminal = Terminal()
    try:
        child = server.spawn(argv, env, tty=terminal.name)
        wait_painted(terminal, child)
        terminal.send("r")
        terminal.wait_for("Finished with an answer", alive=lambda: child.poll() is None)
        steps = snapshot(db)
        start = terminal.mark()
        terminal.send("f")
        terminal.wait_for("Find the first mistake", since=start,
                          alive=lambda: child.poll() is None)
        terminal.send("\r")  # the default: direct step-level, the session's model
        target = rng.randint(1, len(expected) - 1)
        deadline = time.monotonic() + 60
        while len(finder_verdicts(db)) < target:
            assert child.poll() is None, terminal.text()[-2000:]
            assert time.monotonic() < deadline, "the finder made no progress in a minute"
            time.sleep(0.005)
        before = finder_verdicts(db)
        delay = rng.uniform(0.0, FINDER_LATENCY_S)
        time.sleep(delay)
        code = child.kill()
    finally:
        terminal.close()
    where = (f"{task} #{index}: killed {delay * 1000:.0f} ms after answer {target} of "
             f"{len(expected)} (seed {SEED})")
    if code != -9:
        return None
    assert_no_error_on_screen(terminal, where)
    assert integrity(db) == "ok", where
    after = finder_verdicts(db)
    assert after[: len(before)] == before, where  # every committed answer kept, unchanged
    assert [row[4] for row in after] == expected[: len(after)], where
    [(session_id, finished, ended)] = query(
        db, "SELECT session_id, finished_at, ended FROM finder_runs")
    if finished is not None:
        return None  # the last answer landed first: no kill mid-run this time
    assert ended is None, where  # it did not get to say how it ended: it was killed
    assert snapshot(db) == steps, where  # the trace itself untouched

    # Resume: the cut run shows as stopped with the answers it got; a new run finishes.
    terminal = Terminal()
    try:
        again = server.spawn(["--session", str(session_id)], env, tty=terminal.name)
        wait_painted(terminal, again)
        count = len(after)
        terminal.wait_for(f"stopped after {count} answer{'s' if count != 1 else ''}: no result",
                          alive=lambda: again.poll() is None)
        start = terminal.mark()
        terminal.send("f")
        terminal.wait_for("Find the first mistake", since=start,
                          alive=lambda: again.poll() is None)
        terminal.send("\r")
        terminal.wait_for("Model says:", since=start, alive=lambda: again.poll() is None)
        terminal.send("q")
        assert again.wait(30) == 0, terminal.text()[-2000:]
        assert_no_error_on_screen(terminal, where)
    finally:
        terminal.close()
    assert integrity(db) == "ok", where
    runs = query(db, "SELECT id, finished_at IS NOT NULL, mistake_number FROM finder_runs "
                     "ORDER BY id")
    gold = bundled_rows(task)[index].mistake_index
    assert [(finished, number) for _, finished, number in runs] == [
        (0, None), (1, None if gold is None else gold + 1)], where
    final = finder_verdicts(db)
    assert final[: len(after)] == after, where
    assert [row[4] for row in final if row[1] == runs[1][0]] == expected, where
    assert snapshot(db) == steps, where
    return where


def test_app_killed_while_a_finder_runs_keeps_every_answer(
    server: ForkServer, finder_server: FakeOpenAI, tmp_path: Path
) -> None:
    """SIGKILL mid-run of a step-level finder: the answers committed are kept, the run has no
    result, the trace is untouched, and the resumed session shows it stopped and can run
    another."""
    rng = random.Random(SEED + 2)
    candidates = finder_rows()
    assert len(candidates) >= FINDER_KILLS
    killed = []
    for task, index in rng.sample(candidates, FINDER_KILLS):
        for attempt in range(4):
            where = kill_finder_once(server, tmp_path, finder_server.base_url, task, index,
                                     rng, attempt)
            if where is not None:
                killed.append(where)
                break
        else:
            raise AssertionError(f"{task} #{index}: the finder finished before every kill")
    print("\n".join(killed))
    assert len(killed) == FINDER_KILLS


# ---------------------------------------------------------------------------- a backtrack

BACKTRACK_KILLS = 4
# The trace backtracked: Thought 2 is its mistake (gold). The samples of Thought 2 all differ
# from it; the highest log-probability ("2 + 2 = 4") is chosen, then the continuation writes
# Thoughts 3..CONTINUED+2 and the answer, one streamed call each, word by word.
BT_QUESTION, BT_TARGET = "((2 + 2) * 1) =", "4"
BT_ORIGINAL = ["Let me work it out.", "2 + 2 = 5", "5 * 1 = 5", "So the answer is 5"]
BT_SAMPLES = ["2 + 2 = 4", "2 + 2 = 22", "two plus two is four", "2 + 2 = 3", "2+2=4",
              "2 + 2 is 4", "4 = 2 + 2", "2 and 2 make 4"]
BT_LOGPROBS = [-0.2, -3.0, -0.6, -2.0, -1.0, -0.5, -0.9, -0.7]
CONTINUED = 8
WORD_DELAY_S = 0.015
SAMPLE_DELAY_S = 1.5  # the sampling call, when a test kills the process during it
# Set while a test wants the sampling call held that long.
SLOW_SAMPLING = threading.Event()


def continuation_text(number: int) -> str:
    if number == CONTINUED + 3:
        return "So the answer is 4"
    return f"Thought {number} of the new branch carries on the sum"


def expected_new_branch() -> list[str]:
    return [BT_SAMPLES[0], *(continuation_text(n) for n in range(3, CONTINUED + 4))]


@pytest.fixture(scope="module")
def backtrack_server() -> Iterator[FakeOpenAI]:
    """The samples of Thought 2 (one call, n=8, not streamed) and a slow continuation: every
    thought streamed word by word, so that a kill lands mid-stream."""
    from bbm_tui.core.prompts.thoughts import asked_number

    server = FakeOpenAI().start()

    def respond(path: str, body: dict) -> Reply:
        if not body.get("stream"):
            return Reply(choices=[f" {text}\nThought 3:" for text in BT_SAMPLES],
                         choice_logprobs=BT_LOGPROBS, honor_stop=False,
                         delay_s=SAMPLE_DELAY_S if SLOW_SAMPLING.is_set() else 0.0)
        number = asked_number(body["messages"][-1]["content"])
        assert number is not None and 3 <= number <= CONTINUED + 3, number
        return Reply(f" {continuation_text(number)}\nThought {number + 1}: more",
                     chunk_delay_s=WORD_DELAY_S)

    server.responder = respond
    yield server
    server.stop()


def backtrack_argv(base_url: str, source: Path, out: Path) -> list[str]:
    return ["backtrack", "--model", "openai/test", "--api-base", base_url, "--input",
            str(source), "--locations", "gold", "--out", str(out), "--no-progress"]


def write_backtrack_input(folder: Path) -> Path:
    source = folder / "multistep_arithmetic.jsonl"
    source.write_text(json.dumps({"input": BT_QUESTION, "steps": BT_ORIGINAL, "answer": "5",
                                  "target": BT_TARGET, "mistake_index": 1}) + "\n")
    return source


def sample_requests(server: FakeOpenAI) -> int:
    return sum(1 for request in server.requests if request.body.get("n") == 8)


@dataclass(frozen=True)
class SavedBranches:
    """One backtracked session as plain SQL reads it: the original (the dataset's steps, in
    order) and the new branch (the chosen sample, then the continuation)."""

    original: list[SavedStep]
    new: list[SavedStep]
    head: int | None


def saved_branches(db: Path) -> SavedBranches:
    [(session_id, head)] = query(db, "SELECT id, head_step_id FROM sessions")
    steps = {step.id: step for step in snapshot(db).values()}
    origins = dict(query(db, "SELECT id, origin FROM steps"))
    original = [steps[i] for i in sorted(steps) if origins[i] == "dataset"]
    new = [steps[i] for i in sorted(steps) if origins[i] != "dataset"]
    assert all(step.session_id == session_id for step in steps.values())
    return SavedBranches(original, new, head)


def assert_backtrack_consistent(db: Path, where: str) -> SavedBranches:
    """The original branch whole; every committed step of the new branch whole and in one
    chain from the original's Thought 1 (the chosen sample, then one model step a call, each
    with its call); the samples all or none; the head on the newest branch's last step."""
    saved = saved_branches(db)
    assert [s.text for s in saved.original] == BT_ORIGINAL, where
    assert [s.number for s in saved.original] == [1, 2, 3, 4], where
    assert [s.parent_id for s in saved.original] == [None] + [s.id for s in saved.original[:-1]]
    candidates = query(db, "SELECT text, step_id, call_id, parent_id, number FROM candidates "
                           "ORDER BY id")
    sample_calls = query(db, "SELECT id FROM calls WHERE purpose = 'sample'")
    assert len(candidates) in (0, 8) and len(sample_calls) == (1 if candidates else 0), where
    if not candidates:  # killed before the samples were saved: nothing else either
        assert saved.new == [] and saved.head == saved.original[-1].id, where
        assert query(db, "SELECT COUNT(*) FROM calls")[0][0] == 0, where
        return saved
    assert [c[0] for c in candidates] == BT_SAMPLES, where
    assert {(c[2], c[3], c[4]) for c in candidates} == {
        (sample_calls[0][0], saved.original[0].id, 2)}, where
    chosen = [c[1] for c in candidates if c[1] is not None]
    texts = [step.text for step in saved.new]
    assert texts == expected_new_branch()[: len(texts)], where  # no step cut or changed
    assert [s.number for s in saved.new] == list(range(2, len(saved.new) + 2)), where
    # The samples, the chosen one's step and its mark: one transaction.
    assert saved.new and chosen == [saved.new[0].id], where
    assert [s.parent_id for s in saved.new] == [saved.original[0].id] + [
        s.id for s in saved.new[:-1]], where
    assert saved.head == saved.new[-1].id, where
    steps_with_calls = query(db, "SELECT c.step_id, s.call_id FROM calls AS c JOIN steps AS s "
                                 "ON s.id = c.step_id WHERE c.purpose = 'step' ORDER BY c.id")
    assert [row[0] for row in steps_with_calls] == [s.id for s in saved.new[1:]], where
    assert query(db, "SELECT COUNT(*) FROM calls WHERE purpose = 'step' AND step_id IS NULL"
                 )[0][0] == 0, where
    return saved


def resume_backtrack(forks: ForkServer, server: FakeOpenAI, argv: list[str], home: Path,
                     before: dict[int, SavedStep], where: str) -> None:
    """The same command again: it samples nothing more (the samples are saved) unless none
    were, keeps every step it finds (same ids), finishes the new branch and writes its row."""
    had_samples = query(home / DATABASE_NAME, "SELECT COUNT(*) FROM candidates")[0][0] > 0
    asked = sample_requests(server)
    again = forks.spawn(argv, environment(home, 0), stderr=home.parent / "stderr-resume")
    assert again.wait(120) == 0, again.stderr
    assert "1 trace written" in again.stderr and "0 failed" in again.stderr, again.stderr
    db = home / DATABASE_NAME
    assert integrity(db) == "ok", where
    assert sample_requests(server) == asked + (0 if had_samples else 1), where
    assert_kept(before, snapshot(db))
    saved = assert_backtrack_consistent(db, where)
    assert [s.text for s in saved.new] == expected_new_branch(), where
    lines, tail = out_rows(home.parent / "out.jsonl")
    [row] = [json.loads(line) for line in lines]
    assert tail == b"" and row["new_steps"] == [BT_ORIGINAL[0], *expected_new_branch()], where
    assert row["new_answer"] == "4" and row["new_correct"] is True, where


def kill_backtrack_once(forks: ForkServer, server: FakeOpenAI, root: Path, attempt: int,
                        rng: random.Random) -> str | None:
    """Kill `bbm-tui backtrack` once its continuation has committed a random number of
    thoughts, a random moment into the next one's stream; None if it finished first."""
    home = root / f"backtrack-{attempt}" / "home"
    home.mkdir(parents=True)
    db, out = home / DATABASE_NAME, home.parent / "out.jsonl"
    argv = backtrack_argv(server.base_url, write_backtrack_input(home.parent), out)
    child = forks.spawn(argv, environment(home, 0), stderr=home.parent / "stderr")
    # The original's 4 steps, the chosen sample, then `done` continued thoughts.
    done = rng.randint(0, CONTINUED - 1)
    deadline = time.monotonic() + 60
    while committed_steps(db) < 5 + done:
        assert child.poll() is None, f"it ended ({child.poll()}) first: {child.stderr}"
        assert time.monotonic() < deadline, "no progress in a minute"
        time.sleep(0.002)
    before = snapshot(db)
    delay = rng.uniform(0.0, WORD_DELAY_S * 10)  # within the next thought's stream
    time.sleep(delay)
    code = child.kill()
    if code != -9:
        assert code == 0, child.stderr
        return None
    where = (f"backtrack killed {delay * 1000:.0f} ms after continued thought {done} "
             f"(seed {SEED})")
    assert integrity(db) == "ok", where
    assert_kept(before, snapshot(db))
    saved = assert_backtrack_consistent(db, where)
    assert len(saved.new) >= 1 + done, where
    lines, tail = out_rows(out)
    assert lines == [] and tail == b"", where  # the row comes once the trace is finished
    with Store.open(db) as store:  # opens cleanly, and reads the same branch
        assert store.integrity_check() == "ok"
        assert [s.id for s in store.branch(store.sessions()[0].session.id)] == [
            saved.original[0].id, *(s.id for s in saved.new)], where
    resume_backtrack(forks, server, argv, home, snapshot(db), where)
    return f"{where}: {len(saved.new) - 1} of {CONTINUED + 1} continued thoughts saved"


def test_a_kill_during_a_backtrack_loses_at_most_the_step_being_streamed(
    server: ForkServer, backtrack_server: FakeOpenAI, tmp_path: Path
) -> None:
    """SIGKILL `bbm-tui backtrack` while its continuation streams: the original branch is
    whole, every committed step of the new branch is there, in one chain with its call,
    nothing half-written; the store opens cleanly; the same command again finishes the branch
    without sampling again."""
    rng = random.Random(SEED + 3)
    killed = []
    for index in range(BACKTRACK_KILLS):
        for attempt in range(4):
            where = kill_backtrack_once(server, backtrack_server, tmp_path / str(index),
                                        attempt, rng)
            if where is not None:
                killed.append(where)
                break
        else:
            raise AssertionError(f"the backtrack finished before every kill (seed {SEED})")
    print("\n".join(killed))


def test_a_kill_during_the_sampling_call_leaves_the_original_untouched(
    server: ForkServer, backtrack_server: FakeOpenAI, tmp_path: Path
) -> None:
    """SIGKILL while the 8 samples are being asked for (the server holds its answer): the
    original branch is exactly as it was, no sample, call or step of a new branch is saved,
    the head is the original's; the same command again samples and finishes."""
    rng = random.Random(SEED + 4)
    home = tmp_path / "sampling" / "home"
    home.mkdir(parents=True)
    db = home / DATABASE_NAME
    argv = backtrack_argv(backtrack_server.base_url, write_backtrack_input(home.parent),
                          home.parent / "out.jsonl")
    asked = sample_requests(backtrack_server)
    SLOW_SAMPLING.set()
    try:
        child = server.spawn(argv, environment(home, 0), stderr=home.parent / "stderr")
        deadline = time.monotonic() + 60
        while sample_requests(backtrack_server) == asked:
            assert child.poll() is None, f"it ended ({child.poll()}) first: {child.stderr}"
            assert time.monotonic() < deadline, "no sampling call in a minute"
            time.sleep(0.002)
        before = snapshot(db)
        delay = rng.uniform(0.0, SAMPLE_DELAY_S / 2)
        time.sleep(delay)
        assert child.kill() == -9, child.stderr
    finally:
        SLOW_SAMPLING.clear()
    where = f"backtrack killed {delay * 1000:.0f} ms into its sampling call (seed {SEED})"
    assert integrity(db) == "ok", where
    assert snapshot(db) == before, where
    saved = assert_backtrack_consistent(db, where)
    assert saved.new == [] and saved.head == saved.original[-1].id, where
    assert query(db, "SELECT COUNT(*) FROM candidates")[0][0] == 0, where
    with Store.open(db) as store:
        assert store.integrity_check() == "ok"
    resume_backtrack(server, backtrack_server, argv, home, before, where)
    print(where)


def test_a_kill_once_the_samples_are_in_finds_the_choice_taken_with_them(
    server: ForkServer, backtrack_server: FakeOpenAI, tmp_path: Path
) -> None:
    """The samples and the chosen one are committed in one transaction (two before, each a
    turn at the store's write lock: a kill between them left samples with none chosen, which
    the next run then chose from by the rule). The child is stopped (SIGSTOP) the moment its
    samples are in the store: the chosen one is there with them. Killed there, the same
    command again samples nothing more and finishes the new branch."""
    home = tmp_path / "home"
    home.mkdir(parents=True)
    db = home / DATABASE_NAME
    argv = backtrack_argv(backtrack_server.base_url, write_backtrack_input(home.parent),
                          home.parent / "out.jsonl")
    child = server.spawn(argv, environment(home, 0), stderr=home.parent / "stderr")
    assert _taken_when_the_samples_are_in(child, db) == 1
    assert child.kill() == -9, child.stderr
    where = "backtrack killed the moment its samples were in the store"
    assert integrity(db) == "ok", where
    before = snapshot(db)
    saved = assert_backtrack_consistent(db, where)
    assert saved.new and query(db, "SELECT COUNT(*) FROM candidates")[0][0] == 8, where
    resume_backtrack(server, backtrack_server, argv, home, before, where)


def _taken_when_the_samples_are_in(child: Child, db: Path) -> int:
    """Watch the store (reads only) until the samples are in, stop the child there (it stays
    stopped), and say how many of them are taken as a step."""
    import signal
    import sqlite3

    deadline = time.monotonic() + 60
    watcher: sqlite3.Connection | None = None
    try:
        while True:
            assert child.poll() is None, f"it ended ({child.poll()}) first: {child.stderr}"
            assert time.monotonic() < deadline, "no samples in a minute"
            if db.exists():
                watcher = watcher or sqlite3.connect(db, timeout=10)
                with contextlib.suppress(sqlite3.OperationalError):  # not made yet
                    if watcher.execute("SELECT COUNT(*) FROM candidates").fetchone()[0]:
                        break
            time.sleep(0.0002)
        os.kill(child.pid, signal.SIGSTOP)
        return watcher.execute(
            "SELECT COUNT(*) FROM candidates WHERE step_id IS NOT NULL").fetchone()[0]
    finally:
        if watcher is not None:
            watcher.close()


def children_of(pid: int) -> list[int]:
    """The processes whose parent is `pid` (Linux's /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            # pid (comm) state ppid ...: comm may hold spaces and parentheses.
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(stat.parent.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads Linux's /proc")
def test_a_kill_of_a_backtrack_over_processes_leaves_no_worker_behind(
    server: ForkServer, backtrack_server: FakeOpenAI, tmp_path: Path
) -> None:
    """SIGKILL `bbm-tui backtrack --processes 2` while a worker process streams the
    continuation: the workers see their pipe close and end within seconds (none is left
    writing to the store), nothing committed is lost or half-written, and the same command
    again finishes the branch without sampling again."""
    rng = random.Random(SEED + 5)
    home = tmp_path / "processes" / "home"
    home.mkdir(parents=True)
    db = home / DATABASE_NAME
    argv = [*backtrack_argv(backtrack_server.base_url, write_backtrack_input(home.parent),
                            home.parent / "out.jsonl"), "--processes", "2", "--concurrency", "2"]
    child = server.spawn(argv, environment(home, 0), stderr=home.parent / "stderr")
    done = rng.randint(0, CONTINUED - 2)
    deadline = time.monotonic() + 120  # each worker imports litellm first
    while committed_steps(db) < 5 + done:
        assert child.poll() is None, f"it ended ({child.poll()}) first: {child.stderr}"
        assert time.monotonic() < deadline, "no progress in two minutes"
        time.sleep(0.002)
    # The two workers, and multiprocessing's resource tracker: all must go.
    workers = children_of(child.pid)
    spawned = [pid for pid in workers
               if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()]
    assert len(spawned) == 2, workers
    before = snapshot(db)
    delay = rng.uniform(0.0, WORD_DELAY_S * 10)
    time.sleep(delay)
    assert child.kill() == -9, child.stderr
    deadline = time.monotonic() + 20
    while any(alive(pid) for pid in workers):
        assert time.monotonic() < deadline, "a worker process outlived its batch by 20 s"
        time.sleep(0.05)
    where = (f"backtrack over 2 processes killed {delay * 1000:.0f} ms after continued "
             f"thought {done} (seed {SEED})")
    assert integrity(db) == "ok", where
    assert_kept(before, snapshot(db))
    saved = assert_backtrack_consistent(db, where)
    assert len(saved.new) >= 1 + done, where
    resume_backtrack(server, backtrack_server, argv, home, snapshot(db), where)
