"""Log-probabilities no model could give: positive, NaN, infinite, absurdly large or small,
or a boolean (`true` read as 1.0). Such a value makes the token's step or sample one "without
log-probabilities": never stored as a number, never what backtracking chooses by, said in the
summary; and a store that already holds such values (written before) opens, its token view
included. Against the local server through litellm, a real store and the real command line."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from bbm_tui.cli import main
from bbm_tui.core import llm
from bbm_tui.core.generation.backtrack import choose
from bbm_tui.core.llm.sampling import sample_steps
from bbm_tui.core.records import TokenLogprob
from bbm_tui.core.store import Store
from bbm_tui.core.trace.branches import band, confidence
from bbm_tui.core.trace.session import NewTrace, TraceSession
from bbm_tui.core.types import plausible_logprob
from tests.openai_server import FakeOpenAI, Reply
from tests.strict_json import strict_json_lines
from tests.test_backtrack import LOGPROBS, ORIGINAL, QUESTION, SAMPLED, TARGET, responder

FAST = llm.RetryPolicy(attempts=1)
CALL = llm.CallSettings(logprobs=True, retry=FAST, timeout_s=10, idle_timeout_s=10)
IMPOSSIBLE = {
    "positive": 3999.94,
    "NaN": float("nan"),
    "infinity": float("inf"),
    "minus infinity": float("-inf"),
    "1e308": 1e308,
    "-1e308": -1e308,
    "true": True,
}


def spec(server: FakeOpenAI) -> llm.ModelSpec:
    return llm.ModelSpec("openai/test-model", server.base_url)


async def one_step(server: FakeOpenAI) -> llm.StepText:
    items = [item async for item in llm.stream_step(spec(server), "Q: 1\nThought 1:", CALL)]
    return items[-1]


def test_what_a_log_probability_can_be() -> None:
    for value in (0, 0.0, -0.0, -0.5, -30.0, -9999.0, 1e-9):
        assert plausible_logprob(value), value
    for value in (*IMPOSSIBLE.values(), 0.5, "-0.5", None, False):
        assert not plausible_logprob(value), value


@pytest.mark.parametrize("name", IMPOSSIBLE)
async def test_a_streamed_step_with_an_impossible_value_has_no_log_probabilities(
    openai_server: FakeOpenAI, name: str
) -> None:
    """One impossible token among good ones: the step is kept, without log-probabilities
    (a sum over it would mean nothing), and the call says why."""
    openai_server.enqueue(Reply("4 + 4 = 8\n", logprob_values=[-0.5, IMPOSSIBLE[name], -0.1]))
    step = await one_step(openai_server)
    assert step.text == "4 + 4 = 8"
    assert step.call.tokens is None and step.call.logprobs is None
    assert step.call.impossible_logprobs


async def test_good_values_are_kept_and_alternatives_that_cannot_be_are_left_out(
    openai_server: FakeOpenAI,
) -> None:
    openai_server.enqueue(Reply("4 + 4 = 8\n", logprob_values=[-0.5, -0.0, -1e-3],
                                alternatives=lambda piece, value: [
                                    (piece, value), ("x", float("nan")), ("y", 2.5),
                                    ("z", -4.0)]))
    step = await one_step(openai_server)
    assert step.call.logprobs == [-0.5, 0.0, -1e-3, -0.5, -0.0]
    assert not step.call.impossible_logprobs
    assert step.call.tokens is not None
    for token in step.call.tokens:
        assert [text for text, _ in token.alternatives] == [token.text, "z"]


@pytest.mark.parametrize("name", IMPOSSIBLE)
@pytest.mark.parametrize("position", [1, 2])
async def test_a_sample_with_an_impossible_value_is_never_chosen_by_it(
    openai_server: FakeOpenAI, name: str, position: int
) -> None:
    """Sample 1 ("2 + 2 = 4", -2.5 in all) is the best of those that differ; sample 3 comes
    next. An impossible value in sample 1 leaves sample 3 the choice; in sample 2 it
    changes nothing: where the value stands does not matter, and it never wins."""
    values = list(LOGPROBS)
    values[position] = IMPOSSIBLE[name]
    openai_server.enqueue(Reply(choices=SAMPLED, choice_logprobs=values, honor_stop=False))
    prompt = "Q: ((2 + 2) * 1) =\nThought 1: Let me work it out.\nThought 2:"
    samples = await sample_steps(spec(openai_server), prompt, 8,
                                 llm.CallSettings(temperature=1.0, logprobs=True, retry=FAST))
    candidates = samples.candidates
    assert candidates[position].logprob is None and candidates[position].tokens is None
    assert candidates[position].impossible_logprobs
    assert samples.calls[0].impossible_logprobs
    assert all(c.logprob is None or math.isfinite(c.logprob) for c in candidates)
    dropped = [c.text == "2 + 2 = 5" for c in candidates]
    chosen, how = choose(candidates, dropped)
    assert how == "logprob" and chosen == (3 if position == 1 else 1)


def arithmetic_file(path: Path) -> Path:
    row = {"input": QUESTION, "steps": ORIGINAL, "answer": "5", "target": TARGET,
           "mistake_index": 1}
    path.write_text(json.dumps(row) + "\n")
    return path


def test_backtrack_writes_null_for_a_sample_it_could_not_score_and_says_so(
    openai_server: FakeOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    values = list(LOGPROBS)
    values[1] = float("nan")
    base = responder()

    def respond(path: str, body: dict) -> Reply:
        reply = base(path, body)
        return reply if body.get("stream") else Reply(choices=SAMPLED, honor_stop=False,
                                                      choice_logprobs=values)

    openai_server.responder = respond
    source = arithmetic_file(tmp_path / "multistep_arithmetic.jsonl")
    out = tmp_path / "out.jsonl"
    assert main(["backtrack", "--model", "openai/test", "--api-base", openai_server.base_url,
                 "--input", str(source), "--out", str(out), "--locations", "gold",
                 "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert "1 sample came with log-probabilities no model could give" in err
    [row] = strict_json_lines(out)
    samples = row["samples"]
    assert samples[1]["logprob"] is None and not samples[1]["chosen"]
    assert samples[3]["chosen"] and row["new_steps"][1] == "two plus two is four"


def test_run_logprobs_writes_null_not_a_number_and_says_so(
    openai_server: FakeOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Before: `"step_logprobs": [3999.94, ...]` in OUT (or a bare Infinity, which strict
    readers refuse), and the app then failed opening the session."""
    answers = iter(["Let me add.\n", "So the answer is 4\n"])
    values = iter([[3999.94], [-0.25]])
    openai_server.responder = lambda path, body: Reply(next(answers),
                                                       logprob_values=next(values))
    source = tmp_path / "multistep_arithmetic.jsonl"
    source.write_text(json.dumps({"input": "2 + 2 =", "target": "4"}) + "\n")
    out = tmp_path / "out.jsonl"
    assert main(["run", "--model", "openai/test-model", "--api-base", openai_server.base_url,
                 "--input", str(source), "--out", str(out), "--logprobs",
                 "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert "1 step came with log-probabilities no model could give" in err
    [row] = strict_json_lines(out)
    assert row["step_logprobs"][0] is None
    assert row["step_logprobs"][1] == pytest.approx(-0.25 * 5)  # "So the answer is 4"
    with Store.open() as store:
        [summary] = store.sessions()
        first = store.branch(summary.session.id)[0]
        assert (first.logprob, first.confidence, store.step(first.id).tokens) == (
            None, None, None)


def test_the_store_refuses_them_too(tmp_path: Path) -> None:
    """The last line of defence, as for usage: tokens handed to the store with such a value
    are stored as none (the model-call boundary refuses them first)."""
    with Store.open(tmp_path / "s.sqlite3") as store:
        trace = TraceSession.create(store, NewTrace("multistep_arithmetic", QUESTION, TARGET),
                                    llm.ModelSpec("openai/test", "http://127.0.0.1:9"))
        call = llm.CallRecord(model="openai/test", params={}, latency_s=0.1,
                              logprobs=[3999.94], tokens=[TokenLogprob("2 + 2", 3999.94)])
        step = store.add_step(trace.id, parent_id=None, number=1, text="2 + 2", call=call)
        assert (step.logprob, step.tokens, step.confidence) == (None, None, None)
        [sample] = store.add_candidates(trace.id, parent_id=None, number=1, calls=[call],
                                        candidates=[(0, 0, "2 + 2", call.tokens, False)])
        assert (sample.logprob, sample.tokens) == (None, None)
        assert store.step(step.id).tokens is None


def test_the_pure_functions_take_what_an_old_store_held() -> None:
    assert confidence([TokenLogprob("a", 3999.94)]) is None
    assert confidence([TokenLogprob("a", float("nan"))]) is None
    assert band(float("nan")) == 4 and band(5.0) == 0
