"""llama.cpp's llama-server leaves the last token before a stop sequence out of a whole
answer's token list (measured on the real server, docs/NOTES.md: " alphabet." came with the
tokens of " alphabet", on every sample; a streamed answer, or one without `stop`, sends every
token). The samples of a backtrack then had no log-probability at all and the paper's rule
fell silently to "the first that differs". Now a sample's tokens may stop short of its end
by what the server withheld: the sample is scored on the rest, and the choice says so.

tests/openai_server.py reproduces the server (`withhold_token_before_stop`)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from bbm_tui.cli import main
from bbm_tui.core import llm
from bbm_tui.core.dataset import read_rows
from bbm_tui.core.llm.transport import aligned_tokens_short_of_stop
from bbm_tui.core.records import TokenLogprob
from tests.openai_server import FakeOpenAI, Reply
from tests.test_backtrack_cli import dataset_file
from tests.test_providers_cli import backtrack_responder
from tests.test_sampling_http import CHOICES, LOGPROBS, PROMPT

UNSCORED = ("log-probabilities: the server sent none for the token before the stop (as "
            "llama-server does); each sample's total leaves it out")


def tokens_of(server: FakeOpenAI, body: dict) -> tuple[str, str]:
    answer = httpx.post(f"{server.base_url}/chat/completions", json=body).json()
    choice = answer["choices"][0]
    return (choice["message"]["content"],
            "".join(token["token"] for token in choice["logprobs"]["content"]))


def test_the_test_server_withholds_as_llama_server_does(openai_server: FakeOpenAI) -> None:
    openai_server.withhold_token_before_stop = True
    openai_server.responder = lambda path, body: Reply(
        "I should sort the alphabet.\nThought 3: more", logprob_per_token=-0.5)
    body = {"model": "tiny", "messages": [{"role": "user", "content": "Q"}], "logprobs": True}
    # At the stop: the text is whole, its tokens stop short by the last one.
    assert tokens_of(openai_server, body | {"stop": ["\n"]}) == (
        "I should sort the alphabet.", "I should sort the ")
    # Without a stop, every token.
    text, tokens = tokens_of(openai_server, body)
    assert text == tokens == "I should sort the alphabet.\nThought 3: more"
    # Streamed, every token too.
    with httpx.stream("POST", f"{openai_server.base_url}/chat/completions",
                      json=body | {"stop": ["\n"], "stream": True}) as response:
        events = [json.loads(line[6:]) for line in response.iter_lines()
                  if line.startswith("data: {")]
    streamed = "".join(token["token"] for event in events for choice in event["choices"]
                       for token in (choice.get("logprobs") or {}).get("content") or [])
    assert streamed == "I should sort the alphabet."


def test_alignment_accepts_a_short_withheld_end_and_nothing_else() -> None:
    raw = " Sort them by the first letter.\nThought 3: x"
    end = raw.index("\n")
    tokens = [TokenLogprob(text, -1.0) for text in (" Sort", " them", " by", " the",
                                                    " first", " letter")]
    kept, withheld = aligned_tokens_short_of_stop(raw, tokens, 1, end)
    assert "".join(token.text for token in kept) == "Sort them by the first letter"
    assert withheld == "."
    # Tokens that spell something else, or stop far short, are not the step's.
    assert aligned_tokens_short_of_stop(raw, tokens[:2], 1, end) == (None, "")
    other = [TokenLogprob(" Sort them by size", -1.0)]
    assert aligned_tokens_short_of_stop(raw, other, 1, end) == (None, "")


async def test_every_sample_gets_its_log_probability_from_a_server_that_withholds(
    openai_server: FakeOpenAI,
) -> None:
    openai_server.withhold_token_before_stop = True
    openai_server.responder = lambda path, body: Reply(choices=CHOICES,
                                                       choice_logprobs=LOGPROBS)
    settings = llm.CallSettings(temperature=1.0, max_tokens=64, logprobs=True,
                                retry=llm.RetryPolicy(attempts=1))
    spec = llm.ModelSpec("openai/tiny", api_base=openai_server.base_url)
    samples = await llm.sample_steps(spec, PROMPT, 8, settings)
    assert openai_server.requests[0].body["stop"] == ["\n"]
    for candidate in samples.candidates:
        if len(candidate.text.split()) == 1:
            # All of it withheld: nothing to score it by (never taken for a likely one).
            assert (candidate.logprob, candidate.unscored) == (None, "")
            continue
        assert candidate.logprob is not None, candidate
        scored = "".join(token.text for token in candidate.tokens)
        assert scored + candidate.unscored == candidate.text
        assert candidate.unscored  # the last word, as the server left it out


def test_backtrack_on_a_server_that_withholds_ranks_by_log_probability_and_says_so(
    openai_server: FakeOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture,
) -> None:
    openai_server.withhold_token_before_stop = True
    openai_server.responder = backtrack_responder(logprobs=True, honor_stop=True)
    source = dataset_file(tmp_path / "multistep_arithmetic.jsonl")
    out = tmp_path / "out.jsonl"
    code = main(["backtrack", "--model", "openai/tiny", "--api-base", openai_server.base_url,
                 "--input", str(source), "--out", str(out), "--no-progress",
                 "--locations", "gold"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert f"note: {UNSCORED}" in err.splitlines()
    samples = read_rows(out)[0].extra["samples"]
    usable = [(sample["logprob"], index) for index, sample in enumerate(samples)
              if not sample["dropped"] and sample["text"].strip()]
    # Each has its log-probability but a one-token sample, which the server left bare.
    assert [index for logprob, index in usable if logprob is None] == [6]
    usable = [(logprob, index) for logprob, index in usable if logprob is not None]
    best = max(usable, key=lambda pair: (pair[0], -pair[1]))[1]
    assert [sample["chosen"] for sample in samples].index(True) == best
