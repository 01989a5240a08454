"""`run --mode thinking` (issue 32, item 4's rows): one call a trace, rows with the steps
(stripped), the answer and whether it is right, the model, the mode, the split rule, the raw
reasoning whole and its kind; offline with solver/thinking and over HTTP against the tests'
OpenAI-compatible server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bbm_tui.cli import main
from bbm_tui.core.dataset import bundled_path, bundled_rows
from bbm_tui.core.generation.splitting import split_text, stripped_steps
from bbm_tui.core.llm.offline import thinking as offline
from bbm_tui.core.prompts.thinking import thinking_messages, thinking_prompt
from bbm_tui.core.tasks import get_task
from bbm_tui.core.types import SplitRule
from tests.fake_server import pieces_of
from tests.openai_server import FakeOpenAI, Reply


def rows_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("rule", ["paragraph", "sentence"])
def test_run_thinking_offline(tmp_path: Path, rule: str) -> None:
    out = tmp_path / "out.jsonl"
    code = main(["run", "--task", "multistep_arithmetic", "--dataset", "--limit", "3",
                 "--model", "solver/thinking", "--mode", "thinking", "--split", rule,
                 "--out", str(out)])
    assert code == 0
    rows = rows_of(out)
    assert len(rows) == 3
    by_input = {row.input: row for row in bundled_rows("multistep_arithmetic")[:3]}
    for row in rows:
        reply = offline.respond(offline.MODEL, thinking_messages("multistep_arithmetic",
                                                                 row["input"]))
        assert row["reasoning"] == reply.reasoning and row["reasoning_kind"] == "raw"
        assert row["steps"] == stripped_steps(split_text(reply.reasoning, SplitRule(rule)))
        assert row["mode"] == "thinking" and row["split"] == rule
        assert row["model"] == "solver/thinking"
        answer = get_task("multistep_arithmetic").extract_answer(reply.content)
        assert row["answer"] == answer
        assert row["is_correct"] == (answer == by_input[row["input"]].target)
        assert row["usage"]["calls"] == 1


def test_run_thinking_over_http(openai_server: FakeOpenAI, tmp_path: Path) -> None:
    source = tmp_path / "multistep_arithmetic.jsonl"
    source.write_text("\n".join(bundled_path("multistep_arithmetic").read_text()
                                .splitlines()[:2]) + "\n")
    reasoning = "Let me plan.  I add the parts first.\n\nA is 5.\n\nWait, check: A is 5."
    for _ in range(2):
        openai_server.enqueue(Reply(text="The sum holds.\nSo the answer is 5",
                                    reasoning=reasoning, reasoning_tokens=40))
    out = tmp_path / "out.jsonl"
    code = main(["run", "--model", "openai/qwen3-8b", "--api-base", openai_server.base_url,
                 "--mode", "thinking", "--thinking-effort", "high", "--input", str(source),
                 "--concurrency", "2", "--out", str(out)])
    assert code == 0
    rows = rows_of(out)
    assert len(rows) == 2 and len(openai_server.requests) == 2  # one call a trace
    for row in rows:
        assert row["steps"] == ["Let me plan.  I add the parts first.", "A is 5.",
                                "Wait, check: A is 5."]
        assert row["reasoning"] == reasoning and row["reasoning_kind"] == "raw"
        assert row["answer"] == "5" and row["mode"] == "thinking" and row["split"] == "paragraph"
        # The server's own counts, once: the shares of the one call sum to them.
        assert row["usage"]["calls"] == 1 and row["usage"]["prompt_tokens"] > 20
        assert row["usage"]["completion_tokens"] == len(pieces_of(reasoning, None)) + len(
            pieces_of("The sum holds.\nSo the answer is 5", None))
    questions = {row["input"] for row in rows}
    for request in openai_server.requests:
        content = request.body["messages"][0]["content"]
        assert any(content == thinking_prompt("multistep_arithmetic", q) for q in questions)
        assert request.body["reasoning_effort"] == "high"
        assert "stop" not in request.body


def test_run_thinking_a_summary_is_said_so(openai_server: FakeOpenAI, tmp_path: Path) -> None:
    source = tmp_path / "multistep_arithmetic.jsonl"
    source.write_text(bundled_path("multistep_arithmetic").read_text().splitlines()[0] + "\n")
    openai_server.enqueue(Reply(text="So the answer is 5", reasoning="**Adding up**\n\nDone."))
    out = tmp_path / "out.jsonl"
    assert main(["run", "--model", "openai/claude-sonnet-4-5", "--api-base",
                 openai_server.base_url, "--mode", "thinking", "--input", str(source),
                 "--out", str(out)]) == 0
    (row,) = rows_of(out)
    assert row["reasoning_kind"] == "summary" and row["steps"] == ["**Adding up**", "Done."]


def test_a_bad_split_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit):
        main(["run", "--dataset", "--task", "dyck_languages", "--split", "word",
              "--out", str(tmp_path / "o.jsonl")])
    assert "invalid choice: 'word'" in capsys.readouterr().err


def test_the_config_says_thinking(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "config.toml"
    config.write_text('model = "solver/thinking"\nmode = "thinking"\nsplit = "line"\n'
                      'thinking_effort = "low"\n', encoding="utf-8")
    monkeypatch.setenv("BBM_TUI_CONFIG", str(config))
    out = tmp_path / "out.jsonl"
    assert main(["run", "--task", "dyck_languages", "--dataset", "--limit", "1",
                 "--out", str(out)]) == 0
    (row,) = rows_of(out)
    assert row["mode"] == "thinking" and row["split"] == "line"
    assert row["steps"] == stripped_steps(split_text(row["reasoning"], SplitRule.LINE))


def test_a_bad_split_in_the_config_names_the_line(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "config.toml"
    config.write_text('mode = "thinking"\nsplit = "words"\n', encoding="utf-8")
    monkeypatch.setenv("BBM_TUI_CONFIG", str(config))
    from bbm_tui.core.config import ConfigError, load_config

    with pytest.raises(ConfigError, match=r"line 2.*'split' must be one of"):
        load_config()


def test_thinking_rows_are_dataset_rows_to_import_and_export(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """`run --mode thinking`'s rows are dataset rows: `import` (what the annotation queue and
    agreement read) knows them for the traces `run` saved, and `export` gives them back, steps
    and all."""
    out = tmp_path / "multistep_arithmetic.jsonl"
    assert main(["run", "--task", "multistep_arithmetic", "--dataset", "--limit", "2",
                 "--model", "solver/thinking", "--mode", "thinking", "--out", str(out)]) == 0
    rows = rows_of(out)
    assert main(["import", str(out)]) == 0
    assert "2 traces already saved (by `run`" in capsys.readouterr().err
    exported = tmp_path / "exported.jsonl"
    assert main(["export", "--out", str(exported)]) == 0
    back = {row["input"]: row for row in rows_of(exported)}
    for row in rows:
        assert back[row["input"]]["steps"] == row["steps"]


# -- the temperature of a thinking call (--temperature, the config's `temperature`)


def one_question(tmp_path: Path) -> Path:
    source = tmp_path / "multistep_arithmetic.jsonl"
    source.write_text(bundled_path("multistep_arithmetic").read_text().splitlines()[0] + "\n")
    return source


def test_the_temperature_given_reaches_the_thinking_call(
        openai_server: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--temperature is sent with the thinking call; the config's `temperature` too; unset,
    none is sent (the provider's default, not the paper's 0 of the step-at-a-time mode)."""
    source = one_question(tmp_path)
    config = tmp_path / "config.toml"
    monkeypatch.setenv("BBM_TUI_CONFIG", str(config))
    sent: list[object] = []
    for typed, in_config in ((["--temperature", "0.6"], ""), ([], "temperature = 0.3\n"),
                             ([], "")):
        config.write_text(in_config, encoding="utf-8")
        openai_server.enqueue(Reply(text="So the answer is 5", reasoning="A is 5.\n\nDone."))
        out = tmp_path / f"out-{len(sent)}.jsonl"
        assert main(["run", "--model", "openai/qwen3-8b", "--api-base", openai_server.base_url,
                     "--mode", "thinking", "--input", str(source), *typed,
                     "--out", str(out)]) == 0
        sent.append(openai_server.requests[-1].body.get("temperature", "unset"))
        (row,) = rows_of(out)
        assert row["answer"] == "5"
    assert sent == [0.6, 0.3, "unset"]


def test_a_temperature_anthropic_refuses_stops_the_run_before_any_call(
        anthropic_server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Anthropic takes only temperature 1 with thinking on: --temperature 0.5 is one usage
    error saying which and why, and the server sees no request."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-123")
    anthropic_server.api_key = "test-key-123"
    out = tmp_path / "out.jsonl"
    code = main(["run", "--model", "anthropic/claude-sonnet-4-5", "--api-base",
                 anthropic_server.base_url, "--mode", "thinking", "--temperature", "0.5",
                 "--input", str(one_question(tmp_path)), "--out", str(out)])
    assert code == 2
    assert capsys.readouterr().err == ("bbm-tui: temperature 0.5: Anthropic takes only "
                                       "temperature 1 with thinking on (leave it unset)\n")
    assert anthropic_server.requests == [] and not out.exists()


def test_a_temperature_out_of_range_is_a_usage_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", "--model", "solver/thinking", "--mode", "thinking", "--dataset",
                 "--task", "dyck_languages", "--temperature", "2.5",
                 "--out", str(tmp_path / "o.jsonl")])
    assert code == 2
    assert capsys.readouterr().err == "bbm-tui: --temperature must be from 0 to 2 (got 2.5)\n"


def test_an_exported_summary_says_so_and_comes_back_a_thinking_trace(
        openai_server: FakeOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A provider's summary (Claude 4's) exported from the store: the JSONL row carries the
    reasoning whole with `reasoning_kind: "summary"`, the split and the mode, as `run`'s row
    does, and imported again it is a thinking trace of that summary; the Markdown export says
    the thoughts are cut from a summary, not the reasoning."""
    summary = "**Adding up**\n\nThe parts are 1 and 4.\n\nDone."
    openai_server.enqueue(Reply(text="So the answer is 5", reasoning=summary))
    out = tmp_path / "out.jsonl"
    assert main(["run", "--model", "openai/claude-sonnet-4-5", "--api-base",
                 openai_server.base_url, "--mode", "thinking", "--split", "sentence",
                 "--input", str(one_question(tmp_path)), "--out", str(out)]) == 0
    exported, markdown = tmp_path / "exported.jsonl", tmp_path / "exported.md"
    assert main(["export", "--out", str(exported)]) == 0
    assert main(["export", "--format", "markdown", "--out", str(markdown)]) == 0
    (row,) = rows_of(exported)
    assert (row["mode"], row["split"], row["reasoning"], row["reasoning_kind"]) == (
        "thinking", "sentence", summary, "summary")
    assert row["steps"] == stripped_steps(split_text(summary, SplitRule.SENTENCE))
    assert ("- thoughts: the provider's summary of the model's reasoning (not the reasoning "
            "itself), cut by sentence\n") in markdown.read_text(encoding="utf-8")
    # Into another store: a thinking trace of the summary again, not a recorded one.
    capsys.readouterr()
    from bbm_tui.core.annotation.export import import_rows
    from bbm_tui.core.dataset import read_input_rows
    from bbm_tui.core.store import Store
    from bbm_tui.core.trace.session import TraceSession

    other = tmp_path / "other"
    other.mkdir()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BBM_TUI_HOME", str(other))
        with Store.open() as store:
            [session_id] = import_rows(store, "multistep_arithmetic",
                                       read_input_rows(exported)).imported
            trace = TraceSession.load(store, session_id)
            reasoning = trace.reasoning()
            assert reasoning is not None and (reasoning.text, reasoning.kind) == (
                summary, "summary")
            assert trace.split_rule() == SplitRule.SENTENCE and trace.texts == row["steps"]


def test_the_csv_exports_name_each_labelled_traces_reasoning_kind(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """`export --format csv` and `csv-steps` carry `reasoning_kind` as the JSONL rows name it:
    "raw" for a thinking model's reasoning, "summary" for a provider's summary (so that a
    spreadsheet of labels does not pass a summary off as the model's thinking), empty for a
    step-at-a-time trace; for the app's labels, an imported file's and an annotator's."""
    import csv

    from bbm_tui.core.store import Store
    from bbm_tui.core.trace.session import TraceSession

    raw = "A is 4 + 6 = 10.\n\nB is 9 - 5 + 1 = 5.\n\nSo the product is 10 * 5 = 50."
    summary = "**Working out the parts**\n\nThe parts are 10 and 5.\n\nTheir product is 50."

    def thinking_row(question: str, reasoning: str, kind: str, mistake: int | None) -> dict:
        return {"input": question, "steps": stripped_steps(split_text(reasoning,
                                                                      SplitRule.PARAGRAPH)),
                "answer": "50", "target": "50", "mistake_index": mistake, "mode": "thinking",
                "split": "paragraph", "reasoning": reasoning, "reasoning_kind": kind,
                "answer_text": "So the answer is 50"}

    path = tmp_path / "labelled.jsonl"
    rows = [thinking_row("((4 + 6) * (9 - 5 + 1)) =", raw, "raw", 1),
            thinking_row("((4 + 6) * (9 - 4)) =", summary, "summary", None),
            {"input": "((1 + 4) * 2) =", "steps": ["1 + 4 = 5.", "5 * 2 = 12."],
             "answer": "12", "target": "10", "mistake_index": 1}]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    assert main(["import", str(path), "--task", "multistep_arithmetic"]) == 0
    with Store.open() as store:
        ids = sorted(summary.session.id for summary in store.sessions())
        kinds = dict(zip(ids, ["raw", "summary", ""], strict=True))
        # An annotator's label on the summary: its first mistake at Thought 2.
        trace = TraceSession.load(store, ids[1])
        store.set_label(ids[1], trace.steps[1].id, trace.steps[-1].id, annotator="alice")
    capsys.readouterr()

    def exported(fmt: str) -> list[dict[str, str]]:
        out = tmp_path / f"labels-{fmt}.csv"
        assert main(["export", "--format", fmt, "--out", str(out)]) == 0
        with out.open(newline="", encoding="utf-8") as opened:
            return list(csv.DictReader(opened))

    labels = exported("csv")
    assert sorted((int(row["session_id"]), row["annotator"], row["reasoning_kind"])
                  for row in labels) == [
        (ids[0], "imported", "raw"), (ids[1], "alice", "summary"),
        (ids[1], "imported", "summary"), (ids[2], "imported", "")]
    ratings = exported("csv-steps")
    assert {(int(row["session_id"]), row["reasoning_kind"]) for row in ratings} == set(
        kinds.items())
    assert all(row["reasoning_kind"] == kinds[int(row["session_id"])] for row in ratings)
