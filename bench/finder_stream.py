"""Streamed finder answers: the CPU of `find --method direct-step --limit 100` over the bundled
dataset on the offline replay model (500 traces, a call a judged thought: ~2,800 calls), against
the same batch with each answer asked for in one piece (not streamed), in one run (issue 36).

The target: streamed at most 4.2 s where unstreamed took 4.16 s (issue 36's figures before and
after the finders' answers were streamed), that is at most 1.01x the unstreamed CPU here,
measured in the same run and process: the batch code `bbm-tui find` runs (core/batch/find.py's
`find_batch`), litellm imported first, the two sides alternating, each figure the median of
its rounds. The unstreamed side replaces the finders' `llm.complete_events` with
`llm.complete(..., streamed=False)` (the path before streaming) for its rounds.

    .venv/bin/python bench/finder_stream.py            # --limit 100, 3 rounds each
    .venv/bin/python bench/finder_stream.py --quick    # --limit 20, 3 rounds each (CI)
    .venv/bin/python bench/finder_stream.py --profile  # and where the streamed side's time goes
"""

from __future__ import annotations

import asyncio
import cProfile
import pstats
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import header, parser, private_home

TARGET = 4.2 / 4.16
ROUNDS = 3


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
    limit = 20 if args.quick else 100
    header(f"find --method direct-step --limit {limit} on replay/bbm: streamed answers vs "
           "unstreamed, CPU", args.quick)
    with private_home() as env, tempfile.TemporaryDirectory(prefix="bbm-finder-") as tmp:
        import os

        os.environ.update(env)
        streamed, unstreamed = asyncio.run(measure(limit, Path(tmp), args.profile))
    cpu_streamed, cpu_unstreamed = statistics.median(streamed), statistics.median(unstreamed)
    ratio = cpu_streamed / cpu_unstreamed
    print(f"streamed answers:   {cpu_streamed:6.2f} s of CPU (rounds: "
          f"{', '.join(f'{value:.2f}' for value in streamed)})")
    print(f"unstreamed answers: {cpu_unstreamed:6.2f} s of CPU (rounds: "
          f"{', '.join(f'{value:.2f}' for value in unstreamed)})")
    print()
    if ratio <= TARGET:
        print(f"TARGET MET: streamed / unstreamed CPU = {ratio:.3f}x (target <= {TARGET:.2f}x: "
              "4.2 s where unstreamed took 4.16 s)")
    else:
        bar = "!" * 72
        print(bar)
        print(f"!!! TARGET MISSED: streamed / unstreamed CPU = {ratio:.3f}x (target <= "
              f"{TARGET:.2f}x: 4.2 s where unstreamed took 4.16 s)")
        print(bar)
    return 0


if __name__ == "__main__":
    sys.exit(main())
