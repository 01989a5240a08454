"""`bbm-tui backtrack --processes P`, `run --processes P` and `find --processes P`
(core/batch/workers.py): the
traces shared out to child processes, each with its own event loop, litellm and store
connection, against the local server through litellm (and on the replay model). The parent
keeps OUT, the progress and the resume, so the batch writes what it writes in one process; a
child that dies stops it with one message."""

from __future__ import annotations

import gc
import json
import os
import signal
import time
from pathlib import Path

import pytest

from bbm_tui.cli import main
from bbm_tui.core import llm
from bbm_tui.core.batch.backtrack import (
    BacktrackJob,
    backtrack_batch,
    backtrack_in_child,
    jobs_from_files,
    parse_locations,
)
from bbm_tui.core.batch.find import find_batch
from bbm_tui.core.batch.find import jobs_from_files as find_jobs
from bbm_tui.core.batch.runner import BATCH_GC_THRESHOLD
from bbm_tui.core.batch.workers import WorkerError, Workers, WorkerSetup
from bbm_tui.core.dataset import bundled_path
from bbm_tui.core.generation.stepper import StepperSettings
from bbm_tui.core.store import Store
from tests.openai_server import FakeOpenAI, Reply
from tests.test_backtrack import responder
from tests.test_backtrack_cli import dataset_file


def backtrack(server: FakeOpenAI, source: Path, out: Path, capsys: pytest.CaptureFixture,
              *extra: str) -> tuple[int, str, str]:
    code = main(["backtrack", "--model", "openai/test", "--api-base", server.base_url,
                 "--input", str(source), "--out", str(out), "--no-progress", "--json",
                 "--locations", "gold", *extra])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_two_processes_write_what_one_writes(
    openai_server: FakeOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    openai_server.responder = responder()
    source = dataset_file(tmp_path / "multistep_arithmetic.jsonl")
    code, one_json, one_err = backtrack(openai_server, source, tmp_path / "one.jsonl", capsys)
    assert code == 0, one_err
    one_calls = len(openai_server.requests)
    monkeypatch.setenv("BBM_TUI_HOME", str(tmp_path / "second-home"))  # nothing to resume
    code, two_json, two_err = backtrack(openai_server, source, tmp_path / "two.jsonl", capsys,
                                        "--processes", "2", "--concurrency", "2")
    assert code == 0, two_err
    assert json.loads(two_json) == json.loads(one_json)
    assert (tmp_path / "two.jsonl").read_text() == (tmp_path / "one.jsonl").read_text()
    assert len(openai_server.requests) == 2 * one_calls
    # The summary line counts the children's calls as the parent's own.
    assert two_err.splitlines()[-1].replace("two.jsonl", "one.jsonl") == \
        one_err.splitlines()[-1]
    with Store.open(tmp_path / "second-home" / "bbm-tui.sqlite3") as store:
        [summary] = store.sessions()  # the one trace with a mistake, made by a child
        assert summary.session.source == "backtrack"


@pytest.mark.parametrize(("options", "message"), [
    (["--processes", "0"], "--processes must be at least 1"),
    (["--processes", "3", "--concurrency", "2"], "--processes 3 needs --concurrency 3"),
])
def test_processes_are_checked_before_any_work(tmp_path: Path, capsys, options: list[str],
                                               message: str) -> None:
    source = dataset_file(tmp_path / "multistep_arithmetic.jsonl")
    assert main(["backtrack", "--input", str(source), "--locations", "gold",
                 "--out", str(tmp_path / "o.jsonl"), *options]) == 2
    assert message in capsys.readouterr().err


def jobs(tmp_path: Path) -> list[BacktrackJob]:
    source = dataset_file(tmp_path / "multistep_arithmetic.jsonl")
    return jobs_from_files([source], None, parse_locations("gold"))


async def test_a_worker_that_dies_stops_the_batch_with_one_message(
    openai_server: FakeOpenAI, tmp_path: Path
) -> None:
    openai_server.responder = responder()
    spec = llm.ModelSpec("openai/test", openai_server.base_url)
    with Store.open(tmp_path / "store.sqlite3") as store:
        setup = WorkerSetup(store.path, spec, StepperSettings(), backtrack_in_child)
        async with Workers(2, setup) as workers:
            for pid in workers.pids:
                os.kill(pid, signal.SIGKILL)
            with pytest.raises(WorkerError, match=r"worker process ended.*signal 9"):
                await backtrack_batch(jobs(tmp_path), spec, store, tmp_path / "out.jsonl",
                                      concurrency=2, workers=workers)
    assert not (tmp_path / "out.jsonl").read_text()


async def test_closing_the_workers_ends_every_child(openai_server: FakeOpenAI,
                                                   tmp_path: Path) -> None:
    openai_server.responder = responder()
    spec = llm.ModelSpec("openai/test", openai_server.base_url)
    with Store.open(tmp_path / "store.sqlite3") as store:
        setup = WorkerSetup(store.path, spec, StepperSettings(), backtrack_in_child)
        async with Workers(2, setup) as workers:
            children = list(workers._children)
            result = await backtrack_batch(jobs(tmp_path), spec, store,
                                           tmp_path / "out.jsonl", concurrency=2,
                                           workers=workers)
            assert result.progress.done == 2 and not result.progress.failed
    assert [child.process.exitcode for child in children] == [0, 0]


async def _collector_threshold(_job: object, _store: Store | None,
                               _setup: WorkerSetup) -> int:
    """A child's work that reports the youngest generation's threshold it runs under."""
    return gc.get_threshold()[0]


async def test_a_worker_collects_young_objects_as_the_batch_does(tmp_path: Path) -> None:
    # At Python's default (700) the collector took ~2% of a child's CPU in the backtrack
    # benchmark; the parent's runner had the batch's threshold, its children did not.
    setup = WorkerSetup(None, llm.ModelSpec("openai/test"), StepperSettings(),
                        _collector_threshold)
    async with Workers(2, setup) as workers:
        thresholds = [await workers.run(index) for index in range(2)]
    assert thresholds == [BATCH_GC_THRESHOLD, BATCH_GC_THRESHOLD]


async def test_a_worker_that_cannot_open_the_store_says_why(tmp_path: Path) -> None:
    bad = tmp_path / "not-a-store.sqlite3"
    bad.write_bytes(b"this is not SQLite, and it is long enough to have a header" * 4)
    setup = WorkerSetup(bad, llm.ModelSpec("openai/test"), StepperSettings(),
                        backtrack_in_child)
    with pytest.raises(WorkerError, match=r"could not start: .*not-a-store"):
        async with Workers(2, setup):
            pass
    assert bad.read_bytes().startswith(b"this is not SQLite")


def test_a_run_over_two_processes_writes_what_one_writes(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`bbm-tui run --processes 2` on the replay model: the same rows in the same order (but
    for each trace's measured latency), the same summary, each trace a session."""
    def rows_of(out: Path) -> list[dict]:
        rows = [json.loads(line) for line in out.read_text().splitlines()]
        for row in rows:
            assert isinstance(row.pop("latency_s"), float)
        return rows

    args = ["run", "--task", "multistep_arithmetic", "--dataset", "--limit", "6",
            "--concurrency", "4", "--no-progress"]
    assert main([*args, "--out", str(tmp_path / "one.jsonl")]) == 0
    one_err = capsys.readouterr().err
    monkeypatch.setenv("BBM_TUI_HOME", str(tmp_path / "second-home"))
    assert main([*args, "--processes", "2", "--out", str(tmp_path / "two.jsonl")]) == 0
    two_err = capsys.readouterr().err
    assert rows_of(tmp_path / "two.jsonl") == rows_of(tmp_path / "one.jsonl")
    assert two_err.replace("two.jsonl", "one.jsonl") == one_err
    with Store.open(tmp_path / "second-home" / "bbm-tui.sqlite3") as store:
        assert len([s for s in store.sessions() if s.session.source == "run"]) == 6


# --------------------------------------------------------------------------- find


def test_find_over_two_processes_judges_what_one_judges(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """`bbm-tui find --processes 2` on the replay model, a step-level method (a call a
    judged thought): the same PREDS lines (in the order they finished), the same scores and
    the same summary, the children's calls counted as the parent's own."""
    def preds_of(out: Path) -> list[str]:
        return sorted(out.read_text().splitlines())

    args = ["find", "--method", "direct-step", "--input", str(bundled_path("dyck_languages")),
            "--limit", "8", "--concurrency", "4", "--no-progress", "--json"]
    assert main([*args, "--out", str(tmp_path / "one.jsonl")]) == 0
    one = capsys.readouterr()
    assert main([*args, "--processes", "2", "--out", str(tmp_path / "two.jsonl")]) == 0
    two = capsys.readouterr()
    assert preds_of(tmp_path / "two.jsonl") == preds_of(tmp_path / "one.jsonl")
    assert len(preds_of(tmp_path / "one.jsonl")) == 8
    assert json.loads(two.out) == json.loads(one.out)
    assert json.loads(two.out)["usage"]["calls"] > 8
    assert two.err.replace("two.jsonl", "one.jsonl") == one.err


async def test_find_over_processes_counts_failures_and_calls(
    tmp_path: Path, openai_server: FakeOpenAI
) -> None:
    jobs = find_jobs([bundled_path("multistep_arithmetic")], None, "direct-trace", limit=6)
    failing = jobs[2].row.input

    def respond(path: str, body: dict) -> Reply:
        if failing in body["messages"][-1]["content"]:
            return Reply(status=500)
        return Reply("No")

    openai_server.responder = respond
    spec = llm.ModelSpec("openai/test", api_base=openai_server.base_url)
    settings = llm.CallSettings(max_tokens=64, retry=llm.RetryPolicy(attempts=2,
                                                                     base_delay_s=0.01))
    outcome = await find_batch(jobs, "direct-trace", spec, tmp_path / "p.jsonl",
                               concurrency=3, settings=settings, processes=2)
    progress = outcome.progress
    assert (progress.done, progress.failed, progress.calls) == (5, 1, 5)
    assert "server error" in progress.errors[0]
    assert outcome.report.tasks["multistep_arithmetic"].n == 5
    assert len((tmp_path / "p.jsonl").read_text().splitlines()) == 5


def test_find_over_processes_stops_at_a_model_that_cannot_work(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    code = main(["find", "--model", "replay/nope", "--method", "direct-trace", "--input",
                 str(bundled_path("dyck_languages")), "--limit", "3", "--concurrency", "2",
                 "--processes", "2", "--out", str(tmp_path / "p.jsonl")])
    err = capsys.readouterr().err
    assert code != 0 and "Traceback" not in err
    assert "find stopped" in err and "replay/nope" in err


def test_find_over_processes_shares_the_rpm_out(
    tmp_path: Path, capsys: pytest.CaptureFixture, openai_server: FakeOpenAI
) -> None:
    """--rpm 600 over 2 processes: each child starts at most 300 calls a minute, so the one
    with 5 or more of the 10 calls spends at least 0.8 s starting them (0.4 s if each child
    took the whole 600); less its first call's own start (litellm's first call in a fresh
    process), which the others wait behind."""
    arrived: list[float] = []

    def respond(path: str, body: dict) -> Reply:
        arrived.append(time.monotonic())
        return Reply("No")

    openai_server.responder = respond
    code = main(["find", "--model", "openai/test", "--api-base", openai_server.base_url,
                 "--method", "direct-trace", "--input", str(bundled_path("dyck_languages")),
                 "--limit", "10", "--concurrency", "4", "--processes", "2", "--rpm", "600",
                 "--no-progress", "--out", str(tmp_path / "p.jsonl")])
    assert code == 0, capsys.readouterr().err
    assert len(arrived) == 10
    assert max(arrived) - min(arrived) >= 0.55
