"""`backtrack` throughput: 300 traces backtracked from their gold mistake against the local
OpenAI-compatible server with 50 ms of latency per call, at concurrency 16 and at 1, in one run.

The target: concurrency 16 at least 12x faster than concurrency 1 (issue 36), or, where
litellm's own CPU a trace caps the figure below that on this machine, 90% of that ceiling for
the processes used (the floor below, measured in the same run). Concurrency 16 is timed twice:
in one process, and shared out to two worker processes (`bbm-tui backtrack --concurrency 16
--processes 2`, core/batch/workers.py), whose start (each imports litellm) is not timed, as
litellm's import in this process is not. Each is judged against its own line, and the verdict
is the better of the two.

The server (tests/openai_server.py's FakeOpenAI) runs in its own process. It answers a
sampling call (n=8, not streamed) with eight different steps with log-probabilities, and the
temperature-0 continuation (streamed) with the answer, so each trace is two calls, as a
backtrack whose chosen sample is one thought from the end. The client is the real batch code
(`bbm_tui.core.batch.backtrack.backtrack_batch`) over HTTP with a real store, writing OUT to a
temporary folder. litellm is imported and warmed before either timing starts.

    .venv/bin/python bench/backtrack_concurrency.py            # 300 traces (about a minute)
    .venv/bin/python bench/backtrack_concurrency.py --quick    # 64 traces (CI)
    .venv/bin/python bench/backtrack_concurrency.py --profile  # where a trace's CPU goes

After the two timings it measures the floor: the same two calls per trace made straight through
`litellm.acompletion` (the eight samples in one call, then one streamed call read to its end)
and nothing else, sequentially, and prints their client CPU per trace and the speed-up that
floor allows: at concurrency 16 the client's CPU, not the latency, sets the pace, so no client
built on litellm can be faster than (calls x latency + floor) / floor in one process, P times
that over P processes (at most one a CPU, the CPUs shared with the local server), and never
more than the concurrency. Where the client itself spent less CPU a trace at 16 than litellm
alone read to its end (it closes a stream at the provider's last chunk), the ceiling is
computed from the client's figure (bench/_common.py's `cpu_floor`).

`--profile` runs the traces at concurrency 1 only, where the parts of a trace run one after
another, and splits the client's CPU (all its threads) by what was running: the sampling call,
the continuation's streamed calls (both through litellm), the store's methods, and the rest (the
batch and session code, the event loop, the collector). Approximate: litellm finishes a call's
logging in a task of its own, which may run during the next part.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (
    CLIENT_CPU_AT_TOP,
    PYTHON,
    ROOT,
    cpu_floor,
    header,
    judge_against_ceilings,
    litellm_ceiling,
    parser,
    private_home,
    process_cpu_s,
)

TARGET = 12.0
CONCURRENCY = 16
PROCESSES = 2
LATENCY_MS = 50.0
TRACES, QUICK_TRACES = 300, 64


def serve(latency_ms: float) -> None:
    """The server process: print the base URL, serve until stdin closes."""
    from tests.openai_server import FakeOpenAI, Reply

    samples = [f"a different step, version {index}" for index in range(8)]

    def respond(path: str, body: dict) -> Reply:
        if body.get("stream"):
            return Reply("So the answer is 42")
        return Reply(choices=samples, honor_stop=False,
                     choice_logprobs=[-0.1 * (index + 1) for index in range(8)])

    server = FakeOpenAI(latency_s=latency_ms / 1000).start()
    server.responder = respond
    server.requests = _Discard()
    print(server.base_url, flush=True)
    sys.stdin.read()
    server.stop()


class _Discard(list):
    def append(self, item: object) -> None:
        return None


def jobs(count: int) -> list:
    """Traces with a gold mistake, taken from every task in turn."""
    from bbm_tui.core.batch.backtrack import BacktrackJob
    from bbm_tui.core.dataset import bundled_rows
    from bbm_tui.core.tasks import TASK_NAMES

    with_mistake = {task: [row for row in bundled_rows(task) if row.mistake_index is not None]
                    for task in TASK_NAMES}
    found = []
    for index in range(count):
        task = TASK_NAMES[index % len(TASK_NAMES)]
        row = with_mistake[task][index // len(TASK_NAMES)]
        found.append(BacktrackJob(task, row, row.mistake_index))
    return found


async def timed_run(batch: list, base_url: str, concurrency: int, folder: Path,
                    processes: int = 1) -> float:
    from bbm_tui.core import llm
    from bbm_tui.core.batch.backtrack import backtrack_batch, backtrack_in_child
    from bbm_tui.core.batch.workers import Workers, WorkerSetup
    from bbm_tui.core.generation.stepper import StepperSettings
    from bbm_tui.core.store import Store

    spec = llm.ModelSpec("hosted_vllm/test", api_base=base_url)
    folder.mkdir()
    with Store.open(folder / "store.sqlite3") as store, contextlib.ExitStack() as stack:
        workers = None
        if processes > 1:
            setup = WorkerSetup(store.path, spec, StepperSettings(), backtrack_in_child)
            workers = Workers(processes, setup)
            await workers.start()
            stack.callback(workers.close)
            # Warm, as this process is before either timing (measure(): 16 traces at 16):
            # each child's first calls build litellm's caches and open the connections its
            # share of the 16 in flight will use.
            await backtrack_batch(batch[:CONCURRENCY], spec, store, folder / "warm.jsonl",
                                  concurrency=CONCURRENCY, workers=workers)
        started, cpu = time.perf_counter(), time.process_time()
        result = await backtrack_batch(batch, spec, store, folder / "out.jsonl",
                                       concurrency=concurrency, workers=workers)
        elapsed = time.perf_counter() - started
    if folder.name != "warm" and processes == 1:
        # The client's own CPU per trace (litellm's work on two calls, the store's four
        # commits): with 16 in flight it, not the latency, is the floor.
        cpu_ms = (time.process_time() - cpu) * 1000 / len(batch)
        print(f"  concurrency {concurrency:2}: client CPU {cpu_ms:.2f} ms per trace")
        if concurrency == CONCURRENCY:
            CLIENT_CPU_AT_TOP.append(cpu_ms / 1000)
    progress = result.progress
    if progress.failed or progress.done != len(batch):
        raise SystemExit(f"concurrency {concurrency}: {progress.failed} failed, "
                         f"{progress.done}/{len(batch)} done: {progress.errors[:3]}")
    return elapsed


async def measure(batch: list, base_url: str, folder: Path,
                  server_pid: int) -> tuple[float, float, float, float, float]:
    """The three timings, litellm's floor, and the server's CPU a trace (it shares the CPUs)."""
    await timed_run(batch[:16], base_url, 16, folder / "warm")
    fast = await timed_run(batch, base_url, CONCURRENCY, folder / "fast")
    processes = await timed_run(batch, base_url, CONCURRENCY, folder / "processes",
                                processes=PROCESSES)
    server_cpu = process_cpu_s(server_pid)
    slow = await timed_run(batch, base_url, 1, folder / "slow")
    server_cpu = (process_cpu_s(server_pid) - server_cpu) / len(batch)
    floor = await litellm_floor(base_url, len(batch))
    return fast, processes, slow, floor, server_cpu


async def litellm_floor(base_url: str, traces: int) -> float:
    """Client CPU seconds per trace of litellm alone: the trace's two calls with the options
    the app sends (its retries off, the timeout, the stop, log-probabilities with their top
    alternatives), one after the other."""
    import litellm

    from bbm_tui.core import llm
    from bbm_tui.core.llm.capabilities import logprob_kwargs

    spec = llm.ModelSpec("hosted_vllm/test", api_base=base_url)
    common = {"model": spec.model, "api_base": base_url, "api_key": "no-key-set",
              "max_retries": 0, "timeout": 60, "max_tokens": 256, "stop": ["\n"],
              "messages": [{"role": "user", "content": "Thought 1:"}], **logprob_kwargs(spec)}

    async def one_trace() -> None:
        await litellm.acompletion(n=8, temperature=1.0, **common)
        stream = await litellm.acompletion(stream=True, temperature=0.0, **common)
        async for _chunk in stream:
            pass

    for _ in range(8):  # warm: the first calls build litellm's caches
        await one_trace()
    cpu = time.process_time()
    for _ in range(traces):
        await one_trace()
    return (time.process_time() - cpu) / traces


class CpuParts:
    """Process CPU time spent while each part runs (one part at a time: concurrency 1)."""

    def __init__(self) -> None:
        self.spent: Counter[str] = Counter()
        self._inside = threading.local()

    def coroutine(self, function: Callable[..., Any], part: str) -> Callable[..., Any]:
        async def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.process_time()
            try:
                return await function(*args, **kwargs)
            finally:
                self.spent[part] += time.process_time() - started
        return timed

    def generator(self, function: Callable[..., Any], part: str) -> Callable[..., Any]:
        async def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.process_time()
            try:
                async for item in function(*args, **kwargs):
                    yield item
            finally:
                self.spent[part] += time.process_time() - started
        return timed

    def method(self, function: Callable[..., Any], part: str) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            if getattr(self._inside, "depth", 0):  # a store method calling another
                return function(*args, **kwargs)
            self._inside.depth = 1
            started = time.process_time()
            try:
                return function(*args, **kwargs)
            finally:
                self._inside.depth = 0
                self.spent[part] += time.process_time() - started
        return timed


def profile(batch: list, base_url: str, folder: Path) -> None:
    """Where a trace's client CPU goes (see the module's docstring)."""
    from bbm_tui.core import llm
    from bbm_tui.core.store import Store

    parts = CpuParts()
    llm.sample_steps = parts.coroutine(llm.sample_steps, "the sampling call (n=8)")
    llm.stream_step = parts.generator(llm.stream_step, "the continuation's streamed calls")
    for name in dir(Store):
        if not name.startswith("_") and callable(getattr(Store, name)) and name != "open":
            setattr(Store, name, parts.method(getattr(Store, name), "the store"))

    async def run() -> float:
        await timed_run(batch[:16], base_url, 16, folder / "warm")
        parts.spent.clear()  # the warm-up's parts overlapped
        started = time.process_time()
        await timed_run(batch, base_url, 1, folder / "profiled")
        return time.process_time() - started

    total = asyncio.run(run())
    per_trace = 1000 / len(batch)
    print(f"client CPU per trace at concurrency 1: {total * per_trace:6.2f} ms")
    for part, seconds in parts.spent.most_common():
        print(f"  {part:36} {seconds * per_trace:6.2f} ms  ({seconds / total:4.0%})")
    rest = total - sum(parts.spent.values())
    print(f"  {'the rest (ours, the loop, the GC)':36} {rest * per_trace:6.2f} ms  "
          f"({rest / total:4.0%})")


def main() -> int:
    options = parser(__doc__.splitlines()[0])
    options.add_argument("--serve", action="store_true", help=argparse_hidden())
    options.add_argument("--latency-ms", type=float, default=LATENCY_MS)
    options.add_argument("--profile", action="store_true",
                         help="split a trace's client CPU into its parts, at concurrency 1")
    args = options.parse_args()
    if args.serve:
        serve(args.latency_ms)
        return 0
    header(f"backtrack from gold locations, {args.latency_ms:.0f} ms per call: concurrency "
           "16 vs 1", args.quick)
    batch = jobs(QUICK_TRACES if args.quick else TRACES)
    with private_home() as env, tempfile.TemporaryDirectory(prefix="bbm-backtrack-") as tmp:
        os.environ.update(env)
        server = subprocess.Popen(
            [PYTHON, __file__, "--serve", "--latency-ms", str(args.latency_ms)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT,
        )
        try:
            base_url = server.stdout.readline().strip()
            if args.profile:
                profile(batch, base_url, Path(tmp))
                return 0
            fast, processes, slow, floor, server_cpu = asyncio.run(
                measure(batch, base_url, Path(tmp), server.pid))
        finally:
            server.stdin.close()
            server.wait(10)
    report(len(batch), fast, processes, slow, floor, server_cpu, args.latency_ms / 1000)
    return 0


def report(traces: int, fast: float, processes: float, slow: float, floor: float,
           server_cpu: float, latency_s: float) -> None:
    one, over = slow / fast, slow / processes
    used = cpu_floor(floor)
    ceilings = {count: litellm_ceiling(2 * latency_s, used, count, CONCURRENCY, server_cpu)
                for count in (1, PROCESSES)}
    print(f"traces:         {traces} (2 calls each: 8 samples in one call, the continuation)")
    print(f"concurrency {CONCURRENCY}: {fast:8.2f} s  ({traces / fast:7.1f} traces/s)  one "
          f"process: {one:.2f}x")
    print(f"  over {PROCESSES} processes: {processes:4.2f} s  ({traces / processes:7.1f} "
          f"traces/s)  --processes {PROCESSES}: {over:.2f}x")
    print(f"concurrency  1: {slow:8.2f} s  ({traces / slow:7.1f} traces/s)")
    judge_against_ceilings(floor=floor, used=used, ceilings=ceilings, server_cpu=server_cpu,
                           one=one, over=over, concurrency=CONCURRENCY, processes=PROCESSES,
                           target=TARGET, calls="the same two calls")


def argparse_hidden() -> str:
    import argparse

    return argparse.SUPPRESS


if __name__ == "__main__":
    raise SystemExit(main())
