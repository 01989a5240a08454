"""The cost a user sees on the command line (issue 20, item 5): `run`, `find` and `backtrack`
summaries give the calls, the input / cached / output tokens and the cost, their --json the
same figures, `bbm-tui sessions` a cost per session; a cost no one knows is "cost unknown"
(with a note naming the model), never "$0.0000". Real HTTP to the local servers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bbm_tui.cli import main
from bbm_tui.core.accounting import format_cost, format_total_cost
from bbm_tui.core.dataset import bundled_path
from bbm_tui.core.store import Store
from tests.openai_server import FakeOpenAI, Reply, dataset_responder


def one_question(folder: Path, task: str = "word_sorting") -> Path:
    source = folder / f"{task}.jsonl"
    source.write_text(bundled_path(task).read_text().splitlines()[0] + "\n")
    return source


def cached_responder(path: str, body: dict) -> Reply:
    """The dataset's model, on a server that read 512 of each prompt's tokens from its cache."""
    reply = dataset_responder(path, body)
    reply.cached_tokens = 512
    return reply


def test_run_summary_and_json_give_tokens_and_cost(
    openai_server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    openai_server.responder = cached_responder
    out = tmp_path / "out.jsonl"
    code = main(["run", "--model", "openai/gpt-4o-mini", "--api-base", openai_server.base_url,
                 "--input", str(one_question(tmp_path)), "--out", str(out), "--no-progress",
                 "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    summary = json.loads(captured.out)
    with Store.open() as store:
        [session] = store.sessions()
        totals = store.totals(session.session.id)
    usage = summary["usage"]
    assert (usage["calls"], usage["prompt_tokens"], usage["completion_tokens"]) == (
        totals.calls, totals.prompt_tokens, totals.completion_tokens)
    assert usage["cached_tokens"] == 512 * totals.calls == totals.cached_tokens
    assert usage["cost"] == pytest.approx(totals.cost) and usage["cost"] > 0
    assert (usage["unpriced_calls"], usage["cost_unknown_for"]) == (0, [])
    assert (summary["written"], summary["steps"]) == (1, totals.calls)
    line = captured.err.strip().splitlines()[-1]
    assert line == (
        f"1 trace written to {out}, 0 already there, 0 failed; {totals.calls} steps, "
        f"{totals.calls} calls, {totals.prompt_tokens:,} in / {totals.cached_tokens:,} cached / "
        f"{totals.completion_tokens:,} out tokens, {format_cost(totals.cost)}")


def test_a_cost_no_one_knows_is_said_to_be_unknown(openai_server: FakeOpenAI, tmp_path: Path,
                                                   capsys) -> None:
    """litellm has no price for a local model: not "$0.0000", and the summary says for which
    model the cost is unknown."""
    openai_server.responder = dataset_responder
    out = tmp_path / "out.jsonl"
    code = main(["run", "--model", "openai/my-local-model", "--api-base",
                 openai_server.base_url, "--input", str(one_question(tmp_path)), "--out",
                 str(out), "--no-progress", "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "$0.0000" not in captured.err and "$0" not in captured.err
    calls = json.loads(captured.out)["usage"]["calls"]
    assert captured.err.strip().splitlines()[-1].endswith(" tokens, cost unknown")
    assert (f"note: cost unknown for openai/my-local-model ({calls} calls): litellm has no "
            "price for the model, or the provider reported no usage") in captured.err
    usage = json.loads(captured.out)["usage"]
    assert (usage["cost"], usage["unpriced_calls"], usage["cost_unknown_for"]) == (
        None, calls, ["openai/my-local-model"])
    # The sessions list says the same.
    assert main(["sessions"]) == 0
    listed = capsys.readouterr().out
    assert f"unlabelled       {'—':>9}  openai/my-local-model" in listed
    assert main(["sessions", "--json"]) == 0
    row = json.loads(capsys.readouterr().out.splitlines()[0])
    assert (row["calls"], row["cost"], row["unpriced_calls"]) == (calls, None, calls)


def test_find_and_backtrack_summaries_and_json_give_tokens_and_cost(
    openai_server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys,
) -> None:
    from tests.test_backtrack import responder
    from tests.test_backtrack_cli import dataset_file

    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    openai_server.enqueue(*(Reply(text="No", prompt_tokens=1200, cached_tokens=1024)
                            for _ in range(2)))
    source = dataset_file(tmp_path / "multistep_arithmetic.jsonl")
    code = main(["find", "--model", "openai/gpt-4o-mini", "--api-base", openai_server.base_url,
                 "--method", "direct-trace", "--input", str(source), "--out",
                 str(tmp_path / "preds.jsonl"), "--no-progress", "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    usage = json.loads(captured.out)["usage"]
    assert (usage["calls"], usage["prompt_tokens"], usage["cached_tokens"]) == (2, 2400, 2048)
    assert usage["cost"] > 0 and usage["unpriced_calls"] == 0
    assert (f"2 traces judged into {tmp_path / 'preds.jsonl'}, 0 already there, 0 failed; "
            f"2 calls, 2,400 in / 2,048 cached / {usage['completion_tokens']} out tokens, "
            f"{format_cost(usage['cost'])}") in captured.err

    openai_server.responder = responder()
    code = main(["backtrack", "--model", "openai/test", "--api-base", openai_server.base_url,
                 "--input", str(source), "--locations", "gold", "--out",
                 str(tmp_path / "back.jsonl"),
                 "--no-progress", "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    usage = json.loads(captured.out)["usage"]
    assert usage["calls"] == 3 and usage["cost"] is None
    assert usage["cost_unknown_for"] == ["openai/test"]
    assert captured.err.strip().splitlines()[-1].endswith(" tokens, cost unknown")


def test_costs_read_the_same_everywhere() -> None:
    assert [format_cost(c) for c in (None, 0, 0.0031, 0.00042, 0.000031, 1.23456)] == [
        "—", "$0", "$0.0031", "$0.00042", "$0.000031", "$1.2346"]
    assert format_total_cost(0.0, 3, 3) == "—"
    assert format_total_cost(0.002, 3, 1) == "≥$0.0020"
    assert format_total_cost(0.0, 0, 0) == "$0"
