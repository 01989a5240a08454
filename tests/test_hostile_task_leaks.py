"""Issue 33, items 6-7: a task file reads nothing outside its folder, and no key a task file or
a router file could carry ends up in a request body, the store, OUT or a message. Each leak is
checked by planting a secret and searching everywhere it could land."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bbm_tui.core.redact import REDACTED, redact
from bbm_tui.core.tasks.files import TaskFileError, load_task_file
from tests.openai_server import FakeOpenAI, Reply

TIME_LIMIT_S = 120
PLANTED = "sk-planted0123456789abcdef"


def task_folder(tmp_path: Path, prompt: str, key: str = "prompt") -> Path:
    folder = tmp_path / "tasks"
    folder.mkdir(exist_ok=True)
    path = folder / "shared.toml"
    path.write_text(f'name = "shared"\nquestion = "Q: {{input}}"\n{key} = "{prompt}"\n',
                    encoding="utf-8")
    return path


def bbm(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run([sys.executable, "-m", "bbm_tui", *args], capture_output=True,
                              text=True, timeout=TIME_LIMIT_S, env={**os.environ, **(env or {})})
    except subprocess.TimeoutExpired:
        pytest.fail(f"still running after {TIME_LIMIT_S} s: {' '.join(args[:3])} ...")


def stored_bytes(home: Path) -> bytes:
    """Every byte of the store (the database, its journal) and of anything else under home."""
    return b"".join(path.read_bytes() for path in sorted(home.rglob("*")) if path.is_file())


# --------------------------------------------------------------------------- 6. task files


@pytest.mark.parametrize("key", ["prompt", "finding_prompts", "questions"])
@pytest.mark.parametrize(("named", "said"), [
    ("/proc/self/environ", "must be a path relative to the task file's folder"),
    ("/etc/passwd", "must be a path relative to the task file's folder"),
    ("../outside.txt", "must be a path relative to the task file's folder"),
    ("sub/../../outside.txt", "must be a path relative to the task file's folder"),
    ("~/outside.txt", "must be a path relative to the task file's folder"),
    ("link.txt", "leads out of the task file's folder"),
])
def test_a_task_file_reads_nothing_outside_its_folder(tmp_path: Path, key: str, named: str,
                                                      said: str) -> None:
    (tmp_path / "outside.txt").write_text("secret\n", encoding="utf-8")
    path = task_folder(tmp_path, named, key)
    (path.parent / "link.txt").symlink_to(tmp_path / "outside.txt")
    with pytest.raises(TaskFileError) as raised:
        load_task_file(path)
    assert str(raised.value).startswith(f"{path.resolve()}: line 3: {key!r}: "), raised.value
    assert said in str(raised.value)


def test_a_device_or_fifo_in_the_folder_is_no_prompt(tmp_path: Path) -> None:
    path = task_folder(tmp_path, "pipe")
    os.mkfifo(path.parent / "pipe")
    with pytest.raises(TaskFileError, match="is a FIFO \\(named pipe\\), not a regular file"):
        load_task_file(path).read_files()
    (path.parent / "pipe").unlink()
    (path.parent / "pipe").symlink_to("/dev/zero")
    with pytest.raises(TaskFileError, match="leads out of the task file's folder"):
        load_task_file(path)


def test_prompts_in_the_folder_and_its_subfolders_load(tmp_path: Path) -> None:
    path = task_folder(tmp_path, "prompts/few_shot.txt")
    (path.parent / "prompts").mkdir()
    (path.parent / "prompts" / "few_shot.txt").write_text("Q: 1\nThought 1: So the answer is "
                                                          "1.\n", encoding="utf-8")
    assert load_task_file(path).prompt == "Q: 1\nThought 1: So the answer is 1."
    # A link that stays inside the folder is followed.
    (path.parent / "same.txt").symlink_to(path.parent / "prompts" / "few_shot.txt")
    path = task_folder(tmp_path, "same.txt")
    assert load_task_file(path).prompt.endswith("So the answer is 1.")
    path = task_folder(tmp_path, "./prompts/few_shot.txt")
    assert load_task_file(path).few_shot


def test_a_task_file_cannot_send_the_environment_and_no_key_is_stored(
        tmp_path: Path, isolated_home: Path, openai_server: FakeOpenAI) -> None:
    """`prompt = "/proc/self/environ"` sent OPENAI_API_KEY in the request body and stored it in
    task_definitions: now refused; and a prompt of one's own holding a key is stored
    redacted."""
    openai_server.responder = lambda path, body: Reply(" So the answer is 4.\n")
    env = {"OPENAI_API_KEY": PLANTED}
    questions = tmp_path / "q.jsonl"
    questions.write_text('{"input": "2 + 2", "target": "4"}\n', encoding="utf-8")
    out = tmp_path / "out.jsonl"
    run = ("run", "--model", "openai/test", "--api-base", openai_server.base_url, "--input",
           str(questions), "--out", str(out), "--no-progress")
    path = task_folder(tmp_path, "/proc/self/environ")
    done = bbm(*run, "--task-file", str(path), env=env)
    assert done.returncode == 2
    assert "'prompt': '/proc/self/environ' must be a path relative" in done.stderr
    assert openai_server.requests == []
    # The user's own prompt, in the folder, with a key pasted into it.
    path = task_folder(tmp_path, "prompt.txt")
    (path.parent / "prompt.txt").write_text(f"Use key {PLANTED} wisely.\nQ: 1 + 1\nThought 1: "
                                            "So the answer is 2.\n", encoding="utf-8")
    done = bbm(*run, "--task-file", str(path), env=env)
    assert done.returncode == 0, done.stderr
    assert PLANTED.encode() not in stored_bytes(isolated_home)
    assert REDACTED.encode() in stored_bytes(isolated_home)
    assert PLANTED not in out.read_text(encoding="utf-8") + done.stdout + done.stderr


# --------------------------------------------------------------------------- 7. router keys


LITERAL_KEY = "lit-key-7f3a9c2e1b"
AUTH_VALUE = "auth-5d8e2c4b9a"  # behind VLLM_AUTH: a name that does not look secret
NUMBER_KEY = "0x1F2E3D4C5B6A"  # YAML reads it as the number 34286586878826


def router_file(tmp_path: Path, server: FakeOpenAI, *, number: bool = False) -> Path:
    """Two deployments with a key each (as written, from a variable); with `number`, a third
    whose key YAML reads as a number (the file check refuses it, naming no value)."""
    path = tmp_path / "servers.yaml"
    third = f"""  - model_name: number
    litellm_params: {{model: openai/test, api_base: "{server.base_url}", api_key: {NUMBER_KEY}}}
""" if number else ""
    path.write_text(f"""model_list:
  - model_name: literal
    litellm_params: {{model: openai/test, api_base: "{server.base_url}", api_key: {LITERAL_KEY}}}
  - model_name: environ
    litellm_params:
      model: openai/test
      api_base: {server.base_url}
      api_key: os.environ/VLLM_AUTH
{third}""", encoding="utf-8")
    return path


SECRETS = (LITERAL_KEY, AUTH_VALUE, NUMBER_KEY, str(int(NUMBER_KEY, 16)))


@pytest.mark.parametrize("group", ["literal", "environ", "number"])
def test_a_router_files_keys_are_in_no_message_store_or_out(
        tmp_path: Path, isolated_home: Path, openai_server: FakeOpenAI, group: str) -> None:
    """A server that echoes the key it was sent (as some do in a 401), and litellm's own
    checks of a key YAML read as a number: every key of the file, and every variable it
    names, is redacted wherever text is shown or stored."""
    secrets = SECRETS if group == "number" else (LITERAL_KEY, AUTH_VALUE)
    echoed = " ".join(secrets)
    openai_server.responder = lambda path, body: Reply(
        status=400, error_message=f"invalid api key; you sent {echoed}")
    questions = tmp_path / "q.jsonl"
    questions.write_text('{"input": "b a", "target": "a b"}\n', encoding="utf-8")
    out = tmp_path / "out.jsonl"
    path = router_file(tmp_path, openai_server, number=group == "number")
    done = bbm("run", "--router", str(path), "--model", group,
               "--task", "word_sorting", "--input", str(questions), "--out", str(out),
               "--no-progress", env={"VLLM_AUTH": AUTH_VALUE})
    assert done.returncode != 0
    shown = done.stdout + done.stderr + (out.read_text() if out.exists() else "")
    stored = stored_bytes(isolated_home)
    bodies = json.dumps([request.body for request in openai_server.requests])
    for secret in secrets:
        assert secret not in shown, (secret, shown)
        assert secret.encode() not in stored, secret
        assert secret not in bodies, secret
    if group != "number":  # the server's echo, redacted
        assert REDACTED in shown, shown


def test_declared_secrets_are_redacted_whatever_their_name(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          openai_server: FakeOpenAI) -> None:
    from bbm_tui.core import redact as redaction
    from bbm_tui.core.llm.router import read_router_file

    # Nothing declared yet in this process (a router file read by another test declares).
    monkeypatch.setattr(redaction, "_declared_values", set())
    monkeypatch.setattr(redaction, "_declared_variables", set())
    monkeypatch.setenv("VLLM_AUTH", AUTH_VALUE)
    assert redact(f"got {AUTH_VALUE}") == f"got {AUTH_VALUE}"  # not a secret-looking name
    read_router_file(router_file(tmp_path, openai_server))
    for secret in (LITERAL_KEY, AUTH_VALUE):
        assert redact(f"got {secret}!") == f"got {REDACTED}!", secret
    assert redact("an ordinary sentence") == "an ordinary sentence"
