"""The app as the command line runs it: `run_app`'s exit code, and a first frame that does
not wait for litellm."""

from __future__ import annotations

import functools
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from textual.app import App
from textual.pilot import Pilot
from ui_helpers import wait_for

from bbm_tui.core import llm
from bbm_tui.core.config import Config
from bbm_tui.ui import app as app_module
from bbm_tui.ui.dialogs import StoreErrorScreen
from bbm_tui.ui.run import run_app
from bbm_tui.ui.screens.new_session import NewSessionScreen


def run_headless(monkeypatch: pytest.MonkeyPatch, auto_pilot) -> None:
    """`run_app` runs `BbmApp.run()`; here that runs headless, driven by `auto_pilot`, and the
    background import of litellm is skipped (these tests call no model)."""
    run = functools.partialmethod(App.run, headless=True, size=(120, 40), auto_pilot=auto_pilot)
    monkeypatch.setattr(app_module.BbmApp, "run", run)
    monkeypatch.setattr(llm, "warm_up", lambda: None)


def test_run_app_returns_zero_after_q(monkeypatch: pytest.MonkeyPatch) -> None:
    async def quit_at_once(pilot: Pilot) -> None:
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, NewSessionScreen))
        await pilot.press("q")

    run_headless(monkeypatch, quit_at_once)
    assert run_app(Config()) == 0


def test_run_app_returns_one_when_the_store_cannot_be_opened(
    monkeypatch: pytest.MonkeyPatch, isolated_home: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    isolated_home.mkdir(parents=True, exist_ok=True)
    (isolated_home / "bbm-tui.sqlite3").write_text("not a database")

    async def read_and_quit(pilot: Pilot) -> None:
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, StoreErrorScreen))
        await pilot.press("q")

    run_headless(monkeypatch, read_and_quit)
    capfd.readouterr()
    assert run_app(Config()) == 1
    # Said again on stderr once the app's screen is gone, so that it stays in view.
    lines = capfd.readouterr().err.splitlines()
    assert lines[-1].startswith("bbm-tui: ") and "not a SQLite file" in lines[-1]
    assert str(isolated_home / "bbm-tui.sqlite3") in lines[-1]


def test_the_first_frame_comes_before_litellm(tmp_path: Path) -> None:
    """In a fresh process: litellm is not loaded when the first frame is drawn (it is
    warmed in a thread afterwards)."""
    script = textwrap.dedent("""
        import os
        import sys
        from textual.app import App
        from bbm_tui.ui.app import BbmApp

        original = App._display

        def display(self, screen, renderable):
            if renderable is not None and not getattr(self, "_seen", False):
                self._seen = True
                print("litellm loaded at first frame:", "litellm" in sys.modules, flush=True)
                os._exit(0)  # not waiting for the warm-up thread to finish importing it
            return original(self, screen, renderable)

        App._display = display
        BbmApp().run(headless=True, size=(120, 40))
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=60, check=True)
    assert "litellm loaded at first frame: False" in result.stdout
