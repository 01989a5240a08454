"""Child processes for the store tests: run as `python -m tests.kill_helpers MODE ...` from the
project root. They use the real Store (and, for `generate`, the real stepper with the replay
model through litellm), so that a test can kill one mid-trace or run several at once.

Modes:
  generate DB TASK INDEX     generate the dataset row's trace into a new session, step by step
  write DB GO N NAME         wait for the file GO, then commit N steps into a new session
  think DB TASK INDEX         solver/thinking's one call for the row's question (thinking mode),
                             its reasoning's steps committed as they are cut
  open DB GO                 say it is ready (GO.ready.PID), wait for the file GO, then open
                             the store and create a session
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path


def wait_for(go: str) -> None:
    deadline = time.monotonic() + 30
    while not os.path.exists(go):
        if time.monotonic() > deadline:
            raise SystemExit("the go file never appeared")
        time.sleep(0.001)


def generate(db: str, task: str, index: str) -> None:
    from bbm_tui.core import llm
    from bbm_tui.core.dataset import bundled_rows
    from bbm_tui.core.store import Store
    from bbm_tui.core.trace.session import NewTrace, TraceSession

    row = bundled_rows(task)[int(index)]
    store = Store.open(db)
    session = TraceSession.create(
        store, NewTrace(task, row.input, row.target, int(index)), llm.ModelSpec("replay/bbm")
    )

    async def run() -> None:
        async for _ in session.generate():
            pass

    asyncio.run(run())
    print("finished", flush=True)


def think(db: str, task: str, index: str) -> None:
    from bbm_tui.core import llm
    from bbm_tui.core.dataset import bundled_rows
    from bbm_tui.core.store import Store
    from bbm_tui.core.trace.session import NewTrace, TraceSession

    row = bundled_rows(task)[int(index)]
    store = Store.open(db)
    session = TraceSession.create(store, NewTrace(task, row.input, row.target, int(index)),
                                  llm.ModelSpec("solver/thinking", mode="thinking"))

    async def run() -> None:
        async for _ in session.generate():
            pass

    asyncio.run(run())
    print("finished", flush=True)


def write(db: str, go: str, count: str, name: str) -> None:
    from bbm_tui.core.llm import CallRecord
    from bbm_tui.core.store import Store

    store = Store.open(db)
    session = store.create_session(task="word_sorting", input=name, model="m", name=name)
    wait_for(go)
    parent = None
    for number in range(1, int(count) + 1):
        step = store.add_step(
            session.id, parent_id=parent, number=number, text=f"{name} step {number}",
            call=CallRecord(model="m", params={}, latency_s=0.001, completion_tokens=1),
        )
        parent = step.id
        if number % 10 == 0:
            store.set_label(session.id, step.id, step.id)
    store.close()
    print("wrote", count, flush=True)


def open_store(db: str, go: str) -> None:
    from bbm_tui.core.store import Store

    Path(f"{go}.ready.{os.getpid()}").touch()
    wait_for(go)
    store = Store.open(db)
    store.create_session(task="word_sorting", input=f"pid {os.getpid()}", model="m")
    store.close()
    print("opened", flush=True)


def main(argv: list[str]) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    mode, *args = argv
    {"generate": generate, "think": think, "write": write, "open": open_store}[mode](*args)


if __name__ == "__main__":
    main(sys.argv[1:])
