"""A batch over two servers behind a router file against the same batch over one (issue 27):
`run_batch` (what `bbm-tui run` uses) at concurrency 16, each server the local one of
`_server.py --serial` in its own process: one request at a time, 50 ms a call (llama-server
with one slot; a GPU server at its batch limit), answering like the dataset's model (Dyck and
tracking traces, 64; 16 with --quick). Both
sides go through a router file (litellm's Router), one deployment against two, so the only
difference is the second server. Target: at least 1.8x the traces a second.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from _common import PYTHON, ROOT, header, parser, private_home

from bbm_tui.core import llm
from bbm_tui.core.batch.run import RunJob, jobs_from_bundled, run_batch
from bbm_tui.core.generation.stepper import StepperSettings
from bbm_tui.core.store import Store

LATENCY_MS = 50.0
CONCURRENCY = 16
TARGET = 1.8
MAX_TRACES = 4  # what the manual (docs/scale.md) recommends for a server of one request at a time


def start_server(env: dict[str, str]) -> tuple[subprocess.Popen, str]:
    server = subprocess.Popen(
        [PYTHON, str(ROOT / "bench" / "_server.py"), "--serial", "--latency-ms",
         str(LATENCY_MS)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
        cwd=ROOT)
    assert server.stdout is not None
    return server, server.stdout.readline().strip()


def router_file(folder: Path, name: str, bases: list[str]) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"model_list": [
        {"model_name": "bench",
         # Each server takes one request at a time (llama-server with one slot): four
         # live traces keep it busy while the client is slow to send a trace's next step,
         # and the next trace goes to the first that frees a place (not 8 and 8 of 16
         # from the start, blind to their lengths).
         "model_info": {"id": f"server-{index}", "max_traces": MAX_TRACES},
         "litellm_params": {"model": "openai/test", "api_base": base, "api_key": "no-key"}}
        for index, base in enumerate(bases, start=1)]}))
    return path


async def one_batch(jobs: list[RunJob], router: Path, folder: Path, name: str
                    ) -> tuple[float, int, dict[str, int]]:
    spec = llm.ModelSpec("bench", router=str(router))
    started = time.perf_counter()
    with Store.open(folder / f"{name}.sqlite3") as store:
        progress = await run_batch(jobs, spec, store, folder / f"{name}.jsonl",
                                   concurrency=CONCURRENCY, settings=StepperSettings())
        wall = time.perf_counter() - started
        served: dict[str, int] = {}
        for summary in store.sessions():
            for step in store.branch(summary.session.id):
                served[str(step.deployment)] = served.get(str(step.deployment), 0) + 1
    return wall, progress.done, served


def jobs(count: int) -> list[RunJob]:
    """Dyck and tracking traces: their steps are short (10 and 12 words; word sorting's are
    38), so that the client's CPU a step (litellm's, per streamed chunk) stays under the
    servers' 50 ms and the servers are what a second one can relieve."""
    tasks = ("dyck_languages", "tracking_shuffled_objects")
    return [job for task in tasks for job in jobs_from_bundled(task, count // len(tasks))]


async def measure(count: int, bases: list[str], folder: Path) -> None:
    batch = jobs(count)
    llm.warm_up()  # litellm's import (seconds) is not the batch's
    one = router_file(folder, "one", bases[:1])
    two = router_file(folder, "two", bases)
    # Nor is what litellm loads at its first call (the openai SDK's resources, the
    # tokenizer: ~1 s, 1-2 s at load 4), which the first batch measured, always a
    # one-server one, paid alone: two traces, not measured. Each side is warmed alike: the
    # two-server file's Router, and the second server's first calls and connections, were
    # paid in the first two-server batch only (0.4 s more than the second on average, 7
    # runs at load 2-9; the one-server batches equal), two traces on each file.
    await one_batch(jobs(2), one, folder, "warm-up")
    await one_batch(jobs(2), two, folder, "warm-up-two")
    rounds = []
    for round_number in range(2):  # alternating, as the load changes minute to minute
        single = await one_batch(batch, one, folder, f"one-{round_number}")
        double = await one_batch(batch, two, folder, f"two-{round_number}")
        rounds.append((single, double))
    for (single, double) in rounds:
        print(f"one server:  {single[0]:7.2f} s  {single[1] / single[0]:6.2f} traces/s  "
              f"steps served: {single[2]}")
        print(f"two servers: {double[0]:7.2f} s  {double[1] / double[0]:6.2f} traces/s  "
              f"steps served: {double[2]}")
    speed_up = sum(s[0] for s, _ in rounds) / sum(d[0] for _, d in rounds)
    print()
    if speed_up >= TARGET:
        print(f"TARGET MET: two servers / one = {speed_up:.3f}x (target >= {TARGET:.2f}x)")
    else:
        bar = "!" * 72
        print(bar)
        print(f"!!! TARGET MISSED: two servers / one = {speed_up:.3f}x (target >= "
              f"{TARGET:.2f}x)")
        print(bar)


def main() -> int:
    options = parser(__doc__.splitlines()[0])
    args = options.parse_args()
    header(f"a batch over two servers vs one, one request at a time each, {LATENCY_MS:.0f} ms "
           f"a call, concurrency {CONCURRENCY}", args.quick)
    with private_home() as env, tempfile.TemporaryDirectory(prefix="bbm-router-") as tmp:
        os.environ.update(env)
        servers = [start_server(env) for _ in range(2)]
        try:
            asyncio.run(measure(16 if args.quick else 64, [base for _, base in servers],
                                Path(tmp)))
        finally:
            for server, _ in servers:
                assert server.stdin is not None
                server.stdin.close()
                server.wait(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
