"""Big stores: the app on a session of 10^5 steps and on a store of 10^5
sessions.

Two stores are written first, each in a child process straight through SQLite
(`tests/big_stores.py`: executemany, seconds): one session of N steps (every step with its call
and tokens), and N sessions of 3 steps (a third of them labelled). Then, in this process, the
real app runs headless (Textual's `run_test`, 120x40) and the clock measures:

- opening: from starting the app on the big session until its first frame with thoughts (the
  trace screen mounted, Thought 1 laid out and painted);
- a key: `j`, `k`, `G`, `pgdn`, `home`, digits+enter and `x` (until its label is saved), each
  from the key press until the screen is idle and repainted; the median and the worst;
- the sessions screen: from `s` until the first page is on screen, then `down` and `pgdn`
  through several pages (a key that crosses into the next page waits for it);
- memory: the process's peak RSS (`resource.getrusage`), and what the loaded session holds
  (tracemalloc, on a load of its own after the timed runs).

A key's time runs from sending it to the app until the last frame it caused (the compositor's
update, caught at `App._display`), so Pilot's own waiting is not counted; its CPU time (the
app's thread) is printed beside it, median and worst: on a busy machine the wall time is
mostly waiting for a core. Each app runs with the collector on the schedule `bbm-tui` gives it
after the first frame (ui/run.py), as the other benchmarks of the app do.

Each figure is printed beside the same one on a small store (100 steps, 1,000 sessions) run
in the same process: the part of a key's time that is Textual's own, whatever the size.

Targets: under 1 s to open, under 50 ms a key, under 300 MB.

    .venv/bin/python bench/big_store.py            # N = 100,000
    .venv/bin/python bench/big_store.py --quick    # N = 10,000 (CI)
    .venv/bin/python bench/big_store.py --code DIR # another checkout's bbm_tui (a before)
"""

from __future__ import annotations

import asyncio
import gc
import os
import resource
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PYTHON, ROOT, header, median, parser, private_home

OPEN_TARGET_S = 1.0
KEY_TARGET_S = 0.050
RSS_TARGET_MB = 80  # issue 36 (300 in issue 8)
# Issue 36: the big session opens at most this many times the small one's time.
OPEN_RATIO_TARGET = 1.5
SIZE = (120, 40)
# The same keys on a small store, for comparison: what a key costs whatever the store's size.
SMALL_STEPS = 100
SMALL_SESSIONS = 1_000


def build(kind: str, path: str, count: int) -> None:
    """In a child process: write one big store."""
    from tests.big_stores import big_session, many_sessions

    if kind == "steps":
        big_session(Path(path), count)
    else:
        many_sessions(Path(path), count)


def write_store(kind: str, home: Path, count: int) -> float:
    home.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    subprocess.run([PYTHON, __file__, "--build", kind, str(home / "bbm-tui.sqlite3"),
                    str(count)], check=True, cwd=ROOT)
    return time.perf_counter() - started


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class FrameClock:
    """When the app's frames are made: wraps the app's `_display`, which the compositor calls
    with each update it renders (headless, nothing is written; the update is still computed,
    which is the work a key costs)."""

    def __init__(self, app) -> None:  # type: ignore[no-untyped-def]
        self.frames: list[float] = []
        original = app._display

        def display(screen, renderable) -> None:  # type: ignore[no-untyped-def]
            if renderable is not None:
                self.frames.append(time.perf_counter())
            original(screen, renderable)

        app._display = display

    async def key(self, pilot, key: str, done: Callable[[], bool],
                  settle: float = 0.05) -> tuple[float, float, float]:
        """From sending `key` until its first frame (once `done()` holds: the change is made),
        and until the last frame it caused (frames are awaited until none has come for
        `settle` seconds: a window that moved lays out its new thoughts); and the CPU time
        of this thread, the app's, until then (the waiting in between costs next to none)."""
        app = pilot.app
        seen = len(self.frames)
        cpu_started = time.thread_time()
        started = time.perf_counter()
        await app._press_keys([key])
        while not done() or len(self.frames) == seen:
            if time.perf_counter() - started > 60:
                raise TimeoutError(f"{key}: the app never got there")
            await asyncio.sleep(0.001)
        # Frames come only from changes, and a key's action runs before any of its frames.
        first = self.frames[seen]
        while time.perf_counter() - self.frames[-1] < settle:
            await asyncio.sleep(0.005)
        return first - started, self.frames[-1] - started, time.thread_time() - cpu_started


def as_the_command_runs_it(app):  # type: ignore[no-untyped-def]
    """The collector on the app's schedule from the first frame on, as `bbm-tui` runs the
    app (ui/run.py run_app; bench/side_by_side.py does the same). Without it the bench ran
    the app on Python's default schedule, whose full passes over every object the app holds
    (70-450 ms each on a busy machine) fell inside a key every few pages of the sessions
    screen: a cost the command does not have. `after_the_app` undoes it."""
    from bbm_tui.ui.termination import collect_from_now_on

    app.call_after_first_frame(collect_from_now_on)
    return app


def after_the_app() -> None:
    """The process as a new command would find it, for the next app: what the app left
    frozen (its garbage too, which would stay for good and count in the next one's peak
    RSS) is the collector's again, and collected."""
    gc.unfreeze()
    gc.collect()


async def until(pilot, condition: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.perf_counter() + timeout
    while not condition():
        if time.perf_counter() > deadline:
            raise TimeoutError("the app never got there")
        await asyncio.sleep(0.001)


async def big_trace(home: Path, steps: int) -> dict[str, object]:
    from bbm_tui.core.config import Config
    from bbm_tui.ui.app import BbmApp
    from bbm_tui.ui.screens.trace import TraceScreen
    from bbm_tui.ui.widgets.thought import ThoughtView
    from bbm_tui.ui.widgets.thought_list import ThoughtList

    os.environ["BBM_TUI_HOME"] = str(home)
    app = as_the_command_runs_it(BbmApp(Config(), session_id=1, warm_up=False,
                                        wall_clock=False))
    clock = FrameClock(app)
    started = time.perf_counter()
    cpu_started = time.process_time()
    figures: dict[str, object] = {}
    async with app.run_test(size=SIZE) as pilot:
        def opened() -> bool:
            screen = app.screen
            return (isinstance(screen, TraceScreen) and screen.is_mounted
                    and (first := screen.query_one(ThoughtList).view(1)) is not None
                    and first.region.height > 0
                    and bool(clock.frames) and clock.frames[-1] > started)

        await until(pilot, opened)
        figures["open"] = clock.frames[-1] - started
        # The process's CPU time (every thread) until then: on a busy machine the wall time
        # is several times it, and the CPU time is what the code costs.
        figures["open_cpu"] = time.process_time() - cpu_started
        screen = app.screen
        assert isinstance(screen, TraceScreen)
        await pilot.pause()
        figures["mounted"] = len(screen.query(ThoughtView))
        keys: dict[str, list[tuple[float, float, float]]] = {}

        async def press(name: str, key: str, wanted: Callable[[], int]) -> None:
            target = wanted()
            keys.setdefault(name, []).append(
                await clock.key(pilot, key, lambda: screen.view.selected == target))
            view = screen.query_one(ThoughtList).view(target)
            assert view is not None, f"{name}: Thought {target} not mounted"
            pane = screen.query_one("#thoughts")
            assert pane.region.overlaps(view.region), f"{name}: Thought {target} not in sight"

        count = steps
        for _ in range(30):
            await press("j", "j", lambda: min(screen.view.selected + 1, count))
        for _ in range(10):
            await press("k", "k", lambda: max(screen.view.selected - 1, 1))
        for _ in range(5):
            page = max(1, screen.view.thoughts_in_view() - 1)
            await press("pgdn", "pagedown",
                        lambda page=page: min(screen.view.selected + page, count))
        for _ in range(3):
            await press("G", "G", lambda: count)
            await press("home", "home", lambda: 1)
        await press("G", "G", lambda: count)
        for _ in range(10):
            await press("k", "k", lambda: max(screen.view.selected - 1, 1))
        for _ in range(3):
            page = max(1, screen.view.thoughts_in_view() - 1)
            await press("pgup", "pageup", lambda page=page: max(screen.view.selected - page, 1))
        for digit in str(steps // 2):
            await app._press_keys([digit])
        await press("digits+enter", "enter", lambda: steps // 2)
        for _ in range(3):
            selected = screen.view.selected
            keys.setdefault("x", []).append(await clock.key(
                pilot, "x", lambda selected=selected: screen.view.trace.mistake_number == selected))
            await press("j", "j", lambda: min(screen.view.selected + 1, count))
        figures["keys"] = keys
        figures["mounted_after"] = len(screen.query(ThoughtView))
    after_the_app()
    return figures


def load_memory(home: Path) -> tuple[float, float]:
    """The big session loaded as the app loads it, alone: seconds, and Python's allocations
    (tracemalloc, which slows the load: so it is timed first, without it)."""
    from bbm_tui.core.store import Store
    from bbm_tui.core.trace.session import TraceSession

    with Store.open(home / "bbm-tui.sqlite3") as store:
        started = time.perf_counter()
        TraceSession.load(store, 1)
        seconds = time.perf_counter() - started
        tracemalloc.start()
        trace = TraceSession.load(store, 1)
        held = tracemalloc.get_traced_memory()[0] / 2**20
        tracemalloc.stop()
        del trace
    return seconds, held


async def many(home: Path, count: int) -> dict[str, object]:
    from textual.widgets import DataTable

    from bbm_tui.core.config import Config
    from bbm_tui.ui.app import BbmApp
    from bbm_tui.ui.screens.new_session import NewSessionScreen
    from bbm_tui.ui.screens.sessions import MARGIN, SessionsScreen

    os.environ["BBM_TUI_HOME"] = str(home)
    app = as_the_command_runs_it(BbmApp(Config(), warm_up=False, wall_clock=False))
    clock = FrameClock(app)
    figures: dict[str, object] = {}
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: isinstance(app.screen, NewSessionScreen))
        await pilot.pause()

        def listed() -> bool:
            screen = app.screen
            return (isinstance(screen, SessionsScreen)
                    and screen.query_one(DataTable).row_count > 0)

        figures["open"] = (await clock.key(pilot, "s", listed))[1]
        screen = app.screen
        assert isinstance(screen, SessionsScreen)
        table = screen.query_one(DataTable)
        keys: dict[str, list[tuple[float, float, float]]] = {}
        for name, key, times in (("down", "down", 150), ("pgdn", "pagedown", 20)):
            for _ in range(times):
                end = screen._offset + table.row_count
                position = screen._offset + table.cursor_row

                def done(end: int = end, position: int = position) -> bool:
                    # Moved; and a key that came near the end has its next page.
                    near = (screen._offset + table.cursor_row >= end - MARGIN
                            and end < screen._total)
                    moved = screen._offset + table.cursor_row != position
                    return moved and (not near or screen._offset + table.row_count > end)
                keys.setdefault(name, []).append(await clock.key(pilot, key, done))
        figures["keys"] = keys
        figures["rows_loaded"] = table.row_count
        figures["cursor"] = screen._offset + table.cursor_row
        started = time.perf_counter()
        search = screen.query_one("#sessions-search")
        search.value = f"question {count - 1}"  # type: ignore[attr-defined]
        await until(pilot, lambda: screen._total == 1 and table.row_count == 1)
        figures["search"] = time.perf_counter() - started
    after_the_app()
    return figures


def report_keys(keys: dict[str, list[tuple[float, float, float]]],
                small: dict[str, list[tuple[float, float, float]]]) -> tuple[float, float]:
    """Each key's median (and worst) to its first frame and until settled, and its CPU time,
    beside the same key on the small store; returns the worst of the medians to the first
    frame and the worst of all until settled, on the big store."""
    worst_median = worst_last = 0.0
    print(f"  {'key':13} {'first frame, median (max)':>27} {'settled, median (max)':>24}"
          f" {'CPU, median (max)':>18}   small store: first frame, settled, CPU (medians)")
    for name, times in keys.items():
        first = [pair[0] for pair in times]
        last = [pair[1] for pair in times]
        cpu = [pair[2] for pair in times]
        worst_median = max(worst_median, median(first))
        worst_last = max(worst_last, max(last))
        nan = float("nan")
        baseline = small.get(name, [(nan, nan, nan)])
        print(f"  {name:13} {median(first) * 1000:15.1f} ms ({max(first) * 1000:5.1f})"
              f" {median(last) * 1000:13.1f} ms ({max(last) * 1000:5.1f})"
              f" {median(cpu) * 1000:12.1f} ms ({max(cpu) * 1000:5.1f})"
              f"   {median([p[0] for p in baseline]) * 1000:8.1f} ms, "
              f"{median([p[1] for p in baseline]) * 1000:5.1f} ms, "
              f"{median([p[2] for p in baseline]) * 1000:5.1f} ms   (n={len(times)})")
    return worst_median, worst_last


def verdict_line(name: str, value: float, target: float, unit: str, *,
                 at_most: bool = False) -> bool:
    met = value <= target if at_most else value < target
    mark = "TARGET MET" if met else "!!! TARGET MISSED"
    print(f"{mark}: {name} = {value:.3f} {unit} (target {'<=' if at_most else '<'} {target} "
          f"{unit})")
    return met


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--build":
        build(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return 0
    options = parser(__doc__.splitlines()[0])
    options.add_argument("--code", type=Path, default=ROOT,
                         help="measure another checkout's bbm_tui (for a before and after)")
    args = options.parse_args()
    code = args.code.resolve()
    if code != ROOT:
        # The same measurements in a child that imports that checkout's bbm_tui first.
        env = {**os.environ, "PYTHONPATH": f"{code}:{ROOT}"}
        return subprocess.run([PYTHON, __file__, *(["--quick"] if args.quick else [])],
                              env=env, cwd=ROOT).returncode
    count = 10_000 if args.quick else 100_000
    header(f"big stores: one session of {count:,} steps, {count:,} sessions", args.quick)
    with private_home() as env:
        home = Path(env["BBM_TUI_HOME"])
        os.environ["BBM_TUI_CONFIG"] = env["BBM_TUI_CONFIG"]
        os.environ["BBM_TUI_REPLAY_TPS"] = "0"
        steps_home, sessions_home = home / "steps", home / "sessions"
        small_steps, small_sessions = home / "small-steps", home / "small-sessions"
        print(f"writing the stores: {write_store('steps', steps_home, count):.1f} s and "
              f"{write_store('sessions', sessions_home, count):.1f} s "
              f"({(steps_home / 'bbm-tui.sqlite3').stat().st_size / 2**20:.0f} MB and "
              f"{(sessions_home / 'bbm-tui.sqlite3').stat().st_size / 2**20:.0f} MB); "
              f"the small ones for comparison: {SMALL_STEPS} steps, {SMALL_SESSIONS:,} sessions")
        write_store("steps", small_steps, SMALL_STEPS)
        write_store("sessions", small_sessions, SMALL_SESSIONS)
        before = rss_mb()
        # The small store first, then the big one, each in a fresh app.
        small_trace = asyncio.run(big_trace(small_steps, SMALL_STEPS))
        trace = asyncio.run(big_trace(steps_home, count))
        after_trace = rss_mb()
        print(f"\nThe app on one session of {count:,} steps:")
        print(f"  open (first frame with thoughts) {trace['open']:.3f} s, CPU "
              f"{trace['open_cpu']:.3f} s (small store: {small_trace['open']:.3f} s, CPU "
              f"{small_trace['open_cpu']:.3f} s); thought views mounted {trace['mounted']} (after "
              f"the keys: {trace['mounted_after']})")
        worst_trace = report_keys(trace["keys"], small_trace["keys"])  # type: ignore[arg-type]
        small_many = asyncio.run(many(small_sessions, SMALL_SESSIONS))
        sessions = asyncio.run(many(sessions_home, count))
        print(f"\nThe sessions screen on {count:,} sessions:")
        print(f"  open (s until the first page) {sessions['open']:.3f} s (small store: "
              f"{small_many['open']:.3f} s); rows held after the keys "
              f"{sessions['rows_loaded']:,} (the cursor on row {sessions['cursor']:,})")
        worst_sessions = report_keys(sessions["keys"], small_many["keys"])  # type: ignore[arg-type]
        print(f"  a search (text in {count:,} questions) {sessions['search'] * 1000:.0f} ms "
              f"(small store: {small_many['search'] * 1000:.0f} ms)")
        peak = rss_mb()
        print(f"\npeak RSS of this process {peak:.0f} MB (before opening the app: "
              f"{before:.0f} MB; after the big session: {after_trace:.0f} MB)")
        # Last: tracemalloc's own bookkeeping would count in the peak above.
        load_s, held_mb = load_memory(steps_home)
        print(f"the big session's load alone (TraceSession.load, as the app does it): "
              f"{load_s:.3f} s; the loaded session holds {held_mb:.0f} MB of Python objects\n")
        verdict_line("open the big session", float(trace["open"]), OPEN_TARGET_S, "s")  # type: ignore[arg-type]
        verdict_line("open the big session / the small one's (issue 36)",
                     float(trace["open"]) / float(small_trace["open"]), OPEN_RATIO_TARGET, "x",  # type: ignore[arg-type]
                     at_most=True)
        verdict_line("open the sessions screen", float(sessions["open"]), OPEN_TARGET_S, "s")  # type: ignore[arg-type]
        for where, (typical, worst) in (("big session", worst_trace),
                                        ("sessions", worst_sessions)):
            verdict_line(f"slowest key's median to its frame, {where}", typical * 1000,
                         KEY_TARGET_S * 1000, "ms")
            verdict_line(f"worst key until settled, {where}", worst * 1000,
                         KEY_TARGET_S * 1000, "ms")
        verdict_line("peak RSS", peak, RSS_TARGET_MB, "MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
