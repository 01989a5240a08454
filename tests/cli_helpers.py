"""Running the real command line in child processes, and checking what it refused."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Only a real hang should reach this: a run of a few replayed traces took over 30 s on
# this 2-core machine under a load average of 8 (other suites running).
TIMEOUT_S = 120


@dataclass
class Result:
    args: tuple[str, ...]
    code: int
    out: str
    err: str


def launch(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "bbm_tui", *args], cwd=ROOT, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, **(env or {})},
    )


def run_all(commands: list[tuple[str, ...]], env: dict[str, str] | None = None) -> list[Result]:
    """Run the commands at once (each a child process, stdin not a terminal)."""
    processes = [(args, launch(*args, env=env)) for args in commands]
    results = []
    for args, process in processes:
        try:
            out, err = process.communicate(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            raise AssertionError(f"bbm-tui {' '.join(args)} hung") from None
        results.append(Result(args, process.returncode, out, err))
    return results


@dataclass(frozen=True)
class Snapshot:
    data: bytes
    mtime_ns: int

    @classmethod
    def of(cls, path: Path) -> Snapshot:
        return cls(path.read_bytes(), path.stat().st_mtime_ns)


def assert_refused(result: Result, *needles: str) -> None:
    """One line on stderr that leads with the file, nothing on stdout, exit code non-zero."""
    assert result.code in (1, 2), result
    assert "Traceback" not in result.err + result.out, result
    assert "internal error" not in result.err, result
    assert result.out == "", result
    assert result.err.startswith("bbm-tui: ") and result.err.count("\n") == 1, result
    for needle in needles:
        assert needle in result.err, (needle, result)
