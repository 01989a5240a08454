"""Where the shipped prompt files and the bundled dataset live, installed or in a checkout."""

from __future__ import annotations

from pathlib import Path


def _package_dir(name: str) -> Path:
    # importlib.resources here, where a file is looked for: the app's first frame reads none.
    from importlib import resources

    # In a wheel, `prompts/` and `dataset/` are installed as sub-packages of bbm_tui; in an
    # editable install or a plain checkout they stay at the project root.
    installed = resources.files("bbm_tui").joinpath(name)
    if installed.is_dir():
        return Path(str(installed))
    return Path(__file__).resolve().parents[2] / name


def prompts_dir() -> Path:
    return _package_dir("prompts")


def dataset_dir() -> Path:
    return _package_dir("dataset")
