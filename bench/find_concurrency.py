"""`find` throughput: direct trace-level over all 2,186 traces against the local OpenAI-compatible
server with 50 ms of latency per call, at concurrency 16 and at concurrency 1, in one run.

The target: concurrency 16 at least 10x faster than concurrency 1.

The server (tests/openai_server.py's FakeOpenAI) runs in its own process, as a real server
would, so its CPU is not on the measured client's GIL; it answers every finder prompt from the
gold label (the replay oracle), after the latency. The client is the real batch code
(`bbm_tui.core.batch_find.find_batch`) over HTTP, writing PREDS to a temporary folder. litellm
is imported and warmed before either timing starts.

The model is `hosted_vllm/test` by default: a vLLM server behind `--api-base` is what a batch
at scale points at (docs/DESIGN.md §9), and litellm's path for it costs ~4 ms of client CPU per call
here. Its `openai/` path costs ~10 ms, most of it in the OpenAI SDK's request transform, so
with 16 calls in flight on this 2-CPU machine the client's CPU, not the latency, becomes the
limit; `--model openai/test` measures that path.

    .venv/bin/python bench/find_concurrency.py            # all 2,186 traces (about 3 minutes)
    .venv/bin/python bench/find_concurrency.py --quick    # the first 100 traces of each task (CI)
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PYTHON, ROOT, header, parser, private_home

TARGET = 10.0
LATENCY_MS = 50.0
QUICK_PER_TASK = 100


def serve(latency_ms: float) -> None:
    """The server process: print the base URL, serve until stdin closes."""
    from bbm_tui.core.llm.offline.replay import ReplayError, engine
    from tests.openai_server import FakeOpenAI, Reply

    def respond(path: str, body: dict) -> Reply:
        try:
            return Reply(text=engine().respond("replay/bbm", body["messages"], {}))
        except ReplayError as error:
            return Reply(status=400, error_body={"error": {"message": str(error)}})

    server = FakeOpenAI(latency_s=latency_ms / 1000).start()
    server.responder = respond
    server.requests = _Discard()  # a long benchmark must not keep every request body
    print(server.base_url, flush=True)
    sys.stdin.read()
    server.stop()


class _Discard(list):
    def append(self, item: object) -> None:
        return None


def jobs(quick: bool) -> list:
    from bbm_tui.core.batch.find import jobs_from_files
    from bbm_tui.core.dataset import bundled_path
    from bbm_tui.core.tasks import TASK_NAMES

    paths = [bundled_path(task) for task in TASK_NAMES]
    return jobs_from_files(paths, None, "direct-trace", QUICK_PER_TASK if quick else None)


async def timed_run(
    batch: list, base_url: str, concurrency: int, folder: Path, model: str
) -> float:
    from bbm_tui.core import llm
    from bbm_tui.core.batch.find import find_batch

    spec = llm.ModelSpec(model, api_base=base_url)
    out = folder / f"preds-{concurrency}-{len(batch)}.jsonl"
    started, cpu = time.perf_counter(), time.process_time()
    outcome = await find_batch(batch, "direct-trace", spec, out, concurrency=concurrency)
    elapsed = time.perf_counter() - started
    cpu_ms = (time.process_time() - cpu) * 1000 / len(batch)
    if folder.name != "warm":
        # The client's own CPU per trace: with 16 in flight, this (not the latency) is the
        # floor on a machine whose cores are busy with other work.
        print(f"  concurrency {concurrency:2}: client CPU {cpu_ms:.2f} ms per trace")
    progress = outcome.progress
    accuracy = outcome.report.overall.accuracy
    if progress.failed or progress.done != len(batch) or accuracy != 100.0:
        raise SystemExit(f"concurrency {concurrency}: {progress.failed} failed, "
                         f"{progress.done}/{len(batch)} done, accuracy {accuracy}: "
                         f"{progress.errors[:3]}")
    return elapsed


FAST_ROUNDS = 3


async def measure(batch: list, base_url: str, folder: Path, model: str) -> tuple[float, float]:
    """Warm up (litellm imported, 16 connections open), then time 16 and 1, on one loop.

    Concurrency 16 runs FAST_ROUNDS times around the one run at 1, and its median counts: at
    16 the client's CPU is the limit, so a burst of other work on this shared 2-CPU machine
    moves that side by 20-30% (seen: 2.5 s and 3.1 s for the same 500 traces), while the run
    at 1 waits on the 50 ms latency and barely moves. Each round writes a fresh PREDS."""
    await timed_run(batch[-32:], base_url, 16, folder / "warm", model)
    fast_runs = [await timed_run(batch, base_url, 16, folder / "fast-0", model)]
    slow = await timed_run(batch, base_url, 1, folder, model)
    for index in range(1, FAST_ROUNDS):
        fast_runs.append(await timed_run(batch, base_url, 16, folder / f"fast-{index}", model))
    print("  concurrency 16 rounds: " + ", ".join(f"{run:.2f} s" for run in fast_runs))
    return statistics.median(fast_runs), slow


def main() -> int:
    options = parser(__doc__.splitlines()[0])
    options.add_argument("--serve", action="store_true", help=argparse_hidden())
    options.add_argument("--latency-ms", type=float, default=LATENCY_MS)
    options.add_argument("--model", default="hosted_vllm/test",
                         help="litellm model string for the local server")
    args = options.parse_args()
    if args.serve:
        serve(args.latency_ms)
        return 0
    header(f"find, direct trace-level, {args.model}, {args.latency_ms:.0f} ms per call: "
           "concurrency 16 vs 1", args.quick)
    batch = jobs(args.quick)
    with private_home() as env, tempfile.TemporaryDirectory(prefix="bbm-find-") as tmp:
        server = subprocess.Popen(
            [PYTHON, __file__, "--serve", "--latency-ms", str(args.latency_ms)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT,
        )
        try:
            base_url = server.stdout.readline().strip()
            folder = Path(tmp)
            for name in ("warm", *(f"fast-{index}" for index in range(FAST_ROUNDS))):
                (folder / name).mkdir()
            fast, slow = asyncio.run(measure(batch, base_url, folder, args.model))
        finally:
            server.stdin.close()
            server.wait(10)
    report(len(batch), fast, slow)
    return 0


def report(traces: int, fast: float, slow: float) -> None:
    ratio = slow / fast
    print(f"traces:         {traces}")
    print(f"concurrency 16: {fast:8.2f} s  ({traces / fast:7.1f} traces/s; median of "
          f"{FAST_ROUNDS} rounds)")
    print(f"concurrency  1: {slow:8.2f} s  ({traces / slow:7.1f} traces/s)")
    print(f"speed-up:       {ratio:8.2f}x")
    print()
    if ratio >= TARGET:
        print(f"TARGET MET: concurrency 16 is {ratio:.2f}x faster than 1 (target >= {TARGET:.0f}x)")
    else:
        bar = "!" * 72
        print(bar)
        print(f"!!! TARGET MISSED: concurrency 16 is {ratio:.2f}x faster than 1 "
              f"(target >= {TARGET:.0f}x)")
        print(bar)


def argparse_hidden() -> str:
    import argparse

    return argparse.SUPPRESS


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
