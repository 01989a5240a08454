"""Mistake-finding prompts (docs/DESIGN.md §4, §13; paper section 3, appendix A.2): the methods
and the messages of one call.

The paper's methods: the task's few-shot messages verbatim (for the paper's five, from
prompts/mistake_finding_prompts.json; a task of one's own may bring its own in that shape),
then one user message `TEMPLATE.format(input=..., steps=..., current_step=...)` where `steps`
is `"\\n".join(f"Thought {i}: {s}")` numbered from 1 (prompts/thoughts.py); step-level methods
show thoughts 1..k for the question about Thought k.

Ours (prompts/ours/finding_prompts.json): for a task without few-shot finding prompts, the
paper's direct templates with the task's description in place of the examples; and for every
task a critic, which reasons and ends with the earliest wrong thought, or -1, in `\\boxed{}`
(the form ProcessBench evaluated critic models in). In our templates `{input}` is the question
as the generation prompt shows it, `{description}` the task's description.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from bbm_tui.core.errors import UserError
from bbm_tui.core.prompts.thoughts import format_steps
from bbm_tui.core.resources import prompts_dir
from bbm_tui.core.tasks import Task, get_task, paper_finding_prompts

# --------------------------------------------------------------------------- methods


@dataclass(frozen=True)
class Method:
    """A way of asking a model for the first mistake. `zero_shot`: ours, for a task without
    few-shot finding prompts; `critic`: ours, for every task, its answer in `\\boxed{}`."""

    name: str
    title: str
    template_key: str
    messages_key: str
    step_level: bool
    cot: bool
    zero_shot: bool = False
    critic: bool = False

    @property
    def ours(self) -> bool:
        return self.zero_shot or self.critic


METHODS: dict[str, Method] = {
    method.name: method
    for method in (
        Method("direct-trace", "Direct, trace-level", "DIRECT_TEMPLATE", "DIRECT_MESSAGES",
               step_level=False, cot=False),
        Method("direct-step", "Direct, step-level", "DIRECT_PERSTEP_TEMPLATE",
               "DIRECT_PERSTEP_MESSAGES", step_level=True, cot=False),
        Method("cot-step", "CoT, step-level", "COT_PERSTEP_TEMPLATE", "COT_PERSTEP_MESSAGES",
               step_level=True, cot=True),
        # The paper has CoT trace-level prompts for word sorting only.
        Method("cot-trace", "CoT, trace-level", "COT_TEMPLATE", "COT_MESSAGES",
               step_level=False, cot=True),
    )
}
METHOD_NAMES: tuple[str, ...] = tuple(METHODS)

CRITIC = "critic"
OUR_METHODS: dict[str, Method] = {
    method.name: method
    for method in (
        Method("direct-trace-zero-shot", "Direct, trace-level, zero-shot", "DIRECT_TEMPLATE",
               "DIRECT_MESSAGES", step_level=False, cot=False, zero_shot=True),
        Method("direct-step-zero-shot", "Direct, step-level, zero-shot",
               "DIRECT_PERSTEP_TEMPLATE", "DIRECT_PERSTEP_MESSAGES", step_level=True,
               cot=False, zero_shot=True),
        Method(CRITIC, "Critic (reasons, then \\boxed{N})", "CRITIC_TEMPLATE",
               "CRITIC_MESSAGES", step_level=False, cot=True, critic=True),
    )
}
ALL_METHODS: dict[str, Method] = {**METHODS, **OUR_METHODS}


class MethodError(UserError, ValueError):
    """An unknown method, or one the task has no prompts for."""

    title = "No such finding method here"


def finding_prompts() -> dict[str, dict[str, Any]]:
    """prompts/mistake_finding_prompts.json, as shipped."""
    return paper_finding_prompts()


@cache
def our_finding_prompts() -> dict[str, Any]:
    """prompts/ours/finding_prompts.json: the zero-shot and critic templates and messages."""
    path = prompts_dir() / "ours" / "finding_prompts.json"
    return json.loads(path.read_bytes().decode("utf-8"))


def get_method(name: str) -> Method:
    try:
        return ALL_METHODS[name]
    except KeyError:
        raise MethodError(
            f"unknown method {name!r}; known methods: {', '.join(ALL_METHODS)}"
        ) from None


def methods_for(task: Task | str) -> tuple[str, ...]:
    """The paper's methods the task has few-shot prompts for (none for a task of one's own
    without `finding_prompts`)."""
    prompts = get_task(task).finding_prompts or {}
    return tuple(name for name, m in METHODS.items() if m.template_key in prompts)


def our_methods_for(task: Task | str) -> tuple[str, ...]:
    """Ours that fit the task: the zero-shot ones where it has no few-shot finding prompts,
    the critic always."""
    few_shot = bool(get_task(task).finding_prompts)
    return tuple(name for name, m in OUR_METHODS.items() if m.critic or not few_shot)


def check_method(task: Task | str, method: str) -> Method:
    """The method, if the task has its prompts; else MethodError saying which it has."""
    found = get_method(method)
    task = get_task(task)
    usable = methods_for(task) + our_methods_for(task)
    if method in usable:
        return found
    if found.zero_shot:
        why = (f"the zero-shot methods are for tasks without few-shot finding prompts, and "
               f"{task.name!r} has them")
    elif not task.finding_prompts:
        why = f"{task.name!r} has no few-shot finding prompts (its file names none)"
    elif task.is_paper:
        why = (f"method {method!r} has no prompts for task {task.name!r} (the paper wrote "
               f"CoT trace-level prompts for word sorting only)")
    else:
        why = f"method {method!r} has no template in {task.name!r}'s finding prompts"
    raise MethodError(f"{why}; use one of: {', '.join(usable)}")


# --------------------------------------------------------------------------- prompts


def build_messages(
    task: Task | str, method: str, input_text: str, steps: Sequence[str],
    current_step: int | None = None,
) -> list[dict[str, str]]:
    """The messages for one call: the few-shot messages, then the filled template.
    Step-level methods need `current_step` (1-based) and see thoughts 1..current_step."""
    spec = check_method(task, method)
    found = get_task(task)
    if spec.step_level:
        if current_step is None or not 1 <= current_step <= len(steps):
            raise ValueError(f"current_step must be 1..{len(steps)}, not {current_step!r}")
        shown = steps[:current_step]
    else:
        shown = steps
    if spec.ours:
        prompts = our_finding_prompts()
        description = found.description or found.title
        question_input = found.question(input_text)
    else:
        prompts = dict(found.finding_prompts or {})
        description = ""
        question_input = input_text
    # str.format parses only the template: braces in the input or the steps stay as they are.
    question = prompts[spec.template_key].format(
        input=question_input, steps=format_steps(shown), current_step=current_step,
        description=description,
    )
    few_shot = [dict(message) for message in prompts[spec.messages_key]]
    if spec.ours:
        for message in few_shot:
            message["content"] = message["content"].replace("{description}", description)
    return [*few_shot, {"role": "user", "content": question}]
