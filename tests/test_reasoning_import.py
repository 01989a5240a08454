"""Reasoning written elsewhere comes in (issue 32, item 6): a JSONL of question / reasoning /
answer / target rows (the reasoning in its own key or between `<think>` tags) and DeltaBench's
CSV (its sections, its error sections as the label), cut into steps by `--split`, through
`import` and `annotate`. Bad rows are one message naming file and line. The fixtures in
tests/fixtures/formats/ (reasoning.jsonl, deltabench.csv) are written by hand from the shapes
DeltaBench publishes (its CSV's header, `sectionN:` headings, label lists as text) and the
shapes thinking models write; every expected value below is written out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bbm_tui.cli import main
from bbm_tui.cli.annotate import read_annotation_files
from bbm_tui.core.dataset import DatasetError, read_input_rows
from bbm_tui.core.dataset.formats import StepCut, detect_format, read_dataset
from bbm_tui.core.dataset.formats.documents import iter_rows
from bbm_tui.core.generation.cuts import step_cut
from bbm_tui.core.store import Store
from bbm_tui.core.trace.session import TraceSession
from bbm_tui.core.types import SplitRule

FIXTURES = Path(__file__).parent / "fixtures" / "formats"
REASONING = FIXTURES / "reasoning.jsonl"
DELTABENCH = FIXTURES / "deltabench.csv"


def cut(rule: str = "paragraph") -> StepCut:
    return step_cut(rule)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def write(path: Path, *rows: object) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


# -- the reasoning JSONL


def test_reasoning_rows_by_paragraph() -> None:
    found = read_dataset(REASONING, cut=cut())
    assert found.format.name == "reasoning"  # told by content, no --format
    first, second, third = found.traces
    assert first.input == "Is 17 prime?"
    assert first.steps == ["17 is odd, so 2 does not divide it.",
                           "Wait, check 3: 1 + 7 = 8, not a multiple of 3. E.g. 4 squared "
                           "is 16 < 17.",
                           "So only 1 and 17 divide it."]
    assert (first.answer, first.target) == ("Yes", "Yes")
    assert not first.labelled
    assert first.extra["reasoning"] == ("17 is odd, so 2 does not divide it.\n\nWait, check "
                                        "3: 1 + 7 = 8, not a multiple of 3. E.g. 4 squared "
                                        "is 16 < 17.\n\nSo only 1 and 17 divide it.")
    assert (first.extra["mode"], first.extra["split"], first.extra["reasoning_kind"]) == (
        "thinking", "paragraph", "raw")
    origin = first.extra["origin"]
    assert origin["format"] == "reasoning"
    assert origin["fields"] == {"model": "deepseek-r1"}
    assert first.extra["answer_text"] == "So the answer is Yes."
    # `<think>` in a model's output: the reasoning between the tags, the answer after.
    assert second.input == "What is 12 * 12?"
    assert second.steps == ["12 * 12 = 144.", "Check: 12 * 10 = 120, plus 24 is 144."]
    assert second.extra["reasoning"] == ("\n12 * 12 = 144.\n\nCheck: 12 * 10 = 120, plus 24 "
                                         "is 144.\n")
    assert (second.answer, second.target) == ("144", "144")
    assert "<think>" not in "".join(second.steps)
    # A label on the steps as cut.
    assert third.labelled and third.mistake_index == 0
    assert (third.answer, third.target) == ("8", "7")


def test_the_split_rule_cuts_the_same_reasoning_differently() -> None:
    by_sentence = read_dataset(REASONING, cut=cut("sentence")).traces[0]
    assert by_sentence.steps == ["17 is odd, so 2 does not divide it.",
                                 "Wait, check 3: 1 + 7 = 8, not a multiple of 3.",
                                 "E.g. 4 squared is 16 < 17.",
                                 "So only 1 and 17 divide it."]
    assert by_sentence.extra["split"] == "sentence"
    by_line = read_dataset(REASONING, fmt="reasoning", cut=cut("line")).traces[1]
    assert by_line.steps == ["12 * 12 = 144.", "Check: 12 * 10 = 120, plus 24 is 144."]
    # The raw reasoning is the same whatever the cut: the steps are a view of it.
    assert by_sentence.extra["reasoning"] == read_dataset(REASONING, cut=cut()).traces[0].extra[
        "reasoning"]


@pytest.mark.parametrize(("row", "said"), [
    ({"question": "q", "reasoning": 7}, "'reasoning' must be a string, not int"),
    ({"reasoning": "r", "question": None, "input": "x"}, "'question' must be a string"),
    ({"question": "q", "reasoning": "  \n"}, "'reasoning' holds no reasoning"),
    ({"question": "q", "output": "no tags here </thin>"},
     "a model's output must hold its reasoning between <think> and </think>"),
    ({"question": "q", "answer": "no reasoning at all"}, "missing key 'reasoning' (or a "
                                                          "model's output with <think>"),
    ({"question": "q", "reasoning": "a\n\nb", "mistake_index": 2},
     "'mistake_index' 2 is outside the 2 steps"),
    ({"question": "q", "reasoning": "a", "mistake_index": "1"},
     "'mistake_index' must be a whole number"),
    ({"question": "q", "reasoning": "a", "target": ["x"]}, "'target' must be a string"),
])
def test_bad_reasoning_rows_name_file_and_line(tmp_path: Path, row: dict, said: str) -> None:
    good = {"question": "Is 2 prime?", "reasoning": "Yes.", "answer": "Yes"}
    path = write(tmp_path / "mine.jsonl", good, good, row)
    with pytest.raises(DatasetError) as caught:
        read_dataset(path, cut=cut())
    assert str(caught.value).startswith(f"{path}:3: Reasoning row: {said}")


def test_a_model_output_must_close_its_reasoning(tmp_path: Path) -> None:
    path = write(tmp_path / "outputs.jsonl",
                 {"question": "q", "output": "<think>a</think>b"},
                 {"question": "q", "output": "<think>a never closed"})
    with pytest.raises(DatasetError, match=r"outputs.jsonl:2: Reasoning row: a model's output "
                                           "must hold its reasoning between <think> and"):
        read_dataset(path, fmt="reasoning", cut=cut())


def test_a_reasoning_opened_in_the_prompt(tmp_path: Path) -> None:
    """DeepSeek-R1's template opens `<think>` in the prompt: the output has only `</think>`."""
    path = write(tmp_path / "r1.jsonl",
                 {"question": "q", "response": "First.\n\nSecond.\n</think>\n\n\\boxed{4}",
                  "target": "4"})
    [row] = read_dataset(path, cut=cut()).traces
    assert row.steps == ["First.", "Second."]
    assert row.answer == "4"


def test_rows_with_steps_are_not_reasoning_rows() -> None:
    """A thinking run's own rows (steps, and the reasoning beside them) stay the BBM
    dataset's: read as they were cut, never cut again."""
    row = {"input": "q", "steps": ["a"], "answer": None, "target": "", "reasoning": "a",
           "mode": "thinking", "split": "paragraph"}
    found = detect_format(row)
    assert found is not None and found.name == "bbm"


def test_a_command_that_cannot_cut_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "stats", str(REASONING))
    assert code == 2 and out == ""
    assert err == (f"bbm-tui: {REASONING}: holds Reasoning rows, whose reasoning is cut into "
                   "steps by a split rule: `import` or `annotate` reads them (--split "
                   "paragraph, sentence or line)\n")


# -- DeltaBench


def test_deltabench_csv_sections_and_their_label() -> None:
    found = read_dataset(DELTABENCH, cut=cut())
    assert found.format.name == "deltabench"
    assert [line for line, _row in found.rows] == [2, 17]  # a row's cells span lines
    first, second = found.traces
    assert first.input == "What is the number of possible values of $k$ with $k \\leq 2940$?"
    assert first.target == "30"
    assert first.steps == [
        "Let's tackle this step by step. We need the gcd to be a perfect square.",
        "First, factor 205800 = 2^3 * 3 * 5^2 * 7^3.",
        "Now 35k = 5 * 7 * k, so the exponents of 5 and 7 depend on k.",
        "Other primes in k do not matter, so we ignore them.",
        "Counting the cases gives 20 + 2 + 1 + 5 + 1 = 29.",
        "**final answer**\n\\boxed{29}",
    ]
    # Section 3 is DeltaBench's first wrong one: its first step is the label.
    assert first.labelled and first.mistake_index == 3
    assert first.answer == "29"
    fields = first.extra["origin"]["fields"]
    assert fields["step_sections"] == [1, 1, 2, 3, 3, 4]
    assert fields["reason_error_section_numbers"] == [3]
    assert fields["stragegy_shift_section_numbers"] == [2]
    assert fields["id"] == "f11c7a6b" and fields["error_type"] == "Premise Error"
    assert first.extra["reasoning"].startswith("Let's tackle this step by step.")
    assert "section2:" not in first.extra["reasoning"]
    # No error section: labelled, no mistake.
    assert second.labelled and second.mistake_index is None
    assert second.steps == ['Alright, so I need to count numbers without "13".',
                            "Count by digits: the answer is 1287.", "\\boxed{1287}"]


def test_deltabench_by_sentence_keeps_the_label_on_its_section() -> None:
    first = read_dataset(DELTABENCH, cut=cut("sentence")).traces[0]
    assert first.steps[first.mistake_index or 0] == (
        "Other primes in k do not matter, so we ignore them.")
    assert first.extra["origin"]["fields"]["step_sections"] == [1, 1, 1, 2, 3, 3, 4]


def test_deltabench_json_lines_too(tmp_path: Path) -> None:
    """DeltaBench's JSON Lines file has the same columns, its label lists as lists."""
    path = write(tmp_path / "Deltabench_v1.jsonl", {
        "id": "x", "question": "q", "answer": "2",
        "sections_content": "section1: One.\n\n\nsection2: Two, wrongly.\n\n\nsection3: 2",
        "reason_error_section_numbers": [2], "reflection_section_numbers": []})
    [row] = read_dataset(path, cut=cut()).traces
    assert row.steps == ["One.", "Two, wrongly.", "2"]
    assert row.mistake_index == 1


CSV_HEADER = "id,question,answer,sections_content,reason_error_section_numbers\n"


@pytest.mark.parametrize(("row", "said"), [
    ('b,q,1,"no heading at all",[]', "'sections_content' has no 'section1:' heading"),
    ('b,q,1,"section1: a\n\nsection2:   ",[]', "'sections_content': section 2 is empty"),
    ('b,q,1,"section1: a\n\nsection2: b",[3]',
     "'reason_error_section_numbers': section 3 is outside the 2 sections"),
    ('b,q,1,"section1: a",three', "'reason_error_section_numbers' must be a list of section "
                                  "numbers such as [2, 7], not 'three'"),
    ('b,q,1,"section1: a",[1],extra', "a CSV row of 6 cells, under a header of 5 names"),
    ('b,q,1,"section1: a\n\nsection2: b', "malformed CSV"),
])
def test_bad_deltabench_rows_name_file_and_line(tmp_path: Path, row: str, said: str) -> None:
    path = tmp_path / "delta.csv"
    good = 'a,q,1,"section1: x\n\nsection2: y",[2]\n'
    path.write_text(CSV_HEADER + good + good + row + "\n", encoding="utf-8")
    with pytest.raises(DatasetError) as caught:
        read_dataset(path, cut=cut())
    where = f"{path}:8: " if said != "malformed CSV" else f"{path}:8: malformed CSV"
    assert str(caught.value).startswith(where), str(caught.value)
    assert said in str(caught.value)


def test_a_csv_named_otherwise_is_told_by_its_header(tmp_path: Path) -> None:
    path = tmp_path / "delta.txt"
    path.write_bytes(DELTABENCH.read_bytes())
    assert [line for line, _row in iter_rows(path)] == [2, 17]


# -- through the commands


def test_import_cuts_by_split_and_keeps_the_reasoning(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Imported as a run stores a thinking trace (store v17): the reasoning whole, the
    steps a view of it cut by --split, on show; labels as the file gives them."""
    code, _, err = run(capsys, "import", str(REASONING), "--split", "sentence")
    assert code == 0, err
    assert err.startswith("3 sessions imported (2 of them unlabelled)")
    code, _, err = run(capsys, "import", str(DELTABENCH))
    assert code == 0, err
    with Store.open() as store:
        first = TraceSession.load(store, 1)
        assert first.texts == ["17 is odd, so 2 does not divide it.",
                               "Wait, check 3: 1 + 7 = 8, not a multiple of 3.",
                               "E.g. 4 squared is 16 < 17.", "So only 1 and 17 divide it."]
        assert [step.origin for step in first.steps] == ["thinking"] * 4
        assert first.split_rule() == "sentence"
        reasoning = first.reasoning()
        assert reasoning is not None and reasoning.complete
        assert reasoning.text == read_dataset(REASONING, cut=cut()).traces[0].extra["reasoning"]
        assert (reasoning.kind, reasoning.answer_text) == ("raw", "So the answer is Yes.")
        assert first.steps[-1].answer == "Yes"
        third = TraceSession.load(store, 3)
        assert third.mistake_number == 1
        delta = TraceSession.load(store, 4)
        assert delta.session.task == "deltabench"
        assert len(delta.texts) == 6
        assert delta.session.gold_mistake_index == 3
        assert delta.mistake_number == 4
        # Cut again by another rule: a new view of the same text, no call.
        assert delta.recut(SplitRule.LINE)
        assert len(delta.texts) == 7
    # Imported twice: the same traces, not made again.
    code, _, err = run(capsys, "import", str(REASONING), "--split", "sentence")
    assert code == 0 and "3 traces already saved" in err, err


def test_annotate_reads_reasoning_cut_by_split() -> None:
    traces = read_annotation_files([REASONING, DELTABENCH], None, None, cut("line"))
    assert [trace.task for trace in traces] == ["reasoning"] * 3 + ["deltabench"] * 2
    assert traces[0].row.steps[0] == "17 is odd, so 2 does not divide it."
    # By line: the last section's two lines are two steps; section 3 still begins at the 4th.
    assert len(traces[3].row.steps) == 7
    assert traces[3].row.mistake_index == 3


def test_read_input_rows_without_a_cut_refuses() -> None:
    with pytest.raises(DatasetError, match="holds DeltaBench rows"):
        read_input_rows(DELTABENCH)


def test_the_apps_annotate_files_cuts_by_paragraph() -> None:
    """The app's "Annotate files" dialog has no --split: paragraphs, the default rule."""
    from bbm_tui.core.annotation.queue import read_queue_file

    [first, *_] = read_queue_file(REASONING)
    assert first.row.steps == read_dataset(REASONING, cut=cut()).traces[0].steps
    assert first.row.extra["split"] == "paragraph"


def test_a_thinking_runs_rows_come_back_as_thinking_traces(tmp_path: Path) -> None:
    """`run --mode thinking` writes BBM rows with the reasoning beside the steps: imported,
    they are thinking traces again (their reasoning whole, the steps a view of it); a row
    whose steps are no longer that reasoning's cut (edited since) comes in as recorded."""
    from bbm_tui.core.annotation.export import import_rows

    reasoning = "Plan first.\n\nThen do it. So the answer is 4."
    row = {"input": "2 + 2?", "steps": ["Plan first.", "Then do it. So the answer is 4."],
           "answer": "4", "target": "4", "mode": "thinking", "split": "paragraph",
           "reasoning": reasoning, "reasoning_kind": "summary", "answer_text": "4",
           "model": "anthropic/claude-sonnet-4-5"}
    edited = dict(row, steps=["Plan first.", "Did it otherwise."])
    path = write(tmp_path / "run.jsonl", row, edited)
    with Store.open() as store:
        ids = import_rows(store, "multistep_arithmetic", read_input_rows(path)).imported
        thinking, recorded = (TraceSession.load(store, session_id) for session_id in ids)
        stored = thinking.reasoning()
        assert stored is not None
        assert (stored.text, stored.kind, stored.model) == (
            reasoning, "summary", "anthropic/claude-sonnet-4-5")
        assert thinking.texts == row["steps"]
        assert recorded.reasoning() is None
        assert [step.origin for step in recorded.steps] == ["dataset", "dataset"]


def test_annotating_a_reasoning_file_stores_the_reasoning_with_the_session() -> None:
    """The queue makes a trace's session when it is first judged: a thinking trace's with
    its reasoning whole and its steps a view of it, as `import` makes it."""
    from bbm_tui.core.annotation.queue import AnnotationQueue

    with Store.open() as store:
        queue = AnnotationQueue(store, "ana", read_annotation_files(
            [DELTABENCH], None, None, cut("sentence")))
        queue.judge(True)
        session_id = queue.session_id()
        assert session_id is not None
        trace = TraceSession.load(store, session_id)
        assert trace.texts == queue.current.row.steps
        assert trace.split_rule() == "sentence"
        reasoning = trace.reasoning()
        assert reasoning is not None and reasoning.complete
        assert reasoning.text == queue.current.row.extra["reasoning"]
        assert [step.origin for step in trace.steps] == ["thinking"] * 7


def test_a_bad_row_stops_import_with_one_message(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Nothing is imported, and the message names file, line and format (no traceback)."""
    path = tmp_path / "delta.csv"
    path.write_text(CSV_HEADER + 'a,q,1,"section1: x\n\nsection2: y",[2]\n'
                    + 'b,q,1,"section1: x",[5]\n', encoding="utf-8")
    code, out, err = run(capsys, "import", str(path), "--split", "line")
    assert (code, out) == (2, "")
    assert err == (f"bbm-tui: {path}:5: DeltaBench row: 'reason_error_section_numbers': "
                   "section 5 is outside the 1 sections (1-based)\n")
    with Store.open() as store:
        assert store.sessions() == []


def test_a_short_sentence_joined_across_sections_carries_the_label(tmp_path: Path) -> None:
    """By sentence, a piece under 10 characters joins the next: section 1's "Done." goes
    with section 2's first sentence, and that step holds the start of the wrong section."""
    path = write(tmp_path / "delta.jsonl", {
        "question": "q", "answer": "1",
        "sections_content": "section1: A first sentence here. Done.\n\n\n"
                            "section2: Wrong claim made here. More.\n\n\nsection3: \\boxed{1}",
        "reason_error_section_numbers": [2]})
    [row] = read_dataset(path, cut=cut("sentence")).traces
    assert row.steps == ["A first sentence here.", "Done.\n\nWrong claim made here.",
                         "More.\n\n\\boxed{1}"]
    assert row.extra["origin"]["fields"]["step_sections"] == [1, 1, 2]
    assert row.mistake_index == 1
