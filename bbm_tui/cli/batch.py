"""The skeleton the batch commands (run, find, backtrack) share: their options' checks, the
store they write to (`batch_store`), and `drive_batch`, which runs the batch under a progress
bar with SIGTERM and SIGHUP handled as Ctrl+C, says its summary (a stopped batch's too) and
turns its stops into the command's message."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from bbm_tui.cli.errors import CommandError, Stopped, UsageError, fail, given, note
from bbm_tui.cli.phrases import count, os_problem
from bbm_tui.core import llm
from bbm_tui.core.accounting import (
    UNKNOWN,
    format_tokens_in_out,
    format_total_cost,
    unknown_cost_note,
)
from bbm_tui.core.batch.runner import BatchStop
from bbm_tui.core.batch.shard import Shard
from bbm_tui.core.dataset import DatasetError
from bbm_tui.core.store import Store
from bbm_tui.core.textsafe import one_line

R = TypeVar("R")
OnProgress = Callable[[Any], None]


def check_batch_options(args: argparse.Namespace) -> None:
    """The values every batch command's --concurrency, --limit and --pace must have; the
    offline models' pace is set here for this command (and the processes it starts)."""
    if args.concurrency < 1:
        raise UsageError("--concurrency must be at least 1")
    if args.limit is not None and args.limit < 0:
        raise UsageError("--limit must be 0 or more")
    if getattr(args, "rpm", None) is not None and args.rpm <= 0:
        raise UsageError("--rpm must be more than 0")
    if getattr(args, "processes", 1) < 1:
        raise UsageError("--processes must be at least 1")
    if getattr(args, "processes", 1) > args.concurrency:
        raise UsageError(f"--processes {args.processes} needs --concurrency {args.processes} "
                         "or more (each process works at least one trace at a time)")
    if not args.pace >= 0:  # also NaN
        raise UsageError("--pace must be 0 (full speed) or more tokens a second")
    llm.set_batch_replay_pace(args.pace)


def shard_of(args: argparse.Namespace) -> Shard | None:
    """--shard I/N: this machine's share of the input (None: all of it); a malformed one is
    a usage error (ShardError is a UserError, said by `given`)."""
    return Shard.parse(args.shard) if args.shard else None


@dataclass(frozen=True)
class BatchCommand(Generic[R]):
    """What `drive_batch` needs to know of a command's batch."""

    name: str  # "run": a batch's stop is said as "run stopped: ..."
    out: Path  # the file it writes
    progress_bar: bool  # not --no-progress (and only on a terminal)
    detail: Callable[[Any], str]  # what the progress bar shows beside the count
    # The closing lines, from the batch's progress; `stopped` for a batch stopped part way.
    summary: Callable[[Path, Any, bool], None]
    progress_of: Callable[[R], Any]  # the batch's progress, in its result


@contextmanager
def batch_store() -> Iterator[Store]:
    """The session store a batch writes to, open while it runs; one that cannot be opened is
    a usage error, as the command's other inputs are."""
    with given():
        store = Store.open()
    with store:
        yield store


def drive_batch(batch: BatchCommand[R], work: Callable[[OnProgress], Awaitable[R]]) -> R:
    """Run `work(on_progress)` to its end, say the summary and hand back the result. Stopped
    by Ctrl+C, SIGTERM or SIGHUP, the summary of what was done is said and the stop goes on up
    (`main` says "interrupted"). A batch's own stop (a missing key, an unknown model, a worker
    process that died) is a failure; a file it cannot read or write is a usage error."""
    latest = LatestProgress()
    try:
        with ProgressDisplay(batch.progress_bar, batch.detail) as show:
            result = asyncio.run(until_signalled(work(latest.keep(show))))
    except (Stopped, KeyboardInterrupt):
        if latest.progress is not None:
            batch.summary(batch.out, latest.progress, True)
        raise
    except BatchStop as error:
        raise CommandError(f"{batch.name} stopped: {error.message}") from error
    except DatasetError as error:
        raise UsageError(error.message) from error
    except OSError as error:  # OUT is a folder, or in one that does not exist, or not ours
        raise UsageError(os_problem(error, batch.out)) from error
    batch.summary(batch.out, batch.progress_of(result), False)
    return result


async def until_signalled(work: Awaitable[R]) -> R:
    """Await `work`, cancelling it on SIGTERM or SIGHUP and raising Stopped instead."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    received: list[int] = []

    def stop(number: int) -> None:
        received.append(number)
        if task is not None:
            task.cancel()

    numbers = (signal.SIGTERM, signal.SIGHUP)
    for number in numbers:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(number, stop, number)
    try:
        return await work
    except asyncio.CancelledError:
        if received:
            raise Stopped(received[0]) from None
        raise
    finally:
        for number in numbers:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.remove_signal_handler(number)


class LatestProgress:
    """The last progress a batch reported, for its summary when it is stopped."""

    def __init__(self) -> None:
        self.progress: Any = None

    def keep(self, show: OnProgress) -> OnProgress:
        def both(progress: Any) -> None:
            self.progress = progress
            show(progress)

        return both


class ProgressDisplay:
    """A rich progress bar on stderr (a terminal only), fed by a batch's progress object:
    `detail(progress)` says what the bar shows beside the count."""

    def __init__(self, enabled: bool, detail: Callable[[Any], str]) -> None:
        self.enabled = enabled and sys.stderr.isatty()
        self.detail = detail
        self._progress: Any = None
        self._task: Any = None

    def __enter__(self) -> OnProgress:
        if self.enabled:
            from rich.console import Console  # rich only for a bar on a terminal
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._progress = Progress(
                TextColumn("traces"), BarColumn(), MofNCompleteColumn(),
                TextColumn("{task.fields[detail]}"), TimeElapsedColumn(),
                TimeRemainingColumn(), console=Console(stderr=True),
            )
            self._progress.__enter__()
            self._task = self._progress.add_task("traces", total=None, detail="")
        return self.update

    def update(self, progress: Any) -> None:
        if self._progress is None:
            return
        detail = self.detail(progress)
        if progress.failed:
            detail += f" · {progress.failed} failed"
        self._progress.update(
            self._task, total=progress.total,
            completed=progress.done + progress.skipped + progress.failed, detail=detail,
        )

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.__exit__(*exc)


def steps_detail(progress: Any) -> str:
    """Beside the bar of a batch that writes steps (run, backtrack): steps, and the cost."""
    return f"{count(progress.steps, 'step')} · {running_cost(progress)}"


def calls_detail(progress: Any) -> str:
    """Beside the bar of a batch that writes no steps (find): calls, and the cost."""
    return f"{count(progress.calls, 'call')} · {running_cost(progress)}"


def running_cost(progress: Any) -> str:
    """The cost so far: "≥$…" once a call's price is unknown (a lower bound), "cost —" when
    none is known."""
    cost = format_total_cost(progress.cost, progress.calls, progress.unpriced_calls)
    return f"cost {cost}" if cost == UNKNOWN else cost


def spend(progress: Any) -> str:
    """"20 calls, 40,705 in / 36,678 cached / 400 out tokens, $0.0253": a batch's calls, as
    the app's title shows a session's ("~" on estimated counts, "cost unknown" never $0)."""
    tokens = format_tokens_in_out(progress.prompt_tokens, progress.cached_tokens,
                                  progress.completion_tokens, progress.estimated_calls > 0,
                                  progress.prompt_estimated_calls > 0)
    cost = format_total_cost(progress.cost, progress.calls, progress.unpriced_calls)
    return (f"{count(progress.calls, 'call')}, {tokens} tokens, "
            f"{'cost unknown' if cost == UNKNOWN else cost}")


def print_batch_notes(out: Path, progress: Any) -> None:
    """What a batch did besides its work: a repaired OUT, questions listed twice, calls whose
    cost is unknown."""
    if progress.mended:
        note(f"{out}: {progress.mended}")
    for said in progress.notes:
        note(said)
    if progress.unpriced_calls:
        note(unknown_cost_note(progress.unpriced_models, progress.unpriced_calls))
    if progress.duplicates:
        note(f"{progress.duplicates} duplicate(s) in the input were done once")
    if progress.deployments:  # behind a router file: who did the work
        served = ", ".join(f"{one_line(name)} {count(calls, 'call')}"
                           for name, calls in sorted(progress.deployments.items()))
        note(f"served by {served}")


def print_impossible_logprobs(number: int, noun: str) -> None:
    if number:
        note(f"{count(number, noun)} came with log-probabilities no model could "
             "give (positive, NaN, infinite or out of range); "
             f"{'it was' if number == 1 else 'they were'} kept without log-probabilities "
             "(null in OUT)" + (", and never chosen by them" if noun == "sample" else ""))


def print_errors(errors: list[str]) -> None:
    """The first ten traces' failures, each on its line."""
    for message in errors[:10]:
        fail(message)
