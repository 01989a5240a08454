"""Running the real command line, and checking what it refused.

`run_all` calls the command line's `main` in this process, one command after another, as
`python -m bbm_tui` would run it (stdin not a terminal, stdout and stderr captured, the working
folder the project's, the environment given): a child process pays Python's start and the
import of litellm (about 4 s of CPU) for each command. `launch` starts a real child process,
for the tests whose subject is one (a kill, a signal, two writers at once, a terminal)."""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import os
import subprocess
import sys
import traceback
import warnings
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from bbm_tui.cli import main

ROOT = Path(__file__).resolve().parents[1]
# What a child process's default warning filters leave out (Python's own defaults): the
# others reach its stderr, so they reach the captured stderr here too.
SILENT_WARNINGS = (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning)


@dataclass
class Result:
    args: tuple[str, ...]
    code: int
    out: str
    err: str


def launch(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    """`python -m bbm_tui ARGS` in a child process, stdin not a terminal."""
    return subprocess.Popen(
        [sys.executable, "-m", "bbm_tui", *args], cwd=ROOT, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, **(env or {})},
    )


def run_all(commands: list[tuple[str, ...]], env: dict[str, str] | None = None) -> list[Result]:
    """Run the commands one after another in this process (see the module's docstring)."""
    return [run_here(args, env) for args in commands]


def run_here(args: tuple[str, ...], env: dict[str, str] | None = None) -> Result:
    """One command through `main`, as its own process would run it. From inside a running
    event loop (an async test) it runs in a thread of its own, as `main` starts its own loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return _run_main(args, env)
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(_run_main, args, env).result()


def _run_main(args: tuple[str, ...], env: dict[str, str] | None) -> Result:
    out, err = io.StringIO(), io.StringIO()
    with _as_a_process(out, err, env), warnings.catch_warnings(record=True) as caught:
        try:
            code = main(list(args))
        except SystemExit as stop:  # argparse's usage errors and --help
            code = _exit_code(stop, err)
        except Exception:  # what the interpreter prints for an uncaught exception
            traceback.print_exc(file=err)
            code = 1
    for warning in caught:
        if issubclass(warning.category, SILENT_WARNINGS):
            continue
        err.write(warnings.formatwarning(warning.message, warning.category, warning.filename,
                                         warning.lineno, warning.line))
    return Result(tuple(args), code, out.getvalue(), err.getvalue())


def _exit_code(stop: SystemExit, err: io.StringIO) -> int:
    if stop.code is None or isinstance(stop.code, int):
        return stop.code or 0
    print(stop.code, file=err)
    return 1


@contextlib.contextmanager
def _as_a_process(out: io.StringIO, err: io.StringIO,
                  env: dict[str, str] | None) -> Iterator[None]:
    """stdin empty and not a terminal, stdout and stderr (and every logging handler that
    writes to them) into the buffers, the working folder the project's, `env` added."""
    saved_streams = sys.stdin, sys.stdout, sys.stderr
    saved_env = {name: os.environ.get(name) for name in env or {}}
    saved_cwd = os.getcwd()
    handlers = _stream_handlers()
    saved_handler_streams = [handler.stream for handler in handlers]
    sys.stdin, sys.stdout, sys.stderr = io.StringIO(), out, err
    for handler in handlers:
        handler.setStream(out if handler.stream is saved_streams[1] else err)
    os.environ.update(env or {})
    os.chdir(ROOT)
    try:
        yield
    finally:
        os.chdir(saved_cwd)
        for name, value in saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        for handler, stream in zip(handlers, saved_handler_streams, strict=True):
            handler.setStream(stream)
        sys.stdin, sys.stdout, sys.stderr = saved_streams


def _stream_handlers() -> list[logging.StreamHandler]:
    """The handlers that write to a stream (not a file), on every logger there is."""
    loggers = [logging.getLogger(), *(logger for logger in logging.Logger.manager.loggerDict
                                      .values() if isinstance(logger, logging.Logger))]
    found = {id(handler): handler for logger in loggers for handler in logger.handlers
             if type(handler) is logging.StreamHandler}
    return list(found.values())


@dataclass(frozen=True)
class Snapshot:
    data: bytes
    mtime_ns: int

    @classmethod
    def of(cls, path: Path) -> Snapshot:
        return cls(path.read_bytes(), path.stat().st_mtime_ns)


def assert_refused(result: Result, *needles: str) -> None:
    """One line on stderr that leads with the file, nothing on stdout, exit code non-zero."""
    assert result.code in (1, 2), result
    assert "Traceback" not in result.err + result.out, result
    assert "internal error" not in result.err, result
    assert result.out == "", result
    assert result.err.startswith("bbm-tui: ") and result.err.count("\n") == 1, result
    for needle in needles:
        assert needle in result.err, (needle, result)
