"""`anchors` throughput (issue 35): rollouts a second at concurrency 16 and at 1, against a
local server that goes on from a prefix as llama-server does (tests/llama_server.py's
`/apply-template` and `/completion`) with 50 ms of latency a call, in its own process.

The client is the real batch code (`bbm_tui.core.batch.anchors.anchors_batch`) over HTTP,
writing OUT to a temporary folder: thinking traces of 10 steps, M rollouts from each of their
11 prefixes, each one call that goes on to the answer. The target: concurrency 16 at least 12x
the rollouts a second of concurrency 1.

    .venv/bin/python bench/anchors.py            # 4 traces x 11 prefixes x 16 rollouts
    .venv/bin/python bench/anchors.py --quick    # 1 trace x 11 x 8 (CI)
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PYTHON, ROOT, header, parser, private_home, verdict

TARGET_SPEEDUP = 12.0
LATENCY_MS = 50.0
STEPS = 10


def serve(latency_ms: float) -> None:
    """The server process: print the base URL, serve until stdin closes."""
    from tests.llama_server import FakeLlamaServer

    server = FakeLlamaServer(latency_s=latency_ms / 1000)
    server.start()
    server.continuation = lambda prompt, body: (
        f"A new step, rollout {body.get('seed')}.\n\n</think>\n\nSo the answer is 4")
    server.requests = _Discard()
    print(server.base_url, flush=True)
    sys.stdin.read()
    server.stop()


class _Discard(list):
    def append(self, item: object) -> None:
        return None


def traces(count: int) -> list:
    from bbm_tui.core.batch.anchors import Trace
    from bbm_tui.core.dataset import TraceRow
    from bbm_tui.core.types import SplitRule

    found = []
    for index in range(count):
        raw = tuple(f"Trace {index}, step {step}: some working here.\n\n"
                    for step in range(STEPS))
        row = TraceRow(f"((1 + {index}) * 2) = ?", [step.strip() for step in raw], "4",
                       "4", None, {"reasoning": "".join(raw), "split": "paragraph"})
        found.append(Trace("multistep_arithmetic", row, raw, SplitRule.PARAGRAPH))
    return found


async def timed_run(batch: list, base_url: str, rollouts: int, concurrency: int,
                    folder: Path) -> tuple[float, int]:
    from bbm_tui.core import llm
    from bbm_tui.core.batch.anchors import AnchorsSettings, anchors_batch
    from bbm_tui.core.judging.anchors import similar_by_words

    async def words(_texts: list[str]):
        return similar_by_words

    spec = llm.ModelSpec("openai/tiny", api_base=base_url)
    started, cpu = time.perf_counter(), time.process_time()
    result = await anchors_batch(batch, spec, folder / f"out-{concurrency}.jsonl",
                                 settings=AnchorsSettings(rollouts=rollouts),
                                 similar_for=words, concurrency=concurrency)
    elapsed = time.perf_counter() - started
    progress = result.progress
    if progress.done:
        # The client's own CPU a rollout: with 16 in flight it, with the server's, is the floor.
        cpu_ms = (time.process_time() - cpu) * 1000 / progress.done
        print(f"  concurrency {concurrency:2}: client CPU {cpu_ms:.2f} ms a rollout")
    if progress.failed or progress.done != progress.total:
        raise SystemExit(f"concurrency {concurrency}: {progress.failed} failed: "
                         f"{progress.errors[:3]}")
    return elapsed, progress.done


def main() -> None:
    args = parser(__doc__ or "").parse_args()
    header("anchors: rollouts a second, concurrency 16 vs 1", args.quick)
    count, rollouts = (1, 8) if args.quick else (4, 16)
    with private_home() as env:
        server = subprocess.Popen([PYTHON, __file__, "--serve"], cwd=ROOT, env=env,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert server.stdout is not None
            base_url = server.stdout.readline().strip()
            with tempfile.TemporaryDirectory(prefix="bbm-bench-anchors-") as folder:
                batch = traces(count)
                warm = Path(folder) / "warm"
                warm.mkdir()
                # Warm: litellm's import and the first connections are not timed.
                asyncio.run(timed_run(traces(1), base_url, 2, 4, warm))
                fast, done = asyncio.run(timed_run(batch, base_url, rollouts, 16,
                                                   Path(folder)))
                slow, _ = asyncio.run(timed_run(batch, base_url, rollouts, 1, Path(folder)))
        finally:
            if server.stdin is not None:
                server.stdin.close()
            server.wait(30)
    print(f"{done} rollouts ({count} traces x {STEPS + 1} prefixes x {rollouts}), "
          f"{LATENCY_MS:.0f} ms a call")
    print(f"  concurrency 16: {fast:6.2f} s  {done / fast:7.1f} rollouts/s")
    print(f"  concurrency  1: {slow:6.2f} s  {done / slow:7.1f} rollouts/s")
    print(f"  speed-up: {slow / fast:.1f}x (target >= {TARGET_SPEEDUP:.0f}x)")
    verdict("time at concurrency 16 / time at concurrency 1", fast / slow,
            1 / TARGET_SPEEDUP)


if __name__ == "__main__":
    if "--serve" in sys.argv:
        serve(LATENCY_MS)
    else:
        main()
