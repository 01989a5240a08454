"""Every judge (anything that says which step of a trace is wrong) described once: the paper's
finders (judging/finders.py) and the task verifier (judging/verifier.py). The batch `find`
(core/batch/find.py), a session's recorded run (core/trace/recording.py), the trace view's
finder and its dialog (ui/screens/trace/finding.py, ui/dialogs/find.py) read them from here, so
a new judge is its module and one entry in JUDGES.

A judge's run yields the finders' events: one StepJudged per thought it judges (or one
TraceJudged for the whole trace), then FindFinished. The runs are imported only when a judge
runs: the command line builds `find --method` from this module before it knows the command,
and the verifiers load every task's checker.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from bbm_tui.core.prompts.finding import ALL_METHODS, MethodError, check_method
from bbm_tui.core.tasks import Task, get_task
from bbm_tui.core.types import VERIFIER_MODEL, VERIFY, CallSettings, ModelSpec

if TYPE_CHECKING:
    from bbm_tui.core.judging.finders import FindEvent, OnRetry, Pace


class JudgeRun(Protocol):
    """How a judge runs on one trace (the signature of finders.find_mistake)."""

    def __call__(
        self, task: Task | str, method: str, input_text: str, steps: Sequence[str], spec: ModelSpec,
        *, settings: CallSettings | None, judge_all: bool, pace: Pace | None,
        on_retry: OnRetry | None,
    ) -> AsyncIterator[FindEvent]: ...


@dataclass(frozen=True)
class Judge:
    """One judge: `name` is what `find --method` takes and what the store and PREDS record;
    `title` and `hint` are how the finder dialog shows it. `step_level`: a verdict per
    thought (else one on the whole trace); `cot`: its answers reason before they conclude;
    `stops_early`: it stops at the first mistake unless asked to judge every thought.
    `own_model` is set for a judge that asks no model: the name its runs are recorded under
    (and `who` says who judges, in words); the others ask the model they are given."""

    name: str
    title: str
    hint: str
    step_level: bool
    run: JudgeRun
    # Raises MethodError, saying why, where it cannot judge a task's traces.
    check: Callable[[Task | str], object]
    cot: bool = False
    stops_early: bool = False
    own_model: str | None = None
    who: str = ""

    def can_judge(self, task: Task | str) -> bool:
        try:
            self.check(task)
        except MethodError:
            return False
        return True

    @property
    def needs_model(self) -> bool:
        return self.own_model is None

    def spec(self, asked: ModelSpec) -> ModelSpec:
        """The model its run is made and recorded with: the one asked for, or its own."""
        return asked if self.own_model is None else ModelSpec(self.own_model)

    async def events(
        self, task: Task | str, input_text: str, steps: Sequence[str], spec: ModelSpec, *,
        settings: CallSettings | None = None, judge_all: bool = False, pace: Pace | None = None,
        on_retry: OnRetry | None = None,
    ) -> AsyncIterator[FindEvent]:
        """Its run on one trace; `on_retry` is told of each retry of a model call as it is
        made. Raises ValueError (a trace with no thoughts) before any work, LLMError from a
        model."""
        async for event in self.run(task, self.name, input_text, steps, self.spec(spec),
                                    settings=settings, judge_all=judge_all, pace=pace,
                                    on_retry=on_retry):
            yield event


def _paper_method(
    task: Task | str, method: str, input_text: str, steps: Sequence[str], spec: ModelSpec, *,
    settings: CallSettings | None, judge_all: bool, pace: Pace | None,
    on_retry: OnRetry | None,
) -> AsyncIterator[FindEvent]:
    from bbm_tui.core.judging.finders import find_mistake

    return find_mistake(task, method, input_text, steps, spec, settings=settings,
                        judge_all=judge_all, pace=pace, on_retry=on_retry)


def _task_verifier(
    task: Task | str, method: str, input_text: str, steps: Sequence[str], spec: ModelSpec, *,
    settings: CallSettings | None, judge_all: bool, pace: Pace | None,
    on_retry: OnRetry | None,
) -> AsyncIterator[FindEvent]:
    from bbm_tui.core.judging.verifier import verify_events

    return verify_events(get_task(task).name, input_text, steps)


def _has_prompts(method: str) -> Callable[[Task | str], object]:
    """A check that the task has this method's prompts (the paper's: CoT trace-level for word
    sorting only; a task of one's own: its few-shot finding prompts, else ours)."""
    return lambda task: check_method(task, method)


def _paper_task(task: Task | str) -> None:
    """The verifiers cover the paper's five tasks (core/tasks/verify.py), no other."""
    found = get_task(task)
    if not found.is_paper:
        raise MethodError(f"the task verifiers check the paper's five tasks only, not "
                          f"{found.name!r}; use a model's method")


# One line on what each judge does (docs/DESIGN.md §4, §12).
_PAPER_HINTS = {
    "direct-trace": "one call on the whole trace; answers No or a thought number",
    "direct-step": "one call per thought, Yes or No; the first No is the mistake",
    "cot-step": "per thought, reasons first, then Yes or No",
    "cot-trace": "reasons over the whole trace, then No or a number",
    "direct-trace-zero-shot": "the paper's direct trace-level question, the task's "
                              "description in place of examples",
    "direct-step-zero-shot": "the paper's direct step-level question per thought, the task's "
                             "description in place of examples",
    "critic": "reasons over the whole trace, then the earliest wrong thought (or -1) in "
              "\\boxed{}, as ProcessBench asked critic models",
}

VERIFIER = Judge(
    VERIFY, "Task verifier (no model)",
    "no model: a program checks each step against the question and the steps before it; "
    "✓ correct, ✗ mistaken (e shows why), ? cannot judge",
    step_level=True, run=_task_verifier, check=_paper_task,
    own_model=VERIFIER_MODEL, who="the task verifiers",
)

JUDGES: dict[str, Judge] = {
    judge.name: judge
    for judge in (
        *(Judge(method.name, method.title, _PAPER_HINTS[method.name], method.step_level,
                _paper_method, _has_prompts(method.name), cot=method.cot,
                stops_early=method.step_level)
          for method in ALL_METHODS.values()),
        VERIFIER,
    )
}
JUDGE_NAMES: tuple[str, ...] = tuple(JUDGES)
DEFAULT_JUDGE = "direct-step"
# For a task without few-shot finding prompts: the paper's default method, zero-shot.
DEFAULT_ZERO_SHOT_JUDGE = "direct-step-zero-shot"


def get_judge(name: str) -> Judge:
    try:
        return JUDGES[name]
    except KeyError:
        raise MethodError(
            f"unknown method {name!r}; known methods: {', '.join(JUDGE_NAMES)}"
        ) from None


def judges_for(task: Task | str) -> list[Judge]:
    """The judges that can judge this task's traces, in the order the dialog lists them."""
    return [judge for judge in JUDGES.values() if judge.can_judge(task)]


def default_judge(task: Task | str) -> str:
    """The method the finder dialog offers first for a task."""
    return DEFAULT_JUDGE if JUDGES[DEFAULT_JUDGE].can_judge(task) else DEFAULT_ZERO_SHOT_JUDGE


def check_judge(task: Task | str, name: str) -> Judge:
    """The judge called `name`, if it can judge this task's traces; else MethodError."""
    judge = get_judge(name)
    judge.check(task)
    return judge
