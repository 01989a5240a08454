"""Big questions (issue 21, item 8): the app opening a session whose question is 10 MB ("w " x
5,000,000: what an earlier bbm-tui let into its store), and `bbm-tui annotate` on a file whose
row holds such a question, then on one holding the largest question bbm-tui takes
(`MAX_QUESTION_CHARS`, 100,000 characters), where it exists.

Each case runs in a fresh child process (temporary BBM_TUI_HOME) with the real app headless
(Textual's `run_test`, 120x40): the time until the first frame painted with the trace screen (or
the annotation screen) mounted; the first key after it (`k` on the trace, `c` in the queue,
sent as the terminal would, `App.simulate_key`) until the first frame painted with its effect
(frames caught at `App._display`, as bench/annotate_queue.py does); and the child's peak RSS
(VmHWM). A file the command refuses is timed to its refusal instead. `--code DIR` runs
another checkout's bbm_tui, for a before/after.

    .venv/bin/python bench/big_question.py [--quick] [--code DIR]
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PYTHON, ROOT, header, parser, private_home

BIG = 10_000_000  # characters
TAKEN = 100_000

CHILD = r"""
import asyncio, json, sys, time
from pathlib import Path

def hwm_mb():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0

mode, size, folder = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
question = "w " * (size // 2)
from tests.ui.ui_helpers import make_app

class Frames:
    # Frames as the compositor hands them to the terminal (App._display), so that Pilot's own
    # waits (which give up after a few seconds of a busy app) are not what is timed. `ready()`
    # is asked as each frame is painted: the time is that of the first frame painted once the
    # change is made.
    def __init__(self, app):
        self.wanted = None
        self.first = None
        original = app._display
        def display(screen, renderable):
            original(screen, renderable)
            if renderable is not None and self.wanted is not None and self.wanted():
                self.first, self.wanted = time.perf_counter(), None
        app._display = display

    async def first_painted(self, ready, timeout=1800.0):
        self.first, self.wanted = None, ready
        deadline = time.perf_counter() + timeout
        while self.first is None:
            if time.perf_counter() > deadline:
                raise SystemExit("timed out")
            await asyncio.sleep(0.005)
        return self.first

async def session():
    from bbm_tui.core.store import Store
    with Store.open() as store:
        made = store.create_session(task="word_sorting", input=question, target="w",
                                    model="replay/bbm", name="big")
        parent = None
        for number in (1, 2, 3):
            parent = store.add_step(made.id, parent_id=parent, number=number,
                                    text=f"Thought {number} of the sort.").id
    start = time.perf_counter()
    app = make_app(session_id=made.id)
    frames = Frames(app)
    async with app.run_test(size=(120, 40)):
        def shown():
            screen = app.screen
            return (type(screen).__name__ == "TraceScreen" and screen.is_mounted
                    and bool(screen.query("#question")))
        opened = await frames.first_painted(shown) - start
        screen = app.screen
        screen.view.selected = 3
        await asyncio.sleep(0.5)
        begin = time.perf_counter()
        app.simulate_key("k")
        key = await frames.first_painted(lambda: screen.view.selected == 2) - begin
    print(json.dumps({"open_s": opened, "key_s": key, "hwm_mb": hwm_mb()}))

async def annotate():
    from bbm_tui.cli.annotate import read_annotation_files
    from bbm_tui.core.dataset import DatasetError
    from bbm_tui.ui.app import AnnotateRequest
    path = folder / "word_sorting.jsonl"
    path.write_text(json.dumps({"input": question, "steps": ["Let me sort.", "So the answer is w."],
                                "answer": "w", "target": "w", "mistake_index": None}) + "\n")
    start = time.perf_counter()
    try:
        traces = read_annotation_files([path], "word_sorting")
    except DatasetError as error:
        print(json.dumps({"refused_s": time.perf_counter() - start, "said": str(error)[-120:],
                          "hwm_mb": hwm_mb()}))
        return
    app = make_app(annotate=AnnotateRequest("bench", traces))
    frames = Frames(app)
    async with app.run_test(size=(120, 40)):
        def shown():
            screen = app.screen
            return (type(screen).__name__ == "AnnotateScreen" and screen.is_mounted
                    and screen._painted_question)
        opened = await frames.first_painted(shown) - start
        screen = app.screen
        begin = time.perf_counter()
        app.simulate_key("c")
        key = await frames.first_painted(lambda: len(screen.queue.judged) == 1) - begin
    print(json.dumps({"open_s": opened, "key_s": key, "hwm_mb": hwm_mb()}))

asyncio.run(session() if mode == "session" else annotate())
"""


def child(mode: str, size: int, code: Path) -> dict:
    with private_home() as env:
        env["PYTHONPATH"] = f"{code}:{ROOT}"
        folder = Path(env["BBM_TUI_HOME"]).parent
        done = subprocess.run([PYTHON, "-c", CHILD, mode, str(size), str(folder)], cwd=code,
                              env=env, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"the {mode} child failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def report(what: str, found: dict) -> None:
    if "refused_s" in found:
        print(f"{what}: refused in {found['refused_s'] * 1000:.0f} ms, peak RSS "
              f"{found['hwm_mb']:.0f} MB ({found['said']})")
        return
    print(f"{what}: open {found['open_s']:.2f} s, first key {found['key_s']:.2f} s, peak RSS "
          f"{found['hwm_mb']:.0f} MB")


def main() -> int:
    options = parser(__doc__.splitlines()[0])
    options.add_argument("--code", type=Path, default=ROOT,
                         help="the checkout whose bbm_tui runs the app (default: this one)")
    args = options.parse_args()
    code = args.code.resolve()
    header("a 10 MB question", args.quick, code)
    report("the app, a 1 KB question (for scale)", child("session", 1_000, code))
    report("the app, a session with a 10 MB question", child("session", BIG, code))
    report("annotate, a 10 MB question", child("annotate", BIG, code))
    if not args.quick:
        report(f"annotate, a {TAKEN:,}-character question", child("annotate", TAKEN, code))
    return 0


if __name__ == "__main__":
    sys.exit(main())
