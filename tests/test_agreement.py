"""Agreement figures (bbm_tui/core/annotation/agreement.py): hand-computed cases, and the
independent `krippendorff` package (test dependency only) on random labels."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from bbm_tui.core.annotation.agreement import (
    Vote,
    agreement_report,
    cohen_kappa,
    disagreements,
    gold_agreement,
    krippendorff_alpha,
    majority,
    pairwise_kappa,
)

# Two annotators, four traces; None = "no mistake" (a value), absent = unlabelled.
A = {"t1": 0, "t2": 1, "t3": None, "t4": None}
B = {"t1": 0, "t2": 2, "t3": None, "t4": 0}


def test_alpha_by_hand() -> None:
    # Coincidences: (0,0)=2, (1,2)=(2,1)=1, (N,N)=2, (N,0)=(0,N)=1; n_0=3, n_1=1, n_2=1,
    # n_N=3, n=8; disagreements 4; sum over c != k of n_c n_k = 64 - 20 = 44.
    # alpha = 1 - (n - 1) * 4 / 44 = 16/44.
    assert krippendorff_alpha({"A": A, "B": B}) == pytest.approx(16 / 44)


def test_kappa_by_hand() -> None:
    # Observed 2/4; expected (1*2 + 1*0 + 2*1) / 16 = 1/4; kappa = (1/2 - 1/4) / (3/4).
    assert cohen_kappa(A, B) == pytest.approx(1 / 3)
    assert pairwise_kappa({"B": B, "A": A}) == {"A|B": pytest.approx(1 / 3)}


def test_gold_agreement_by_hand() -> None:
    gold = {"t1": 0, "t2": 1, "t3": None, "t4": None}
    assert gold_agreement({"A": A, "B": B}, gold) == {"A": 100.0, "B": 50.0}


def test_perfect_agreement_and_undefined_cases() -> None:
    same = {"t1": 0, "t2": None, "t3": 3}
    assert krippendorff_alpha({"A": same, "B": dict(same)}) == 1.0
    assert cohen_kappa(same, dict(same)) == 1.0
    # One value throughout: chance agreement is total, alpha and kappa are undefined.
    flat = {"t1": None, "t2": None}
    assert krippendorff_alpha({"A": flat, "B": dict(flat)}) is None
    assert cohen_kappa(flat, dict(flat)) is None
    # Nobody labelled a trace in common.
    assert krippendorff_alpha({"A": {"t1": 0}, "B": {"t2": 1}}) is None
    assert cohen_kappa({"t1": 0}, {"t2": 1}) is None


def test_unlabelled_is_absent_not_no_mistake() -> None:
    """A trace only one annotator labelled does not count for alpha; had it been read as
    "no mistake" for the other, the figure would change."""
    with_gap = {"A": {**A, "t5": 2}, "B": B}
    assert krippendorff_alpha(with_gap) == krippendorff_alpha({"A": A, "B": B})
    assert agreement_report(with_gap).n == 4


def test_majority_and_ties() -> None:
    labels = {
        "A": {"t1": 0, "t2": 1, "t3": None},
        "B": {"t1": 0, "t2": 2, "t3": 4},
        "C": {"t1": 1, "t3": None},
    }
    votes = majority(labels)
    assert votes["t1"] == Vote(0, 2, 3, False)
    assert votes["t2"] == Vote(None, 1, 2, True)  # 1 against 2: adjudicate
    assert votes["t3"] == Vote(None, 2, 3, False)  # "no mistake" wins 2 to 1
    assert disagreements(labels) == ["t1", "t2", "t3"]
    assert disagreements({"A": {"t1": 0}, "B": {"t1": 0}}) == []


def test_report_json_shape() -> None:
    report = agreement_report({"A": A, "B": B}, gold={"t1": 0, "t2": 1})
    assert report.to_json() == {
        "krippendorff_alpha": pytest.approx(16 / 44),
        "cohen_kappa": {"A|B": pytest.approx(1 / 3)},
        "gold_agreement": {"A": 100.0, "B": 50.0},
        "n": 4,
        "raw_agreement": 50.0,
        "cohen_raw_agreement": {"A|B": 50.0},
        "undefined": {},
    }


def _reference_alpha(labels: dict[str, dict[int, int | None]], keys: list[int]) -> float:
    import krippendorff

    def code(value: int | None) -> float:
        return -1.0 if value is None else float(value)

    matrix = np.array([
        [code(labels[name][key]) if key in labels[name] else np.nan for key in keys]
        for name in sorted(labels)
    ])
    return krippendorff.alpha(reliability_data=matrix, level_of_measurement="nominal")


@pytest.mark.parametrize("seed", range(40))
def test_alpha_equals_the_krippendorff_package_on_random_labels(seed: int) -> None:
    rng = random.Random(seed)
    annotators = rng.randint(2, 5)
    traces = rng.randint(5, 60)
    values = [None, *range(rng.randint(1, 8))]
    agree = rng.random()  # from chance-level to near-perfect agreement
    labels: dict[str, dict[int, int | None]] = {f"a{i}": {} for i in range(annotators)}
    for key in range(traces):
        truth = rng.choice(values)
        for name in labels:
            if rng.random() < 0.2:
                continue  # this annotator did not label this trace
            labels[name][key] = truth if rng.random() < agree else rng.choice(values)
    ours = krippendorff_alpha(labels)
    try:
        theirs = _reference_alpha(labels, list(range(traces)))
    except ValueError:  # the package refuses a single value in use: ours is None then
        assert ours is None
        return
    if ours is None:
        assert math.isnan(theirs) or theirs == pytest.approx(1.0)
    else:
        assert ours == pytest.approx(theirs, abs=1e-9)


@pytest.mark.parametrize("seed", range(20))
def test_kappa_equals_a_direct_computation_on_random_labels(seed: int) -> None:
    """Against the textbook formula over a confusion matrix (computed here with numpy)."""
    rng = random.Random(1000 + seed)
    values = [None, 0, 1, 2, 3]
    first = {key: rng.choice(values) for key in range(50) if rng.random() < 0.9}
    second = {key: rng.choice(values) for key in range(50) if rng.random() < 0.9}
    shared = sorted(set(first) & set(second))
    index = {value: i for i, value in enumerate(values)}
    confusion = np.zeros((len(values), len(values)))
    for key in shared:
        confusion[index[first[key]], index[second[key]]] += 1
    total = confusion.sum()
    observed = np.trace(confusion) / total
    expected = (confusion.sum(axis=1) @ confusion.sum(axis=0)) / total**2
    assert cohen_kappa(first, second) == pytest.approx((observed - expected) / (1 - expected))
