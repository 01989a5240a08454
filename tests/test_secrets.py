"""API keys never reach the store (and its -wal/-shm), the exports, the commands' output, any
file the project writes (logs included, wherever they would go), or a screenshot of the app;
the store and export files are created readable by the owner only.

A distinctive key is planted in the environment and really used (the local server sees it in
every request's Authorization header, and echoes it back in its error bodies, as some
providers do); then the BYTES of everything are searched for it, as is and base64- and
URL-encoded.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import secrets
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest

from bbm_tui.core import llm
from bbm_tui.core.dataset import bundled_rows
from bbm_tui.core.generation.stepper import (
    StepFailed,
    StepperSettings,
    StepRestarted,
    TraceFinished,
)
from bbm_tui.core.judging.finders import FINDER_MAX_TOKENS
from bbm_tui.core.llm.offline.replay import parse_generation_prompt
from bbm_tui.core.redact import REDACTED, redact
from bbm_tui.core.store import DATABASE_NAME, Store
from bbm_tui.core.trace.recording import record_find
from bbm_tui.core.trace.session import NewTrace, TraceSession
from tests.openai_server import FakeOpenAI, Reply, dataset_responder

TASK = "multistep_arithmetic"
ROWS = bundled_rows(TASK)
FAST = llm.RetryPolicy(attempts=2, base_delay_s=0.01, max_delay_s=0.02)
STEPPER = StepperSettings(call=llm.CallSettings(retry=FAST))
FINDER = llm.CallSettings(max_tokens=FINDER_MAX_TOKENS, retry=FAST)
FORMATS = ("jsonl", "processbench", "prm800k", "markdown")


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> str:
    planted = f"sk-test-PLANTED-{secrets.token_hex(12)}"
    monkeypatch.setenv("OPENAI_API_KEY", planted)
    return planted


def forms(key: str) -> dict[str, bytes]:
    """The key as it could appear in bytes: as is, URL-encoded, and base64 (standard and
    URL-safe) at each of the three alignments it can have inside a longer encoded text."""
    raw = key.encode()
    found = {"raw": raw, "url": quote(key, safe="").encode(),
             "url+": quote_plus(key).encode()}
    for shift in range(3):
        for name, encode in (("base64", base64.b64encode),
                             ("urlsafe-base64", base64.urlsafe_b64encode)):
            encoded = encode(b"\0" * shift + raw)
            # Leave out the groups that the prefix or the end share with the key.
            found[f"{name}@{shift}"] = encoded[(4 if shift else 0): -4]
    return found


def assert_no_key(data: bytes | str, key: str, where: object) -> None:
    if isinstance(data, str):
        data = data.encode()
    for name, needle in forms(key).items():
        assert needle not in data, f"the key ({name}) is in {where}"


def assert_no_piece_of_key(text: str, key: str, where: object) -> None:
    """For a screen: a line may wrap anywhere, so no 8 characters of the key's random part
    may be anywhere."""
    token = key.removeprefix("sk-test-PLANTED-")
    for start in range(len(token) - 7):
        assert token[start:start + 8] not in text, f"part of the key is in {where}"


def echo(key: str, status: int, **extra: object) -> Reply:
    """An error whose body quotes the key back, as some providers do."""
    return Reply(status=status, error_body={"error": {
        "message": f"Incorrect API key provided: {key}. Authorization: Bearer {key}",
        "type": "invalid_request_error"}}, **extra)


def files_under(root: Path) -> Iterator[Path]:
    for path in sorted(root.rglob("*")):
        if path.is_file():
            yield path


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# ------------------------------------------------------------------------------- redaction


def test_redact_removes_every_form_of_a_key_and_nothing_else(key: str) -> None:
    text = (f"a {key} b {base64.b64encode(key.encode()).decode()} c {quote(key, safe='')} "
            f"d Bearer abc.DEF-123_xyz e sk-proj-{'Q' * 20} f gsk_{'a1' * 10}")
    cleaned = redact(text)
    assert_no_key(cleaned, key, cleaned)
    assert "sk-proj" not in cleaned and "gsk_" not in cleaned and "abc.DEF" not in cleaned
    assert cleaned.count(REDACTED) == 6
    ordinary = "Thought 3: the task-list and desk-lamp words sort as sk before skate; 12 = 12."
    assert redact(ordinary) == ordinary


def test_the_command_lines_error_path_redacts(key: str, capsys) -> None:
    from bbm_tui.cli.errors import fail

    assert fail(f"internal error: RuntimeError: bad header {key!r}") == 1
    err = capsys.readouterr().err
    assert_no_key(err, key, "stderr")
    assert REDACTED in err


# ------------------------------------------------------------------------------- in process


async def test_generation_and_finding_keep_the_key_out_of_messages_and_the_store(
    key: str, openai_server: FakeOpenAI, isolated_home: Path
) -> None:
    row = ROWS[0]
    store = Store.open()
    spec = llm.ModelSpec("openai/test", openai_server.base_url)
    trace = TraceSession.create(store, NewTrace(TASK, row.input, row.target), spec)
    openai_server.responder = dataset_responder
    events = [e async for e in trace.generate(max_new_steps=2, settings=STEPPER)]
    assert events[-1] == TraceFinished("paused", row.steps[:2], None)

    messages: list[str] = []
    # 401 with the key in the body: not retried, the key's variable named, the key not shown.
    openai_server.enqueue(echo(key, 401))
    events = [e async for e in trace.generate(settings=STEPPER)]
    failed = events[-1]
    assert isinstance(failed, StepFailed) and failed.error.kind == "auth"
    assert "rejected the API key in OPENAI_API_KEY" in failed.error.message
    messages.append(failed.error.message)
    # 500 and 400 bodies are quoted in the message: the key in them is redacted.
    openai_server.enqueue(echo(key, 500), echo(key, 400))
    events = [e async for e in trace.generate(settings=STEPPER)]
    failed = events[-1]
    assert isinstance(failed, StepFailed) and failed.error.kind == "bad_request"
    restarts = [e.reason for e in events if isinstance(e, StepRestarted)]
    assert len(restarts) == 1 and "server error (500)" in restarts[0]
    messages += [*restarts, failed.error.message, str(failed.error)]
    assert REDACTED in failed.error.message and "Incorrect API key provided" in \
        failed.error.message

    # The finders, trace- and step-level, the same.
    trace_ = TraceSession.create(store, NewTrace(TASK, ROWS[1].input, ROWS[1].target), spec)
    trace_.load_recorded(list(ROWS[1].steps))
    for method, replies in (("direct-trace", [echo(key, 400)]),
                            ("direct-step", [Reply("Yes"), echo(key, 503, headers={
                                "Retry-After": "0"}), echo(key, 503)])):
        openai_server.enqueue(*replies)
        with pytest.raises(llm.LLMError) as caught:
            async for _ in record_find(store, trace_.id, TASK, method, ROWS[1].input,
                                       ROWS[1].steps, spec, settings=FINDER):
                pass
        messages += [caught.value.message, str(caught.value)]
        assert REDACTED in caught.value.message
    openai_server.enqueue(Reply(f"No mistake; my key is not {key[:6]}"))
    async for _ in record_find(store, trace_.id, TASK, "direct-trace", ROWS[1].input,
                               ROWS[1].steps, spec, settings=FINDER):
        pass

    for message in messages:
        assert_no_key(message, key, repr(message))
    # The key was really sent: it is only our files that must not have it.
    assert openai_server.requests
    assert all(r.headers.get("Authorization") == f"Bearer {key}"
               for r in openai_server.requests)

    # The store's files, read while it is open: the database, its -wal and -shm.
    path = store.path
    files = sorted(path.parent.glob(path.name + "*"))
    assert [f.name for f in files] == [DATABASE_NAME, f"{DATABASE_NAME}-shm",
                                       f"{DATABASE_NAME}-wal"]
    for file in files:
        assert_no_key(file.read_bytes(), key, file)
        assert mode(file) == 0o600, file
    assert mode(path.parent) == 0o700
    store.close()
    assert_no_key(path.read_bytes(), key, path)


# ------------------------------------------------------------------------------- commands


def respond_with_one_failure(key: str, victim: str):
    def respond(path: str, body: dict) -> Reply:
        prompt = body["messages"][-1]["content"]
        request = parse_generation_prompt(prompt)
        if request is None:  # a finder's question
            return echo(key, 500, headers={"Retry-After": "0"}) if victim in prompt else (
                Reply("No"))
        if request.question.endswith(victim):
            return echo(key, 500, headers={"Retry-After": "0"})
        return dataset_responder(path, body)
    return respond


def test_commands_keep_the_key_out_of_every_file_and_line(
    key: str, openai_server: FakeOpenAI, tmp_path: Path, isolated_home: Path
) -> None:
    """Every command a user runs, with the key in its environment, a home, config, cache,
    state and temporary folder of its own (so that any log file would be found), and umask 0
    (so that only the project's own care makes files private)."""
    world = tmp_path / "world"
    folders = {name: world / name for name in ("home", "config", "cache", "data", "state",
                                               "tmp", "cwd")}
    for folder in folders.values():
        folder.mkdir(parents=True)
    env = {**os.environ, "OPENAI_API_KEY": key, "HOME": str(folders["home"]),
           "XDG_CONFIG_HOME": str(folders["config"]), "XDG_CACHE_HOME": str(folders["cache"]),
           "XDG_DATA_HOME": str(folders["data"]), "XDG_STATE_HOME": str(folders["state"]),
           "TMPDIR": str(folders["tmp"]), "BBM_TUI_HOME": str(world / "bbm-home"),
           "BBM_TUI_CONFIG": str(folders["config"] / "bbm-tui.toml")}
    (folders["config"] / "bbm-tui.toml").write_text('model = "openai/test"\n')
    source = folders["cwd"] / f"{TASK}.jsonl"
    source.write_text("".join(row.to_line() + "\n" for row in ROWS[:3]))
    openai_server.responder = respond_with_one_failure(key, ROWS[1].input)
    api = ["--api-base", openai_server.base_url]

    def bbm(*commands: tuple[str, ...]) -> list[subprocess.CompletedProcess]:
        processes = [subprocess.Popen(
            [sys.executable, "-m", "bbm_tui", *args], cwd=folders["cwd"], env=env,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, umask=0,
        ) for args in commands]
        results = []
        for process in processes:
            out, err = process.communicate(timeout=120)
            assert b"Traceback" not in err, err
            results.append(subprocess.CompletedProcess(process.args, process.returncode, out,
                                                       err))
        return results

    # In three waves of processes at once: what makes sessions, what reads them, a 401.
    results = bbm(
        ("run", *api, "--input", str(source), "--out", "run.jsonl", "--no-progress"),
        ("find", *api, "--method", "direct-trace", "--input", str(source), "--out",
         "preds.jsonl", "--no-progress", "--json"),
        ("import", str(source)),
    )
    results += bbm(
        *(("export", "--format", fmt, "--out", f"export.{fmt}") for fmt in FORMATS),
        ("sessions",), ("sessions", "--json"),
    )
    openai_server.responder = lambda path, body: echo(key, 401)
    results += bbm(("find", *api, "--method", "direct-step", "--input", str(source),
                    "--out", "preds-401.jsonl", "--no-progress"))
    codes = [r.returncode for r in results]
    assert codes == [1, 1, 0, 0, 0, 0, 0, 0, 0, 1], [r.stderr for r in results]
    # The errors were the echoing ones, and said so without the key.
    assert b"had a server error (500): Incorrect API key provided: [redacted]" in \
        results[0].stderr
    assert b"had a server error (500)" in results[1].stderr
    assert b"rejected the API key in OPENAI_API_KEY" in results[-1].stderr
    assert {r.headers.get("Authorization") for r in openai_server.requests} == {
        f"Bearer {key}"}
    for result in results:
        assert_no_key(result.stdout, key, f"stdout of {result.args[3:]}")
        assert_no_key(result.stderr, key, f"stderr of {result.args[3:]}")

    # Every file any of them wrote, wherever: store, exports, outputs, logs, caches.
    written = list(files_under(world))
    names = {path.name for path in written}
    assert {DATABASE_NAME, "run.jsonl", "preds.jsonl", "preds-401.jsonl",
            *(f"export.{fmt}" for fmt in FORMATS)} <= names
    for path in written:
        assert_no_key(path.read_bytes(), key, path)
    # Nothing but what a user asked for, the store and the input: no log, no cache.
    unexpected = {path for path in written
                  if path.parent not in (folders["cwd"], world / "bbm-home")
                  and path.name != "bbm-tui.toml"}
    assert unexpected == set()

    # Private: the data folder, the store (and any sidecar left), the outputs and exports.
    assert mode(world / "bbm-home") == 0o700
    for path in written:
        if path == source or path.name == "bbm-tui.toml":
            continue
        assert mode(path) == 0o600, (path, oct(mode(path)))
    # The exports hold what they should (the key is absent, not everything).
    exported = json.loads((folders["cwd"] / "export.processbench").read_text().splitlines()[0])
    assert exported["steps"] and exported["generator"]


def test_an_export_over_a_world_readable_file_is_private(tmp_path: Path, isolated_home) -> None:
    from bbm_tui.cli import main

    out = tmp_path / "shared.md"
    out.write_text("old")
    out.chmod(0o644)
    source = tmp_path / f"{TASK}.jsonl"
    source.write_text(ROWS[0].to_line() + "\n")
    assert main(["import", str(source)]) == 0
    assert main(["export", "--format", "markdown", "--out", str(out), "--force"]) == 0
    assert mode(out) == 0o600
    assert out.read_text().startswith("## ")


# ------------------------------------------------------------------------------- the app


async def test_a_screenshot_after_an_error_keeps_the_key_out(
    key: str, openai_server: FakeOpenAI, tmp_path: Path
) -> None:
    from bbm_tui.ui.app import BbmApp
    from bbm_tui.ui.screens.trace import TraceScreen

    row = ROWS[0]
    with Store.open() as store:
        trace = TraceSession.create(store, NewTrace(TASK, row.input, row.target),
                                    llm.ModelSpec("openai/test", openai_server.base_url))
        trace.load_recorded(list(row.steps[:2]))
    llm.warm_up()  # litellm, before the app, so that the wait below is for the step only
    # The step is retried once after a 500 (shown as "retrying (...)"), then fails on a 400:
    # both bodies quote the key.
    openai_server.enqueue(echo(key, 500, headers={"Retry-After": "0"}), echo(key, 400))
    app = BbmApp(session_id=trace.id, warm_up=False, wall_clock=False)
    async with app.run_test(size=(120, 40)) as pilot:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 20
        pressed = False
        def status() -> str:
            return str(app.screen.query_one("#run-status").render())

        while not (pressed and "Thought 3 failed" in status()):
            assert loop.time() < deadline, "no failure in the status line"
            if isinstance(app.screen, TraceScreen) and not pressed:
                await pilot.pause(0.1)
                await pilot.press("n")
                pressed = True
            await pilot.pause(0.05)
        # Said once, in the status line (issue 10, item 12); any toast is checked too.
        notes = [status(), *(f"{n.title}: {n.message}" for n in app._notifications)]
        assert "Thought 3 failed" in notes[0] and REDACTED in notes[0], notes
        svg = Path(app.save_screenshot("error.svg", str(tmp_path)))
    data = svg.read_bytes()
    assert_no_key(data, key, svg)
    shown = data.decode().replace("&#160;", " ")
    assert "Thought 3 failed" in shown and "refused" in shown  # the error is on it
    assert "Incorrect API key provided: [redacted]" in shown
    assert_no_piece_of_key(shown, key, svg)
    for note in notes:
        assert_no_key(note, key, note)
    assert len(openai_server.requests) == 2
    assert all(r.headers.get("Authorization") == f"Bearer {key}"
               for r in openai_server.requests)
    for path in files_under(tmp_path):
        assert_no_key(path.read_bytes(), key, path)
