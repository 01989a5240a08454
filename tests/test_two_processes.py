"""The app and headless writers on one store at once (one BBM_TUI_HOME).

The app runs as a real process in a pseudo-terminal: it generates a long trace with `r` while
two `bbm-tui run`s write theirs, then takes a series of labels (x, c, u) while another `run`
and two plain store writers commit as fast as they can. Both sides finish; neither shows
"database is locked" (nor any other error) on its stderr or on the app's screen; nothing is
lost: every step, call and label each side committed is in the store, and the counts add up.
A Pilot variant does the same with the app in this process (its store work in threads) and a
`run` in a child process.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from bbm_tui.core import llm
from bbm_tui.core.config import Config
from bbm_tui.core.dataset import bundled_rows
from bbm_tui.core.store import DATABASE_NAME
from bbm_tui.core.tasks import extract_answer
from bbm_tui.ui.dialogs import ConfirmScreen
from tests.kill_targets import (
    ROOT,
    ForkServer,
    Terminal,
    check_sessions,
    committed_steps,
    errors_on_screen,
    integrity,
    query,
    screen_text,
)

APP_TASK, APP_QUESTION = "dyck_languages", 57  # 56 thoughts
ERRORS = ("locked", "Traceback", "internal error")
# The labels the app is given, with what the store must hold afterwards: (thought flagged
# or None for "no mistake", undone). "k" x40 first puts the selection on Thought 1.
LABEL_KEYS = ["x", "j", "j", "x", "c", "u", "k", "x", "u", "u", "c"]
EXPECTED_LABELS = [(1, 0), (3, 1), (None, 1), (2, 1), (None, 0)]


@pytest.fixture(scope="module")
def server() -> Iterator[ForkServer]:
    forks = ForkServer()
    yield forks
    forks.close()


def environment(home: Path, pace: int) -> dict[str, str | None]:
    return {"BBM_TUI_HOME": str(home), "BBM_TUI_CONFIG": str(home.parent / "none.toml"),
            "BBM_TUI_REPLAY_TPS": str(pace), "TERM": "xterm-256color", "BBM_TUI_DEBUG": None}


def run_argv(task: str, limit: int, out: Path, concurrency: int = 4) -> list[str]:
    return ["run", "--dataset", "--task", task, "--limit", str(limit), "--concurrency",
            str(concurrency), "--out", str(out), "--no-progress"]


def writer(db: Path, go: Path, count: int, name: str) -> subprocess.Popen:
    """tests/kill_helpers.py: N steps committed one by one, a label every tenth."""
    return subprocess.Popen(
        [sys.executable, "-m", "tests.kill_helpers", "write", str(db), str(go), str(count),
         name], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def wait_until(condition, what: str, timeout: float = 60) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def labels_of(db: Path, session_id: int) -> list[tuple[int | None, int]]:
    return [tuple(row) for row in query(
        db, "SELECT s.number, l.undone FROM labels AS l LEFT JOIN steps AS s "
            "ON s.id = l.mistake_step_id WHERE l.session_id = ? ORDER BY l.id", (session_id,))]


def label_model(keys: list[str]) -> list[list[tuple[int | None, int]]]:
    """The labels table after each key, by the app's rules (x flags the selected thought,
    c says no mistake, u withdraws the latest label in force, j/k move)."""
    selected, labels, states = 1, [], []
    for key in keys:
        if key == "j":
            selected += 1
        elif key == "k":
            selected = max(1, selected - 1)
        elif key in "xc":
            labels.append([selected if key == "x" else None, 0])
        elif key == "u":
            live = [label for label in labels if not label[1]]
            if live:
                live[-1][1] = 1
        states.append([tuple(label) for label in labels])
    return states


def assert_out(out: Path, task: str, limit: int) -> None:
    rows = bundled_rows(task)[:limit]
    lines = out.read_text().splitlines()
    assert len(lines) == limit
    by_input = {row.input: row for row in rows}
    for line in lines:
        value = json.loads(line)
        row = by_input.pop(value["input"])
        assert value["steps"] == row.steps
        assert value["answer"] == extract_answer(row.steps[-1])
    assert not by_input


def assert_clean(stderr: str, who: str) -> None:
    for bad in ERRORS:
        assert bad not in stderr, f"{who}: {bad!r} in {stderr!r}"


def test_the_app_and_headless_runs_share_the_store(server: ForkServer, tmp_path: Path) -> None:
    assert label_model(LABEL_KEYS)[-1] == EXPECTED_LABELS
    home = tmp_path / "home"
    db = home / DATABASE_NAME
    env = environment(home, 300)
    app_row = bundled_rows(APP_TASK)[APP_QUESTION]
    runs = {"word_sorting": 8, "logical_deduction": 10, "tracking_shuffled_objects": 30}
    terminal = Terminal()
    try:
        # All at once on a store that does not exist yet: the app and two paced runs.
        app = server.spawn(["--task", APP_TASK, "--question", str(APP_QUESTION)], env,
                           tty=terminal.name)
        # Headless runs replay at full speed unless --pace: paced, they are still writing
        # while the app generates (the overlap checked at the end).
        first = {task: server.spawn([*run_argv(task, runs[task], tmp_path / f"{task}.jsonl"),
                                     "--pace", "100"], env, stderr=tmp_path / f"{task}.err")
                 for task in ("word_sorting", "logical_deduction")}
        terminal.wait_for("n generates the next thought", alive=lambda: app.poll() is None)
        wait_until(lambda: committed_steps(db) >= 3, "the runs' first steps")
        terminal.send("r")
        wait_until(lambda: query(db, "SELECT COUNT(*) FROM steps JOIN sessions ON "
                                     "sessions.id = steps.session_id WHERE source = 'app'")
                   == [(len(app_row.steps),)], "the app's trace")
        terminal.wait_for("Finished with an answer", alive=lambda: app.poll() is None)
        [(app_session,)] = query(db, "SELECT id FROM sessions WHERE source = 'app'")

        # Labels while another run and two plain writers commit as fast as they can.
        go = tmp_path / "go"
        writers = [writer(db, go, 300, name) for name in ("left", "right")]
        last = server.spawn(run_argv("tracking_shuffled_objects", 30,
                                     tmp_path / "tracking_shuffled_objects.jsonl"),
                            {**env, "BBM_TUI_REPLAY_TPS": "0"},
                            stderr=tmp_path / "tracking_shuffled_objects.err")
        go.touch()
        terminal.send("k" * 60)  # to Thought 1: the selection followed the run to the last
        for key, state in zip(LABEL_KEYS, label_model(LABEL_KEYS), strict=True):
            before = terminal.mark()
            terminal.send(key)
            if key == "c":  # the trace's answer is wrong: c asks first
                terminal.wait_for("mistake anyway", since=before)
                terminal.send("y")
            if key in "xcu":
                wait_until(lambda state=state: labels_of(db, app_session) == state,
                           f"the label after {key!r}: {state}")
        terminal.send("q")
        assert app.wait(30) == 0, terminal.text()[-2000:]
        assert not errors_on_screen(screen_text(terminal.output))
    finally:
        terminal.close()
    for task, child in [*first.items(), ("tracking_shuffled_objects", last)]:
        assert child.wait(120) == 0, child.stderr
        assert f"{runs[task]} traces written" in child.stderr, child.stderr
        assert ", 0 failed;" in child.stderr
        assert_clean(child.stderr, task)
        assert_out(tmp_path / f"{task}.jsonl", task, runs[task])
    for process in writers:
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0 and "wrote 300" in out, err
        assert_clean(err, "a writer")

    # Nothing lost: every side's every step, call and label.
    assert integrity(db) == "ok"
    assert labels_of(db, app_session) == EXPECTED_LABELS
    recorded = {row.input: row.steps for task, limit in runs.items()
                for row in bundled_rows(task)[:limit]}
    recorded[app_row.input] = app_row.steps
    written = {name: [f"{name} step {n}" for n in range(1, 301)] for name in ("left", "right")}
    sessions = check_sessions(db, {**recorded, **written}, complete=True)
    assert len(sessions) == len(recorded) + 2
    expected_steps = sum(len(steps) for steps in recorded.values()) + 600
    assert query(db, "SELECT COUNT(*) FROM steps") == [(expected_steps,)]
    assert query(db, "SELECT COUNT(*) FROM calls") == [(expected_steps,)]
    assert query(db, "SELECT COUNT(*) FROM labels") == [(len(EXPECTED_LABELS) + 60,)]
    # And they did overlap: the app's steps were written while the first runs wrote theirs.
    assert_overlapped(db, app_session, "x.task != 'tracking_shuffled_objects'")


# ---------------------------------------------------------------------------- Pilot


def rendered(app) -> str:
    """The app's screen as text (what export_screenshot draws), notifications included."""
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True,
                      color_system="truecolor", record=True, legacy_windows=False)
    console.print(app.screen._compositor.render_update(
        full=True, screen_stack=app._background_screens))
    return console.export_text(styles=False)


async def test_pilot_app_labels_and_generates_while_a_run_writes(
    server: ForkServer, isolated_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from bbm_tui.ui.app import BbmApp

    await asyncio.to_thread(llm.warm_up)
    monkeypatch.setenv("BBM_TUI_REPLAY_TPS", "500")
    db = isolated_home / DATABASE_NAME
    row = bundled_rows("word_sorting")[11]
    out = tmp_path / "run.jsonl"
    # Headless commands replay at full speed unless --pace: the run is paced (300 tokens/s,
    # as the environment asks of the app) so that it is still writing while the app labels.
    child = server.spawn([*run_argv("multistep_arithmetic", 40, out, 3), "--pace", "300"],
                         {"BBM_TUI_HOME": str(isolated_home), "BBM_TUI_REPLAY_TPS": "300",
                          "BBM_TUI_CONFIG": os.environ["BBM_TUI_CONFIG"]},
                         stderr=tmp_path / "run.err")
    app = BbmApp(Config(), task="word_sorting", question=11, warm_up=False, wall_clock=False)
    async with app.run_test(size=(120, 40)) as pilot:
        async def until(condition, what: str) -> None:
            for _ in range(3000):
                if condition():
                    return
                await pilot.pause(0.02)
            raise AssertionError(f"timed out waiting for {what}: {rendered(app)}")

        await until(lambda: "n generates the next thought" in rendered(app), "the trace")
        await until(lambda: committed_steps(db) >= 3, "the run's first steps")
        await pilot.press("r")
        await until(lambda: "Finished with an answer" in rendered(app), "the answer")
        [(session,)] = await asyncio.to_thread(
            query, db, "SELECT id FROM sessions WHERE source = 'app'")
        await pilot.press(*["k"] * 20)
        for key, state in zip(LABEL_KEYS, label_model(LABEL_KEYS), strict=True):
            await pilot.press(key)
            if key == "c":  # the trace's answer is wrong: c asks first
                await until(lambda: isinstance(app.screen, ConfirmScreen), "the question")
                await pilot.press("y")
            if key in "xcu":
                await until(lambda state=state: labels_of(db, session) == state,
                            f"the label after {key!r}")
        screen = rendered(app)
        assert not errors_on_screen(screen), screen
        assert app.is_running
    assert await asyncio.to_thread(child.wait, 120) == 0, child.stderr
    assert_clean(child.stderr, "run")
    assert_out(out, "multistep_arithmetic", 40)
    assert integrity(db) == "ok"
    rows = bundled_rows("multistep_arithmetic")[:40]
    sessions = check_sessions(db, {row.input: row.steps, **{r.input: r.steps for r in rows}},
                              complete=True)
    assert len(sessions) == 41
    assert labels_of(db, session) == EXPECTED_LABELS
    assert query(db, "SELECT COUNT(*) FROM steps") == [
        (len(row.steps) + sum(len(r.steps) for r in rows),)]
    assert_overlapped(db, session)


def assert_overlapped(db: Path, app_session: int, runs: str = "1") -> None:
    """The premise: the app's steps were committed while a run was committing its own."""
    (app_first, app_last), = query(
        db, "SELECT MIN(created_at), MAX(created_at) FROM steps WHERE session_id = ?",
        (app_session,))
    (runs_first, runs_last), = query(
        db, "SELECT MIN(s.created_at), MAX(s.created_at) FROM steps AS s JOIN sessions AS x "
            f"ON x.id = s.session_id WHERE x.source = 'run' AND {runs}")
    assert runs_first < app_last and app_first < runs_last, (app_first, app_last, runs_first,
                                                             runs_last)
