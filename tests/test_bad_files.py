"""Bad files through the real command line (its `main`, run as `python -m bbm_tui ...` would
run it: tests/cli_helpers.py): malformed, truncated, mis-encoded and empty JSONL inputs; a
session store that is not SQLite, not ours, damaged or from a newer bbm-tui; a broken config
file. Each gets one clear line naming the file (and the line where there is one), a non-zero
exit code, no traceback, and the file left byte for byte as it was (its mtime too). The app
command (`bbm-tui` alone) is run with stdin not a terminal and under a pseudo-terminal (a child
process): it exits with the message, never hangs.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import signal
import sqlite3
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from bbm_tui.core.dataset import bundled_rows
from bbm_tui.core.store import DATABASE_NAME
from tests.cli_helpers import Snapshot, assert_refused, run_all

ROOT = Path(__file__).resolve().parents[1]
TASK = "multistep_arithmetic"
TIMEOUT_S = 30


def run_in_pty(*args: str, env: dict[str, str] | None = None, answer: tuple[str, bytes] | None
               = None, timeout_s: float = TIMEOUT_S) -> tuple[int, str]:
    """Run the command under a pseudo-terminal (120x40), as a person's shell would; when the
    screen shows answer[0], type answer[1]. Returns the exit code and everything written."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    process = subprocess.Popen(
        [sys.executable, "-m", "bbm_tui", *args], cwd=ROOT, stdin=slave, stdout=slave,
        stderr=slave, env={**os.environ, "TERM": "xterm-256color", **(env or {})},
        start_new_session=True,
    )
    os.close(slave)
    output = b""
    answered = answer is None
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            if time.monotonic() > deadline:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                raise AssertionError(f"bbm-tui {' '.join(args)} hung under a terminal; it "
                                     f"showed: {output.decode(errors='replace')[-2000:]!r}")
            ready, _, _ = select.select([master], [], [], 0.05)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the child has gone and closed the terminal
                    chunk = b""
                output += chunk
                if not chunk and process.poll() is not None:
                    break
            elif process.poll() is not None:
                break
            if not answered and answer[0].encode() in output:
                os.write(master, answer[1])
                answered = True
    finally:
        os.close(master)
    return process.wait(), output.decode(errors="replace")


def good_lines(n: int = 3) -> list[bytes]:
    return [row.to_line().encode() for row in bundled_rows(TASK)[:n]]


# ------------------------------------------------------------------------------- input files

def malformed() -> tuple[bytes, str]:
    lines = good_lines()
    lines[1] = lines[1].replace(b'"steps": [', b'"steps": [[', 1)
    return b"\n".join(lines) + b"\n", ":2: malformed JSON"


def truncated() -> tuple[bytes, str]:
    lines = good_lines()
    return b"\n".join(lines)[:-40], ":3: malformed JSON"


def latin1() -> tuple[bytes, str]:
    lines = good_lines()
    lines[1] = lines[1].replace(b'"target": "', b'"target": "caf\xe9 ', 1)
    return b"\n".join(lines) + b"\n", ":2: not UTF-8 text"


def utf16() -> tuple[bytes, str]:
    text = "\n".join(line.decode() for line in good_lines()) + "\n"
    return text.encode("utf-16"), ":1: is UTF-16 text"


def empty() -> tuple[bytes, str]:
    return b"", ": holds no traces"


def blank() -> tuple[bytes, str]:
    return b"\n  \n\n", ": holds no traces"


def deeply_nested() -> tuple[bytes, str]:
    """A line of 100,000 "[": a RecursionError ("internal error ... please report it")."""
    lines = good_lines()
    lines[1] = b"[" * 100_000
    return b"\n".join(lines) + b"\n", ":2: nested too deeply to read"


def not_a_number() -> tuple[bytes, str]:
    lines = good_lines()
    lines[2] = lines[2][:-1] + b', "score": NaN}'
    return b"\n".join(lines) + b"\n", ":3: NaN is not a JSON number"


INPUTS = {"malformed": malformed, "truncated": truncated, "latin-1": latin1,
          "utf-16 with BOM": utf16, "empty": empty, "blank lines only": blank,
          "deeply nested": deeply_nested, "NaN": not_a_number}


def input_commands(path: Path, tmp_path: Path) -> list[tuple[str, ...]]:
    return [
        ("stats", str(path)),
        ("run", "--input", str(path), "--out", str(tmp_path / "run-out.jsonl"),
         "--no-progress"),
        ("find", "--method", "direct-trace", "--input", str(path), "--out",
         str(tmp_path / "find-out.jsonl"), "--no-progress"),
        ("import", str(path)),
    ]


@pytest.mark.nonstandard_json_inputs
@pytest.mark.parametrize("name", list(INPUTS))
def test_bad_input_files(name: str, tmp_path: Path, isolated_home: Path) -> None:
    content, where = INPUTS[name]()
    path = tmp_path / f"{TASK}.jsonl"
    path.write_bytes(content)
    os.utime(path, ns=(1_600_000_000_000_000_000, 1_600_000_000_000_000_000))
    before = Snapshot.of(path)
    for result in run_all(input_commands(path, tmp_path)):
        assert_refused(result, f"bbm-tui: {path}{where}")
    assert Snapshot.of(path) == before
    # Nothing was made from it: no output file, no session.
    assert not (tmp_path / "run-out.jsonl").exists()
    assert not (tmp_path / "find-out.jsonl").exists()
    assert not (isolated_home / DATABASE_NAME).exists()


def test_a_utf8_byte_order_mark_is_read_past(tmp_path: Path) -> None:
    """What Windows editors write: read as the UTF-8 it is, not refused."""
    path = tmp_path / f"{TASK}.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + b"\n".join(good_lines()) + b"\n")
    [result] = run_all([("stats", "--json", str(path))])
    assert result.code == 0, result
    assert json.loads(result.out)["overall"]["traces"] == 3


def test_an_out_file_that_cannot_be_used(tmp_path: Path) -> None:
    """--out naming a folder, or a file in a folder that does not exist (an internal error
    before)."""
    folder = tmp_path / "results"
    folder.mkdir()
    (folder / "keep.txt").write_text("mine")
    before = Snapshot.of(folder / "keep.txt")
    missing = tmp_path / "no-such-folder" / "out.jsonl"
    source = tmp_path / f"{TASK}.jsonl"
    source.write_bytes(b"\n".join(good_lines(1)) + b"\n")
    commands = [(*command, "--out", str(out), "--no-progress")
                for out in (folder, missing)
                for command in (("run", "--input", str(source)),
                                ("find", "--method", "direct-trace", "--input", str(source)))]
    results = run_all(commands)
    for result, where in zip(results, [folder, folder, missing, missing], strict=True):
        reason = "Is a directory" if where == folder else "No such file or directory"
        assert_refused(result, f"bbm-tui: {where}: cannot use it: {reason}")
    assert Snapshot.of(folder / "keep.txt") == before
    assert [p.name for p in folder.iterdir()] == ["keep.txt"]
    assert not missing.parent.exists()


def test_an_out_file_with_a_deeply_nested_line_is_not_ours(tmp_path: Path) -> None:
    """OUT's lines are read to resume: one nested 100,000 deep is a line that is not ours,
    named, the file left as it was."""
    source = tmp_path / f"{TASK}.jsonl"
    source.write_bytes(b"\n".join(good_lines(1)) + b"\n")
    out = tmp_path / "out.jsonl"
    out.write_bytes(b"[" * 100_000 + b"\n")
    before = Snapshot.of(out)
    [result] = run_all([("run", "--input", str(source), "--out", str(out), "--no-progress")])
    assert_refused(result, f"bbm-tui: {out}:1: nested too deeply to read: not a file of")
    assert Snapshot.of(out) == before


# ------------------------------------------------------------------------------- the store

def store_text(path: Path) -> str:
    path.write_text("these are my notes, not a database\n")
    return "is not a SQLite file"


def store_random(path: Path) -> str:
    path.write_bytes(bytes((i * 193 + 71) % 256 for i in range(8192)))
    return "is not a SQLite file"


def store_newer(path: Path) -> str:
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE sessions (id INTEGER PRIMARY KEY)")
        connection.execute("PRAGMA user_version = 99")
    connection.close()
    return "written by a newer bbm-tui (schema version 99"


def store_foreign(path: Path) -> str:
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE recipes (name TEXT)")
        connection.execute("INSERT INTO recipes VALUES ('bread')")
    connection.close()
    return "is not a bbm-tui session store"


def store_damaged(path: Path) -> str:
    store_foreign(path)
    data = bytearray(path.read_bytes())
    data[100:] = b"\xa5" * (len(data) - 100)  # the header survives, the pages do not
    path.write_bytes(bytes(data))
    return "not a usable bbm-tui session store"


STORES = {"text": store_text, "random bytes": store_random, "newer schema": store_newer,
          "another program's SQLite": store_foreign, "damaged SQLite": store_damaged}
# What the app can tell from the file's first 100 bytes, before it starts.
SEEN_BEFORE_THE_APP = {"text", "random bytes", "newer schema"}


def sidecars(path: Path) -> list[Path]:
    return [p for p in path.parent.iterdir() if p != path]


@pytest.mark.parametrize("name", list(STORES))
def test_a_bad_store(name: str, tmp_path: Path, isolated_home: Path) -> None:
    isolated_home.mkdir(parents=True)
    path = isolated_home / DATABASE_NAME
    message = STORES[name](path)
    before = Snapshot.of(path)
    source = tmp_path / f"{TASK}.jsonl"
    source.write_bytes(b"\n".join(good_lines()) + b"\n")
    export_out = tmp_path / "export.jsonl"
    commands = [
        ("sessions",),
        ("export", "--out", str(export_out)),
        ("import", str(source)),
        ("run", "--input", str(source), "--out", str(tmp_path / "o.jsonl"), "--no-progress"),
    ]
    if name in SEEN_BEFORE_THE_APP:
        commands.append(())  # the app, stdin not a terminal
    results = run_all(commands)
    for result in results:
        assert_refused(result, f"bbm-tui: {path}: ", message)
    # Commands that do not need the store are not stopped by it.
    [stats] = run_all([("stats", str(source))])
    assert stats.code == 0 and "Traceback" not in stats.err
    assert Snapshot.of(path) == before
    assert sidecars(path) == []
    assert not export_out.exists()


@pytest.mark.parametrize("name", ["text", "newer schema"])
def test_the_app_under_a_terminal_says_why_and_exits(name: str, isolated_home: Path) -> None:
    isolated_home.mkdir(parents=True)
    path = isolated_home / DATABASE_NAME
    message = STORES[name](path)
    before = Snapshot.of(path)
    code, output = run_in_pty(timeout_s=15)
    assert code == 1
    assert output.startswith(f"bbm-tui: {path}: ") and message in output, output
    assert "Traceback" not in output and "\x1b[?1049h" not in output  # no screen was drawn
    assert Snapshot.of(path) == before and sidecars(path) == []


@pytest.mark.parametrize("name", ["another program's SQLite", "damaged SQLite"])
def test_the_app_shows_what_only_opening_the_store_finds_then_quits(
    name: str, isolated_home: Path
) -> None:
    """The app's own dialog (it opens the store in a thread once it is up); q leaves it with
    exit code 1."""
    isolated_home.mkdir(parents=True)
    path = isolated_home / DATABASE_NAME
    STORES[name](path)
    before = Snapshot.of(path)
    code, output = run_in_pty(answer=("The session store cannot be opened", b"q"))
    assert code == 1
    assert "The session store cannot be opened" in output
    assert "Traceback" not in output
    assert Snapshot.of(path) == before and sidecars(path) == []


def test_the_app_without_a_terminal_says_so(isolated_home: Path) -> None:
    [result] = run_all([()])
    assert_refused(result, "the app needs a terminal")
    assert result.code == 2


def test_a_folder_in_place_of_the_store(isolated_home: Path) -> None:
    (isolated_home / DATABASE_NAME).mkdir(parents=True)
    for result in run_all([("sessions",), ("export", "--out", "x.jsonl"), ()]):
        assert_refused(result, f"{isolated_home / DATABASE_NAME}: is a folder")
    assert list((isolated_home / DATABASE_NAME).iterdir()) == []


# ------------------------------------------------------------------------------- the config

PLANTED = "sk-test-PLANTED-c0nf1g-7f3a9e"
CONFIGS = {
    "invalid TOML": (b'model = "replay/bbm"\nmode = chat\n',
                     ": line 2, column 8: invalid TOML"),
    "step_limit a string": (b'model = "replay/bbm"\nstep_limit = "many"\n',
                            ": line 2: 'step_limit' must be a whole number"),
    "model a number": (b"model = 3\n", ": line 1: 'model' must be a string"),
    "unknown setting": (b'modle = "openai/gpt-4o"\n', ": line 1: unknown setting 'modle'"),
    "an api_key": (f'model = "openai/gpt-4o"\napi_key = "{PLANTED}"\n'.encode(),
                   ": line 2: 'api_key': API keys do not belong in the config file"),
    "not UTF-8": (b'model = "caf\xe9"\n', ": the config file is not UTF-8 text"),
    # tomllib recurses on each level: a RecursionError, "internal error ... please report it".
    "5,000 nested inline tables": (b'model = "replay/bbm"\nx = ' + b"{a = " * 5000 + b"1" +
                                   b"}" * 5000 + b"\n",
                                   ": line 2: nested too deeply to read (invalid TOML)"),
    "100,000 nested arrays": (b"x = " + b"[" * 100_000 + b"\n",
                              ": line 1: nested too deeply to read (invalid TOML)"),
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_a_broken_config(name: str, tmp_path: Path, isolated_home: Path) -> None:
    content, where = CONFIGS[name]
    path = Path(os.environ["BBM_TUI_CONFIG"])
    path.write_bytes(content)
    before = Snapshot.of(path)
    source = tmp_path / f"{TASK}.jsonl"
    source.write_bytes(b"\n".join(good_lines()) + b"\n")
    results = run_all([
        ("run", "--input", str(source), "--out", str(tmp_path / "o.jsonl"), "--no-progress"),
        ("find", "--method", "direct-trace", "--input", str(source), "--out",
         str(tmp_path / "p.jsonl"), "--no-progress"),
        (),  # the app, stdin not a terminal
    ])
    for result in results:
        assert_refused(result, f"bbm-tui: {path}{where}")
        assert result.code == 2
        assert PLANTED not in result.err
    code, output = run_in_pty(timeout_s=15)
    assert code == 2 and output.startswith(f"bbm-tui: {path}{where}"), output
    assert PLANTED not in output
    # Commands that read no config still work; nothing wrote to the file.
    [sessions] = run_all([("sessions",)])
    assert sessions.code == 0 and sessions.err == ""
    assert Snapshot.of(path) == before
    assert not (tmp_path / "o.jsonl").exists() and not (tmp_path / "p.jsonl").exists()


@pytest.mark.parametrize("below", [False, True])
def test_a_file_in_place_of_the_data_folder(tmp_path: Path, below: bool) -> None:
    """BBM_TUI_HOME naming a file (or a folder under one): "cannot create the session store
    (...: File exists)". Now every command, and the app before it starts, says the file is
    not a folder; the file is left as it was."""
    blocker = tmp_path / "notes.txt"
    blocker.write_text("mine\n")
    before = Snapshot.of(blocker)
    home = blocker / "bbm" if below else blocker
    source = tmp_path / f"{TASK}.jsonl"
    source.write_bytes(b"\n".join(good_lines(1)) + b"\n")
    results = run_all([("sessions",), ("run", "--input", str(source), "--out",
                                       str(tmp_path / "o.jsonl"), "--no-progress"),
                       ("import", str(source)), ()], env={"BBM_TUI_HOME": str(home)})
    for result in results:
        assert_refused(result, f"bbm-tui: {blocker}: is a file, not a folder, so the session "
                               "store cannot be kept in it; set BBM_TUI_HOME to a folder")
    code, output = run_in_pty(env={"BBM_TUI_HOME": str(home)}, timeout_s=15)
    assert code == 1 and output.startswith(f"bbm-tui: {blocker}: is a file, not a folder"), (
        output)
    assert Snapshot.of(blocker) == before
