"""Fixtures for the app's tests; the helpers are in ui_helpers.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bbm_tui.core.store import Store


@pytest.fixture
def store() -> Iterator[Store]:
    """The store the app will open (the same BBM_TUI_HOME), for setting up and checking."""
    opened = Store.open()
    yield opened
    opened.close()
