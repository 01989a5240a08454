"""`bbm-tui backtrack --mode thinking` (issue 35): the paper's backtracking on thinking traces
(rows of `run --mode thinking` or `import`, which carry the raw `reasoning` and its `split`),
on the same batch runner, locations, OUT lines and Table 6 as core/batch/backtrack.py.

Step k of the reasoning is resampled `samples` times from the prefix of steps 1..k-1 as the
raw reasoning had them (generation/resample_thinking.py, over a server that goes on from a
prefix: core/llm/prefix.py); the paper's choice among the samples that differ goes on at
temperature 0 to the end of the reasoning and the answer. Besides backtrack's own keys
(`location`, `new_steps`, `new_answer`, `new_correct`, `samples`), an OUT line carries
`new_reasoning` (raw, whole), `new_answer_text` and `chosen_by`. A trace is written when it is
done: a kill loses at most the traces under way (their samples are drawn again). Each trace
done is also a session of the store (source "backtrack", as the paper's backtracking keeps):
the row's reasoning as its first branch, the samples, and the new branch, its reasoning stored
whole (trace/thinking_backtrack.record_backtrack), so the app opens it with its tree.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from bbm_tui.core import llm
from bbm_tui.core.batch import runner
from bbm_tui.core.batch.backtrack import (
    BacktrackJob,
    BacktrackProgress,
    BacktrackResult,
    FatalBacktrackError,
    _extra,
    out_validator,
    tables,
)
from bbm_tui.core.batch.find import trace_key
from bbm_tui.core.batch.runner import Batch
from bbm_tui.core.batch.shard import Shard
from bbm_tui.core.dataset import TraceRow
from bbm_tui.core.generation.resample_thinking import (
    SAMPLES,
    ThinkingResample,
    answer_settings,
    go_on_to_answer,
    resample_thinking_step,
)
from bbm_tui.core.generation.splitting import split_text
from bbm_tui.core.llm.prefix import Prefixer, PrefixSettings
from bbm_tui.core.prompts.thinking import thinking_messages
from bbm_tui.core.records import ReasoningKind
from bbm_tui.core.store import Store, StoreError
from bbm_tui.core.tasks import get_task
from bbm_tui.core.trace.thinking_backtrack import RecordedBacktrack, record_backtrack
from bbm_tui.core.types import DEFAULT_SPLIT_RULE, SplitRule


@dataclass(frozen=True)
class ThinkingBacktrackSettings:
    prefix: PrefixSettings = field(default_factory=PrefixSettings)
    samples: int = SAMPLES
    chat_template: Path | None = None


class NotAThinkingTrace(ValueError):
    """A row with no raw reasoning to go on from, or whose steps are not its cut."""


def raw_steps_of(row: TraceRow) -> tuple[list[str], SplitRule]:
    """The row's steps as slices of its raw reasoning, and the rule that cut them. Raises
    NotAThinkingTrace."""
    reasoning = row.extra.get("reasoning")
    if not isinstance(reasoning, str):
        raise NotAThinkingTrace("no raw reasoning (`reasoning`): backtracking a thinking step "
                                "needs a row of `run --mode thinking` or `import`")
    try:
        rule = SplitRule(row.extra.get("split") or DEFAULT_SPLIT_RULE)
    except ValueError:
        raise NotAThinkingTrace(f"split {row.extra.get('split')!r} is not a rule") from None
    raw = split_text(reasoning, rule)
    if [step.strip() for step in raw] != list(row.steps):
        raise NotAThinkingTrace(f"its steps are not its reasoning cut by the {rule} rule")
    return raw, rule


async def backtrack_thinking_batch(
    jobs: Sequence[BacktrackJob],
    spec: llm.ModelSpec,
    out_path: Path,
    *,
    settings: ThinkingBacktrackSettings,
    concurrency: int = 4,
    on_progress: Callable[[BacktrackProgress], None] | None = None,
    inputs: Sequence[Path] = (),
    shard: Shard | None = None,
    store: Store | None = None,
) -> BacktrackResult:
    """Backtrack every thinking trace OUT does not hold yet, `concurrency` at once; each
    one done is kept in `store` too (trace/thinking_backtrack.record_backtrack), where given."""
    written: dict[tuple[str, tuple[str, ...]], dict[str, Any]] = {}
    ours = [job for job in runner.unique(jobs, _key) if shard is None or shard.takes(_key(job))]

    async def work(job: BacktrackJob, progress: BacktrackProgress,
                   notify: Callable[[BacktrackProgress], None]) -> str | None:
        extra = await backtrack_thinking_one(job, spec, settings, progress, notify, store)
        if extra is None:
            return None
        written[job.key] = extra
        row = job.row
        return TraceRow(row.input, row.steps, row.answer, row.target, row.mistake_index,
                        {**row.extra, **extra}, row.key_order, row.labelled).to_line()

    progress = BacktrackProgress()
    progress.unlabelled = sum(1 for job in ours if not job.row.labelled and job.location is None)
    batch = Batch(jobs=jobs, key=_key, key_of_row=trace_key, validate=out_validator,
                  what="rows written by `bbm-tui backtrack`", work=work, progress=progress,
                  ordered=True, shard=shard)
    progress, rows = await runner.run_batch(batch, out_path, concurrency=concurrency,
                                            store_path=None if store is None else store.path,
                                            inputs=inputs,
                                            on_progress=on_progress)
    done = {trace_key(row): row.extra for row in rows} | written
    return BacktrackResult(progress, tables(ours, done))


def _key(job: BacktrackJob) -> tuple[str, tuple[str, ...]]:
    return job.key


async def backtrack_thinking_one(
    job: BacktrackJob,
    spec: llm.ModelSpec,
    settings: ThinkingBacktrackSettings,
    progress: BacktrackProgress,
    notify: Callable[[BacktrackProgress], None],
    store: Store | None = None,
) -> dict[str, Any] | None:
    row = job.row
    if job.location is None:
        return _extra(job.task, None, row.steps, row.answer, row.target, [])
    try:
        raw, rule = raw_steps_of(row)
    except NotAThinkingTrace as error:
        progress.fail(job.task, str(error))
        return None
    task = get_task(job.task)
    prefixer: Prefixer | None = None
    try:
        prefixer = Prefixer(spec, thinking_messages(task, row.input), settings.chat_template)
        resample = await resample_thinking_step(prefixer, raw, job.location + 1, rule,
                                                settings.prefix, n=settings.samples)
        for sample in resample.samples:
            progress.add_call(sample.call, _recorded_settings(settings))
        notify(progress)
        chosen = resample.chosen_sample
        if chosen is None:  # no sample differed: the trace stays as it was
            _keep(store, spec, _recorded(job, rule, resample, settings))
            return _extra(job.task, job.location, row.steps, row.answer, row.target,
                          samples_json(resample)) | {"chosen_by": None}
        kept = "".join(raw[: job.location]) + chosen.raw
        ending = await go_on_to_answer(prefixer, task, kept,
                                       answer_settings(settings.prefix, temperature=0.0))
    except llm.LLMError as error:
        if error.kind in llm.STOPS_A_BATCH:
            raise FatalBacktrackError(error.message) from None
        progress.fail(job.task, error.message)
        return None
    finally:
        if prefixer is not None:
            await prefixer.aclose()
    progress.add_call(ending.call, _recorded_settings(settings))
    new_reasoning = kept + ending.reasoning_rest
    _keep(store, spec, replace(_recorded(job, rule, resample, settings),
                               new_reasoning=new_reasoning, new_answer_text=ending.answer_text,
                               new_answer=ending.answer, ending_call=ending.call))
    new_steps = [step.strip() for step in split_text(new_reasoning, rule)]
    progress.steps += len(new_steps) - job.location
    notify(progress)
    return (_extra(job.task, job.location, new_steps, ending.answer, row.target,
                   samples_json(resample))
            | {"new_reasoning": new_reasoning, "new_answer_text": ending.answer_text,
               "chosen_by": resample.chosen_by})


def _recorded(job: BacktrackJob, rule: SplitRule, resample: ThinkingResample,
              settings: ThinkingBacktrackSettings) -> RecordedBacktrack:
    row = job.row
    assert job.location is not None
    kind = row.extra.get("reasoning_kind")
    return RecordedBacktrack(
        task=job.task, input=row.input, target=row.target, gold=row.mistake_index,
        labelled=row.labelled, reasoning=str(row.extra["reasoning"]),
        reasoning_kind=kind if isinstance(kind, str) and kind else str(ReasoningKind.RAW),
        rule=rule, answer=row.answer, location=job.location, resample=resample,
        settings=settings.prefix)


def _keep(store: Store | None, spec: llm.ModelSpec, done: RecordedBacktrack) -> None:
    """The trace's backtracking as a session of the store (the app opens it: the tree,
    compare, exports). A store that cannot be written stops the batch."""
    if store is None:
        return
    try:
        record_backtrack(store, spec, done)
    except StoreError as error:
        raise FatalBacktrackError(str(error)) from None


def _recorded_settings(settings: ThinkingBacktrackSettings) -> llm.CallSettings:
    """What Progress.add_call reads of a call's settings (its prompt-cache note): none apply
    to a raw prompt."""
    return llm.CallSettings(temperature=settings.prefix.temperature, caching=False)


def samples_json(resample: ThinkingResample) -> list[dict[str, Any]]:
    return [{"text": sample.text, "raw": sample.raw, "logprob": sample.logprob,
             "dropped": dropped, "chosen": index == resample.chosen,
             "truncated": sample.truncated}
            for index, (sample, dropped) in enumerate(zip(resample.samples, resample.dropped,
                                                          strict=True))]
