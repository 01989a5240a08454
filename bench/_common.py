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
if str(ROOT) not in sys.path:  # `tests.openai_server`, and bbm_tui from a clean clone
    sys.path.insert(0, str(ROOT))

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


def header(title: str, quick: bool) -> None:
    print(f"== {title}{' (quick)' if quick else ''} ==")
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average "
          f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}")
