"""8 annotators labelling at once through `bbm-tui serve` (issue 37).

A real `bbm-tui serve` process over a word-sorting file, 8 annotators signed in, each with
their own app process (textual-serve's, one per browser), driven at once by a script over
the same WebSocket protocol as the page (["stdin", key], ["resize", size]; frames back as
bytes). Each annotator labels as a person does, a key every 150-300 ms: `c`, `c`, `x` (the
third thought the first mistake), `enter`, trace after trace. Each key is timed from its
send until the annotator's socket has received the frame that draws its change ("Judge
Thought 3", "Complete:", "2 / 40 done"): the key-to-frame time a browser sees (less the
browser's own painting). Then the memory of each app process: its
RSS and its PSS (the shared libraries split between the processes that map them), beside the
front's.

    .venv/bin/python bench/serve.py [--quick] [--annotators N]
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import statistics
import sys
import tempfile
import time
from asyncio import Barrier
from dataclasses import dataclass, field
from pathlib import Path

from _common import header, median, parser, private_home

from bbm_tui.serve.users import Role, add_user
from tests.serve_helpers import AppClient, screen_text, serving, word_sorting_file

TARGET_MS = 100.0
TRACES = 40


def _key_and_change(number: int) -> tuple[str, str]:
    """The key-th key of the labelling (c, c, x, enter, trace after trace) and the text its
    first frame draws."""
    trace, place = divmod(number, 4)
    return [("c", "Judge Thought 2"), ("c", "Judge Thought 3"), ("x", "Complete:"),
            ("\r", f"{trace + 1} / {TRACES} done")][place]


async def annotator(url: str, name: str, password: str, keys: int,
                    seed: int, together: Barrier, released: asyncio.Event) -> list[float]:
    """Sign in, wait for the queue, then `keys` keys at a person's pace; each key's time to
    its first frame (seconds)."""
    pace = random.Random(seed)
    client = await AppClient.open(url, name, password, width=120, height=36)
    times: list[float] = []
    try:
        await client.wait_for("Judge Thought 1", timeout=120)
        await client.settle(quiet=1.0)
        await together.wait()  # every app open: the keys start at once
        for number in range(keys):
            key, change = _key_and_change(number)
            start = len(client.seen)
            sent = time.perf_counter()
            await client.press(key)
            while change not in screen_text(client.seen[start:]):
                if await client.frame(10.0) is None:
                    raise TimeoutError(f"{name}: {change!r} not drawn 10 s after its key")
            times.append(time.perf_counter() - sent)
            await client.settle(quiet=0.05, timeout=5)
            await asyncio.sleep(pace.uniform(0.15, 0.3))
        await together.wait()  # every annotator done: their apps' CPU is read, then
        await released.wait()  # they close
    finally:
        await client.close()
    return times


def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def memory_mb(pid: int) -> tuple[float, float]:
    """RSS and PSS of a process, in MiB (from /proc/PID/smaps_rollup)."""
    values = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        parts = line.split()
        if parts[0] in ("Rss:", "Pss:"):
            values[parts[0]] = int(parts[1]) / 1024
    return values["Rss:"], values["Pss:"]


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def app_processes(server_pid: int) -> list[int]:
    apps = []
    for pid in descendants(server_pid):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"served-app" in command and not command[0].endswith(b"sh"):
            apps.append(pid)
    return apps


@dataclass
class Watched:
    """The app processes' memory while all are open, and their CPU time."""

    memory: list[tuple[float, float]] = field(default_factory=list)
    # Each app's CPU seconds when every app is open, and once every annotator is done.
    cpu_open: dict[int, float] = field(default_factory=dict)
    cpu_done: dict[int, float] = field(default_factory=dict)
    # The front's CPU seconds over the same time (the relay of keys and frames).
    front_cpu: float = 0.0

    def keys_cpu(self) -> float:
        """The CPU seconds every app spent from the first key to the last."""
        return sum(self.cpu_done[pid] - self.cpu_open[pid] for pid in self.cpu_open
                   if pid in self.cpu_done)


async def run_all(url: str, names: list[str], keys: int, server_pid: int
                  ) -> tuple[list[list[float]], Watched]:
    together = Barrier(len(names) + 1)
    released = asyncio.Event()
    tasks = [asyncio.create_task(annotator(url, name, f"pw-{name}", keys, seed, together,
                                           released))
             for seed, name in enumerate(names)]
    watched = Watched()
    await together.wait()
    apps = app_processes(server_pid)
    watched.cpu_open = {pid: cpu_s(pid) for pid in apps}
    front_cpu = cpu_s(server_pid)
    watched.memory = [memory_mb(pid) for pid in apps]
    done = asyncio.create_task(together.wait())
    while not done.done():
        await asyncio.sleep(0.5)
        with contextlib.suppress(OSError, KeyError):
            watched.memory = [memory_mb(pid) for pid in apps]
    watched.cpu_done = {pid: cpu_s(pid) for pid in apps}
    watched.front_cpu = cpu_s(server_pid) - front_cpu
    released.set()
    return [await task for task in tasks], watched


def main() -> int:
    arguments = parser(__doc__.splitlines()[0])
    arguments.add_argument("--annotators", type=int, default=8)
    options = arguments.parse_args()
    header("bbm-tui serve: annotators labelling at once", options.quick)
    count = options.annotators
    keys = 24 if options.quick else 80
    names = [f"annotator{number + 1}" for number in range(count)]
    with private_home() as env, tempfile.TemporaryDirectory(prefix="bbm-serve-") as folder:
        os.environ.update(env)
        data = word_sorting_file(Path(folder), count=TRACES)
        users = Path(folder) / "users.json"
        for name in names:
            add_user(users, name, Role.ANNOTATOR, f"pw-{name}")
        with serving(Path(folder), [data], users) as served:
            started = time.perf_counter()
            times, watched = asyncio.run(run_all(served.url, names, keys,
                                                 served.process.pid))
            elapsed = time.perf_counter() - started
            front = memory_mb(served.process.pid)
    print(f"{count} annotators, {keys} keys each at 150-300 ms apart, {elapsed:.1f} s")
    for name, each in zip(names, times, strict=True):
        print(f"  {name}: key to frame median {median(each) * 1000:6.1f} ms, "
              f"p95 {statistics.quantiles(each, n=20)[-1] * 1000:6.1f} ms, max "
              f"{max(each) * 1000:6.1f} ms")
    every = [value for each in times for value in each]
    medians = [median(each) for each in times]
    print(f"all keys: median {median(every) * 1000:.1f} ms, p95 "
          f"{statistics.quantiles(every, n=20)[-1] * 1000:.1f} ms (n={len(every)}); the "
          f"slowest annotator's median {max(medians) * 1000:.1f} ms")
    print(f"the app processes' CPU from the first key to the last: "
          f"{watched.keys_cpu():.1f} s in all, {watched.keys_cpu() / len(every) * 1000:.1f} ms "
          f"a key; the front's {watched.front_cpu / len(every) * 1000:.1f} ms a key; load "
          f"average now {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    memory = watched.memory
    if memory:
        rss = [value[0] for value in memory]
        pss = [value[1] for value in memory]
        print(f"memory per annotator (app process): RSS median {median(rss):.0f} MiB, PSS "
              f"median {median(pss):.0f} MiB (PSS total {sum(pss):.0f} MiB for {count}); "
              f"the front: RSS {front[0]:.0f} MiB")
    worst = max(medians) * 1000
    print()
    if worst < TARGET_MS:
        print(f"TARGET MET: each annotator's key-to-frame median <= {worst:.1f} ms "
              f"(target < {TARGET_MS:.0f} ms)")
    else:
        bar = "!" * 72
        print(bar)
        print(f"!!! TARGET MISSED: the slowest annotator's key-to-frame median {worst:.1f} ms "
              f"(target < {TARGET_MS:.0f} ms)")
        print(bar)
    return 0


if __name__ == "__main__":
    sys.exit(main())
