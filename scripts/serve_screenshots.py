#!/usr/bin/env python3
"""PNG screenshots of `bbm-tui serve` in a real browser into screenshots/ (run with the
project's venv; needs the system's Chromium, Debian's `chromium`):

    .venv/bin/python scripts/serve_screenshots.py [--out screenshots]

A real server over six word-sorting traces in a throwaway home, with three users; headless
Chromium (through Playwright, the system's browser) signs in and labels, as a person would:
the sign-in page, an annotator's queue mid-trace, and the lead's agreement screen.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.serve_helpers: the server and the users

VIEWPORT = {"width": 1200, "height": 720}


def main() -> int:
    arguments = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arguments.add_argument("--out", type=Path, default=ROOT / "screenshots")
    options = arguments.parse_args()
    chromium = os.environ.get("BBM_TUI_CHROMIUM") or shutil.which("chromium")
    if chromium is None:
        print("serve_screenshots: no Chromium (apt-get install chromium)", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="bbm-serve-shots-") as folder:
        os.environ["BBM_TUI_HOME"] = str(Path(folder) / "home")
        os.environ["BBM_TUI_CONFIG"] = str(Path(folder) / "config.toml")
        from playwright.sync_api import sync_playwright

        from tests.serve_helpers import PASSWORDS, add_users, serving, word_sorting_file

        data = word_sorting_file(Path(folder))
        users = Path(folder) / "users.json"
        add_users(users)
        with serving(Path(folder), [data], users) as served, sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium,
                                                 args=["--no-sandbox"])

            def signed_in(name: str, keys: tuple[str, ...] = ()):
                page = browser.new_context(viewport=VIEWPORT).new_page()
                page.goto(f"{served.url}/")
                page.fill("#name", name)
                page.fill("#password", PASSWORDS[name])
                page.click("button[type=submit]")
                page.wait_for_selector("body.-first-byte", state="attached", timeout=60_000)
                page.click("#terminal")
                page.wait_for_timeout(1500)
                for key in keys:
                    page.keyboard.press(key)
                    page.wait_for_timeout(400)
                page.wait_for_timeout(1500)
                return page

            login = browser.new_context(viewport=VIEWPORT).new_page()
            login.goto(f"{served.url}/login")
            login.fill("#name", "alice")
            login.wait_for_timeout(500)
            login.screenshot(path=str(options.out / "serve-sign-in.png"))
            signed_in("bob", ("x", "Enter", "c", "x", "Enter"))
            alice = signed_in("alice", ("x", "Enter", "c", "c"))
            alice.screenshot(path=str(options.out / "serve-queue.png"))
            lead = signed_in("lee")
            time.sleep(1)
            lead.screenshot(path=str(options.out / "serve-lead.png"))
            browser.close()
    for name in ("serve-sign-in", "serve-queue", "serve-lead"):
        print(options.out / f"{name}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
