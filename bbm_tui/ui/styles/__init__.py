"""The app's Textual stylesheets (.tcss), one per screen or family of widgets."""

from __future__ import annotations

from pathlib import Path


def stylesheet(name: str) -> Path:
    """The absolute path of `name`.tcss (absolute: screens are subclassed from elsewhere)."""
    return Path(__file__).with_name(f"{name}.tcss")
