"""Adjudication (docs/DESIGN.md §11): the traces whose annotators disagree, each with every
annotator's first-mistake location, settled by one person's choice, recorded as a label of the
annotator ADJUDICATOR (so it is kept, undone and exported like any other label).

Also the labels as agreement reads them from the store (`store_labels`), and the label a trace
exports with: the adjudicated one, else the majority's (a tie is left unlabelled).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from bbm_tui.core.annotation.agreement import Location, disagreements, majority
from bbm_tui.core.store import AnnotatorLabel, Store
from bbm_tui.core.types import ADJUDICATOR

# A value no location takes: "not adjudicated yet" (None is a location: "no mistake").
UNSET = "unset"


@dataclass(frozen=True)
class StoreLabels:
    """The labels in force in a store: annotator -> {session id -> location}, the adjudicated
    ones apart, and the gold label of each queued session whose file had one."""

    by_annotator: dict[str, dict[int, Location]]
    adjudicated: dict[int, Location]
    gold: dict[int, Location]
    labels: list[AnnotatorLabel] = field(default_factory=list)


def store_labels(store: Store) -> StoreLabels:
    by_annotator: dict[str, dict[int, Location]] = defaultdict(dict)
    adjudicated: dict[int, Location] = {}
    labels = store.annotator_labels()
    for label in labels:
        if label.annotator == ADJUDICATOR:
            adjudicated[label.session_id] = label.mistake_index
        else:
            by_annotator[label.annotator][label.session_id] = label.mistake_index
    return StoreLabels(dict(by_annotator), adjudicated, store.queue_gold(), labels)


def consensus(labels: StoreLabels) -> dict[int, Location]:
    """Each labelled session's label: adjudicated, else the majority's; ties are left out
    (unlabelled: they wait for adjudication)."""
    agreed: dict[int, Location] = {
        key: vote.location for key, vote in majority(labels.by_annotator).items()
        if not vote.tied
    }
    agreed.update(labels.adjudicated)
    return agreed


@dataclass
class AdjudicationItem:
    session_id: int
    candidates: dict[str, Location]  # annotator -> first-mistake location
    adjudicated: Location | str = UNSET

    @property
    def settled(self) -> bool:
        return self.adjudicated != UNSET

    @property
    def choices(self) -> list[Location]:
        """The distinct locations proposed, in order of their first annotator's name."""
        seen: list[Location] = []
        for name in sorted(self.candidates):
            if self.candidates[name] not in seen:
                seen.append(self.candidates[name])
        return seen


class AdjudicationQueue:
    """The sessions where two or more annotators labelled and did not all agree."""

    def __init__(self, store: Store, items: list[AdjudicationItem]) -> None:
        self.store = store
        self.items = items
        self.position = self.first_unsettled() or 0
        self._step_ids: dict[int, list[int]] = {}

    @classmethod
    def open(cls, store: Store) -> AdjudicationQueue:
        labels = store_labels(store)
        items = []
        for session_id in sorted(disagreements(labels.by_annotator)):
            candidates = {name: found[session_id] for name, found in labels.by_annotator.items()
                          if session_id in found}
            item = AdjudicationItem(session_id, candidates)
            if session_id in labels.adjudicated:
                item.adjudicated = labels.adjudicated[session_id]
            items.append(item)
        return cls(store, items)

    @property
    def current(self) -> AdjudicationItem:
        return self.items[self.position]

    def first_unsettled(self, after: int = -1) -> int | None:
        count = len(self.items)
        for offset in range(count):
            index = (after + 1 + offset) % count
            if not self.items[index].settled:
                return index
        return None

    def steps(self, session_id: int | None = None) -> list[int]:
        session_id = self.current.session_id if session_id is None else session_id
        if session_id not in self._step_ids:
            self._step_ids[session_id] = [step.id for step in self.store.branch(session_id)]
        return self._step_ids[session_id]

    def settle(self, location: Location) -> int | None:
        """Record `location` as the adjudicated label and move to the next unsettled trace:
        its index, or None when every trace is settled (the position then stays)."""
        item = self.current
        step_ids = self.steps()
        if location is not None and not 0 <= location < len(step_ids):
            raise ValueError(f"the trace has Thoughts 1 to {len(step_ids)}")
        self.store.set_label(
            item.session_id, None if location is None else step_ids[location],
            step_ids[-1] if step_ids else None, annotator=ADJUDICATOR,
        )
        item.adjudicated = location
        following = self.first_unsettled(self.position)
        if following is not None:
            self.position = following
        return following

    def undo(self) -> None:
        """Withdraw the adjudicated label of the trace on show."""
        item = self.current
        if not item.settled:
            return
        current = self.store.undo_label(item.session_id, ADJUDICATOR)
        if current is None:
            item.adjudicated = UNSET
        else:
            item.adjudicated = current.mistake_index(self.steps())

    def move(self, delta: int) -> bool:
        """Move `delta` traces on; False (and no move) past either end: the queue does not
        wrap, so that the last trace is never followed by the first unsaid."""
        position = self.position + delta
        if not 0 <= position < len(self.items):
            return False
        self.position = position
        return True

    def summary(self) -> AdjudicationSummary:
        settled = [item for item in self.items if item.settled]
        return AdjudicationSummary(
            total=len(self.items), settled=len(settled),
            no_mistake=sum(item.adjudicated is None for item in settled),
            not_a_candidate=sum(item.adjudicated not in item.choices for item in settled))


@dataclass(frozen=True)
class AdjudicationSummary:
    """How far adjudication has gone: of `total` traces, `settled` have a label, of them
    `no_mistake` "no mistake" and `not_a_candidate` a location no annotator gave."""

    total: int
    settled: int
    no_mistake: int
    not_a_candidate: int

    @property
    def all_settled(self) -> bool:
        return self.settled == self.total

    def text(self) -> str:
        at_thought = self.settled - self.no_mistake
        own = f" ({self.not_a_candidate} not a candidate)" if self.not_a_candidate else ""
        return (f"{self.settled} of {self.total} traces settled: {self.no_mistake} no mistake, "
                f"{at_thought} at a thought{own}")
