"""Streamed finder answers: the CPU of `bbm-tui find --method direct-step --limit 100` on the
offline replay model, the whole command in its own process as a user runs it (issue 36: 4.16 s
before the finders' answers were streamed, 5.24 s after; one task's file, 100 traces, ~600
calls, litellm's import included), and what streaming costs over unstreamed answers.

The target: the command's CPU (user + system) at most 4.2 s, the median of its rounds, over
word sorting's file. Then, in this process and the same run, the batch code the command runs
(core/batch/find.py's `find_batch`) over the first 20 traces of each task, its answers
streamed against the same batch asked unstreamed (`llm.complete_events` replaced by
`llm.complete(..., streamed=False)`, the path before streaming), alternating, litellm
imported first: what streaming itself costs a call, printed beside the verdict.

    .venv/bin/python bench/finder_stream.py            # 3 rounds each
    .venv/bin/python bench/finder_stream.py --quick    # 1 round of the command (CI)
    .venv/bin/python bench/finder_stream.py --profile  # and where the streamed side's time goes
"""

from __future__ import annotations

import asyncio
import cProfile
import os
import pstats
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PYTHON, ROOT, header, parser, private_home

TARGET_S = 4.2
LIMIT = 100
TASK = "word_sorting"
ROUNDS = 3


def command_cpu(out: Path, env: dict[str, str]) -> float:
    """CPU seconds (user + system) of one `bbm-tui find` in its own process."""
    from bbm_tui.core.dataset import bundled_path

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(
        [PYTHON, "-m", "bbm_tui", "find", "--method", "direct-step", "--limit", str(LIMIT),
         "--input", str(bundled_path(TASK)), "--out", str(out), "--no-progress", "--json"],
        check=True, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


async def unstreamed_events(spec, messages, settings=None) -> AsyncIterator[object]:
    """complete_events as it was before streaming: the whole answer in one reply."""
    from bbm_tui.core import llm

    yield await llm.complete(spec, messages, settings, streamed=False)


async def one_side(jobs: list, streamed: bool, out: Path,
                   profiler: cProfile.Profile | None = None) -> float:
    from bbm_tui.core import llm
    from bbm_tui.core.batch.find import find_batch

    streaming = llm.complete_events
    if not streamed:
        llm.complete_events = unstreamed_events  # type: ignore[assignment]
    try:
        if profiler is not None:
            profiler.enable()
        cpu = time.process_time()
        outcome = await find_batch(jobs, "direct-step", llm.ModelSpec("replay/bbm"), out,
                                   concurrency=4)
        spent = time.process_time() - cpu
        if profiler is not None:
            profiler.disable()
    finally:
        llm.complete_events = streaming  # type: ignore[assignment]
    if outcome.progress.failed or outcome.report.overall.accuracy != 100.0:
        raise SystemExit(f"{'streamed' if streamed else 'unstreamed'}: "
                         f"{outcome.progress.failed} failed: {outcome.progress.errors[:3]}")
    return spent


async def measure(limit: int, folder: Path, profile: bool) -> tuple[list[float], list[float]]:
    from bbm_tui.core import llm
    from bbm_tui.core.batch.find import jobs_from_files
    from bbm_tui.core.dataset import bundled_path
    from bbm_tui.core.tasks import TASK_NAMES

    llm.warm_up()  # litellm's import is neither side's
    jobs = jobs_from_files([bundled_path(task) for task in TASK_NAMES], None, "direct-step",
                           limit)
    await one_side(jobs[:20], True, folder / "warm-streamed.jsonl")
    await one_side(jobs[:20], False, folder / "warm-unstreamed.jsonl")
    sides: dict[bool, list[float]] = {True: [], False: []}
    for index in range(ROUNDS):
        order = (True, False) if index % 2 == 0 else (False, True)
        for streamed in order:
            sides[streamed].append(await one_side(jobs, streamed,
                                                  folder / f"{streamed}-{index}.jsonl"))
    if profile:
        profiler = cProfile.Profile()
        await one_side(jobs, True, folder / "profiled.jsonl", profiler)
        stats = pstats.Stats(profiler)
        stats.sort_stats("tottime").print_stats(25)
    return sides[True], sides[False]


def main() -> int:
    options = parser(__doc__.splitlines()[0])
    options.add_argument("--profile", action="store_true",
                         help="also profile a streamed round (cProfile, by own time)")
    args = options.parse_args()
    rounds = 1 if args.quick else ROUNDS
    header(f"find --method direct-step --limit {LIMIT} on replay/bbm ({TASK}): the command's "
           "CPU; streamed answers vs unstreamed", args.quick)
    with private_home() as env, tempfile.TemporaryDirectory(prefix="bbm-finder-") as tmp:
        commands = [command_cpu(Path(tmp) / f"command-{index}.jsonl", env)
                    for index in range(rounds)]
        os.environ.update(env)
        streamed, unstreamed = asyncio.run(measure(20, Path(tmp), args.profile))
    cpu = statistics.median(commands)
    cpu_streamed, cpu_unstreamed = statistics.median(streamed), statistics.median(unstreamed)
    print(f"the command:        {cpu:6.2f} s of CPU (rounds: "
          f"{', '.join(f'{value:.2f}' for value in commands)}; litellm's import included)")
    print(f"in this process, the first 20 traces of each task ({ROUNDS} rounds each):")
    print(f"  streamed answers:   {cpu_streamed:6.2f} s of CPU (rounds: "
          f"{', '.join(f'{value:.2f}' for value in streamed)})")
    print(f"  unstreamed answers: {cpu_unstreamed:6.2f} s of CPU (rounds: "
          f"{', '.join(f'{value:.2f}' for value in unstreamed)}): streamed "
          f"{cpu_streamed / cpu_unstreamed:.2f}x")
    print(f"load average now: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print()
    if cpu <= TARGET_S:
        print(f"TARGET MET: the command's CPU = {cpu:.2f} s (target <= {TARGET_S} s)")
    else:
        bar = "!" * 72
        print(bar)
        print(f"!!! TARGET MISSED: the command's CPU = {cpu:.2f} s (target <= {TARGET_S} s)")
        print(bar)
    return 0


if __name__ == "__main__":
    sys.exit(main())
