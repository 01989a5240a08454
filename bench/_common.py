"""Shared helpers for the benchmarks (not a benchmark itself: scripts/bench skips `_*.py`)."""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# `tests.openai_server`, and bbm_tui from a clean clone. Appended, not put first: a PYTHONPATH
# naming another checkout (`PYTHONPATH=<tree at an older commit> .venv/bin/python bench/X.py`,
# the "before" of a before/after) must win, or both sides would measure this tree's code.
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))

VENV_BIN = ROOT / ".venv" / "bin"
PYTHON = str(VENV_BIN / "python") if (VENV_BIN / "python").exists() else sys.executable


def parser(description: str) -> argparse.ArgumentParser:
    result = argparse.ArgumentParser(description=description)
    result.add_argument("--quick", action="store_true", help="fewer rounds (CI)")
    return result


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def spread(values: Sequence[float], scale: float = 1000.0, unit: str = "ms") -> str:
    """min / median / max of values, scaled (seconds to ms by default)."""
    return (
        f"median {median(values) * scale:8.2f} {unit}   "
        f"(min {min(values) * scale:.2f}, max {max(values) * scale:.2f}, n={len(values)})"
    )


def verdict(name: str, ratio: float, target: float, digits: int = 2) -> bool:
    """Print the ratio against its target (`digits` after the point: more where the line
    is a measured floor); a miss is loud. Never raises: a missed target is a figure to
    report, not a crash."""
    met = ratio <= target
    shown = f"{ratio:.{max(3, digits)}f}x (target <= {target:.{digits}f}x)"
    print()
    if met:
        print(f"TARGET MET: {name} = {shown}")
    else:
        bar = "!" * 72
        print(bar)
        print(f"!!! TARGET MISSED: {name} = {shown}")
        print(bar)
    return met


@contextlib.contextmanager
def private_home() -> Iterator[dict[str, str]]:
    """A temporary BBM_TUI_HOME and BBM_TUI_CONFIG (a missing file: the defaults), so that a
    user's sessions and config are never touched. Yields the environment to use."""
    with tempfile.TemporaryDirectory(prefix="bbm-bench-") as folder:
        env = dict(os.environ)
        env["BBM_TUI_HOME"] = str(Path(folder) / "home")
        env["BBM_TUI_CONFIG"] = str(Path(folder) / "config.toml")
        yield env


def header(title: str, quick: bool, code: Path | None = None) -> None:
    """The run's title, machine and load, and the checkout measured (`code`, where the
    benchmark runs another checkout's bbm_tui in its children)."""
    print(f"== {title}{' (quick)' if quick else ''} ==")
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average "
          f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"code: {code or code_measured()}")


def code_measured() -> Path:
    """The checkout whose bbm_tui this run measures (another one's under PYTHONPATH)."""
    import bbm_tui

    return Path(bbm_tui.__file__).resolve().parent.parent


def litellm_ceiling(latency_s: float, floor_s: float, processes: int, concurrency: int,
                    server_s: float = 0.0) -> float:
    """The most a batch at `concurrency` over `processes` can gain over one at a time, when
    litellm alone costs `floor_s` of client CPU a trace and its calls wait `latency_s` in all:
    one at a time a trace takes latency_s + floor_s; at `concurrency` each process finishes
    at most one trace per floor_s of its CPU (and no more processes run at once than there
    are CPUs), the CPUs are shared with the local server (`server_s` of its CPU a trace), and
    no more than `concurrency` traces overlap."""
    cpus = os.cpu_count() or 1
    per_second = min(min(processes, cpus) / floor_s, cpus / (floor_s + server_s))
    return min(per_second * (latency_s + floor_s), float(concurrency))


def process_cpu_s(pid: int) -> float:
    """A child process's CPU seconds so far (Linux /proc; 0 elsewhere): the local server's."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# The client's own CPU a trace at the top concurrency in one process, as each timed run saw
# it: where the client spends less than litellm alone read to its end (it closes a stream
# once the provider's last chunk is in), that lower cost is the one the ceiling is
# computed from, so that the line is never set below what this client shows it can do.
CLIENT_CPU_AT_TOP: list[float] = []


def cpu_floor(litellm_alone_s: float) -> float:
    """The CPU a trace the ceiling is computed from: litellm alone's, or the client's own
    at the top concurrency (the median of its runs) where that is lower."""
    if not CLIENT_CPU_AT_TOP:
        return litellm_alone_s
    return min(litellm_alone_s, statistics.median(CLIENT_CPU_AT_TOP))


def line_under_ceiling(target: float, ceiling: float) -> float:
    """The line a speed-up must reach (issue 36): the target, or 90% of litellm's own ceiling
    for the processes used where that is lower (no client built on litellm can do better)."""
    return min(target, 0.9 * ceiling)


def verdict_at_least(name: str, ratio: float, line: float, target: float) -> bool:
    """`verdict` for a figure that must be at least `line`; says when the line is 90% of
    litellm's ceiling rather than the target."""
    met = ratio >= line
    why = (f"target >= {target:.0f}x" if line >= target
           else f"line >= {line:.2f}x: 90% of litellm's own ceiling, under the {target:.0f}x "
                "target")
    print()
    if met:
        print(f"TARGET MET: {name} = {ratio:.2f}x ({why})")
    else:
        bar = "!" * 72
        print(bar)
        print(f"!!! TARGET MISSED: {name} = {ratio:.2f}x ({why})")
        print(bar)
    return met


def judge_against_ceilings(*, floor: float, used: float, ceilings: dict[int, float],
                           server_cpu: float, one: float, over: float, concurrency: int,
                           processes: int, target: float, calls: str) -> None:
    """The batch benchmarks' closing lines (issue 36): litellm's own CPU a trace and the
    ceilings it allows in one process and over `processes`, each ratio against its line (the
    target, or 90% of its ceiling where lower), and the verdict on the nearer of the two."""
    print(f"litellm alone:  {floor * 1000:8.2f} ms of client CPU per trace ({calls}, nothing "
          "else, measured in this run)")
    if used < floor:
        print(f"                this client spent {used * 1000:.2f} ms a trace at "
              f"{concurrency}: the ceiling is computed from that")
    print(f"                so concurrency {concurrency} can be at most {ceilings[1]:.2f}x "
          f"faster than 1 in one process here, {ceilings[processes]:.2f}x over {processes} "
          f"({os.cpu_count()} CPUs, shared with the server's {server_cpu * 1000:.2f} ms of CPU "
          "a trace)")
    sides = [(f"concurrency {concurrency} / 1, one process", one,
              line_under_ceiling(target, ceilings[1])),
             (f"concurrency {concurrency} / 1, --processes {processes}", over,
              line_under_ceiling(target, ceilings[processes]))]
    for name, ratio, line in sides:
        print(f"  {name}: {ratio:.2f}x against a line of {line:.2f}x "
              f"(the {target:.0f}x target, or 90% of its ceiling where lower)")
    name, ratio, line = max(sides, key=lambda side: side[1] / side[2])
    verdict_at_least(name, ratio, line, target)
