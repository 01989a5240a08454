"""Processes to kill, and what the kill and two-process tests share.

`python -m tests.kill_targets` (from the project root) is a *fork server*: it imports bbm-tui,
litellm (3-5 s and ~175 MB here), the app's modules and the bundled dataset once, then forks a
child per request that runs the real command line, `bbm_tui.cli.main(argv)`, in its own session
(`setsid`), with its own environment (BBM_TUI_HOME, the replay pace, ...), and its stdin/stdout/
stderr on a pseudo-terminal or on files. Only the import is shared: every child opens the store
itself, builds its own event loop and, for the app, its own Textual driver on its own terminal.
That makes a child cheap to start (milliseconds instead of seconds), so a test can kill twenty of
them at random moments and still finish in a minute. The tests also kill a few cold
`python -m bbm_tui` processes, which import everything themselves, to show the two agree.

The protocol is one JSON object a line on the server's stdin and stdout:
  {"op": "spawn", "argv": [...], "env": {...}, "tty": "/dev/pts/N" | null,
   "stdout": PATH | null, "stderr": PATH | null}   ->  {"pid": N}
  {"op": "poll", "pid": N}                          ->  {"code": None | exit code (-9: SIGKILL)}
  {"op": "exit"}

Also here: a pseudo-terminal that keeps reading what the app draws (`Terminal`), and read-only
looks at a store that another process is writing (`snapshot`, `committed_steps`).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pty
import re
import select
import signal
import sqlite3
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COLUMNS, ROWS = 120, 40


# ---------------------------------------------------------------------------- the server


def _serve() -> None:
    # The protocol gets its own descriptors; anything a library prints goes to stderr.
    commands = os.fdopen(os.dup(0), "r")
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.path.insert(0, str(ROOT))

    from bbm_tui import cli  # noqa: F401  (imported for the children)
    from bbm_tui.core import llm
    from bbm_tui.core.dataset import all_bundled
    from bbm_tui.core.llm.offline import replay

    llm.warm_up()
    all_bundled()
    replay.engine()._question_index()
    import bbm_tui.ui.app
    import bbm_tui.ui.screens.trace  # noqa: F401

    replies.write(json.dumps({"ready": os.getpid()}) + "\n")
    replies.flush()
    for line in commands:
        request = json.loads(line)
        if request["op"] == "spawn":
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                commands.close()
                replies.close()
                _child(request)  # never returns
            replies.write(json.dumps({"pid": pid}) + "\n")
        elif request["op"] == "poll":
            done, status = os.waitpid(request["pid"], os.WNOHANG)
            code = os.waitstatus_to_exitcode(status) if done else None
            replies.write(json.dumps({"code": code}) + "\n")
        else:
            break
        replies.flush()


def _child(request: dict) -> None:
    code = 70
    try:
        os.setsid()
        for key, value in request["env"].items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        tty = request.get("tty")
        if tty:
            # Opened by a session leader, the terminal becomes the controlling one.
            fd = os.open(tty, os.O_RDWR)
            for target in (0, 1, 2):
                os.dup2(fd, target)
            os.close(fd)
        else:
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.close(null)
            for target, key in ((1, "stdout"), (2, "stderr")):
                path = request.get(key) or os.devnull
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
                os.dup2(fd, target)
                os.close(fd)
        # Fresh text streams on the new descriptors, as a new interpreter would have.
        sys.stdin = sys.__stdin__ = open(0, closefd=False)  # noqa: SIM115
        sys.stdout = sys.__stdout__ = open(1, "w", closefd=False)  # noqa: SIM115
        sys.stderr = sys.__stderr__ = open(2, "w", closefd=False, errors="backslashreplace")  # noqa: SIM115
        from bbm_tui.cli import main

        code = main(request["argv"])
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else 1
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


# ---------------------------------------------------------------------------- the client


class ForkServer:
    """The test's side of the fork server. Calls are serialised, so threads may share it."""

    def __init__(self) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-m", "tests.kill_targets"], cwd=ROOT,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True, bufsize=1,
        )
        self._lock = threading.Lock()
        ready = self._process.stdout.readline()
        if not ready:
            raise RuntimeError("the fork server did not start")
        self.pid = json.loads(ready)["ready"]

    def _ask(self, request: dict) -> dict:
        with self._lock:
            self._process.stdin.write(json.dumps(request) + "\n")
            self._process.stdin.flush()
            reply = self._process.stdout.readline()
        if not reply:
            raise RuntimeError("the fork server has gone")
        return json.loads(reply)

    def spawn(self, argv: list[str], env: dict[str, str | None], *, tty: str | None = None,
              stdout: Path | None = None, stderr: Path | None = None) -> Child:
        if tty:  # the terminal's own size, not one left in the environment
            env = {"COLUMNS": None, "LINES": None, **env}
        reply = self._ask({"op": "spawn", "argv": argv, "env": env, "tty": tty,
                           "stdout": str(stdout) if stdout else None,
                           "stderr": str(stderr) if stderr else None})
        return Child(self, reply["pid"], stderr)

    def poll(self, pid: int) -> int | None:
        return self._ask({"op": "poll", "pid": pid})["code"]

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._process.stdin.write(json.dumps({"op": "exit"}) + "\n")
            self._process.stdin.close()
        try:
            self._process.wait(10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()


@dataclass
class Child:
    """A forked `bbm_tui.cli.main(argv)`."""

    server: ForkServer
    pid: int
    stderr_path: Path | None = None
    code: int | None = None

    def poll(self) -> int | None:
        if self.code is None:
            self.code = self.server.poll(self.pid)
        return self.code

    def wait(self, timeout: float) -> int:
        deadline = time.monotonic() + timeout
        while self.poll() is None:
            if time.monotonic() > deadline:
                self.kill()
                raise AssertionError(f"process {self.pid} did not finish in {timeout} s")
            time.sleep(0.02)
        return self.code  # type: ignore[return-value]

    def kill(self) -> int:
        """SIGKILL, and the exit code (-9, or how it ended if it was over already)."""
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
        return self.wait(30)

    @property
    def stderr(self) -> str:
        if self.stderr_path is None or not self.stderr_path.exists():
            return ""
        return self.stderr_path.read_text(errors="replace")


class ColdChild:
    """The same interface over a fresh `python -m bbm_tui ...` (it imports everything)."""

    def __init__(self, argv: list[str], env: dict[str, str | None], *, tty_fd: int | None = None,
                 stderr: Path | None = None) -> None:
        environment = {**os.environ}
        if tty_fd is not None:  # the terminal's own size, not one left in the environment
            env = {"COLUMNS": None, "LINES": None, **env}
        for key, value in env.items():
            if value is None:
                environment.pop(key, None)
            else:
                environment[key] = value
        self.stderr_path = stderr
        err = open(stderr, "ab") if stderr else subprocess.DEVNULL  # noqa: SIM115
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "bbm_tui", *argv], cwd=ROOT, env=environment,
                stdin=tty_fd if tty_fd is not None else subprocess.DEVNULL,
                stdout=tty_fd if tty_fd is not None else subprocess.DEVNULL,
                stderr=tty_fd if tty_fd is not None else err, start_new_session=True,
            )
        finally:
            if stderr:
                err.close()
        self.pid = self._process.pid

    def poll(self) -> int | None:
        return self._process.poll()

    def wait(self, timeout: float) -> int:
        try:
            return self._process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"process {self.pid} did not finish in {timeout} s") from None

    def kill(self) -> int:
        if self._process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
        return self._process.wait(30)

    @property
    def stderr(self) -> str:
        if self.stderr_path is None or not self.stderr_path.exists():
            return ""
        return self.stderr_path.read_text(errors="replace")


# ---------------------------------------------------------------------------- a terminal


class Terminal:
    """A pseudo-terminal of a fixed size whose output a thread keeps reading (an app that
    cannot write blocks), with a way to wait for text to appear."""

    def __init__(self, columns: int = COLUMNS, rows: int = ROWS) -> None:
        self.master, self.slave = pty.openpty()
        fcntl.ioctl(self.slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        self.name = os.ttyname(self.slave)
        self._data = bytearray()
        self._lock = threading.Lock()
        self._closed = False
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while not self._closed:
            try:
                ready, _, _ = select.select([self.master], [], [], 0.05)
                if not ready:
                    continue
                chunk = os.read(self.master, 65536)
            except OSError:  # EIO while no child holds the terminal: nothing to read yet
                time.sleep(0.02)
                continue
            if not chunk:
                time.sleep(0.02)
                continue
            with self._lock:
                self._data += chunk

    @property
    def output(self) -> bytes:
        with self._lock:
            return bytes(self._data)

    def text(self) -> str:
        return self.output.decode("utf-8", errors="replace")

    def mark(self) -> int:
        with self._lock:
            return len(self._data)

    def wait_for(self, needle: str | bytes, *, since: int = 0, timeout: float = 60,
                 alive: Callable[[], bool] | None = None) -> None:
        wanted = needle.encode() if isinstance(needle, str) else needle
        deadline = time.monotonic() + timeout
        while wanted not in self.output[since:]:
            if alive is not None and not alive():
                raise AssertionError(f"the app ended before showing {needle!r}; it showed: "
                                     f"{self.text()[-3000:]!r}")
            if time.monotonic() > deadline:
                raise AssertionError(f"the app never showed {needle!r}; it showed: "
                                     f"{self.text()[-3000:]!r}")
            time.sleep(0.02)

    def send(self, data: str | bytes) -> None:
        os.write(self.master, data.encode() if isinstance(data, str) else data)

    def close(self) -> None:
        self._closed = True
        self._thread.join(5)
        with contextlib.suppress(OSError):
            os.close(self.slave)
        with contextlib.suppress(OSError):
            os.close(self.master)


_CONTROL_SEQUENCE = re.compile(
    rb"\x1b(\[[0-9;?<>=$]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[()][0-9A-Za-z]|.)"
)


def screen_text(output: bytes) -> str:
    """What a terminal would show, roughly: the output without its control sequences (so
    words drawn on one line read as one string)."""
    return _CONTROL_SEQUENCE.sub(b"", output).decode("utf-8", errors="replace")


# What the app shows when something went wrong (its notification titles, the store's and the
# command line's messages).
SCREEN_ERRORS = re.compile(
    r"(Generating|Saving the label|Starting the session|Something|Thought \d+|Opening the "
    r"session|Listing the sessions) failed|Cannot open|locked|Traceback|internal error"
)


def errors_on_screen(text: str) -> list[str]:
    return SCREEN_ERRORS.findall(text)


# ---------------------------------------------------------------------------- the store


@dataclass(frozen=True)
class SavedStep:
    id: int
    session_id: int
    parent_id: int | None
    number: int
    text: str


def _read_only(db: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)


def snapshot(db: Path) -> dict[int, SavedStep]:
    """Every committed step, read without taking a lock a writer needs ({} before the store
    has its tables)."""
    if not db.exists():
        return {}
    try:
        connection = _read_only(db)
        try:
            rows = connection.execute(
                "SELECT id, session_id, parent_id, number, text FROM steps").fetchall()
        finally:
            connection.close()
    except sqlite3.Error:
        return {}
    return {row[0]: SavedStep(*row) for row in rows}


def committed_steps(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        connection = _read_only(db)
        try:
            return connection.execute("SELECT COUNT(*) FROM steps").fetchone()[0]
        finally:
            connection.close()
    except sqlite3.Error:
        return 0


def query(db: Path, sql: str, parameters: tuple = ()) -> list[tuple]:
    connection = sqlite3.connect(db, timeout=30)
    try:
        return connection.execute(sql, parameters).fetchall()
    finally:
        connection.close()


def integrity(db: Path) -> str:
    """PRAGMA integrity_check on a plain connection, before bbm-tui opens the file."""
    return "; ".join(row[0] for row in query(db, "PRAGMA integrity_check"))


def branch_texts(db: Path, session_id: int) -> list[SavedStep]:
    """The session's branch on show (root to head), read with plain SQL."""
    head = query(db, "SELECT head_step_id FROM sessions WHERE id = ?", (session_id,))[0][0]
    steps = {step.id: step for step in snapshot(db).values() if step.session_id == session_id}
    path: list[SavedStep] = []
    while head is not None:
        path.append(steps[head])
        head = steps[head].parent_id
    return path[::-1]


def check_sessions(db: Path, expected: dict[str, list[str]], *, complete: bool) -> dict:
    """Every session's branch is a prefix of its question's recorded trace (the whole trace
    when `complete`), numbered 1..n with no step twice, every step on the branch (nothing
    stored beside it), each with its one call. Returns {input: [step ids]}."""
    sessions = query(db, "SELECT id, input FROM sessions ORDER BY id")
    found: dict[str, list[int]] = {}
    for session_id, input_text in sessions:
        assert input_text in expected, f"session {session_id} is not one of the questions"
        assert input_text not in found, f"two sessions for one question: {input_text[:60]!r}"
        path = branch_texts(db, session_id)
        recorded = expected[input_text]
        texts = [step.text for step in path]
        assert texts == recorded[: len(texts)], f"session {session_id} left the recorded trace"
        if complete:
            assert texts == recorded, f"session {session_id} is not finished"
        assert [step.number for step in path] == list(range(1, len(path) + 1))
        (count,) = query(db, "SELECT COUNT(*) FROM steps WHERE session_id = ?", (session_id,))[0]
        assert count == len(path), f"session {session_id} has {count - len(path)} stray steps"
        (calls,) = query(db, "SELECT COUNT(*) FROM calls WHERE session_id = ? AND "
                             "purpose = 'step'", (session_id,))[0]
        assert calls == len(path), f"session {session_id}: {calls} calls for {len(path)} steps"
        found[input_text] = [step.id for step in path]
    return found


if __name__ == "__main__":
    _serve()
