"""The numbers behind the charts: pure functions from what the commands compute (the stats of
dataset files, a finder's scores, backtracking's deltas, the agreement report) and the paper's
figures to labelled series. The app draws them in its dataset view and agreement summary,
`--plot` under the commands' tables; both draw exactly these numbers, and the commands' tables
print them too, so what a bar shows is always one key (or one table) away.

Nothing here draws: the charts are plain data, and the names in them (tasks, models,
annotators, from files) are the files' text, made safe where they are drawn.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bbm_tui.core.judging.anchors import StepImportance
from bbm_tui.core.judging.metrics import POSITION_BINS, BacktrackDeltas, Report
from bbm_tui.core.tasks import task_order

POSITION_LABELS = tuple(f"{100 * bin // POSITION_BINS}–{100 * (bin + 1) // POSITION_BINS}%"
                        for bin in range(POSITION_BINS))
# At most this many trace-length bins (the last one open: "46+").
LENGTH_BINS = 10
# Bin widths tried for trace lengths, the narrowest that fits first.
_LENGTH_WIDTHS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)

ALL_TASKS = "all tasks"
OVERALL = "overall"


@dataclass(frozen=True)
class Series:
    """One set of bars: a value (or None: no figure) per category of its chart. `paper`: the
    paper's figures, drawn lighter beside ours."""

    name: str
    values: tuple[float | None, ...]
    paper: bool = False


@dataclass(frozen=True)
class BarChart:
    """Bars over categories (thought numbers, fifths of a trace, tasks), one or more series.

    `kind` says which chart it is ("thought", "position", "lengths", "counts", "finder",
    "backtrack_right", "backtrack_wrong", "alpha"); `subject` what it is about (a task, "all
    tasks"); `unit` what a value counts ("traces", "%", "points", "alpha"). `stacked`: the
    series add up (counts); `signed`: values may be below zero (changes in accuracy)."""

    kind: str
    title: str
    category_header: str
    categories: tuple[str, ...]
    series: tuple[Series, ...]
    unit: str
    subject: str = ""
    stacked: bool = False
    signed: bool = False
    # The highest a value can be (100 for a percentage, 1 for alpha); None: the data's.
    ceiling: float | None = None
    note: str = ""

    @property
    def empty(self) -> bool:
        """Nothing to draw: no category, or no value above zero in any series."""
        return not self.categories or not any(
            value for series in self.series for value in series.values)

    def rows(self) -> list[tuple[str, tuple[float | None, ...]]]:
        """The chart as a table: one row per category, one value per series."""
        return [(category, tuple(series.values[index] for series in self.series))
                for index, category in enumerate(self.categories)]


@dataclass(frozen=True)
class MatrixChart:
    """A symmetric matrix over names (Cohen's kappa between annotators): `cells[i][j]` for
    names i and j, None where undefined or on the diagonal; `why` says why a pair's cell is
    undefined ("A|B": reason)."""

    title: str
    names: tuple[str, ...]
    cells: tuple[tuple[float | None, ...], ...]
    why: Mapping[str, str]


def _in_task_order(names: Iterable[str]) -> list[str]:
    # A ProcessBench file is scored per subset ("processbench/gsm8k"): by task, then name.
    return sorted(names, key=lambda name: (task_order(name.split("/")[0]), name))


# --------------------------------------------------------------------------- stats


def thought_numbers(histogram: Mapping[str, int]) -> dict[str, int]:
    """A first-mistake histogram (0-based index as text -> traces) by thought number."""
    return {str(int(index) + 1): count for index, count in histogram.items()}


def length_bins(histogram: Mapping[str, int]) -> list[tuple[int, int | None]]:
    """Bins for trace lengths (steps as text -> traces), all of one width, from the shortest
    trace to the 95th percentile's length, the narrowest width (1, 2, 5, 10, ...) that does it
    in at most LENGTH_BINS - 1 bins; longer traces go in one open bin after them (`(61,
    None)`: 61 steps or more)."""
    lengths = sorted(int(steps) for steps in histogram)
    if not lengths:
        return []
    total = sum(histogram.values())
    seen, reach = 0, lengths[-1]
    for steps in lengths:
        seen += histogram[str(steps)]
        if seen >= 0.95 * total:
            reach = steps
            break
    width = next((width for width in _LENGTH_WIDTHS
                  if (reach - _bin_start(lengths[0], width)) // width + 1 < LENGTH_BINS),
                 _LENGTH_WIDTHS[-1])
    start = _bin_start(lengths[0], width)
    bins: list[tuple[int, int | None]] = []
    while start <= reach:
        bins.append((start, start + width - 1))
        start += width
    if lengths[-1] >= start:  # longer traces left: one open bin takes them
        bins.append((start, None))
    return bins


def _bin_start(shortest: int, width: int) -> int:
    """Bins start at 1, 1 + width, ...: the one holding the shortest trace."""
    return (shortest - 1) // width * width + 1


def length_label(low: int, high: int | None) -> str:
    if high is None:
        return f"{low}+"
    return str(low) if low == high else f"{low}–{high}"


def binned_lengths(histogram: Mapping[str, int],
                   bins: Sequence[tuple[int, int | None]]) -> tuple[int, ...]:
    return tuple(sum(count for steps, count in histogram.items()
                     if low <= int(steps) and (high is None or int(steps) <= high))
                 for low, high in bins)


def stats_tasks(stats: Mapping[str, Any]) -> list[str]:
    """The tasks of a `dataset_stats` result, in the paper's order."""
    return _in_task_order(stats["tasks"])


def _histogram(stats: Mapping[str, Any], key: str, task: str | None) -> Any:
    found = stats[key]
    return found["overall"] if task in (None, ALL_TASKS) else found["tasks"][task]


def _subject(task: str | None) -> str:
    return ALL_TASKS if task is None or task == ALL_TASKS else task


def counts_chart(stats: Mapping[str, Any]) -> BarChart:
    """Per task, traces with a mistake, without one and (when there are any) unlabelled,
    stacked: the bar is the task's traces."""
    tasks = stats_tasks(stats)
    figures = [stats["tasks"][task] for task in tasks]
    series = [Series("with a mistake", tuple(f["with_mistake"] for f in figures)),
              Series("without", tuple(f["without_mistake"] for f in figures))]
    if stats["overall"]["unlabelled"]:
        series.append(Series("unlabelled", tuple(f["unlabelled"] for f in figures)))
    return BarChart("counts", "Traces per task: with a mistake, without, unlabelled", "task",
                    tuple(tasks), tuple(series), "traces", ALL_TASKS, stacked=True)


def thought_chart(stats: Mapping[str, Any], task: str | None = None) -> BarChart:
    """Where the first mistakes are, by thought number (traces labelled with a mistake)."""
    # Bins that fit the data, as the trace lengths' (Dyck's first mistakes run to Thought 40
    # and more: fixed bins of 1 to 10 and "11+" put most of them in the last one).
    # Shared by every task of the stats (from all of their traces), so the tasks compare and
    # the `stats` table has one header.
    bins = length_bins(thought_numbers(stats["mistake_index_histogram"]["overall"]))
    numbers = thought_numbers(_histogram(stats, "mistake_index_histogram", task))
    counts = binned_lengths(numbers, bins)
    return BarChart("thought", f"First mistake at thought N · {_subject(task)}", "thought",
                    tuple(length_label(low, high) for low, high in bins),
                    (Series("traces", counts),), "traces", _subject(task),
                    note=_no_mistakes(counts))


def position_chart(stats: Mapping[str, Any], task: str | None = None) -> BarChart:
    """Where the first mistakes are, by fifth of the trace (Thought k of n at k/n)."""
    counts = tuple(_histogram(stats, "mistake_position_histogram", task))
    return BarChart("position", f"First mistake by place in the trace · {_subject(task)}",
                    "place", POSITION_LABELS, (Series("traces", counts),), "traces",
                    _subject(task), note=_no_mistakes(counts))


def lengths_chart(stats: Mapping[str, Any], task: str | None = None) -> BarChart:
    """Traces by their number of steps, in bins shared by every task of the stats (from all
    of their traces), so the tasks' charts compare."""
    bins = length_bins(stats["steps_histogram"]["overall"])
    counts = binned_lengths(_histogram(stats, "steps_histogram", task), bins)
    return BarChart("lengths", f"Trace lengths (steps) · {_subject(task)}", "steps",
                    tuple(length_label(low, high) for low, high in bins),
                    (Series("traces", counts),), "traces", _subject(task))


def _no_mistakes(counts: Sequence[float]) -> str:
    return "" if any(counts) else "No trace here is labelled with a mistake."


def stats_charts(stats: Mapping[str, Any]) -> list[BarChart]:
    """What `stats --plot` draws: the counts, then each task's first-mistake histograms (by
    thought and by place) and trace lengths."""
    charts = [counts_chart(stats)]
    for make in (thought_chart, position_chart, lengths_chart):
        charts += [make(stats, task) for task in stats_tasks(stats)]
    return charts


# --------------------------------------------------------------------------- find


def finder_chart(report: Report, paper: Mapping[str, Mapping[str, float]] | None = None,
                 paper_name: str = "", who: str = "ours") -> BarChart:
    """Location accuracy per task and overall (the paper's Table 4), ours beside the paper's
    model's when given (`paper_figures`: {task or "overall": {"accuracy": ...}})."""
    names = [*_in_task_order(report.tasks), OVERALL]
    scores = [*(report.tasks[name] for name in names[:-1]), report.overall]
    series = [Series(who, tuple(score.accuracy for score in scores))]
    if paper is not None:
        series.append(Series(f"paper: {paper_name}",
                             tuple(paper.get(name, {}).get("accuracy") for name in names),
                             paper=True))
    return BarChart("finder", "Mistake location accuracy (%; the paper's Table 4)", "task",
                    tuple(names), tuple(series), "%", ALL_TASKS, ceiling=100.0)


# --------------------------------------------------------------------------- backtrack

# Table 6's two location kinds, as its JSON names them.
PAPER_LOCATIONS = {"mistake_location": "gold locations", "random_location": "random locations"}


# Beside the paper's figures, what an offline model's are (core/llm/offline): not a model's.
OFFLINE_CAVEATS = {
    "solver/": "{model} is the offline solver: its resamples work the task out, so its "
               "figures are no language model's and not comparable with PaLM 2's.",
    "replay/": "{model} replays the dataset and cannot resample a step: its figures show the "
               "pipeline, not a model.",
}


def offline_caveat(model: str) -> str:
    """What an offline model's figures are, said under a chart that has the paper's beside."""
    return next((caveat.format(model=model) for prefix, caveat in OFFLINE_CAVEATS.items()
                 if model.startswith(prefix)), "")


def backtrack_charts(tables: Mapping[str, BacktrackDeltas],
                     papers: Mapping[str, Mapping[str, Mapping[str, float]]] | None = None,
                     model: str = "") -> list[BarChart]:
    """Backtracking's change in accuracy per task (the paper's Table 6), in percentage
    points: one chart for the traces whose answer was right, one for those whose answer was
    wrong; beside ours, the paper's PaLM 2 figures for each location kind in `papers`
    ({"mistake_location" or "random_location": {task: {"correct", "incorrect"}}}), with a
    caveat where ours are an offline `model`'s; "No change" where ours are all +0.00."""
    tasks = _in_task_order(tables)
    charts = []
    for kind, key, attribute, what in (
        ("backtrack_right", "correct", "delta_accuracy_correct", "answer was right"),
        ("backtrack_wrong", "incorrect", "delta_accuracy_incorrect", "answer was wrong"),
    ):
        series = [Series("ours", tuple(getattr(tables[task], attribute) for task in tasks))]
        for location, figures in (papers or {}).items():
            series.append(Series(f"paper: PaLM 2, {PAPER_LOCATIONS.get(location, location)}",
                                 tuple(figures.get(task, {}).get(key) for task in tasks),
                                 paper=True))
        ours = series[0].values
        notes = [] if any(ours) or not ours else [
            "No change: Δ accuracy is +0.00 on every task."]
        if papers:
            notes.append(offline_caveat(model))
        charts.append(BarChart(kind, f"Backtracking, {what}: Δ accuracy (points; the "
                               "paper's Table 6)", "task", tuple(tasks),
                               tuple(series), "points", ALL_TASKS, signed=True,
                               note=" ".join(note for note in notes if note)))
    return charts


def importance_chart(steps: Sequence[StepImportance]) -> BarChart:
    """Each thought's resampling importance along a thinking trace (issue 35; accuracy kept
    − accuracy resampled, from -1 to 1, drawn on the scale of the figures there are: the
    whole scale left a short chart too few rows for the bars): a bar a thought, none yet
    where a side has no rollout."""
    values = tuple(step.importance for step in steps)
    note = ("" if any(value is not None for value in values) else
            "No thought has rollouts on both sides yet.")
    return BarChart("importance", "Importance along the trace (accuracy kept − resampled)",
                    "thought", tuple(str(step.index + 1) for step in steps),
                    (Series("importance", values),), "points", signed=True, note=note)


# --------------------------------------------------------------------------- agreement


def kappa_matrix(report: Mapping[str, Any]) -> MatrixChart:
    """Cohen's kappa between each two annotators, from the agreement report's JSON
    (`{"cohen_kappa": {"A|B": k}, "undefined": {"A|B": why}}`)."""
    kappas: Mapping[str, float | None] = report["cohen_kappa"]
    names: list[str] = []
    for pair in kappas:
        for name in pair.split("|", 1):
            if name not in names:
                names.append(name)
    cells = tuple(
        tuple(None if first == second else _pair_value(kappas, first, second)
              for second in names)
        for first in names)
    undefined = report.get("undefined", {})
    return MatrixChart("Cohen's kappa between annotators", tuple(names), cells,
                       {pair: why for pair, why in undefined.items() if pair in kappas})


def _pair_value(kappas: Mapping[str, float | None], first: str, second: str) -> float | None:
    value = kappas.get(f"{first}|{second}")
    return kappas.get(f"{second}|{first}") if value is None else value


def alpha_chart(report: Mapping[str, Any]) -> BarChart | None:
    """Krippendorff's alpha per task beside the paper's, when the report has them (every
    trace the dataset's); None otherwise."""
    per_task = report.get("per_task")
    if not per_task:
        return None
    tasks = _in_task_order(per_task)
    return BarChart(
        "alpha", "Krippendorff's alpha per task (the paper's annotators beside)", "task",
        tuple(tasks),
        (Series("ours", tuple(per_task[task]["krippendorff_alpha"] for task in tasks)),
         Series("paper", tuple(per_task[task]["paper_krippendorff_alpha"] for task in tasks),
                paper=True)),
        "alpha", ALL_TASKS, signed=True, ceiling=1.0)
