"""The charts' numbers (bbm_tui/core/charts.py) and `--plot` on the commands, through the real
command line: every number a chart draws is one the command's own table prints (each test
parses the printed table and compares it with the series handed to plotext), the first
mistake's place in a trace checked by hand and against the bundled dataset with exact
fractions, `--plot` printing under the tables in a terminal or when asked, never beside
--json, and the drawing telling series apart without colour and never passing an escape
sequence through.
"""

from __future__ import annotations

import io
import itertools
import json
import math
import re
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest
from rich.console import Console

from bbm_tui.cli import main
from bbm_tui.core import charts
from bbm_tui.core.batch.summary import summarize
from bbm_tui.core.dataset import TraceRow, bundled_path, bundled_rows
from bbm_tui.core.judging.metrics import mistake_position_histogram
from bbm_tui.core.tasks import TASK_NAMES
from bbm_tui.plotting import chart_text, legend, numbers, styles, value_text

DATASET = [bundled_path(task) for task in TASK_NAMES]


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def table_rows(out: str, title: str) -> list[list[str]]:
    """The cells of each row of the Rich table printed under `title` (up to the next
    table)."""
    after = out.split(title, 1)[1]
    rows = []
    for line in after.splitlines():
        if line.startswith("└"):
            break
        if line.startswith("│"):
            rows.append([cell.strip() for cell in line.strip("│").split("│")])
    return rows


def table_headers(out: str, title: str) -> list[str]:
    after = out.split(title, 1)[1]
    line = next(line for line in after.splitlines() if line.startswith("┃"))
    return [cell.strip() for cell in line.strip("┃").split("┃")]


def row(steps: int, mistake: int | None, labelled: bool = True) -> TraceRow:
    return TraceRow("q", [f"s{i}" for i in range(steps)], "a", "a", mistake, labelled=labelled)


# --------------------------------------------------------------------------- place in a trace


def test_the_first_mistakes_place_in_fifths_by_hand() -> None:
    """Thought k of n is at k/n: Thought 2 of 10 (20%) is in the first fifth, not pushed into
    the next by rounding; Thought 3 of 10 in the second; the last thought always in the last,
    Thought 1 of 1 too; no mistake and unlabelled rows are not counted."""
    rows = [row(10, 1), row(10, 2), row(10, 9), row(1, 0), row(5, 0), row(3, 1),
            row(4, None), row(6, 2, labelled=False)]
    # 2/10 -> 1st; 3/10 -> 2nd; 10/10 -> 5th; 1/1 -> 5th; 1/5 -> 1st; 2/3 = 66.7% -> 4th
    assert mistake_position_histogram(rows) == [2, 1, 0, 1, 2]


def test_the_place_of_every_bundled_first_mistake_with_fractions() -> None:
    """The whole dataset, by exact fractions here rather than the whole-number rule there."""
    for task in TASK_NAMES:
        expected = [0] * 5
        for found in bundled_rows(task):
            if found.mistake_index is None:
                continue
            share = Fraction(found.mistake_index + 1, len(found.steps))
            expected[math.ceil(share * 5) - 1] += 1
        assert mistake_position_histogram(bundled_rows(task)) == expected, task


def test_length_bins() -> None:
    assert charts.length_bins({"5": 1, "7": 2, "9": 1}) == [(5, 5), (6, 6), (7, 7), (8, 8),
                                                            (9, 9)]
    # Twenty lengths: width 5 from 1; the one long outlier goes in an open bin.
    histogram = {str(n): 10 for n in range(1, 21)} | {"126": 1}
    assert charts.length_bins(histogram) == [(1, 5), (6, 10), (11, 15), (16, 20), (21, None)]
    assert charts.binned_lengths(histogram, charts.length_bins(histogram)) == (50, 50, 50, 50,
                                                                             1)
    assert charts.length_label(21, None) == "21+" and charts.length_label(5, 5) == "5"


# --------------------------------------------------------------------------- stats


def test_stats_tables_print_every_number_the_charts_draw(capsys) -> None:
    code, out, err = run(capsys, "stats", *map(str, DATASET))
    assert code == 0, err
    stats = summarize(DATASET).stats
    tasks = charts.stats_tasks(stats)
    titles = {"thought": "First mistake at thought N", "position": "First mistake by place in "
              "the trace", "lengths": "Trace lengths (steps; traces)"}
    drawn = charts.stats_charts(stats)
    for kind, title in titles.items():
        printed = {cells[0]: cells[1:] for cells in table_rows(out, title)}
        per_task = [chart for chart in drawn if chart.kind == kind]
        assert [chart.subject for chart in per_task] == tasks
        for chart in per_task:
            assert table_headers(out, title)[1:] == list(chart.categories)
            assert printed[chart.subject] == [value_text(value, "traces")
                                              for value in chart.series[0].values], kind
    # The counts chart: with / without a mistake, from Table 2's columns.
    table_2 = {cells[0]: cells for cells in table_rows(out, "Traces per task")}
    counts = next(chart for chart in drawn if chart.kind == "counts")
    for index, task in enumerate(counts.categories):
        assert [series.values[index] for series in counts.series] == [
            int(table_2[task][3]), int(table_2[task][4])]
    # And independently of the chart code: the paper's Table 2 counts.
    assert counts.series[0].values == (266, 260, 294, 238, 650)
    assert counts.series[1].values == (34, 40, 6, 62, 336)


def test_stats_json_carries_the_places_and_lengths(capsys) -> None:
    code, out, _ = run(capsys, "stats", "--json", str(DATASET[0]))
    assert code == 0
    result = json.loads(out)
    assert result["mistake_position_histogram"]["tasks"]["word_sorting"] == \
        mistake_position_histogram(bundled_rows("word_sorting"))
    assert result["steps_histogram"]["overall"]["5"] == sum(
        len(found.steps) == 5 for found in bundled_rows("word_sorting"))


def test_plot_is_left_out_of_a_pipe_unless_asked(capsys) -> None:
    """capsys is not a terminal: --plot (auto) says why there is no chart; --plot=always
    draws them under the tables; without --plot, nothing is said."""
    chart = "Traces per task: with a mistake, without"
    code, out, err = run(capsys, "stats", str(DATASET[0]))
    assert code == 0 and chart not in out and "charts" not in err
    code, out, err = run(capsys, "stats", str(DATASET[0]), "--plot")
    assert code == 0 and chart not in out
    assert "charts left out: the output is not a terminal (--plot=always draws them)" in err
    code, out, err = run(capsys, "stats", str(DATASET[0]), "--plot=always")
    assert code == 0, err
    tables_end = out.index("Trace lengths (steps; traces)")
    charts_start = out.index(chart)
    assert charts_start > tables_end  # under the tables
    assert "██ with a mistake   ░░ without" in out  # the legend, by marker
    assert "First mistake by place in the trace · word_sorting" in out


def test_plot_beside_json_is_refused(capsys) -> None:
    code, out, err = run(capsys, "stats", "--json", "--plot=always", str(DATASET[0]))
    assert code == 2 and out == ""
    assert "--plot draws under the tables, and --json prints none" in err
    assert run(capsys, "stats", "--json", "--plot=never", str(DATASET[0]))[0] == 0


def test_plot_in_a_terminal_is_as_wide_as_it(capsys, monkeypatch) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")  # Rich: a terminal
    monkeypatch.setenv("COLUMNS", "100")
    code, out, _ = run(capsys, "stats", str(DATASET[0]), "--plot")
    assert code == 0
    frame_lines = [line for line in re.sub(r"\x1b\[[0-9;]*m", "", out).splitlines()
                   if line.rstrip().endswith("┐")]
    assert frame_lines and max(len(line.rstrip()) for line in frame_lines) <= 100
    assert max(len(line.rstrip()) for line in frame_lines) >= 90


# --------------------------------------------------------------------------- find


def test_find_chart_is_the_tables_accuracy_beside_the_papers(tmp_path: Path, capsys) -> None:
    preds = tmp_path / "preds.jsonl"
    code, out, err = run(capsys, "find", "--model", "simulated/rm-0.65", "--method",
                         "direct-trace", "--input", str(DATASET[0]), str(DATASET[3]),
                         "--limit", "40", "--out", str(preds), "--paper", "gpt-4",
                         "--no-progress")
    assert code == 0, err
    printed = {cells[0]: cells for cells in table_rows(out, "first-mistake location")}
    # task, n, accuracy, paper, with mistake, paper, ...
    summary = summarize([preds])
    chart = charts.finder_chart(summary.finder, summary.paper_finder("gpt-4"), "gpt-4")
    assert chart.categories == ("word_sorting", "multistep_arithmetic", "overall")
    for index, task in enumerate(chart.categories):
        assert value_text(chart.series[0].values[index], "%") == printed[task][2]
        assert value_text(chart.series[1].values[index], "%") == printed[task][3]
    # Table 4, GPT-4, direct trace; the paper's overall over the two tasks run, as ours is.
    assert chart.series[1].values == (35.0, 44.0, 39.5)
    code, out, _ = run(capsys, "find", "--model", "simulated/rm-0.65", "--method",
                       "direct-trace", "--input", str(DATASET[0]), str(DATASET[3]),
                       "--limit", "40", "--out", str(preds), "--paper", "gpt-4",
                       "--no-progress", "--plot=always")
    assert code == 0
    assert "Mistake location accuracy (%; the paper's Table 4)" in out
    assert "██ simulated/rm-0.65   ░░ paper: gpt-4" in out
    # PREDS to standard output (--out -): the table and the chart go to standard error, so
    # the rows stay JSON Lines.
    code, out, err = run(capsys, "find", "--model", "simulated/rm-0.65", "--method",
                         "direct-trace", "--input", str(DATASET[0]), "--limit", "5",
                         "--out", "-", "--no-progress", "--plot=always")
    assert code == 0, err
    assert all(json.loads(line) for line in out.splitlines())
    assert "Mistake location accuracy (%; the paper's Table 4)" in err


# --------------------------------------------------------------------------- backtrack


def test_backtrack_charts_are_the_tables_deltas(tmp_path: Path, capsys) -> None:
    out_file = tmp_path / "bt.jsonl"
    code, out, err = run(capsys, "backtrack", "--model", "replay/bbm", "--input",
                         str(bundled_path("multistep_arithmetic")), "--locations", "gold",
                         "--limit", "4", "--out", str(out_file), "--no-progress",
                         "--plot=always")
    assert code == 0, err
    printed = {cells[0]: cells for cells in table_rows(out, "the paper's Table 6)")}
    summary = summarize([out_file])
    right, wrong = charts.backtrack_charts(
        summary.backtrack, {"mistake_location": {"multistep_arithmetic": {
            "correct": -0.0, "incorrect": 18.04}}})
    assert printed["multistep_arithmetic"][3] == value_text(right.series[0].values[0], "points")
    assert printed["multistep_arithmetic"][5] == value_text(wrong.series[0].values[0],
                                                            "points")
    assert printed["multistep_arithmetic"][7] == value_text(wrong.series[1].values[0],
                                                            "points")
    assert "Backtracking, answer was wrong: Δ accuracy" in out
    assert "██ ours   ░░ paper: PaLM 2, gold locations" in out


# --------------------------------------------------------------------------- agreement


def labels_file(path: Path, labels: list[int | None]) -> Path:
    rows = bundled_rows("word_sorting")[:len(labels)]
    path.write_text("".join(json.dumps({**found.to_json(), "mistake_index": label}) + "\n"
                            for found, label in zip(rows, labels, strict=True)))
    return path


def test_agreement_matrix_is_the_reports_kappas(tmp_path: Path, capsys) -> None:
    files = [labels_file(tmp_path / "alice.jsonl", [1, None, 0, 3, 2, 2]),
             labels_file(tmp_path / "bob.jsonl", [1, 2, 0, 3, 2, None]),
             labels_file(tmp_path / "carol.jsonl", [1, None, 0, 1, 2, 2])]
    code, out, err = run(capsys, "agreement", *map(str, files), "--plot=always")
    assert code == 0, err
    printed = dict(re.findall(r"Cohen's kappa (\w+ / \w+): (-?[0-9.]+)", out))
    matrix = out.split("Cohen's kappa between annotators", 1)[1]
    cells = {cells[0]: cells[1:] for cells in
             ([cell.strip() for cell in line.strip("│┃").split("│")]
              for line in matrix.splitlines() if line.startswith("│"))}
    names = ["alice", "bob", "carol"]
    for pair, kappa in printed.items():
        first, second = pair.split(" / ")
        for a, b in ((first, second), (second, first)):
            assert cells[a][names.index(b)].endswith(kappa), (a, b)
    assert cells["alice"][0] == "—"
    alphas = {task: ours for task, ours, _paper in
              re.findall(r"alpha, (\w+): ([0-9.—-]+) \(paper: ([0-9.]+)\)", out)}
    report = json.loads(run(capsys, "agreement", *map(str, files), "--json")[1])
    chart = charts.alpha_chart(report)
    assert chart is not None and chart.categories == ("word_sorting",)
    assert value_text(chart.series[0].values[0], "alpha") == alphas["word_sorting"]
    assert chart.series[1].values == (0.979,)


# --------------------------------------------------------------------------- drawing


def sample_chart(name: str = "ours") -> charts.BarChart:
    return charts.BarChart("finder", "t", "task", ("word_sorting", "dyck_languages"),
                           (charts.Series(name, (90.0, 40.0)),
                            charts.Series("paper: gpt-4", (44.3, None), paper=True),
                            charts.Series("paper: palm", (20.0, 10.0), paper=True)),
                           "%", ceiling=100.0)


def test_series_are_told_apart_by_marker_not_only_colour() -> None:
    chart = sample_chart()
    markers = [marker for marker, _colour in styles(chart)]
    assert len(set(markers)) == len(markers)
    drawn = chart_text(chart, 80, 16, colour=False)
    assert not any(span.style for span in drawn.spans if "color" in str(span.style))
    for marker in markers:
        assert marker * 2 in drawn.plain
    assert legend(chart).plain == "██ ours   ░░ paper: gpt-4   ▒▒ paper: palm"
    headers, rows = numbers(chart)
    assert headers == ["task", "ours", "paper: gpt-4", "paper: palm"]
    assert rows[1] == ["dyck_languages", "40.00", "—", "10.00"]


def test_the_legend_s_markers_are_in_their_bars_colours() -> None:
    """Each marker in the legend has the colour plotext paints its bars with (read back from
    the drawing itself); without colour, neither has any."""
    chart = sample_chart()
    drawn = chart_text(chart, 80, 16)
    legend_line = drawn.plain.rindex("\n") + 1
    for marker, _colour in styles(chart):
        in_bars = next(str(span.style) for span in drawn.spans if span.end <= legend_line
                       and drawn.plain[span.start:span.end].strip(marker) == ""
                       and marker in drawn.plain[span.start:span.end])
        in_legend = next(str(span.style) for span in legend(chart).spans
                         if legend(chart).plain[span.start:span.end] == marker * 2)
        assert "color(" in in_bars and in_bars.endswith(in_legend)
    assert not legend(chart, colour=False).spans


DRAW_SIX_TASKS = """
from bbm_tui.core import charts
from bbm_tui.plotting import chart_text
tasks = ("word_sorting", "tracking_shuffled_objects", "logical_deduction",
         "multistep_arithmetic", "dyck_languages", "overall")
chart = charts.BarChart("finder", "t", "task", tasks,
                        (charts.Series("ours", (66.0, 74.0, 66.0, 54.0, 58.0, 62.0)),
                         charts.Series("paper: gpt-4", (46.0, 66.0, 70.0, 46.0, 46.0, 54.0),
                                       paper=True)), "%", ceiling=100.0)
print(chart_text(chart, 76, 14, colour=False).plain)
"""


def test_a_chart_is_drawn_the_same_whatever_the_string_hash() -> None:
    """plotext orders the category labels through a set, that is by the string hash, which
    Python changes from run to run: the same chart drawn under three hash seeds is the same
    drawing, every category's label under its bars."""
    drawings = {subprocess.run([sys.executable, "-c", DRAW_SIX_TASKS], check=True,
                               capture_output=True, text=True,
                               env={"PYTHONHASHSEED": seed, "PATH": ""}).stdout
                for seed in ("1", "5", "11")}
    assert len(drawings) == 1
    labels = drawings.pop().splitlines()[-2]
    assert len(re.findall(r"\S+", labels)) == 6, labels


def test_names_from_files_reach_the_terminal_as_text() -> None:
    """A model or task name with an escape sequence: shown as a visible stand-in, never
    passed to plotext's output raw (which Text.from_ansi would read back as a style)."""
    chart = sample_chart("evil\x1b[31mred\x1b]0;title\x07")
    chart = charts.BarChart(chart.kind, chart.title, "task", ("\x1b[2Jtask", "ok"),
                            chart.series, "%", ceiling=100.0)
    drawn = chart_text(chart, 80, 16)
    assert "\x1b" not in drawn.plain and "\x07" not in drawn.plain
    assert "␛[31mred" in drawn.plain
    console = Console(width=80, color_system=None, record=True, file=io.StringIO())
    console.print(drawn)
    assert "\x1b" not in console.export_text()


# --------------------------------------------------------------------------- issue 34, item 14


def test_backtracking_with_no_change_says_so_instead_of_an_empty_frame(capsys) -> None:
    from argparse import Namespace

    from bbm_tui.cli.plots import print_charts
    from bbm_tui.core.judging.metrics import BacktrackDeltas

    tables = {"dyck_languages": BacktrackDeltas(4, 2, 2, 0.0, 0.0)}
    right, _wrong = charts.backtrack_charts(tables)
    assert right.empty and right.note == "No change: Δ accuracy is +0.00 on every task."
    print_charts(Namespace(plot="always"), lambda made: made.backtrack_charts(tables))
    out = capsys.readouterr().out
    assert "Backtracking, answer was right" in out and "No change" in out
    assert "┌" not in out and "+1.25" not in out  # no frame scaled to a made-up top


def test_the_offline_solvers_figures_beside_the_papers_carry_a_caveat() -> None:
    from bbm_tui.core.judging.metrics import BacktrackDeltas

    tables = {"dyck_languages": BacktrackDeltas(4, 2, 2, 0.0, 91.0)}
    paper = {"mistake_location": {"dyck_languages": {"correct": -1.0, "incorrect": 18.0}}}
    _, wrong = charts.backtrack_charts(tables, paper, "solver/bbm")
    assert "solver/bbm is the offline solver" in wrong.note
    assert "not comparable with PaLM 2's" in wrong.note
    _, alone = charts.backtrack_charts(tables, None, "solver/bbm")
    assert alone.note == ""  # no paper beside: nothing to compare with
    _, real = charts.backtrack_charts(tables, paper, "openai/gpt-4o")
    assert real.note == ""


def test_first_mistake_bins_fit_the_data() -> None:
    """Dyck's first mistakes run to Thought 40 and more: "11+" held 64% of them."""
    stats = summarize([bundled_path("dyck_languages")]).stats
    chart = charts.thought_chart(stats, "dyck_languages")
    counts = chart.series[0].values
    assert chart.categories[-1] != "11+"
    total = sum(value or 0 for value in counts)
    assert (counts[-1] or 0) / total < 0.2, dict(zip(chart.categories, counts, strict=True))
    assert max(value or 0 for value in counts) / total < 0.5


def test_task_names_are_not_cut_at_120_columns() -> None:
    from bbm_tui.core.judging.metrics import Report, Scores

    score = Scores(1, 50.0, None, None, None, None, 0)
    report = Report({name: score for name in TASK_NAMES}, score)
    chart = charts.finder_chart(report)
    drawn = chart_text(chart, 120, 16, colour=False).plain
    axis = drawn.splitlines()[-1]
    assert "…" not in axis, axis
    for word in ("word_sorting", "tracking", "logical", "multistep", "dyck_languages",
                 "overall"):
        assert word in axis, (word, axis)


# --------------------------------------------------------------------------- ticks

Y_TICK = re.compile(r"^\s*([-+]?[0-9][0-9.]*)┤")


def y_ticks(out: str) -> list[str]:
    """Every y-axis tick label drawn in a command's charts."""
    return [found.group(1) for line in out.splitlines() if (found := Y_TICK.match(line))]


def rows_file(path: Path, mistakes: list[int | None], steps: int = 4) -> Path:
    path.write_text("".join(json.dumps({
        "input": f"q{number}", "steps": [f"s{i}" for i in range(steps)], "answer": "a",
        "target": "a" if mistake is None else "b", "mistake_index": mistake}) + "\n"
        for number, mistake in enumerate(mistakes)), encoding="utf-8")
    return path


@pytest.mark.parametrize("mistakes", [
    [None, None, None],  # no mistake anywhere: the mistake charts say so
    [0],  # one trace, one bucket
    [0, 1, 2, 3],  # every bar a 1
    [1, 1],  # one bucket of 2
    [0, None, 3, None],  # zeros and ones
], ids=["no-mistake", "single", "all-ones", "one-bucket", "zeros-and-ones"])
@pytest.mark.parametrize("width", [40, 80, 250])
def test_stats_count_axes_tick_whole_numbers_from_zero(
        tmp_path: Path, capsys, monkeypatch, mistakes: list[int | None], width: int) -> None:
    """Issue 33 item 15: a count axis (the first-mistake histogram, lengths, counts) ticks
    0, 1, 2, ... never below zero and never between whole traces (a histogram of ones had
    ticks 0.2, 0.4, ... traces)."""
    monkeypatch.setenv("COLUMNS", str(width))
    path = rows_file(tmp_path / "dyck_languages.jsonl", mistakes)
    code, out, err = run(capsys, "stats", "--task", "dyck_languages", "--plot=always",
                         str(path))
    assert code == 0, err
    ticks = y_ticks(out)
    assert ticks, out
    assert all(re.fullmatch(r"[0-9]+", tick) for tick in ticks), ticks
    assert "0" in ticks


def test_a_limit_1_run_and_backtrack_plot_ticks_from_zero(tmp_path: Path, capsys,
                                                           monkeypatch) -> None:
    """A one-trace run's stats and a one-trace backtrack: no tick below zero where no value
    is."""
    monkeypatch.setenv("COLUMNS", "80")
    out_file = tmp_path / "run.jsonl"
    code, _, err = run(capsys, "run", "--model", "replay/bbm", "--task", "dyck_languages",
                       "--dataset", "--limit", "1", "--out", str(out_file), "--no-progress")
    assert code == 0, err
    code, out, err = run(capsys, "stats", "--task", "dyck_languages", "--plot=always",
                         str(out_file))
    assert code == 0, err
    assert y_ticks(out) and all(re.fullmatch(r"[0-9]+", t) for t in y_ticks(out)), out
    code, out, err = run(capsys, "backtrack", "--model", "replay/bbm", "--input",
                         str(bundled_path("dyck_languages")), "--locations", "gold",
                         "--limit", "1", "--out", str(tmp_path / "bt.jsonl"), "--no-progress",
                         "--plot=always")
    assert code == 0, err
    # Answer was right: the paper's -6.82 goes below zero, and so may its ticks. Answer was
    # wrong: ours +100 and the paper's +18.06, so none.
    wrong = y_ticks(out.split("Backtracking, answer was wrong", 1)[1])
    assert wrong and all(not tick.startswith("-") for tick in wrong), out


def test_the_importance_chart_is_each_thoughts_figure_along_the_trace() -> None:
    """Issue 35, item 3: a bar a thought, signed (keeping a thought can hurt), from -1 to 1;
    a thought with no rollouts on one side has no bar, and a chart with none says so."""
    from bbm_tui.core.judging.anchors import StepImportance

    steps = [StepImportance(0, "a", 4, 4, 0.75, 0.25), StepImportance(1, "b", 4, 4, 0.5, 0.75),
             StepImportance(2, "c", 0, 4, None, 0.5)]
    chart = charts.importance_chart(steps)
    assert chart.categories == ("1", "2", "3")
    assert chart.series[0].values == (0.5, -0.25, None)
    assert chart.signed and not chart.note
    empty = charts.importance_chart([StepImportance(0, "a", 0, 0, None, None)])
    assert empty.empty and empty.note == "No thought has rollouts on both sides yet."


def test_a_short_chart_has_a_tick_every_other_row_at_most() -> None:
    """At 80x24 the importance chart has ~8 rows: six ticks on five rows were drawn over each
    other (a label beside the wrong line). Each tick label is on a row of its own, with a
    row between."""
    from bbm_tui.core.judging.anchors import StepImportance

    steps = [StepImportance(i, "x", 4, 4, kept, 0.5)
             for i, kept in enumerate((1.0, 0.25, 0.5, 1.0))]
    text = chart_text(charts.importance_chart(steps), 40, 9, colour=False).plain
    rows = [number for number, line in enumerate(text.splitlines())
            if re.match(r"\s*[-+]?\d[\d.]*\s*[┤├]", line)]
    assert len(rows) >= 2
    assert all(later - earlier >= 2 for earlier, later in itertools.pairwise(rows))
