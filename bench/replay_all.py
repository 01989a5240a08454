"""Replay the bundled traces headless, at zero pace, with concurrency 8, through `bbm-tui run`'s
machinery; report traces and steps per second and the peak memory, and check every row.

What it is for: "all 2,186 traces replayed headless at zero pace with concurrency 8 — report traces
per second and peak memory". A child process (fresh interpreter, temporary BBM_TUI_HOME and
BBM_TUI_CONFIG, BBM_TUI_REPLAY_TPS=0) does what `bbm-tui run --model replay/bbm --dataset --task T
--concurrency 8 --out OUT` does for each task in turn: `batch_run.run_batch` with the config's step
settings, every step through the stepper, litellm (the replay provider) and the session store, one
row per trace appended to OUT. The parent then compares every row of every OUT with the dataset:
steps and answer must be the recorded ones.

Peak memory is the child's RSS high-water mark (VmHWM). Where the time goes: the child's
main-thread CPU against its other threads (the store's commits run in threads), and a cProfile
of a small sample afterwards, its main-thread CPU split by package.

    .venv/bin/python bench/replay_all.py              # all 2,186 traces (a few minutes)
    .venv/bin/python bench/replay_all.py --quick      # 20 traces of each task (CI)
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pstats
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PYTHON, ROOT, header, parser, private_home

CONCURRENCY = 8
MODEL = "replay/bbm"
GROUPS = (
    ("waiting (event loop idle: epoll)", ("select.epoll", "selectors.py")),
    ("bbm_tui replay engine", ("bbm_tui/core/llm/offline/",)),
    ("bbm_tui store/session", ("bbm_tui/core/store/", "bbm_tui/core/trace/", "sqlite3")),
    ("bbm_tui llm/stepper/batch", ("bbm_tui/",)),
    ("litellm", ("litellm/",)),
    ("openai SDK / httpx", ("openai/", "httpx/", "httpcore/")),
    ("pydantic", ("pydantic",)),
    ("asyncio", ("asyncio/",)),
)


def vm_hwm_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def vm_rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _thread_cpu() -> dict[int, tuple[str, float]]:
    """CPU seconds (user + system) of every live thread, by native id, with its name."""
    import threading

    tick = os.sysconf("SC_CLK_TCK")
    result = {}
    for thread in threading.enumerate():
        try:
            with open(f"/proc/self/task/{thread.native_id}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        result[thread.native_id] = (thread.name, (int(fields[11]) + int(fields[12])) / tick)
    return result


def _thread_group(name: str) -> str:
    if name == "MainThread":
        return "event loop (main thread)"
    if name.startswith("asyncio"):
        # litellm's acompletion builds each request in loop.run_in_executor (the batches
        # commit to the store on their own loop).
        return "asyncio's executor: litellm's acompletion"
    if name.startswith("ThreadPoolExecutor"):
        return "litellm's logging executor"
    if name.startswith("AnyIO worker"):
        return "anyio workers: litellm's stream_chunk_builder"
    return f"other ({name})"


async def _batch_with_thread_cpu(run, by_group: dict[str, float]):
    """Await `run`, adding each thread group's CPU during it to `by_group` (measured before
    the loop closes its executor, whose threads die with it)."""
    before = _thread_cpu()
    result = await run
    for tid, (name, seconds) in _thread_cpu().items():
        group = _thread_group(name)
        by_group[group] = by_group.get(group, 0.0) + seconds - before.get(tid, (name, 0.0))[1]
    return result


# ------------------------------------------------------------------------------- the child

def child(out_dir: Path, limit: int | None, profile_sample: int) -> None:
    """Run every task's batch; print one JSON line of figures on stdout."""
    from bbm_tui.core import llm
    from bbm_tui.core.batch.run import jobs_from_bundled, run_batch
    from bbm_tui.core.config import load_config
    from bbm_tui.core.generation.stepper import StepperSettings
    from bbm_tui.core.store import Store
    from bbm_tui.core.tasks import TASK_NAMES

    figures: dict = {"tasks": {}, "rss_start_mib": vm_rss_mib()}
    began = time.perf_counter()
    llm.warm_up()
    figures["import_s"] = time.perf_counter() - began
    figures["rss_after_import_mib"] = vm_rss_mib()
    config = load_config()
    spec = llm.ModelSpec(MODEL)
    settings = StepperSettings(step_limit=config.step_limit,
                               call=llm.CallSettings(max_tokens=config.max_tokens))
    store = Store.open()
    wall = cpu = main_cpu = 0.0
    threads: dict[str, float] = {}
    try:
        for task in TASK_NAMES:
            jobs = jobs_from_bundled(task, limit)
            out = out_dir / f"{task}.jsonl"
            t_wall, t_cpu, t_main = time.perf_counter(), time.process_time(), time.thread_time()
            progress = asyncio.run(_batch_with_thread_cpu(
                run_batch(jobs, spec, store, out, concurrency=CONCURRENCY, settings=settings),
                threads,
            ))
            task_wall = time.perf_counter() - t_wall
            task_cpu = time.process_time() - t_cpu
            task_main = time.thread_time() - t_main
            wall, cpu, main_cpu = wall + task_wall, cpu + task_cpu, main_cpu + task_main
            figures["tasks"][task] = {
                "traces": progress.done, "failed": progress.failed, "steps": progress.steps,
                "wall_s": task_wall, "cpu_s": task_cpu, "main_thread_cpu_s": task_main,
                "errors": progress.errors[:5],
            }
            print(f"  {task:<26} {progress.done:5d} traces {progress.steps:6d} steps "
                  f"{task_wall:7.1f} s", file=sys.stderr, flush=True)
    finally:
        store.close()
    figures.update(wall_s=wall, cpu_s=cpu, main_thread_cpu_s=main_cpu, threads_cpu_s=threads,
                   vm_hwm_mib=vm_hwm_mib(), rss_end_mib=vm_rss_mib())
    if profile_sample:
        figures["profile"] = profile_run(profile_sample, spec, settings)
    print(json.dumps(figures), flush=True)


def profile_run(sample: int, spec, settings) -> dict:
    """Main-thread self time by package over a sample of dyck traces (the longest), in a
    fresh store so nothing is resumed."""
    from bbm_tui.core.batch.run import jobs_from_bundled, run_batch
    from bbm_tui.core.store import Store

    with tempfile.TemporaryDirectory(prefix="bbm-bench-profile-") as folder:
        store = Store.open(Path(folder) / "store.db")
        jobs = jobs_from_bundled("dyck_languages", sample)
        profiler = cProfile.Profile()
        began = time.perf_counter()
        profiler.enable()
        progress = asyncio.run(run_batch(jobs, spec, store, Path(folder) / "out.jsonl",
                                         concurrency=CONCURRENCY, settings=settings))
        profiler.disable()
        elapsed = time.perf_counter() - began
        store.close()
    table = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    groups: dict[str, float] = {}
    for key, value in table.items():
        where = f"{key[0]}:{key[2]}"
        name = next((group for group, markers in GROUPS
                     if any(marker in where for marker in markers)), "other (stdlib, builtins)")
        groups[name] = groups.get(name, 0.0) + value[2]
    top = sorted(table.items(), key=lambda item: item[1][2], reverse=True)[:12]
    return {
        "steps": progress.steps, "traces": progress.done, "wall_s": elapsed,
        "groups_s": groups,
        "top": [(f"{key[0].split('site-packages/')[-1].replace(str(ROOT) + '/', '')}:"
                 f"{key[1]}({key[2]})", value[1], value[2]) for key, value in top],
    }


# ------------------------------------------------------------------------------ the parent

def verify(out_dir: Path, limit: int | None) -> tuple[int, int, list[str]]:
    """(rows checked, steps checked, mismatches) of every OUT against the dataset."""
    from bbm_tui.core.dataset import bundled_rows, read_rows
    from bbm_tui.core.tasks import TASK_NAMES

    checked = steps = 0
    mismatches: list[str] = []
    for task in TASK_NAMES:
        expected = bundled_rows(task)[:limit] if limit is not None else bundled_rows(task)
        by_input = {row.input: (index, row) for index, row in enumerate(expected)}
        out = out_dir / f"{task}.jsonl"
        produced = read_rows(out) if out.exists() else []
        seen = set()
        for row in produced:
            checked += 1
            if row.input not in by_input:
                mismatches.append(f"{task}: a row for a question not in the dataset")
                continue
            index, want = by_input[row.input]
            seen.add(row.input)
            steps += len(row.steps)
            want_answer = want.answer.strip() if want.answer is not None else None
            got_answer = row.answer.strip() if row.answer is not None else None
            if row.steps != want.steps:
                first = next((k for k, (a, b) in enumerate(zip(row.steps, want.steps, strict=False))
                              if a != b), min(len(row.steps), len(want.steps)))
                mismatches.append(f"{task} #{index}: steps differ ({len(row.steps)} vs "
                                  f"{len(want.steps)} recorded; first difference at step "
                                  f"{first + 1})")
            elif got_answer != want_answer:
                mismatches.append(f"{task} #{index}: answer {got_answer!r}, recorded "
                                  f"{want_answer!r}")
        for index, row in enumerate(expected):
            if row.input not in seen:
                mismatches.append(f"{task} #{index}: no row produced")
    return checked, steps, mismatches


def main() -> int:
    cli = parser("Replay the bundled traces headless (concurrency 8) and check them.")
    cli.add_argument("--per-task", type=int, metavar="N",
                     help="only the first N traces of each task (quick: 20)")
    cli.add_argument("--profile-sample", type=int, default=None, metavar="N",
                     help="dyck traces to profile afterwards (default 40, quick 10; 0: none)")
    cli.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    opts = cli.parse_args()
    limit = opts.per_task if opts.per_task is not None else (20 if opts.quick else None)
    sample = opts.profile_sample if opts.profile_sample is not None else (
        10 if opts.quick else 40)
    if opts.child is not None:
        child(opts.child, limit, sample)
        return 0
    which = f"the first {limit} traces of each task" if limit is not None else "all traces"
    header(f"replay {which} headless, zero pace, concurrency {CONCURRENCY}", opts.quick)
    with private_home() as env, tempfile.TemporaryDirectory(prefix="bbm-bench-out-") as out:
        env["BBM_TUI_REPLAY_TPS"] = "0"
        env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
        argv = [PYTHON, str(Path(__file__).resolve()), "--child", out]
        if limit is not None:
            argv += ["--per-task", str(limit)]
        argv += ["--profile-sample", str(sample)]
        began = time.perf_counter()
        process = subprocess.run(argv, env=env, cwd=ROOT, stdout=subprocess.PIPE, text=True,
                                 check=False)
        total = time.perf_counter() - began
        peak_children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        if process.returncode != 0 or not process.stdout.strip():
            print(f"ERROR: the replay process failed (status {process.returncode})",
                  file=sys.stderr)
            return 1
        figures = json.loads(process.stdout.strip().splitlines()[-1])
        checked, checked_steps, mismatches = verify(Path(out), limit)
    report(figures, total, peak_children, checked, checked_steps, mismatches)
    return 1 if mismatches or checked == 0 else 0


def report(figures: dict, total: float, peak_children: float, checked: int,
           checked_steps: int, mismatches: list[str]) -> None:
    tasks = figures["tasks"]
    traces = sum(task["traces"] for task in tasks.values())
    steps = sum(task["steps"] for task in tasks.values())
    failed = sum(task["failed"] for task in tasks.values())
    wall = figures["wall_s"]
    print(f"\n{'task':<26} {'traces':>6} {'steps':>6} {'wall s':>7} {'traces/s':>9} "
          f"{'steps/s':>8} {'ms/step':>8}")
    for name, task in tasks.items():
        print(f"{name:<26} {task['traces']:6d} {task['steps']:6d} {task['wall_s']:7.1f} "
              f"{task['traces'] / task['wall_s']:9.2f} {task['steps'] / task['wall_s']:8.1f} "
              f"{task['wall_s'] / max(task['steps'], 1) * 1000:8.2f}")
    print(f"{'all':<26} {traces:6d} {steps:6d} {wall:7.1f} {traces / wall:9.2f} "
          f"{steps / wall:8.1f} {wall / max(steps, 1) * 1000:8.2f}")
    print(f"\nthroughput: {traces / wall:.2f} traces/s, {steps / wall:.0f} steps/s "
          f"({traces} traces, {steps} steps in {wall:.1f} s; concurrency {CONCURRENCY})")
    print(f"peak memory (RSS high-water mark of the replay process): "
          f"{figures['vm_hwm_mib']:.0f} MiB (getrusage of the child: {peak_children:.0f} MiB); "
          f"{figures['rss_start_mib']:.0f} MiB at start, "
          f"{figures['rss_after_import_mib']:.0f} MiB after importing litellm, "
          f"{figures['rss_end_mib']:.0f} MiB at the end")
    print(f"not in the figures: litellm's import {figures['import_s']:.1f} s; the whole child "
          f"process took {total:.1f} s")
    print("\nwhere the time goes:")
    cpu, main = figures["cpu_s"], figures["main_thread_cpu_s"]
    print(f"  CPU {cpu:.1f} s of {wall:.1f} s wall ({cpu / wall:.0%} of one core): event-loop "
          f"thread {main:.1f} s ({main / max(steps, 1) * 1000:.2f} ms a step), other threads "
          f"(see below) {cpu - main:.1f} s "
          f"({(cpu - main) / max(steps, 1) * 1000:.2f} ms a step)")
    for name, seconds in sorted(figures["threads_cpu_s"].items(), key=lambda kv: -kv[1]):
        print(f"    {name:<44} {seconds:6.1f} s CPU  {seconds / max(steps, 1) * 1000:6.2f} ms "
              "a step")
    profile = figures.get("profile")
    if profile:
        per_step = 1000 / max(profile["steps"], 1)
        print(f"  cProfile of {profile['traces']} dyck traces ({profile['steps']} steps, "
              f"{profile['wall_s']:.1f} s with the profiler on), event-loop thread self time, "
              "ms a step:")
        for name, seconds in sorted(profile["groups_s"].items(), key=lambda kv: -kv[1]):
            print(f"    {name:<36} {seconds * per_step:7.3f}")
        print("  heaviest functions (self time, ms a step):")
        for name, calls, seconds in profile["top"]:
            print(f"    {seconds * per_step:7.3f}  {calls * per_step / 1000:7.1f} calls  {name}")
    print(f"\nchecked {checked} rows ({checked_steps} steps) against the dataset: "
          f"{len(mismatches)} mismatches, {failed} traces failed")
    for line in mismatches[:40]:
        print(f"  MISMATCH {line}")
    if len(mismatches) > 40:
        print(f"  ... and {len(mismatches) - 40} more")
    for task in tasks.values():
        for error in task["errors"]:
            print(f"  ERROR {error}")
    if mismatches or failed:
        print("\n!!! REPLAY MISMATCH: the replayed rows differ from the dataset (see above)")
    else:
        print("every replayed row equals the dataset's (steps and answer)")


if __name__ == "__main__":
    sys.exit(main())
