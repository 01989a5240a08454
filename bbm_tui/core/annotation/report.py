"""`bbm-tui agreement`: the labels of several annotators, from the store or from files (one per
annotator, named by the file), turned into the agreement report and the consensus file.

Traces are matched across files by their content (`trace_key`: question and steps). Gold
labels come from `--gold`, else from the bundled dataset for the traces that are its own; when
every trace is the dataset's, the paper's per-task alpha stands beside ours.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from bbm_tui.core.annotation.adjudication import store_labels
from bbm_tui.core.annotation.agreement import (
    AgreementReport,
    Location,
    RatingUnit,
    agreement_report,
    describe_location,
    krippendorff_alpha,
    majority,
    step_ratings_report,
)
from bbm_tui.core.annotation.queue import read_labelled_rows, trace_key
from bbm_tui.core.dataset import (
    DatasetError,
    TraceRow,
    all_bundled,
    check_regular_file,
    replacing,
)
from bbm_tui.core.dataset.formats import row_ratings
from bbm_tui.core.records import SessionSource
from bbm_tui.core.resources import prompts_dir
from bbm_tui.core.store import Store
from bbm_tui.core.types import DEFAULT_ANNOTATOR


@dataclass
class AgreementData:
    """annotator -> {trace -> location}; each trace's row and task (None: not the dataset's);
    gold labels; and, for a store, the adjudicated labels."""

    labels: dict[str, dict[str, Location]]
    rows: dict[str, TraceRow] = field(default_factory=dict)
    tasks: dict[str, str | None] = field(default_factory=dict)
    gold: dict[str, Location] = field(default_factory=dict)
    adjudicated: dict[str, Location] = field(default_factory=dict)
    # What the command says about its files (a trace one file labels twice, differently).
    notes: list[str] = field(default_factory=list)
    # The app's own labels left out (from_store): traces of sessions `import` made, and of
    # the others (labelled on the main screen).
    app_left_out: AppLabelsLeftOut = field(default_factory=lambda: AppLabelsLeftOut(0, 0))
    # annotator -> {(trace, 0-based step) -> rating}: PRM800K-style step ratings, where given.
    ratings: dict[str, dict[RatingUnit, int]] = field(default_factory=dict)

    def report(self) -> AgreementReport:
        return agreement_report(self.labels, self.gold)

    def per_task_alpha(self) -> dict[str, float | None]:
        tasks = sorted({task for task in self.tasks.values() if task})
        return {
            task: krippendorff_alpha({
                name: {key: value for key, value in found.items() if self.tasks.get(key) == task}
                for name, found in self.labels.items()})
            for task in tasks
        }

    def is_papers(self) -> bool:
        """Every labelled trace is one of the bundled dataset's."""
        keys = {key for found in self.labels.values() for key in found}
        return bool(keys) and all(self.tasks.get(key) for key in keys)

    def consensus(self) -> dict[str, Location]:
        agreed = {key: vote.location for key, vote in majority(self.labels).items()
                  if not vote.tied}
        agreed.update(self.adjudicated)
        return agreed


@cache
def bundled_index() -> dict[str, tuple[str, TraceRow]]:
    """Every bundled trace by its key, with its task."""
    return {trace_key(row.input, row.steps): (task, row)
            for task, rows in all_bundled() for row in rows}


def from_files(paths: Sequence[Path], gold_path: Path | None = None,
               fmt: str | None = None) -> AgreementData:
    """One annotator per file, named by the file's name without its extension. A file given
    twice (by another path, or the same bytes under another name) is refused: one annotator
    would count as two. A trace one file labels twice, differently, is left out of that
    annotator's labels, and said (both lines named)."""
    check_each_file_once(paths)
    data = AgreementData(labels={})
    for path in paths:
        name = Path(path).name.split(".")[0] or str(path)
        if name in data.labels:  # two files of one name: keep both apart
            name = str(path)
        data.labels[name] = _file_labels(Path(path), name, data, fmt)
    _known_to_the_dataset(data, use_gold=gold_path is None)
    if gold_path is not None:
        data.gold = {trace_key(row.input, row.steps): row.mistake_index
                     for _line, row, labelled in read_labelled_rows(gold_path) if labelled}
    return data


def _file_labels(path: Path, name: str, data: AgreementData,
                 fmt: str | None = None) -> dict[str, Location]:
    found: dict[str, Location] = {}
    first_line: dict[str, int] = {}
    conflicting: set[str] = set()
    for line, row, labelled in read_labelled_rows(path, fmt):
        key = trace_key(row.input, row.steps)
        data.rows.setdefault(key, row)
        rated = row_ratings(row)
        if rated is not None and key not in conflicting:
            data.ratings.setdefault(name, {}).update(
                ((key, index), value) for index, value in enumerate(rated) if value is not None)
        if not labelled or key in conflicting:
            continue
        if key in found and found[key] != row.mistake_index:
            data.notes.append(
                f"{path}: lines {first_line[key]} and {line} label the same trace differently "
                f"({describe_location(found[key])}, {describe_location(row.mistake_index)}); "
                f"that trace is left out of {name}'s labels")
            conflicting.add(key)
            del found[key]
            continue
        first_line.setdefault(key, line)
        found[key] = row.mistake_index
    return found


def check_each_file_once(paths: Sequence[Path]) -> None:
    """Raises DatasetError for a file given twice: the same file by another path (a symlink,
    `./`, `..`), or the same bytes under another name."""
    by_file: dict[Path, Path] = {}
    by_content: dict[str, Path] = {}
    for path in map(Path, paths):
        check_regular_file(path)
        resolved = path.resolve()
        if resolved in by_file:
            raise DatasetError(path, f"this and {by_file[resolved]} are the same file; give "
                               "each annotator's file once")
        by_file[resolved] = path
        digest = _digest(path)
        if digest in by_content:
            raise DatasetError(path, f"this and {by_content[digest]} hold the same bytes: one "
                               "annotator's file given twice? Give each annotator's file "
                               "once (files alike to the byte agree totally: there is "
                               "nothing to measure)")
        by_content[digest] = path


def _digest(path: Path) -> str:
    digest = hashlib.sha256()
    try:
        with path.open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    except OSError as error:
        raise DatasetError(path, f"cannot read: {error.strerror}") from None
    return digest.hexdigest()


# What the app's own labels outside the annotation queues are called when they are counted.
APP_ANNOTATOR = "app"


@dataclass(frozen=True)
class AppLabelsLeftOut:
    """How many traces' own labels agreement over the store left out, by what made them."""

    imported: int  # sessions `import` made: a file's labels, or relabelled since
    main_screen: int  # every other session: labelled with x or c on the main screen

    @property
    def total(self) -> int:
        return self.imported + self.main_screen


def from_store(store: Store, *, app_labels: bool = False) -> AgreementData:
    """The store's labels (the adjudicator's apart), by session; gold from the queued files.
    Labels under the app's own annotator name (DEFAULT_ANNOTATOR) are an annotator's where
    they are on an annotation queue's session (the app's "Annotate files" offers that name).
    Elsewhere they are the session's own label, given on the main screen or brought in by
    `import`: on sessions no annotator shares, so that as an annotator they could only add
    a row of "—". They are left out, counted in `app_left_out`, unless `app_labels`: then
    they are an annotator named APP_ANNOTATOR."""
    labels = store_labels(store)
    found_by = dict(labels.by_annotator)
    own = found_by.pop(DEFAULT_ANNOTATOR, {})
    sources = {session_id: store.session(session_id).source for session_id in own}
    queued = {key: value for key, value in own.items()
              if sources[key] == SessionSource.ANNOTATE}
    app = {key: value for key, value in own.items() if key not in queued}
    if queued:
        found_by[DEFAULT_ANNOTATOR] = queued
    if app_labels and app:
        found_by[APP_ANNOTATOR] = app
    data = AgreementData(
        labels={name: {str(key): value for key, value in found.items()}
                for name, found in found_by.items()},
        gold={str(key): value for key, value in labels.gold.items()},
        adjudicated={str(key): value for key, value in labels.adjudicated.items()},
    )
    if not app_labels:
        imported = sum(sources[key] == SessionSource.IMPORT for key in app)
        data.app_left_out = AppLabelsLeftOut(imported, len(app) - imported)
    for label in labels.labels:
        name = label.annotator
        if name == DEFAULT_ANNOTATOR and label.session_id in app:
            name = APP_ANNOTATOR
        if label.ratings is not None and name in found_by:
            data.ratings.setdefault(name, {}).update(
                ((str(label.session_id), index), value)
                for index, value in enumerate(label.ratings))
    counted = {int(key) for found in data.labels.values() for key in found}
    for session_id in sorted(counted | set(labels.adjudicated)):
        session = store.session(session_id)
        steps = store.branch(session_id)
        answer = next((step.answer for step in reversed(steps) if step.answer), None)
        data.rows[str(session_id)] = TraceRow(session.input, [step.text for step in steps],
                                              answer, session.target or "", None)
    index = bundled_index()
    for key, row in data.rows.items():
        known = index.get(trace_key(row.input, row.steps))
        data.tasks[key] = known[0] if known else None
    return data


def _known_to_the_dataset(data: AgreementData, *, use_gold: bool) -> None:
    index = bundled_index()
    for key in data.rows:
        known = index.get(key)
        data.tasks[key] = known[0] if known else None
        if known and use_gold:
            data.gold[key] = known[1].mistake_index


def paper_alpha() -> dict[str, float]:
    """The paper's Krippendorff's alpha per task (prompts/paper_tables.json)."""
    tables = json.loads((prompts_dir() / "paper_tables.json").read_text(encoding="utf-8"))
    return dict(tables["krippendorff_alpha_annotators"])


def report_json(data: AgreementData) -> dict[str, Any]:
    """The report as `--json` prints it; with the paper's per-task alpha beside ours when the
    traces are the dataset's."""
    result = data.report().to_json()
    if data.ratings:
        result["step_ratings"] = step_ratings_report(data.ratings)
    if data.is_papers():
        ours = data.per_task_alpha()
        papers = paper_alpha()
        result["per_task"] = {
            task: {"krippendorff_alpha": alpha, "paper_krippendorff_alpha": papers.get(task)}
            for task, alpha in ours.items()
        }
    return result


def write_consensus(data: AgreementData, out: Path) -> tuple[int, int]:
    """Every trace with the consensus label; a trace without one (a tie, or nobody labelled
    it) is written unlabelled, with no `mistake_index` key. Returns (labelled, unlabelled)."""
    agreed = data.consensus()
    labelled = unlabelled = 0
    with replacing(out) as handle:
        for key, row in data.rows.items():
            fields = row.to_json()
            if key in agreed:
                fields["mistake_index"] = agreed[key]
                labelled += 1
            else:
                fields.pop("mistake_index", None)
                unlabelled += 1
            handle.write(json.dumps(fields, allow_nan=False) + "\n")
    return labelled, unlabelled
