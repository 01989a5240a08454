"""The wheel holds everything the app needs: every package of the code, the stylesheets, the
paper's prompts, guidelines and dataset (a user's install has no checkout beside it)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def declared_packages() -> set[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return set(config["tool"]["setuptools"]["packages"])


def test_every_code_package_is_declared() -> None:
    found = {
        ".".join(path.parent.relative_to(ROOT).parts)
        for path in (ROOT / "bbm_tui").rglob("__init__.py")
    }
    assert found - declared_packages() == set()


def test_the_wheel_holds_the_code_and_the_data(tmp_path: Path) -> None:
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp_path), str(ROOT)],
        capture_output=True, text=True, timeout=300,
    )
    assert built.returncode == 0, built.stderr
    wheel = next(tmp_path.glob("bbm_tui-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    code = {str(p.relative_to(ROOT)) for p in (ROOT / "bbm_tui").rglob("*.py")}
    assert code - names == set()
    styles = {f"bbm_tui/ui/styles/{p.name}" for p in (ROOT / "bbm_tui/ui/styles").glob("*.tcss")}
    assert styles and styles <= names
    data = {f"bbm_tui/{p.relative_to(ROOT)}" for folder in ("prompts", "dataset")
            for p in (ROOT / folder).rglob("*") if p.is_file() and p.suffix != ".pyc"}
    assert data - names == set()
    assert any(name.endswith("NOTICE") for name in names)
