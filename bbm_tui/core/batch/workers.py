"""A batch's traces worked in child processes (`--processes P` of `bbm-tui run`, `backtrack` and
`find`).

Against a fast local server the client's CPU, most of it litellm's, is what limits a batch: one
process runs its event loop on one core (bench/backtrack_concurrency.py). Each child here has
its own event loop, litellm and connection to the store, and works the traces it is sent (the
command's work function: `run_in_child` in core/batch/run.py, `backtrack_in_child` in
core/batch/backtrack.py, `find_in_child` in core/batch/find.py); the parent keeps everything
else (the runner, OUT in the inputs' order, the progress, the resume), so a batch over
processes writes what it writes in one.

Each child is spawned (a fresh interpreter: forking a process that runs an event loop and
litellm's HTTP clients is not safe) and imports litellm before it says it is ready, so a pool
costs one litellm import up front, on the children's cores. A child that dies stops the batch
with one message; a child whose parent is gone (its pipe closes) stops its traces and exits.
Every step a child finishes is committed to the store as it is in one process, so a kill loses
at most the steps being streamed.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from bbm_tui.core import llm
from bbm_tui.core.batch.runner import BatchStop, Progress, young_objects_collected_less_often
from bbm_tui.core.tasks import Task, use_tasks, user_tasks

if TYPE_CHECKING:
    from multiprocessing.process import BaseProcess

    from bbm_tui.core.store import Store

# A batch's own progress (RunProgress, BacktrackProgress), handed back to its `notify`.
ProgressT = TypeVar("ProgressT", bound=Progress)

# How long a child may take to import litellm and open the store before the pool gives up.
START_TIMEOUT_S = 120.0


class WorkerError(BatchStop):
    """A child process could not start, or ended while it had traces."""


# A child's work on one job: what to send back to the parent (picklable; for `Workers.work`,
# what the batch writes and the trace's ProgressDelta). It raises BatchStop for a fault that
# stops the whole batch. A module-level function, so that it pickles. The store is None for a
# command that writes no sessions (find).
ChildWork = Callable[[Any, "Store | None", "WorkerSetup"], Awaitable[Any]]


@dataclass(frozen=True)
class WorkerSetup:
    """What every child needs: the store to commit to (None: the work writes no sessions), the
    model, the work's settings (the stepper's for run and backtrack, the finder's for find),
    the work it does on each job, and the user's tasks (a spawned child has read no task
    file)."""

    store_path: Path | None
    spec: llm.ModelSpec
    settings: Any
    work: ChildWork
    tasks: tuple[Task, ...] = field(default_factory=user_tasks)


@dataclass
class _Child:
    process: BaseProcess
    connection: Connection
    ready: asyncio.Future[None]  # set by its first message: ready, or why it cannot be
    pending: dict[int, asyncio.Future[Any]] = field(default_factory=dict)


class Workers:
    """`count` children, used as `async with Workers(...) as workers:` and handed to the batch
    (e.g. `backtrack_batch(..., workers=workers)`). A job goes to the child with the fewest."""

    def __init__(self, count: int, setup: WorkerSetup) -> None:
        if count < 2:
            raise ValueError("worker processes are for 2 or more; 1 is the batch's own loop")
        self.count = count
        self.setup = setup
        self._children: list[_Child] = []
        self._next_id = 0

    async def __aenter__(self) -> Workers:
        try:
            await self.start()
        except BaseException:
            self.close()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    @property
    def pids(self) -> list[int]:
        return [child.process.pid for child in self._children if child.process.pid]

    async def start(self) -> None:
        """Spawn the children and wait until each has litellm imported and the store open."""
        context = multiprocessing.get_context("spawn")
        loop = asyncio.get_running_loop()
        for _ in range(self.count):
            ours, theirs = context.Pipe()
            process = context.Process(target=child_main, args=(theirs, self.setup),
                                      name="bbm-tui-worker", daemon=True)
            process.start()
            theirs.close()
            child = _Child(process, ours, loop.create_future())
            self._children.append(child)
            loop.add_reader(ours.fileno(), self._receive, child)
        try:
            await asyncio.wait_for(
                asyncio.gather(*(child.ready for child in self._children)), START_TIMEOUT_S)
        except TimeoutError:
            raise WorkerError(f"a worker process was not ready after {START_TIMEOUT_S:.0f} s "
                              "(importing litellm, opening the store)") from None

    async def run(self, job: Any) -> Any:
        """What a child's work made of `job`. Raises WorkerError (a BatchStop) when the work
        stopped the batch or the child died."""
        child = min(self._children, key=lambda each: len(each.pending))
        job_id = self._next_id
        self._next_id += 1
        result = asyncio.get_running_loop().create_future()
        child.pending[job_id] = result
        try:
            child.connection.send((job_id, job))
        except OSError:
            child.pending.pop(job_id, None)
            raise WorkerError(f"a worker process ended "
                              f"({_how_it_ended(child.process)})") from None
        try:
            return await result
        finally:
            child.pending.pop(job_id, None)

    async def work(self, job: Any, progress: ProgressT,
                   notify: Callable[[ProgressT], None]) -> Any:
        """A job worked in a child, as a batch's `work` does it in this process: the child's
        result is (what the batch writes, the trace's ProgressDelta); the delta is added to
        `progress`, which is reported, and the first part returned."""
        value, delta = await self.run(job)
        delta.add_to(progress)
        notify(progress)
        return value

    def _receive(self, child: _Child) -> None:
        try:
            message = child.connection.recv()
        except (EOFError, OSError):
            self._lost(child)
            return
        if not child.ready.done():  # its first word: ready, or why it cannot be
            if message[0] == "ready":
                child.ready.set_result(None)
            else:
                child.ready.set_exception(
                    WorkerError(f"a worker process could not start: {message[1]}"))
            return
        kind, job_id = message[0], message[1]
        waiting = child.pending.get(job_id)
        if waiting is None or waiting.done():
            return
        if kind == "done":
            waiting.set_result(message[2])
        elif kind == "stop":
            waiting.set_exception(WorkerError(message[2]))
        else:
            waiting.set_exception(WorkerError(f"a worker process failed: {message[2]}"))

    def _lost(self, child: _Child) -> None:
        with contextlib.suppress(ValueError, OSError):
            asyncio.get_running_loop().remove_reader(child.connection.fileno())
        child.process.join(1)
        if not child.ready.done():
            child.ready.set_exception(WorkerError(
                f"a worker process did not start ({_how_it_ended(child.process)})"))
        error = WorkerError(f"a worker process ended while it had traces "
                            f"({_how_it_ended(child.process)}); run the batch again to resume")
        for waiting in child.pending.values():
            if not waiting.done():
                waiting.set_exception(error)

    def close(self) -> None:
        """Stop every child: asked first (its pipe closes), ended if it lingers."""
        with contextlib.suppress(RuntimeError):
            loop = asyncio.get_running_loop()
            for child in self._children:
                with contextlib.suppress(ValueError, OSError):
                    loop.remove_reader(child.connection.fileno())
        for child in self._children:
            child.connection.close()
            if not child.ready.done():
                child.ready.cancel()
            elif not child.ready.cancelled():
                child.ready.exception()  # said already, by the first failure to start
        for child in self._children:
            child.process.join(5)
            if child.process.is_alive():
                child.process.terminate()
                child.process.join(5)
        self._children.clear()


@contextlib.asynccontextmanager
async def worker_processes(processes: int, setup: WorkerSetup,
                           given: Workers | None = None) -> AsyncIterator[Workers | None]:
    """The children a batch shares its traces out to: `given` (started, and ended, by the
    caller), none for one process (the batch's own loop), or `processes` children started
    here and ended when the batch is."""
    if given is not None or processes == 1:
        yield given
        return
    async with Workers(processes, setup) as workers:
        yield workers


def _how_it_ended(process: BaseProcess) -> str:
    code = process.exitcode
    if code is None:
        return "still running"
    if code < 0:
        return f"killed by signal {-code}"
    return f"exit code {code}"


# --------------------------------------------------------------------------- in the child


def child_main(connection: Connection, setup: WorkerSetup) -> None:
    """A child's life: ready, then backtrack what it is sent until its pipe closes."""
    # Ctrl-C reaches the whole process group: the parent decides when the children stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    asyncio.run(_serve(connection, setup))


async def _serve(connection: Connection, setup: WorkerSetup) -> None:
    from bbm_tui.core.store import Store

    try:
        use_tasks(setup.tasks)
        llm.warm_up()
        store = None if setup.store_path is None else Store.open(setup.store_path)
    except Exception as error:  # said to the parent, which stops the batch with it
        connection.send(("failed", str(error) or type(error).__name__))
        return
    # The collector as the parent's runner sets it for a batch: at Python's default it took
    # some 2% of a child's CPU (bench/backtrack_concurrency.py), 0.6% so.
    with store if store is not None else contextlib.nullcontext(), \
            young_objects_collected_less_often():
        connection.send(("ready",))
        inbox: asyncio.Queue[tuple[int, Any] | None] = asyncio.Queue()
        loop = asyncio.get_running_loop()
        loop.add_reader(connection.fileno(), _take, connection, inbox)
        running: set[asyncio.Task[None]] = set()
        while (message := await inbox.get()) is not None:
            job_id, job = message
            task = asyncio.ensure_future(_work(connection, store, setup, job_id, job))
            running.add(task)
            task.add_done_callback(running.discard)
        loop.remove_reader(connection.fileno())
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)


def _take(connection: Connection, inbox: asyncio.Queue[tuple[int, Any] | None]) -> None:
    try:
        inbox.put_nowait(connection.recv())
    except (EOFError, OSError):  # the parent closed the pipe, or is gone
        asyncio.get_running_loop().remove_reader(connection.fileno())
        inbox.put_nowait(None)


async def _work(connection: Connection, store: Store | None, setup: WorkerSetup, job_id: int,
                job: Any) -> None:
    try:
        result = await setup.work(job, store, setup)
    except BatchStop as error:
        _send(connection, ("stop", job_id, str(error)))
        return
    except Exception as error:  # a bug: the parent stops the batch and says what it was
        _send(connection, ("error", job_id, f"{type(error).__name__}: {error}"))
        return
    _send(connection, ("done", job_id, result))


def _send(connection: Connection, message: tuple[Any, ...]) -> None:
    with contextlib.suppress(OSError):  # the parent is gone: nobody is waiting
        connection.send(message)
