"""A server that serves one request at a time by cutting the running stream short, as
llama-cpp-python's does (docs/NOTES.md, "Real servers"): calls made side by side must not
cut each other short until their retries run out. After the first such interruption the
calls to that server take turns (bbm_tui/core/llm/turns.py), and the batch says so.

Real HTTP through litellm to tests/openai_server.py, the real `bbm-tui run` in-process.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path

from bbm_tui.cli import main
from bbm_tui.core import llm
from bbm_tui.core.dataset import bundled_rows, read_rows
from tests.openai_server import FakeOpenAI, dataset_responder

TASK = "multistep_arithmetic"
QUESTIONS = 4


def slow_dataset_responder(path: str, body: dict) -> object:
    """The dataset's next step, a piece every 10 ms: streams overlap at concurrency 4."""
    reply = dataset_responder(path, body)
    return replace(reply, chunk_chars=4, chunk_delay_s=0.01)


def run_questions(server: FakeOpenAI, tmp_path: Path, concurrency: int) -> tuple[int, Path]:
    source = tmp_path / f"{TASK}.jsonl"
    source.write_text("".join(json.dumps({"input": row.input}) + "\n"
                              for row in bundled_rows(TASK)[:QUESTIONS]))
    out = tmp_path / "out.jsonl"
    code = main(["run", "--model", "openai/test-model", "--api-base", server.base_url,
                 "--input", str(source), "--out", str(out),
                 "--concurrency", str(concurrency), "--no-progress"])
    return code, out


def test_calls_take_turns_once_the_server_cuts_one_short(
    openai_server: FakeOpenAI, tmp_path: Path, capsys
) -> None:
    openai_server.responder = slow_dataset_responder
    openai_server.one_request_at_a_time = True
    code, out = run_questions(openai_server, tmp_path, concurrency=4)
    assert code == 0, capsys.readouterr().err
    expected = {row.input: row.steps for row in bundled_rows(TASK)[:QUESTIONS]}
    rows = read_rows(out)
    assert {row.input: row.steps for row in rows} == expected
    interrupted = [request for request in openai_server.requests if request.interrupted]
    assert interrupted, "the scenario did not happen: no stream was cut short"
    # Turns, not a storm of retries: each trace's calls are cut short at most twice (once
    # before the server was found out, once by a call that was already running then).
    steps = sum(len(steps) for steps in expected.values())
    assert len(interrupted) <= 2 * QUESTIONS < steps
    err = capsys.readouterr().err
    assert f"{openai_server.base_url} cut a running answer short" in err
    assert "one at a time" in err


def test_a_server_that_serves_many_at_once_is_not_made_to_wait(
    openai_server: FakeOpenAI, tmp_path: Path, capsys
) -> None:
    openai_server.responder = slow_dataset_responder
    code, out = run_questions(openai_server, tmp_path, concurrency=4)
    assert code == 0
    assert len(read_rows(out)) == QUESTIONS
    assert openai_server.most_streaming_at_once > 1
    assert not any(request.interrupted for request in openai_server.requests)
    assert "one at a time" not in capsys.readouterr().err


async def test_one_interrupted_call_alone_changes_nothing(openai_server: FakeOpenAI) -> None:
    """A stream cut short with no other call running is the server's or the network's
    fault: retried as before, and later calls are not made to take turns."""
    from tests.openai_server import Reply

    openai_server.enqueue(Reply("4 + 4 = ", finish_reason=None, usage=False),
                          Reply("4 + 4 = 8"))
    spec = llm.ModelSpec("openai/test-model", openai_server.base_url)
    settings = llm.CallSettings(max_tokens=50, timeout_s=10, idle_timeout_s=10,
                                retry=llm.RetryPolicy(attempts=3, base_delay_s=0.01))
    items = [item async for item in llm.stream_step(spec, "Q: 4 + 4?\nThought 1:", settings)]
    assert items[-1].text == "4 + 4 = 8"
    assert any(isinstance(item, llm.Restart) for item in items)
    assert llm.one_at_a_time_endpoints() == []
    await asyncio.sleep(0)
