"""`find --method verify` throughput: the task verifiers over all 2,186 bundled traces (no
model, no network), through the real batch code writing PREDS, and the verifiers alone.

The verifiers are meant to judge thousands of traces a second; the batch around
them (one JSONL line written per trace, the runner's bookkeeping) is reported beside it.

    .venv/bin/python bench/verify_speed.py            # all 2,186 traces, 3 rounds
    .venv/bin/python bench/verify_speed.py --quick    # 1 round
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, header, parser

TARGET = 1000.0  # traces a second


def batch_round(folder: Path, index: int) -> float:
    from bbm_tui.core import llm
    from bbm_tui.core.batch.find import find_batch, jobs_from_files
    from bbm_tui.core.dataset import bundled_path
    from bbm_tui.core.judging.verifier import VERIFIER_MODEL
    from bbm_tui.core.tasks import TASK_NAMES

    jobs = jobs_from_files([bundled_path(task) for task in TASK_NAMES], None, "verify")
    started = time.perf_counter()
    outcome = asyncio.run(find_batch(jobs, "verify", llm.ModelSpec(VERIFIER_MODEL),
                                     folder / f"preds-{index}.jsonl", concurrency=1))
    elapsed = time.perf_counter() - started
    if outcome.progress.done != len(jobs) or outcome.progress.failed:
        raise SystemExit(f"round {index}: {outcome.progress}")
    return len(jobs) / elapsed


def verifiers_alone() -> float:
    from bbm_tui.core.dataset import all_bundled
    from bbm_tui.core.tasks.verify import verify_trace

    traces = [(task, row) for task, rows in all_bundled() for row in rows]
    started = time.perf_counter()
    for task, row in traces:
        verify_trace(task, row.input, row.steps)
    return len(traces) / (time.perf_counter() - started)


def main() -> int:
    args = parser(__doc__.splitlines()[0]).parse_args()
    header("find --method verify over the bundled dataset", args.quick)
    rounds = 1 if args.quick else 3
    verifiers_alone()  # warm: the dataset read, the verifiers' compiled patterns and caches
    alone = statistics.median(verifiers_alone() for _ in range(rounds))
    with tempfile.TemporaryDirectory(prefix="bbm-verify-") as tmp:
        batch = statistics.median(batch_round(Path(tmp), i) for i in range(rounds))
    print(f"verifiers alone:           {alone:9.0f} traces/s")
    print(f"find --method verify batch: {batch:8.0f} traces/s (PREDS written, one line a trace)")
    print()
    if batch >= TARGET:
        print(f"TARGET MET: {batch:.0f} traces/s through find (target >= {TARGET:.0f})")
    else:
        bar = "!" * 72
        print(bar)
        print(f"!!! TARGET MISSED: {batch:.0f} traces/s through find (target >= {TARGET:.0f})")
        print(bar)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
