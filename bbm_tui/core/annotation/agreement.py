"""Agreement between annotators on the first mistake of each trace (docs/DESIGN.md §11).

A label is the 0-based index of a trace's first mistaken step, or None for "no mistake"
(a value like any other); a trace an annotator has not labelled is simply absent from that
annotator's labels — never read as "no mistake".

- Krippendorff's alpha, nominal, over every trace that at least two annotators labelled
  (Krippendorff 2011, "Computing Krippendorff's Alpha-Reliability", the coincidence matrix);
- Cohen's kappa for each pair of annotators, over the traces both labelled;
- each annotator's agreement with the gold label, in percent;
- a majority vote per trace, with ties left for adjudication.

The paper reports alpha per task (prompts/paper_tables.json, `krippendorff_alpha_annotators`).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from itertools import combinations
from typing import TypeVar

Location = int | None
K = TypeVar("K", bound=Hashable)
# annotator -> {trace key -> first-mistake location}
Labels = Mapping[str, Mapping[K, Location]]


def krippendorff_alpha(labels: Labels, metric: str = "nominal") -> float | None:
    """Alpha over the units (traces; for step ratings, a trace's steps) labelled by two
    annotators or more: `nominal` (every two different values differ alike) or `interval`
    (numbers: the squared difference, for PRM800K's -1/0/+1). None when it is undefined:
    fewer than two such units' worth of pairable values, or a single value in use (everyone
    said the same thing every time, so chance agreement is total)."""
    coincidences: defaultdict[tuple[Hashable, Hashable], float] = defaultdict(float)
    for values in _values_by_trace(labels).values():
        if len(values) < 2:
            continue
        weight = 1.0 / (len(values) - 1)
        counts = Counter(values)
        for first, first_count in counts.items():
            for second, second_count in counts.items():
                pairs = first_count * (second_count - (first == second))
                coincidences[(first, second)] += pairs * weight
    totals: defaultdict[Hashable, float] = defaultdict(float)
    for (first, _second), weight in coincidences.items():
        totals[first] += weight
    n = sum(totals.values())
    if n <= 1 or len(totals) < 2:
        return None
    distance = _DISTANCES[metric]
    observed = sum(w * distance(first, second) for (first, second), w in coincidences.items()
                   if first != second)
    expected_pairs = sum(
        totals[first] * totals[second] * distance(first, second)
        for first in totals for second in totals if first != second
    )
    return 1.0 - (n - 1) * observed / expected_pairs


def _nominal(_first: object, _second: object) -> float:
    return 1.0


def _interval(first: object, second: object) -> float:
    if not isinstance(first, int | float) or not isinstance(second, int | float):
        raise TypeError(f"the interval metric takes numbers, not {first!r} and {second!r}")
    return float((first - second) ** 2)


_DISTANCES = {"nominal": _nominal, "interval": _interval}
RatingUnit = tuple[Hashable, int]  # (trace, 0-based step)


def step_ratings_report(ratings: Mapping[str, Mapping[RatingUnit, int]]) -> dict[str, object]:
    """Agreement over PRM800K-style step ratings: alpha, nominal and interval, over the
    steps rated by two annotators or more (each trace's steps as units), and how many steps
    and traces that is."""
    shared = [unit for unit, values in _values_by_trace(ratings).items() if len(values) >= 2]
    return {
        "krippendorff_alpha_nominal": krippendorff_alpha(ratings, "nominal"),
        "krippendorff_alpha_interval": krippendorff_alpha(ratings, "interval"),
        "n_steps": len(shared),
        "n_traces": len({unit[0] for unit in shared}),
    }


def cohen_kappa(first: Mapping[K, Location], second: Mapping[K, Location]) -> float | None:
    """Kappa over the traces both annotators labelled; None when undefined (no shared
    traces, or both used one and the same value throughout)."""
    shared = [key for key in first if key in second]
    if not shared:
        return None
    n = len(shared)
    observed = sum(first[key] == second[key] for key in shared) / n
    first_counts = Counter(first[key] for key in shared)
    second_counts = Counter(second[key] for key in shared)
    expected = sum(first_counts[v] * second_counts[v] for v in first_counts) / (n * n)
    if expected >= 1.0:
        return None
    return (observed - expected) / (1.0 - expected)


def pairwise_kappa(labels: Labels) -> dict[str, float | None]:
    """Cohen's kappa for every pair of annotators, keyed "A|B" (names in sorted order)."""
    names = sorted(labels)
    return {
        f"{first}|{second}": cohen_kappa(labels[first], labels[second])
        for first, second in combinations(names, 2)
    }


def gold_agreement(labels: Labels, gold: Mapping[K, Location]) -> dict[str, float | None]:
    """Per annotator, the percentage of their labelled traces (that have a gold label) on
    which they chose the gold location; None for an annotator with no such trace."""
    result: dict[str, float | None] = {}
    for name in sorted(labels):
        shared = [key for key in labels[name] if key in gold]
        if not shared:
            result[name] = None
            continue
        agreed = sum(labels[name][key] == gold[key] for key in shared)
        result[name] = 100.0 * agreed / len(shared)
    return result


@dataclass(frozen=True)
class Vote:
    """The majority's location for one trace; `tied` when two or more locations share the
    top count (the trace then needs adjudication and `location` is None)."""

    location: Location
    votes: int
    voters: int
    tied: bool


def majority(labels: Labels[K]) -> dict[K, Vote]:
    """The majority vote of every trace that at least one annotator labelled."""
    votes: dict[K, Vote] = {}
    for key, values in _values_by_trace(labels).items():
        ranked = Counter(values).most_common()
        top = ranked[0][1]
        leaders = [value for value, count in ranked if count == top]
        tied = len(leaders) > 1
        votes[key] = Vote(None if tied else leaders[0], top, len(values), tied)
    return votes


def disagreements(labels: Labels[K]) -> list[K]:
    """Traces labelled by two or more annotators who did not all choose the same location,
    in first-seen order."""
    return [
        key for key, values in _values_by_trace(labels).items()
        if len(values) >= 2 and len(set(values)) > 1
    ]


def raw_agreement(labels: Labels) -> float | None:
    """The share of pairs of labels on one trace (from two annotators) that agree, in
    percent, over the traces labelled by two or more; None with no such trace. What alpha
    corrects for chance: where alpha is undefined it still says how often they agreed."""
    agreeing = pairs = 0
    for values in _values_by_trace(labels).values():
        counts = Counter(values)
        pairs += len(values) * (len(values) - 1)
        agreeing += sum(count * (count - 1) for count in counts.values())
    return 100.0 * agreeing / pairs if pairs else None


def pairwise_raw_agreement(labels: Labels) -> dict[str, float | None]:
    """For every pair of annotators ("A|B"), the percentage of the traces both labelled on
    which they agree; None when they share none."""
    result: dict[str, float | None] = {}
    for first, second in combinations(sorted(labels), 2):
        shared = [key for key in labels[first] if key in labels[second]]
        agreed = sum(labels[first][key] == labels[second][key] for key in shared)
        result[f"{first}|{second}"] = 100.0 * agreed / len(shared) if shared else None
    return result


def describe_location(location: Location) -> str:
    return "no mistake" if location is None else f"Thought {location + 1}"


def why_undefined(labels: Labels) -> dict[str, str]:
    """Why alpha (key "krippendorff_alpha") and each pair's kappa ("A|B") are undefined,
    where they are: no trace in common, or every label the same, which leaves chance
    agreement total."""
    reasons: dict[str, str] = {}
    shared = [values for values in _values_by_trace(labels).values() if len(values) >= 2]
    if not shared:
        reasons["krippendorff_alpha"] = "no trace was labelled by two annotators"
    else:
        used = {value for values in shared for value in values}
        if len(used) == 1:
            reasons["krippendorff_alpha"] = (
                f"every label is the same ({describe_location(used.pop())})")
    for first, second in combinations(sorted(labels), 2):
        keys = [key for key in labels[first] if key in labels[second]]
        if not keys:
            reasons[f"{first}|{second}"] = "they share no labelled trace"
            continue
        used = {labels[first][key] for key in keys} | {labels[second][key] for key in keys}
        if len(used) == 1:
            reasons[f"{first}|{second}"] = ("both gave every trace they share the same label "
                                            f"({describe_location(used.pop())})")
    return reasons


@dataclass(frozen=True)
class AgreementReport:
    krippendorff_alpha: float | None
    cohen_kappa: dict[str, float | None]
    gold_agreement: dict[str, float | None]
    # Traces labelled by at least two annotators (those alpha and kappa speak for).
    n: int
    annotators: tuple[str, ...]
    # How often the labels agree, chance not corrected for (percent): overall, and per pair.
    raw_agreement: float | None = None
    cohen_raw_agreement: dict[str, float | None] = field(default_factory=dict)
    # Why alpha ("krippendorff_alpha") or a pair's kappa ("A|B") is undefined, where it is.
    undefined: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return {
            "krippendorff_alpha": self.krippendorff_alpha,
            "cohen_kappa": dict(self.cohen_kappa),
            "gold_agreement": dict(self.gold_agreement),
            "n": self.n,
            "raw_agreement": self.raw_agreement,
            "cohen_raw_agreement": dict(self.cohen_raw_agreement),
            "undefined": dict(self.undefined),
        }


def agreement_report(labels: Labels, gold: Mapping[K, Location] | None = None) -> AgreementReport:
    shared = sum(len(values) >= 2 for values in _values_by_trace(labels).values())
    return AgreementReport(
        krippendorff_alpha=krippendorff_alpha(labels),
        cohen_kappa=pairwise_kappa(labels),
        gold_agreement=gold_agreement(labels, gold) if gold is not None else {},
        n=shared,
        annotators=tuple(sorted(labels)),
        raw_agreement=raw_agreement(labels),
        cohen_raw_agreement=pairwise_raw_agreement(labels),
        undefined=why_undefined(labels),
    )


def _values_by_trace(labels: Labels[K]) -> dict[K, list[Location]]:
    by_trace: dict[K, list[Location]] = {}
    for name in sorted(labels):
        for key, location in labels[name].items():
            by_trace.setdefault(key, []).append(location)
    return by_trace
