"""A real `bbm-tui serve` for the tests (and bench/serve.py): a process on 127.0.0.1 over a
small word-sorting file, with users added through `bbm-tui users add`, and a client that
speaks the page's WebSocket protocol (textual-serve's: ["stdin", keys], ["resize", size])
and reads the app's frames as text."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from bbm_tui.core.dataset import bundled_rows

PASSWORDS = {"alice": "alice-pw-1", "bob": "bob-pw-2", "lee": "lee-pw-3"}
ROLES = {"alice": "annotator", "bob": "annotator", "lee": "lead"}
# What a frame's bytes hold besides text: escape sequences (CSI, OSC, the rest).
_ESCAPES = re.compile(rb"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b.")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def word_sorting_file(folder: Path, count: int = 6) -> Path:
    path = folder / "word_sorting.jsonl"
    path.write_text("".join(json.dumps(row.to_json()) + "\n"
                            for row in bundled_rows("word_sorting")[:count]))
    return path


def add_users(users: Path, names: tuple[str, ...] = ("alice", "bob", "lee")) -> None:
    for name in names:
        subprocess.run([sys.executable, "-m", "bbm_tui", "users", "add", name, "--role",
                        ROLES[name], "--users", str(users)],
                       input=PASSWORDS[name] + "\n", text=True, check=True,
                       capture_output=True)


@dataclass
class Served:
    url: str
    process: subprocess.Popen
    log: Path

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@contextmanager
def serving(folder: Path, files: list[Path], users: Path,
            extra: tuple[str, ...] = ()) -> Iterator[Served]:
    """`bbm-tui serve` on a free port until the block ends (then stopped as Ctrl+C does)."""
    port = free_port()
    log = folder / f"serve-{port}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "bbm_tui", "serve", "--annotate", *map(str, files),
             "--users", str(users), "--port", str(port), *extra],
            stdout=out, stderr=subprocess.STDOUT, env=dict(os.environ))
    served = Served(f"http://127.0.0.1:{port}", process, log)
    try:
        _wait_for_port(port, process, log)
        yield served
    finally:
        served.stop()


def _wait_for_port(port: int, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"bbm-tui serve ended: {log.read_text()}")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"bbm-tui serve did not listen: {log.read_text()}")


def screen_text(data: bytes) -> str:
    """A frame's text, escape sequences left out."""
    return _ESCAPES.sub(b"", data).decode("utf-8", "replace")


class AppClient:
    """One browser's app, driven as the page drives it: keys and sizes over the WebSocket,
    frames back as bytes."""

    def __init__(self, http: aiohttp.ClientSession, socket: aiohttp.ClientWebSocketResponse
                 ) -> None:
        self.http = http
        self.socket = socket
        self.seen = b""

    @classmethod
    async def open(cls, url: str, name: str, password: str | None = None,
                   width: int = 100, height: int = 30) -> AppClient:
        http = aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))
        signed = await http.post(f"{url}/login", allow_redirects=False,
                                 data={"name": name, "password": password or PASSWORDS[name]})
        if signed.status != 303:
            await http.close()
            raise PermissionError(f"sign-in refused: {signed.status}")
        socket = await http.ws_connect(f"{url.replace('http', 'ws', 1)}/ws"
                                       f"?width={width}&height={height}")
        await socket.send_str(json.dumps(["resize", {"width": width, "height": height}]))
        return cls(http, socket)

    async def press(self, key: str) -> None:
        await self.socket.send_str(json.dumps(["stdin", key]))

    async def frame(self, timeout: float) -> bytes | None:
        """The next frame, or None when none came within `timeout` seconds."""
        try:
            message = await asyncio.wait_for(self.socket.receive(), timeout)
        except TimeoutError:
            return None
        if message.type == aiohttp.WSMsgType.BINARY:
            self.seen += message.data
            return message.data
        if message.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED,
                            aiohttp.WSMsgType.CLOSING, aiohttp.WSMsgType.ERROR):
            raise ConnectionError("the app's WebSocket closed")
        return b""

    async def wait_for(self, text: str, timeout: float = 60.0, *, fresh: bool = True) -> None:
        """Read frames until `text` has been drawn (`fresh`: by a frame read from now on)."""
        start = len(self.seen) if fresh else 0
        deadline = time.monotonic() + timeout
        while text not in screen_text(self.seen[start:]):
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{text!r} never drawn; last: "
                                   f"{screen_text(self.seen[-2000:])!r}")
            await self.frame(left)

    async def settle(self, quiet: float = 1.0, timeout: float = 30.0) -> None:
        """Read frames until none comes for `quiet` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if await self.frame(quiet) is None:
                return

    async def close(self) -> None:
        await self.socket.close()
        await self.http.close()
