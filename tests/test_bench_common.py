"""bench/_common.py: which checkout a benchmark measures."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# A script outside bench/, as `python bench/X.py` is to the interpreter: its own folder first
# on sys.path, then PYTHONPATH, then _common's additions.
HEADER = f"""
import sys
sys.path.insert(0, {str(ROOT / "bench")!r})
import _common
_common.header("which code", True)
"""


def header_code(tmp_path: Path, pythonpath: str | None) -> str:
    script = tmp_path / "header.py"
    script.write_text(HEADER)
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    done = subprocess.run([sys.executable, str(script)], env=env, cwd=tmp_path,
                          capture_output=True, text=True, check=True, timeout=60)
    return next(line for line in done.stdout.splitlines() if line.startswith("code: "))


def test_a_benchmark_measures_the_checkout_pythonpath_names(tmp_path: Path) -> None:
    # The "before" of a before/after: another checkout's bbm_tui, not this one's.
    other = tmp_path / "older-checkout"
    (other / "bbm_tui").mkdir(parents=True)
    (other / "bbm_tui" / "__init__.py").write_text('__version__ = "older"\n')
    assert header_code(tmp_path, str(other)) == f"code: {other}"


def test_a_benchmark_measures_its_own_checkout_by_default(tmp_path: Path) -> None:
    assert header_code(tmp_path, None) == f"code: {ROOT}"
