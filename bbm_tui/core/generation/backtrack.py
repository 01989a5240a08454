"""Backtracking (docs/DESIGN.md §5; paper section 4): from a mistake at Thought k, resample
Thought k at temperature 1 with the prompt of Thoughts 1..k-1, 8 samples; drop the samples
identical to the original (both cut at the first line break and stripped of an echoed
"Thought k:" the same way, llm.sampling does it); choose the highest total log-probability
where the provider sends log-probabilities, else the first sample that differs. The caller
then continues at temperature 0 to the answer (the stepper).

Pure over the model call: what is stored, and the branch it makes, is trace/session.py's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Literal, Protocol

from bbm_tui.core import llm
from bbm_tui.core.prompts.generation import next_step_parts
from bbm_tui.core.tasks import Task, task_name

SAMPLES = 8
TEMPERATURE = 1.0
REPLAY_MODEL = "replay/bbm"
SOLVER_MODEL = "solver/bbm"
# The tasks solver/bbm writes steps for (core/tasks/solver.py).
SOLVER_TASKS = ("word_sorting", "tracking_shuffled_objects", "multistep_arithmetic",
                "dyck_languages")

ChosenBy = Literal["logprob", "first"]

# What is said when the first differing sample was taken instead of the most likely one.
NONE_ASKED = ("log-probabilities: none from this provider; the first differing sample was "
              "taken")
NONE_CAME = ("log-probabilities: asked for, but none came back with the samples; the first "
             "differing sample was taken")
NONE_POSSIBLE = ("log-probabilities: those that came back were impossible; the first differing "
                 "sample was taken")
# What is said when the provider left the end of the samples without log-probabilities.
UNSCORED_END = ("log-probabilities: the server sent none for the token before the stop (as "
                "llama-server does); each sample's total leaves it out")


@dataclass
class Resample:
    """The samples for Thought `number` and the choice among them. `dropped[i]`: sample i is
    the original step again. `chosen` indexes `samples.candidates` (None: no sample differs
    from the original, so there is nothing to backtrack to)."""

    number: int
    original: str
    samples: llm.Samples
    dropped: list[bool]
    chosen: int | None
    chosen_by: ChosenBy | None

    @property
    def chosen_text(self) -> str | None:
        return None if self.chosen is None else self.samples.candidates[self.chosen].text

    @property
    def without_logprobs(self) -> str | None:
        """Why the paper's rule (the highest log-probability) could not be applied, when the
        first sample that differs was taken instead; None when it was applied (or nothing
        was chosen). Never silent: the app's samples dialog and `backtrack`'s summary say
        it."""
        if self.chosen is None or self.chosen_by != "first":
            return None
        if not self.samples.logprobs_asked:
            return NONE_ASKED
        if any(candidate.impossible_logprobs for candidate in self.samples.candidates):
            return NONE_POSSIBLE
        return NONE_CAME

    @property
    def partly_scored(self) -> str | None:
        """What the totals the choice compared leave out, when the provider sent no
        log-probability for the end of some samples (llama-server: the token before the
        stop); None when every sample's text was scored whole."""
        if self.chosen_by != "logprob":
            return None
        if any(candidate.unscored for candidate in self.samples.candidates):
            return UNSCORED_END
        return None


@dataclass(frozen=True)
class SampleArrived:
    """One sample as soon as its call returned, before the others: where it stands among the
    `n` (`position`), and whether it is the original again (`dropped`). The choice waits for
    them all."""

    position: int
    candidate: llm.Candidate
    dropped: bool


OnSample = Callable[[SampleArrived], None]


def backtracking_model(spec: llm.ModelSpec, task: Task | str) -> llm.ModelSpec:
    """The model that samples and continues: `replay/bbm` can only repeat the recorded trace,
    so a backtrack from it goes on with `solver/bbm` where the solver writes the task."""
    if spec.model == REPLAY_MODEL and task_name(task) in SOLVER_TASKS:
        return llm.ModelSpec(SOLVER_MODEL)
    return spec


def sample_settings(settings: llm.CallSettings) -> llm.CallSettings:
    """The step settings at the paper's sampling temperature, asking for log-probabilities
    (the choice needs them; a provider that sends none gets the first sample that differs)."""
    return replace(settings, temperature=TEMPERATURE, logprobs=True)


async def resample_step(
    task: Task | str,
    input_text: str,
    prior: Sequence[str],
    original: str,
    spec: llm.ModelSpec,
    settings: llm.CallSettings,
    *,
    n: int = SAMPLES,
    on_sample: OnSample | None = None,
) -> Resample:
    """Sample Thought len(prior)+1 `n` times and choose its replacement; `on_sample` hears of
    each sample as it arrives. Raises LLMError."""
    refusal = llm.offline_refusal(spec, task)
    if refusal is not None:
        raise refusal
    parts = next_step_parts(task, input_text, prior)

    def arrived(arrival: llm.Arrived) -> None:
        if on_sample is not None:
            for candidate, position in zip(arrival.candidates, arrival.positions, strict=True):
                on_sample(SampleArrived(position, candidate, repeats(candidate, original)))

    samples = await llm.sample_steps(spec, "".join(parts), n, sample_settings(settings),
                                     arrived, parts=parts)
    dropped = [repeats(candidate, original) for candidate in samples.candidates]
    chosen, chosen_by = choose(samples.candidates, dropped)
    return Resample(len(prior) + 1, original, samples, dropped, chosen, chosen_by)


def repeats(candidate: llm.Candidate, original: str) -> bool:
    """The sample is the original step again (both cut and stripped the same way): dropped."""
    return candidate.text == original


class Sample(Protocol):
    """What the rule reads of a sample: a fresh one (llm.Candidate) or a stored one."""

    @property
    def text(self) -> str: ...

    @property
    def logprob(self) -> float | None: ...


def choose(
    candidates: Sequence[Sample], dropped: Sequence[bool]
) -> tuple[int | None, ChosenBy | None]:
    """The paper's rule: among the samples that differ from the original (and say something:
    an empty step corrects nothing), the highest total log-probability of the kept text where
    there are log-probabilities (the first of equals), else the first. The same for samples
    just drawn and for samples stored earlier (a batch resuming after a kill, or samples a
    person saw and left)."""
    usable = [index for index, candidate in enumerate(candidates)
              if not dropped[index] and candidate.text.strip()]
    if not usable:
        return None, None
    scored = [index for index in usable if candidates[index].logprob is not None]
    if scored:
        best = max(scored, key=lambda index: (candidates[index].logprob, -index))
        return best, "logprob"
    return usable[0], "first"
