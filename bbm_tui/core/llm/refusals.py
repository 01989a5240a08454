"""Requests refused before any call: the offline models know the paper's five tasks and
nothing else, so a task of one's own gets one clear message instead of a failed call."""

from __future__ import annotations

from bbm_tui.core.llm.errors import LLMError
from bbm_tui.core.llm.offline.replay import has_recorded_traces
from bbm_tui.core.tasks import Task, get_task
from bbm_tui.core.types import ModelSpec

# What each offline model does, for the message that refuses a task of one's own.
_OFFLINE_ONLY = {
    "replay": "replays the paper's recorded traces (and those in a task's questions file)",
    "solver": "writes steps for four of the paper's tasks",
    "simulated": "answers from the labels of the paper's traces",
}


def offline_refusal(spec: ModelSpec, task: Task | str) -> LLMError | None:
    """Why an offline model cannot work on a task of one's own (None: it can, or it is not
    an offline model): they know the paper's five tasks and nothing else."""
    found = get_task(task)
    provider = spec.model.split("/", 1)[0]
    if found.is_paper or provider not in _OFFLINE_ONLY:
        return None
    if provider == "replay" and has_recorded_traces(found.name):
        return None  # it replays the traces recorded in the task's questions file
    return LLMError(
        "replay",
        f"{spec.model} {_OFFLINE_ONLY[provider]} only, and {found.name!r} is a task of your "
        "own: choose a model of a provider (--model, or ctrl+e on the new-session screen)")


def generation_refusal(spec: ModelSpec) -> str | None:
    """Why a model cannot write a trace's thoughts (None: it can, as far as is known before
    any call): `simulated/rm-X` answers the mistake-finding prompts only."""
    model = spec.model
    if model.split("/", 1)[0] != "simulated":
        return None
    return (f"{model} is a simulated reward model: it finds mistakes (f), it writes no "
            "thoughts. Choose a model that generates (replay/bbm, solver/bbm, or a "
            "provider's).")
