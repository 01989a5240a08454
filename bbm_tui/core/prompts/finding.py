"""The paper's mistake-finding prompts (docs/DESIGN.md §4; paper section 3, appendix A.2), from
prompts/mistake_finding_prompts.json: the methods and the messages of one call.

Messages are the method's few-shot messages verbatim, then one user message
`TEMPLATE.format(input=..., steps=..., current_step=...)` where `steps` is
`"\\n".join(f"Thought {i}: {s}")` numbered from 1 (prompts/thoughts.py); step-level methods
show thoughts 1..k for the question about Thought k.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from bbm_tui.core.prompts.thoughts import format_steps
from bbm_tui.core.resources import prompts_dir
from bbm_tui.core.tasks import get_task

# --------------------------------------------------------------------------- methods


@dataclass(frozen=True)
class Method:
    name: str
    title: str
    template_key: str
    messages_key: str
    step_level: bool
    cot: bool


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



class MethodError(ValueError):
    """An unknown method, or one the task has no prompts for."""


@cache
def finding_prompts() -> dict[str, dict[str, Any]]:
    """prompts/mistake_finding_prompts.json, as shipped."""
    path = prompts_dir() / "mistake_finding_prompts.json"
    return json.loads(path.read_bytes().decode("utf-8"))


def get_method(name: str) -> Method:
    try:
        return METHODS[name]
    except KeyError:
        raise MethodError(
            f"unknown method {name!r}; known methods: {', '.join(METHOD_NAMES)}"
        ) from None


def methods_for(task: str) -> tuple[str, ...]:
    """The methods the paper has prompts for on this task."""
    prompts = finding_prompts()[get_task(task).name]
    return tuple(name for name, m in METHODS.items() if m.template_key in prompts)


def check_method(task: str, method: str) -> Method:
    found = get_method(method)
    if method not in methods_for(task):
        raise MethodError(
            f"method {method!r} has no prompts for task {task!r} (the paper wrote CoT "
            f"trace-level prompts for word sorting only); use one of: "
            f"{', '.join(methods_for(task))}"
        )
    return found


# --------------------------------------------------------------------------- prompts


def build_messages(
    task: str, method: str, input_text: str, steps: Sequence[str], current_step: int | None = None
) -> list[dict[str, str]]:
    """The messages for one call: the few-shot messages, then the filled template.
    Step-level methods need `current_step` (1-based) and see thoughts 1..current_step."""
    spec = check_method(task, method)
    prompts = finding_prompts()[task]
    if spec.step_level:
        if current_step is None or not 1 <= current_step <= len(steps):
            raise ValueError(f"current_step must be 1..{len(steps)}, not {current_step!r}")
        shown = steps[:current_step]
    else:
        shown = steps
    # str.format parses only the template: braces in the input or the steps stay as they are.
    question = prompts[spec.template_key].format(
        input=input_text, steps=format_steps(shown), current_step=current_step
    )
    few_shot = [dict(message) for message in prompts[spec.messages_key]]
    return [*few_shot, {"role": "user", "content": question}]
