"""Finder prompts are the paper's, byte for byte: for every task, method and shipped dataset row
(and, step-level, every thought), the message list equals the few-shot messages plus the filled
template, built here independently from ../shared/bbm."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bbm_tui.core.dataset import bundled_rows
from bbm_tui.core.prompts.finding import (
    METHOD_NAMES,
    MethodError,
    build_messages,
    check_method,
    methods_for,
)
from bbm_tui.core.prompts.thoughts import format_steps
from bbm_tui.core.resources import prompts_dir
from bbm_tui.core.tasks import TASK_NAMES

KEYS = {
    "direct-trace": ("DIRECT_TEMPLATE", "DIRECT_MESSAGES"),
    "direct-step": ("DIRECT_PERSTEP_TEMPLATE", "DIRECT_PERSTEP_MESSAGES"),
    "cot-step": ("COT_PERSTEP_TEMPLATE", "COT_PERSTEP_MESSAGES"),
    "cot-trace": ("COT_TEMPLATE", "COT_MESSAGES"),
}


def reference(shared: Path) -> dict:
    return json.loads((shared / "mistake_finding_prompts.json").read_text(encoding="utf-8"))


def expected_messages(ref: dict, task: str, method: str, row, k: int | None) -> list[dict]:
    template_key, messages_key = KEYS[method]
    shown = row.steps if k is None else row.steps[:k]
    steps = "\n".join(f"Thought {i}: {s}" for i, s in enumerate(shown, start=1))
    question = ref[task][template_key].format(input=row.input, steps=steps, current_step=k)
    return [*ref[task][messages_key], {"role": "user", "content": question}]


def test_shipped_prompts_are_a_byte_copy(reference_bbm: Path) -> None:
    shipped = (prompts_dir() / "mistake_finding_prompts.json").read_bytes()
    assert shipped == (reference_bbm / "mistake_finding_prompts.json").read_bytes()
    assert (prompts_dir() / "paper_tables.json").read_bytes() == (
        reference_bbm / "paper_tables.json"
    ).read_bytes()


@pytest.mark.parametrize("task", TASK_NAMES)
def test_every_row_every_method_every_step(reference_bbm: Path, task: str) -> None:
    ref = reference(reference_bbm)
    methods = [m for m in METHOD_NAMES if KEYS[m][0] in ref[task]]
    assert tuple(methods) == methods_for(task)
    checked = 0
    for row in bundled_rows(task):
        for method in methods:
            if method.endswith("-trace"):
                got = build_messages(task, method, row.input, row.steps)
                assert got == expected_messages(ref, task, method, row, None)
                checked += 1
                continue
            for k in range(1, len(row.steps) + 1):
                got = build_messages(task, method, row.input, row.steps, k)
                assert got == expected_messages(ref, task, method, row, k), (method, k)
                checked += 1
    steps = sum(len(row.steps) for row in bundled_rows(task))
    trace_methods = sum(m.endswith("-trace") for m in methods)
    assert checked == len(bundled_rows(task)) * trace_methods + 2 * steps


def test_methods_per_task() -> None:
    assert methods_for("word_sorting") == METHOD_NAMES
    for task in TASK_NAMES[1:]:
        assert methods_for(task) == ("direct-trace", "direct-step", "cot-step")
    with pytest.raises(MethodError, match="word sorting only"):
        check_method("dyck_languages", "cot-trace")
    with pytest.raises(MethodError, match="unknown method"):
        check_method("word_sorting", "cot")


def test_steps_are_numbered_from_one_and_braces_stay_text() -> None:
    assert format_steps(["a", "b"]) == "Thought 1: a\nThought 2: b"
    messages = build_messages("multistep_arithmetic", "direct-step", "{x} {0}",
                              ["one {steps}", "two", "three"], 2)
    last = messages[-1]["content"]
    assert last.startswith("{x} {0} ?\nThought 1: one {steps}\nThought 2: two\nQ: Is Thought 2 ")
    assert "three" not in last
    with pytest.raises(ValueError, match="current_step"):
        build_messages("word_sorting", "direct-step", "a b", ["x"], 2)


def test_messages_are_fresh_copies() -> None:
    first = build_messages("word_sorting", "direct-trace", "a b", ["x"])
    first[0]["content"] = "changed"
    again = build_messages("word_sorting", "direct-trace", "a b", ["x"])
    assert again[0]["content"] != "changed"
