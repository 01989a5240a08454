"""Backtracking (issue 11, items 1-2; paper section 4), against the local OpenAI-compatible
server through litellm and a real store: Thought k resampled 8 times at temperature 1, the
samples identical to the original dropped, the highest log-probability chosen (else the
first that differs), the trace continued at temperature 0 on a new branch; the original
branch and its label survive, in the store and after reopening."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import pytest

from bbm_tui.core import llm
from bbm_tui.core.generation.backtrack import choose
from bbm_tui.core.generation.stepper import StepFinished, StepperSettings, TraceFinished
from bbm_tui.core.records import TokenLogprob
from bbm_tui.core.store import Store
from bbm_tui.core.trace.session import BranchMade, NewTrace, SamplesReady, TraceSession
from bbm_tui.core.types import StepOrigin
from tests.openai_server import FakeOpenAI, Reply

QUESTION, TARGET = "((2 + 2) * 1) =", "4"
ORIGINAL = ["Let me work it out.", "2 + 2 = 5", "5 * 1 = 5", "So the answer is 5"]
# Thought 2 sampled at temperature 1: echoes, the original again (twice, with the best
# log-probability), and the next thought after the newline, as a model writes them.
SAMPLED = [
    " 2 + 2 = 5\nThought 3: x",
    "Thought 2: 2 + 2 = 4\nThought 3: 4 * 1 = 4",
    " 2 + 2 = 22\n",
    " two plus two is four\n",
    " 2 + 2 = 5\n",
    " 2 + 2 = 3\n",
    " 2+2=4\n",
    " \n",
]
# Per token: the total of a sample is this times its tokens (the kept text's only).
LOGPROBS = [-0.1, -0.5, -3.0, -0.6, -0.1, -2.0, -3.0, -0.01]
CONTINUATION = "4 * 1 = 4\nThought 4: So the answer is 4"
RETRY = llm.RetryPolicy(attempts=1)
SETTINGS = StepperSettings(call=llm.CallSettings(logprobs=True, retry=RETRY))


def responder(*, logprobs: bool = True, sampled: list[str] = SAMPLED, one_choice: bool = False):
    """Samples (never streamed) get `sampled`; the continuation (streamed) goes on to the
    answer one thought a call."""
    served: list[int] = []

    def respond(path: str, body: dict) -> Reply:
        if body.get("stream"):
            asked = json.dumps(body)
            if "Thought 4:" in asked.split("((2 + 2) * 1) =")[-1]:
                return Reply("So the answer is 4")
            return Reply(CONTINUATION, honor_stop=True)
        if one_choice:  # a provider without n: one choice a call, in order
            index = len(served) % len(sampled)
            served.append(index)
            return Reply(sampled[index], honor_stop=False,
                         logprob_per_token=LOGPROBS[index] if logprobs else None)
        return Reply(choices=sampled, honor_stop=False,
                     choice_logprobs=LOGPROBS if logprobs else None)

    return respond


def make_trace(store: Store, server: FakeOpenAI, model: str = "openai/test",
               mode: str = "chat") -> TraceSession:
    trace = TraceSession.create(store, NewTrace("multistep_arithmetic", QUESTION, TARGET),
                                llm.ModelSpec(model, server.base_url, mode))
    trace.load_recorded(ORIGINAL)
    trace.use_model(llm.ModelSpec(model, server.base_url, mode))
    trace.flag_mistake(2)
    return trace


async def backtrack(trace: TraceSession, number: int = 2) -> list[object]:
    return [event async for event in trace.backtrack(number, settings=SETTINGS)]


def ready(events: list[object]) -> SamplesReady:
    [found] = [event for event in events if isinstance(event, SamplesReady)]
    return found


async def test_identical_dropped_best_log_probability_chosen_then_greedy_to_the_answer(
    openai_server: FakeOpenAI, tmp_path: Path
) -> None:
    openai_server.responder = responder()
    with Store.open(tmp_path / "s.sqlite3") as store:
        trace = make_trace(store, openai_server)
        original_ids = [step.id for step in trace.steps]
        events = await backtrack(trace)
        samples = ready(events)
        assert samples.resample.dropped == [True, False, False, False, True, False, False,
                                            False]
        # "2 + 2 = 5" twice is dropped (its -0.1 a token would win); " \n" says nothing.
        assert samples.resample.chosen_text == "2 + 2 = 4"
        assert samples.resample.chosen_by == "logprob"
        [branch] = [event for event in events if isinstance(event, BranchMade)]
        assert (branch.step.number, branch.step.origin) == (2, StepOrigin.BACKTRACK)
        assert isinstance(events[-1], TraceFinished) and events[-1].reason == "answer"
        assert trace.texts == ["Let me work it out.", "2 + 2 = 4", "4 * 1 = 4",
                               "So the answer is 4"]
        assert trace.correct is True
        assert trace.label is None  # the flag was on the other branch

        sample_call, *continuation = openai_server.requests
        assert (sample_call.body["n"], sample_call.body["temperature"]) == (8, 1.0)
        assert not sample_call.body.get("stream")
        assert all(r.body["temperature"] == 0.0 and r.body["stream"] for r in continuation)

        # Every sample is stored with its call, choice and tokens; the chosen one points at
        # the step it became.
        stored = store.candidates(trace.id, original_ids[0], 2)
        assert [c.text for c in stored][:3] == ["2 + 2 = 5", "2 + 2 = 4", "2 + 2 = 22"]
        assert [c.dropped for c in stored] == samples.resample.dropped
        assert [c.step_id for c in stored if c.step_id] == [branch.step.id]
        assert all(c.tokens and "".join(t.text for t in c.tokens) == c.text
                   for c in stored if c.text)
        assert branch.step.logprob == pytest.approx(stored[1].logprob)

        # The original branch survives, with its label, in the store and after reopening.
        again = TraceSession.load(store, trace.id)
        assert again.texts == trace.texts
        versions = again.alternatives(2)
        assert versions[0].id == original_ids[1]
        again.switch_to(original_ids[1])
        assert [step.id for step in again.steps] == original_ids
        assert again.mistake_number == 2


@pytest.mark.parametrize("server", [
    {"one_choice": True},  # the parallel path: a provider that does not take n
    {},
])
async def test_the_n_path_and_the_parallel_path_choose_the_same(
    openai_server: FakeOpenAI, tmp_path: Path, server: dict
) -> None:
    openai_server.responder = responder(**server)
    model = "lm_studio/test" if server else "openai/test"
    with Store.open(tmp_path / "s.sqlite3") as store:
        trace = make_trace(store, openai_server, model)
        events = await backtrack(trace)
        samples = ready(events)
        assert samples.resample.samples.how == ("parallel" if server else "n")
        assert samples.resample.chosen_text == "2 + 2 = 4"
        # Read back from the store, on either path: each candidate's tokens spell exactly
        # its text and sum to its figure, the figures the call gave; the chosen one's is
        # its step's.
        stored = store.candidates(trace.id, trace.steps[0].id, 2)
        assert len(stored) == 8
        for candidate in stored:
            if candidate.text:  # " \n" is an empty step: nothing to spell
                assert candidate.tokens is not None
                assert "".join(t.text for t in candidate.tokens) == candidate.text
                assert candidate.logprob == pytest.approx(
                    sum(t.logprob for t in candidate.tokens))

        def figures(candidates) -> Counter:
            return Counter((c.text, None if c.logprob is None else round(c.logprob, 6))
                           for c in candidates)

        assert figures(stored) == figures(samples.resample.samples.candidates)
        assert len(figures(stored)) == 7  # "2 + 2 = 5" twice
        [branch] = [event for event in events if isinstance(event, BranchMade)]
        [chosen] = [c for c in stored if c.step_id is not None]
        assert chosen.step_id == branch.step.id and chosen.text == "2 + 2 = 4"
        assert TraceSession.load(store, trace.id).steps[1].logprob == pytest.approx(
            chosen.logprob)


async def test_a_server_that_ignores_n_gives_the_same_choice(
    openai_server: FakeOpenAI, tmp_path: Path
) -> None:
    base = responder()

    def ignoring_n(path: str, body: dict) -> Reply:
        reply = base(path, body)
        if reply.choices is None:
            return reply
        # llama-cpp-python: one choice whatever n says; the rest made up by parallel calls,
        # each of which answers with the next scripted sample.
        index = len([r for r in openai_server.requests if not r.body.get("stream")]) - 1
        return Reply(SAMPLED[index % 8], honor_stop=False, ignore_n=True,
                     logprob_per_token=LOGPROBS[index % 8])

    openai_server.responder = ignoring_n
    with Store.open(tmp_path / "s.sqlite3") as store:
        trace = make_trace(store, openai_server)
        samples = ready(await backtrack(trace))
        assert samples.resample.samples.how == "n+parallel"
        assert len(samples.resample.samples.candidates) == 8
        assert samples.resample.chosen_text == "2 + 2 = 4"


async def test_without_log_probabilities_the_first_that_differs(
    openai_server: FakeOpenAI, tmp_path: Path
) -> None:
    openai_server.responder = responder(logprobs=False)
    with Store.open(tmp_path / "s.sqlite3") as store:
        trace = make_trace(store, openai_server)
        samples = ready(await backtrack(trace))
        assert samples.resample.chosen == 1 and samples.resample.chosen_by == "first"


async def test_completion_mode_samples_are_not_streamed(
    openai_server: FakeOpenAI, tmp_path: Path
) -> None:
    openai_server.responder = responder()
    with Store.open(tmp_path / "s.sqlite3") as store:
        trace = make_trace(store, openai_server, mode="completion")
        samples = ready(await backtrack(trace))
        assert samples.resample.chosen_text == "2 + 2 = 4"
        first = openai_server.requests[0]
        assert first.path.endswith("/completions") and "chat" not in first.path
        assert first.body["n"] == 8 and not first.body.get("stream")


async def test_no_different_sample_leaves_the_trace_as_it_was(
    openai_server: FakeOpenAI, tmp_path: Path
) -> None:
    openai_server.responder = responder(sampled=[" 2 + 2 = 5\n"] * 8)
    with Store.open(tmp_path / "s.sqlite3") as store:
        trace = make_trace(store, openai_server)
        before = [step.id for step in trace.steps]
        events = await backtrack(trace)
        assert len(events) == 1 and ready(events).resample.chosen is None
        assert [step.id for step in trace.steps] == before
        assert [s.id for s in TraceSession.load(store, trace.id).steps] == before
        assert all(c.dropped for c in store.candidates(trace.id, before[0], 2))
        assert trace.mistake_number == 2


async def test_picking_another_candidate_makes_its_own_branch(
    openai_server: FakeOpenAI, tmp_path: Path
) -> None:
    openai_server.responder = responder()
    with Store.open(tmp_path / "s.sqlite3") as store:
        trace = make_trace(store, openai_server)
        first = trace.steps[0].id
        await backtrack(trace)
        other = next(c for c in trace.candidates_for(2) if c.text == "two plus two is four")
        events = [e async for e in trace.continue_with(other, settings=SETTINGS)]
        assert isinstance(events[0], BranchMade)
        assert trace.texts[1] == "two plus two is four"
        assert len(trace.tree.children(first)) == 3  # the original and two backtracks
        assert store.candidates(trace.id, first, 2)[3].step_id == trace.steps[1].id


async def test_a_rewritten_thought_is_a_new_branch(
    openai_server: FakeOpenAI, tmp_path: Path
) -> None:
    openai_server.responder = responder()
    with Store.open(tmp_path / "s.sqlite3") as store:
        trace = make_trace(store, openai_server)
        original = [step.id for step in trace.steps]
        events = [e async for e in trace.rewrite(2, "2 + 2 = 4", settings=SETTINGS)]
        assert events[0].step.origin == StepOrigin.EDIT
        assert any(isinstance(e, StepFinished) for e in events)
        assert trace.texts[:2] == ["Let me work it out.", "2 + 2 = 4"]
        assert trace.answer == "4"
        trace.switch_to(original[1])
        assert [s.id for s in trace.steps] == original and trace.mistake_number == 2


@pytest.mark.parametrize(("server", "model"), [
    ({}, "openai/test"),  # one call with n=8, log-probabilities
    ({"logprobs": False}, "openai/test"),  # n=8, none
    ({"one_choice": True}, "lm_studio/test"),  # eight calls of one choice each
])
async def test_a_backtracked_step_counts_its_own_tokens_not_its_calls_eight(
    openai_server: FakeOpenAI, tmp_path: Path, server: dict, model: str
) -> None:
    """A step chosen among the eight choices of one call is one of eight samples: its
    completion tokens are its own (where log-probabilities give its tokens; else none is
    claimed), never the call's count for all eight, and it has no cost of its own (the
    session's totals hold the call's). A sample that had its call is that call's."""
    openai_server.responder = responder(**server)
    with Store.open(tmp_path / "s.sqlite3") as store:
        trace = make_trace(store, openai_server, model)
        events = await backtrack(trace)
        samples = ready(events).resample.samples
        [branch] = [event for event in events if isinstance(event, BranchMade)]
        chosen = samples.candidates[ready(events).resample.chosen]
        call = samples.calls[chosen.call]
        step = branch.step
        if server.get("one_choice"):
            assert step.call_choices == 1
            assert (step.completion_tokens, step.cost) == (call.completion_tokens, call.cost)
        else:
            assert step.call_choices == 8 and step.cost is None
            assert call.completion_tokens > 8  # the server counted all eight choices
            own = len(chosen.tokens) if chosen.tokens else None
            assert step.completion_tokens == own == step.ntokens
            assert (own is None) == (server.get("logprobs") is False)
        assert step.prompt_tokens == call.prompt_tokens
        # The same figures after reopening, from the bulk load; the totals count each call.
        again = TraceSession.load(store, trace.id)
        loaded = again.steps[1]
        assert (loaded.completion_tokens, loaded.cost, loaded.call_choices, loaded.ntokens) == (
            step.completion_tokens, step.cost, step.call_choices, step.ntokens)
        assert store.totals(trace.id).completion_tokens == sum(
            c.completion_tokens for c in samples.calls) + sum(
            e.call.completion_tokens for e in events if isinstance(e, StepFinished))
        if chosen.tokens:
            assert loaded.confidence == pytest.approx(
                math.exp(sum(t.logprob for t in chosen.tokens) / len(chosen.tokens)))


def test_choose_follows_the_paper() -> None:
    def candidate(text: str, logprob: float | None) -> llm.Candidate:
        tokens = None if logprob is None else [TokenLogprob(text, logprob)]
        return llm.Candidate(text, tokens, text, "stop", False, 0, 0)

    with_scores = [candidate("a", -1.0), candidate("b", -0.5), candidate("c", -0.5)]
    assert choose(with_scores, [False, False, False]) == (1, "logprob")
    assert choose(with_scores, [False, True, False]) == (2, "logprob")
    without = [candidate("a", None), candidate("b", None)]
    assert choose(without, [True, False]) == (1, "first")
    assert choose(without, [True, True]) == (None, None)


async def test_prm800k_export_carries_each_thoughts_other_versions(
    openai_server: FakeOpenAI, tmp_path: Path
) -> None:
    """Issue 11, item 6: the samples in PRM800K's shape, rated where a label covers them."""
    from bbm_tui.core.annotation.export import LabelledTrace, prm800k_row

    openai_server.responder = responder()
    with Store.open(tmp_path / "s.sqlite3") as store:
        trace = make_trace(store, openai_server)  # the original flagged at Thought 2
        await backtrack(trace)
        trace.mark_no_mistake()  # the new branch is right throughout
        row = prm800k_row(LabelledTrace.of(TraceSession.load(store, trace.id)))
    first, second = row["label"]["steps"][:2]
    assert [c["text"] for c in first["completions"]] == ["Let me work it out."]
    completions = second["completions"]
    assert completions[0] == {"text": "2 + 2 = 4", "rating": 1, "flagged": None}
    others = {c["text"]: (c["rating"], c["source"]) for c in completions[1:]}
    # The original Thought 2 is on the branch flagged there; the samples no branch took are
    # unrated.
    assert others.pop("2 + 2 = 5") == (-1, "branch")
    assert others == {text: (None, "sample") for text in
                      ("2 + 2 = 22", "two plus two is four", "2 + 2 = 3", "2+2=4")}
    assert second["chosen_completion"] == 0
