"""`bbm-tui serve` in a real browser (issue 37): headless Chromium (Debian's `chromium`,
driven by Playwright with the system's browser; Playwright's own are never downloaded)
against a real server process. Sign in, label three traces with the keyboard, close the tab,
sign in again and resume; two annotators at once, then the lead sees both and adjudicates;
a wrong password and a forged cookie get nothing.

What the app draws is read from the WebSocket frames the page receives (the terminal paints
on a canvas), escape sequences left out."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bbm_tui.core.store import Store
from tests.serve_helpers import PASSWORDS, add_users, screen_text, serving, word_sorting_file

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")


def chromium_path() -> str | None:
    """The system's Chromium: $BBM_TUI_CHROMIUM, else `chromium` on the PATH."""
    return (os.environ.get("BBM_TUI_CHROMIUM") or shutil.which("chromium")
            or shutil.which("chromium-browser"))


pytestmark = pytest.mark.skipif(
    chromium_path() is None,
    reason="no Chromium installed (Debian: apt-get install chromium; .ci/run installs it "
    "when run as root); the browser tests drive the system's browser")


class Tab:
    """One browser tab on the served app, keeping the app's frames as they arrive."""

    def __init__(self, context) -> None:
        self.page = context.new_page()
        self.frames = bytearray()
        self.sent: list[str] = []
        self.sockets = 0
        self.mark = 0
        self.page.on("websocket", self._socket)

    def _socket(self, socket) -> None:
        self.sockets += 1
        socket.on("framereceived", self._frame)
        socket.on("framesent", lambda payload: self.sent.append(str(payload)))

    def _frame(self, payload) -> None:
        if isinstance(payload, bytes):
            self.frames += payload

    def sign_in(self, url: str, name: str, password: str | None = None) -> None:
        self.page.goto(f"{url}/")
        self.page.fill("#name", name)
        self.page.fill("#password", password or PASSWORDS[name])
        self.page.click("button[type=submit]")

    def wait_for(self, text: str, timeout: float = 60.0, *, fresh: bool = True) -> None:
        """Until `text` is drawn in a frame that came after the last wait (`fresh`)."""
        start = self.mark if fresh else 0
        deadline = time.monotonic() + timeout
        while text not in screen_text(bytes(self.frames[start:])):
            if time.monotonic() > deadline:
                tail = screen_text(bytes(self.frames[-1500:]))
                raise TimeoutError(f"{text!r} never drawn; last: {tail!r}")
            self.page.wait_for_timeout(100)
        self.mark = len(self.frames)

    def keys(self, *keys: str) -> None:
        self.mark = len(self.frames)
        for key in keys:
            self.page.keyboard.press(key)

    def ready(self) -> None:
        """The queue on show and the terminal taking keys."""
        self.page.wait_for_selector("body.-first-byte", state="attached", timeout=60_000)
        self.page.click("#terminal")


@pytest.fixture
def browser() -> Iterator:
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path(),
                                             args=["--no-sandbox"])
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def team(tmp_path: Path) -> tuple[Path, Path]:
    data = tmp_path / "data"
    data.mkdir()
    users = tmp_path / "users.json"
    add_users(users)
    return word_sorting_file(data), users


def _labels() -> list[tuple[str, int | None, int]]:
    with Store.open() as store:
        return sorted((label.annotator, label.mistake_index, label.session_id)
                      for label in store.annotator_labels())


def test_label_three_traces_close_the_tab_and_resume(tmp_path: Path, team, browser) -> None:
    data, users = team
    with serving(tmp_path, [data], users) as served:
        context = browser.new_context(viewport={"width": 1100, "height": 700})
        tab = Tab(context)
        tab.sign_in(served.url, "alice")
        tab.ready()
        tab.wait_for("Judge Thought 1", fresh=False)
        assert tab.page.title() == "alice · bbm-tui"
        for done in (1, 2, 3):
            tab.keys("x", "Enter")  # Thought 1 is the first mistake; submit
            tab.wait_for(f"{done} / 6 done")
        tab.page.close()  # mid-queue, the app process ends with the tab
        context.close()
        # Another sign-in (the cookie went with the context): her fourth trace, all kept.
        again = Tab(browser.new_context(viewport={"width": 1100, "height": 700}))
        again.sign_in(served.url, "alice")
        again.ready()
        again.wait_for("word_sorting.jsonl:4", fresh=False)
        again.wait_for("3 / 6 done", fresh=False)
    labels = _labels()
    assert [(name, mistake) for name, mistake, _session in labels] == [("alice", 0)] * 3
    assert len({session for _name, _mistake, session in labels}) == 3


def test_two_annotators_at_once_then_the_lead_sees_both(tmp_path: Path, team,
                                                         browser) -> None:
    data, users = team
    with serving(tmp_path, [data], users) as served:
        alice = Tab(browser.new_context(viewport={"width": 1000, "height": 640}))
        bob = Tab(browser.new_context(viewport={"width": 1000, "height": 640}))
        alice.sign_in(served.url, "alice")
        bob.sign_in(served.url, "bob")
        for tab in (alice, bob):
            tab.ready()
            tab.wait_for("Judge Thought 1", fresh=False)
        # Turn about, both apps open: they agree on trace 1 and part on trace 2.
        alice.keys("x", "Enter")
        bob.keys("x", "Enter")
        alice.wait_for("1 / 6 done")
        bob.wait_for("1 / 6 done")
        alice.keys("x", "Enter")
        bob.keys("c", "x", "Enter")
        alice.wait_for("2 / 6 done")
        bob.wait_for("2 / 6 done")
        lead = Tab(browser.new_context(viewport={"width": 1000, "height": 640}))
        lead.sign_in(served.url, "lee")
        lead.ready()
        lead.wait_for("Progress", fresh=False)
        shown = screen_text(bytes(lead.frames))
        assert "alice" in shown and "bob" in shown and "Krippendorff" in shown
        lead.keys("d")  # the trace they part on
        lead.wait_for("Candidates")
        lead.keys("Escape")
        lead.wait_for("Progress")
    labels = _labels()
    assert [(name, mistake) for name, mistake, _session in labels] == [
        ("alice", 0), ("alice", 0), ("bob", 0), ("bob", 1)]


def test_a_wrong_password_and_a_forged_cookie_get_nothing(tmp_path: Path, team,
                                                          browser) -> None:
    data, users = team
    with serving(tmp_path, [data], users) as served:
        context = browser.new_context()
        tab = Tab(context)
        tab.sign_in(served.url, "alice", "not her password")
        tab.page.wait_for_selector("text=Wrong name or password")
        assert tab.page.url.endswith("/login") and tab.sockets == 0
        forged = browser.new_context()
        forged.add_cookies([{"name": "bbm_session", "value": "made-up-token",
                             "url": served.url}])
        page = Tab(forged)
        page.page.goto(f"{served.url}/")
        assert page.page.url.endswith("/login")
        opened = page.page.evaluate("""url => new Promise(done => {
            const socket = new WebSocket(url);
            socket.onopen = () => done("open");
            socket.onerror = () => done("refused");
        })""", served.url.replace("http", "ws") + "/ws")
        assert opened == "refused" and not page.frames
    assert _labels() == []


def test_a_small_window_gets_the_whole_app(tmp_path: Path, team, browser) -> None:
    """A window of about 80x24 cells: the app is laid out to the size the page measures (sent
    as the page sends it) and its footer's keys are drawn."""
    import json

    data, users = team
    with serving(tmp_path, [data], users) as served:
        tab = Tab(browser.new_context(viewport={"width": 800, "height": 500}))
        tab.sign_in(served.url, "alice")
        tab.ready()
        tab.wait_for("Judge Thought 1", fresh=False)
        tab.wait_for("c correct", fresh=False)
        sizes = [json.loads(message)[1] for message in tab.sent
                 if message.startswith('["resize"')]
        assert sizes, tab.sent
        width, height = sizes[-1]["width"], sizes[-1]["height"]
        assert 78 <= width <= 90 and 22 <= height <= 28, sizes[-1]
        tab.keys("x", "Enter")
        tab.wait_for("1 / 6 done")
