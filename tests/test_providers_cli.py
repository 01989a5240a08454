"""`run`, `find` and `backtrack` over each provider's own wire, through litellm's adapters to
the local servers of tests/*_server.py (the steps themselves and the errors are in
tests/test_providers_http.py): the traces written are the dataset's, each step one line; the
finders get whole answers; backtracking asks a provider without log-probabilities for none,
takes the first sample that differs and says so, and ranks by log-probability where the
provider gives them."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from bbm_tui.cli import main
from bbm_tui.core.dataset import bundled_path, read_rows
from tests.fake_server import Reply, dataset_responder, is_streamed, prompt_of
from tests.test_backtrack import CONTINUATION, LOGPROBS, QUESTION, SAMPLED
from tests.test_backtrack_cli import dataset_file
from tests.test_providers_http import BY_NAME, WIRES, Wire, connect, stop_sent

# `ollama/` in chat mode sends litellm's own prompt template ("### User:\n…") to
# /api/generate; a base model there is run in completion mode, the raw prompt (README).
RUN_MODES = {"ollama": "completion"}
NONE_ASKED = ("log-probabilities: none from this provider; the first differing sample was "
              "taken")


def rows_of(task: str, count: int, folder: Path) -> Path:
    source = folder / f"{task}.jsonl"
    source.write_text("\n".join(bundled_path(task).read_text().splitlines()[:count]) + "\n")
    return source


@pytest.mark.parametrize("wire", WIRES, ids=lambda wire: wire.name)
def test_run_writes_the_dataset_traces_over_each_wire(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, wire: Wire,
    tmp_path: Path, capsys: pytest.CaptureFixture,
) -> None:
    server, _ = connect(request, wire, monkeypatch)
    server.responder = dataset_responder
    source = rows_of("multistep_arithmetic", 3, tmp_path)
    out = tmp_path / "out.jsonl"
    mode = RUN_MODES.get(wire.name, "chat")
    code = main(["run", "--model", wire.model, "--api-base", server.base_url, "--mode", mode,
                 "--input", str(source), "--out", str(out), "--no-progress"])
    assert code == 0, capsys.readouterr().err
    written = {row.input: row for row in read_rows(out)}
    for row in read_rows(source):
        assert written[row.input].steps == row.steps
    assert len(server.requests) == sum(len(row.steps) for row in read_rows(source))
    for record in server.requests:
        assert stop_sent(wire, record.body) == (["\n"] if wire.native_stop else None)


@pytest.mark.parametrize("wire", WIRES, ids=lambda wire: wire.name)
def test_find_judges_over_each_wire(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, wire: Wire,
    tmp_path: Path, capsys: pytest.CaptureFixture,
) -> None:
    """A finder's answer is whole (streamed, read to its end), with no stop: the verdicts
    parse."""
    server, _ = connect(request, wire, monkeypatch)
    server.responder = lambda path, body: Reply("Thought 2 is wrong, so the answer is: 2")
    source = rows_of("multistep_arithmetic", 2, tmp_path)
    out = tmp_path / "preds.jsonl"
    code = main(["find", "--model", wire.model, "--api-base", server.base_url,
                 "--method", "direct-trace", "--input", str(source), "--out", str(out),
                 "--no-progress", "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    predictions = [row.extra["predicted_mistake_index"] for row in read_rows(out)]
    assert predictions == [1, 1]
    assert len(server.requests) == 2
    for record in server.requests:
        assert is_streamed(record.path, record.body)
        assert stop_sent(wire, record.body) is None


def backtrack_responder(logprobs: bool, honor_stop: bool = False):
    """Samples (whole answers) get the samples of tests/test_backtrack.py, all at once where
    the request asks for several (`n`, `candidateCount`), else one a call in order (written
    on past the line break unless `honor_stop`); the continuation (streamed) goes on to the
    answer."""
    served: list[int] = []

    def respond(path: str, body: dict) -> Reply:
        if is_streamed(path, body):
            if "Thought 4:" in prompt_of(body).split(QUESTION)[-1]:
                return Reply("So the answer is 4")
            return Reply(CONTINUATION)
        config = body.get("generationConfig") or {}
        if int(body.get("n") or config.get("candidate_count") or 1) > 1:
            return Reply(choices=SAMPLED, honor_stop=honor_stop,
                         choice_logprobs=LOGPROBS if logprobs else None)
        index = len(served) % len(SAMPLED)
        served.append(index)
        return Reply(SAMPLED[index], honor_stop=honor_stop,
                     logprob_per_token=LOGPROBS[index] if logprobs else None)

    return respond


def backtrack(server, wire: Wire, source: Path, out: Path, capsys) -> tuple[dict, str]:
    code = main(["backtrack", "--model", wire.model, "--api-base", server.base_url,
                 "--input", str(source), "--out", str(out), "--no-progress", "--json",
                 "--locations", "gold"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return json.loads(captured.out), captured.err


def asked_logprobs(wire: Wire, body: dict) -> bool:
    if wire.name == "gemini":
        return bool((body.get("generationConfig") or {}).get("responseLogprobs"))
    return "logprobs" in body or "top_logprobs" in body


@pytest.mark.parametrize("wire", [BY_NAME["anthropic"], BY_NAME["ollama_chat"],
                                  BY_NAME["ollama"]], ids=lambda wire: wire.name)
def test_backtrack_without_log_probabilities_takes_the_first_that_differs_and_says_so(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, wire: Wire,
    tmp_path: Path, capsys: pytest.CaptureFixture,
) -> None:
    """litellm refuses `logprobs` for these providers before sending anything: backtracking
    asks for none (one sample a call: they take no `n`), takes the first sample that
    differs, and the summary (and --json) says why the paper's rule was not applied."""
    server, _ = connect(request, wire, monkeypatch)
    server.responder = backtrack_responder(logprobs=False)
    source = dataset_file(tmp_path / "multistep_arithmetic.jsonl")
    result, err = backtrack(server, wire, source, tmp_path / "out.jsonl", capsys)
    assert f"note: {NONE_ASKED}" in err.splitlines()
    assert result["notes"] == [NONE_ASKED]
    assert not any(asked_logprobs(wire, record.body) for record in server.requests)
    fixed = read_rows(tmp_path / "out.jsonl")[0].extra
    samples = fixed["samples"]
    assert len(samples) == 8 and all(sample["logprob"] is None for sample in samples)
    first = next(index for index, sample in enumerate(samples)
                 if not sample["dropped"] and sample["text"].strip())
    assert [sample["chosen"] for sample in samples].index(True) == first
    assert fixed["new_steps"][fixed["location"]] == samples[first]["text"]
    assert fixed["new_answer"] == "4"


@pytest.mark.parametrize("wire", [BY_NAME["gemini"], BY_NAME["openai"]],
                         ids=lambda wire: wire.name)
def test_backtrack_ranks_by_log_probability_where_the_provider_gives_them(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, wire: Wire,
    tmp_path: Path, capsys: pytest.CaptureFixture,
) -> None:
    """Gemini takes `logprobs` (its `responseLogprobs`) but not `top_logprobs`, and `n` (its
    `candidateCount`): one call, the most likely differing sample chosen."""
    server, _ = connect(request, wire, monkeypatch)
    server.responder = backtrack_responder(logprobs=True)
    source = dataset_file(tmp_path / "multistep_arithmetic.jsonl")
    result, err = backtrack(server, wire, source, tmp_path / "out.jsonl", capsys)
    assert "log-probabilities" not in err and "notes" not in result
    [sampling] = [record for record in server.requests
                  if not is_streamed(record.path, record.body)]
    assert asked_logprobs(wire, sampling.body)
    config = sampling.body.get("generationConfig") or {}
    assert "top_logprobs" not in sampling.body or wire.name == "openai"
    assert "logprobs" not in config  # Gemini's number of alternatives: never asked
    samples = read_rows(tmp_path / "out.jsonl")[0].extra["samples"]
    usable = [(sample["logprob"], index) for index, sample in enumerate(samples)
              if not sample["dropped"] and sample["text"].strip()]
    assert all(logprob is not None for logprob, _ in usable)
    best = max(usable, key=lambda pair: (pair[0], -pair[1]))[1]
    assert [sample["chosen"] for sample in samples].index(True) == best


def test_run_logprobs_on_a_provider_without_them_says_so(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
    capsys: pytest.CaptureFixture,
) -> None:
    wire = BY_NAME["anthropic"]
    server, _ = connect(request, wire, monkeypatch)
    server.responder = lambda path, body: replace(dataset_responder(path, body),
                                                  logprob_per_token=-0.5)
    out = tmp_path / "out.jsonl"
    code = main(["run", "--model", wire.model, "--api-base", server.base_url, "--logprobs",
                 "--input", str(rows_of("multistep_arithmetic", 1, tmp_path)),
                 "--out", str(out), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert ("note: log-probabilities: none from this provider; the steps are stored "
            "without them") in err.splitlines()
    assert all("step_logprobs" not in row.extra for row in read_rows(out))
