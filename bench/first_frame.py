"""Time to first frame: the real `bbm-tui` command against a bare Textual app (Header + Footer).

The target: bbm-tui's first frame at most 1.15x the bare app's in the full run, 1.2x in the quick
one (issue 36), measured in one run (it was 1.5x until the UX pass asked for 1.2x).

Each app is spawned as a fresh process on a real pseudo-terminal (TERM=xterm-256color, a fixed
size), the two alternating, and the clock runs from just before the spawn until the first
*complete* frame is on the terminal. What the app writes is fed to a small terminal model
(cursor moves and text; colours ignored) and the frame counts as painted once every row of the
screen has been drawn, the top row shows the app's title and the bottom row shows the Footer's
keys (the command palette key, `^p palette`, which every Textual Footer ends with). A partial
repaint or a splash screen does not count. Then the process is killed.

bbm-tui runs with a temporary BBM_TUI_HOME and BBM_TUI_CONFIG, so it opens on its defaults
(the new-session screen) and a user's data is never touched.

    .venv/bin/python bench/first_frame.py            # 21 runs of each
    .venv/bin/python bench/first_frame.py --quick    # 5 runs of each (CI)
"""

from __future__ import annotations

import codecs
import contextlib
import fcntl
import os
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PYTHON, ROOT, VENV_BIN, header, median, parser, private_home, spread, verdict

TARGET = 1.15  # the full run's (issue 36)
QUICK_TARGET = 1.2  # --quick: 5 runs of each, a noisier median
ROWS, COLS = 40, 120
TIMEOUT_S = 30.0

_CSI = re.compile(r"\x1b\[([0-?]*)([ -/]*)([@-~])")
_OSC = re.compile(r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")


@dataclass
class Terminal:
    """Just enough of a terminal to know what is on screen: absolute cursor moves, CR/LF, text
    (wide characters take two cells), erase in line/display. Everything else is skipped."""

    rows: int
    cols: int
    grid: list[list[str]] = field(init=False)
    painted: list[bool] = field(init=False)
    row: int = 0
    col: int = 0
    _pending: str = ""

    def __post_init__(self) -> None:
        self.grid = [[" "] * self.cols for _ in range(self.rows)]
        self.painted = [False] * self.rows
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def feed(self, data: bytes) -> None:
        text = self._pending + self._decoder.decode(data)
        self._pending = ""
        i, n = 0, len(text)
        while i < n:
            char = text[i]
            if char != "\x1b":
                end = text.find("\x1b", i)
                end = n if end < 0 else end
                self._write(text[i:end])
                i = end
                continue
            match = _CSI.match(text, i) or _OSC.match(text, i)
            if match is not None:
                if match.re is _CSI:
                    self._csi(match.group(1), match.group(3))
                i = match.end()
            elif n - i < 256 and (text.startswith("\x1b[", i) or text.startswith("\x1b]", i)
                                  or i + 1 == n):
                self._pending = text[i:]  # a sequence cut between two reads
                return
            else:
                i += 2  # ESC and one character (ESC 7, ESC =, ...)

    def _write(self, text: str) -> None:
        for char in text:
            if char == "\r":
                self.col = 0
            elif char == "\n":
                self.row = min(self.row + 1, self.rows - 1)
            elif char == "\b":
                self.col = max(0, self.col - 1)
            elif char >= " ":
                if self.col < self.cols:
                    self.grid[self.row][self.col] = char
                    self.painted[self.row] = True
                wide = unicodedata.east_asian_width(char) in ("W", "F")
                self.col += 2 if wide else 1

    def _csi(self, params: str, final: str) -> None:
        if final in "Hf":
            parts = [p for p in params.split(";")] if params else []
            numbers = [int(p) if p.isdigit() else 1 for p in parts] + [1, 1]
            self.row = min(max(numbers[0], 1), self.rows) - 1
            self.col = min(max(numbers[1], 1), self.cols) - 1
        elif final == "K":
            start = self.col if params in ("", "0") else 0
            for col in range(start, self.cols):
                self.grid[self.row][col] = " "
            self.painted[self.row] = True
        elif final == "J" and params in ("2", "3"):
            self.grid = [[" "] * self.cols for _ in range(self.rows)]
            self.painted = [False] * self.rows

    def line(self, row: int) -> str:
        return "".join(self.grid[row])

    def screen(self) -> str:
        return "\n".join(self.line(row).rstrip() for row in range(self.rows))


@dataclass(frozen=True)
class App:
    name: str
    argv: list[str]
    title: str  # text on the top row of the first screen
    footer: str = "palette"  # text on the bottom row: the Footer's command-palette key


@dataclass
class Run:
    frame_s: float | None
    first_byte_s: float | None
    error: str | None = None
    screen: str = ""
    covered_s: float | None = None  # every row drawn and the title shown, footer keys or not
    cpu_s: float | None = None  # the process's CPU (user + system) when its frame was complete


def measure(app: App, env: dict[str, str]) -> Run:
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
    terminal = Terminal(ROWS, COLS)
    first_byte = covered = None
    started = time.perf_counter()
    try:
        process = subprocess.Popen(
            app.argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=ROOT,
            start_new_session=True, close_fds=True,
        )
    finally:
        os.close(slave)
    try:
        while True:
            now = time.perf_counter()
            if now - started > TIMEOUT_S:
                return Run(None, first_byte, f"no complete frame within {TIMEOUT_S:.0f} s",
                           terminal.screen())
            ready, _, _ = select.select([master], [], [], 0.5)
            if not ready:
                if process.poll() is not None:
                    return Run(None, first_byte, f"exited with status {process.returncode} "
                               "before painting a frame", terminal.screen())
                continue
            try:
                data = os.read(master, 1 << 16)
            except OSError:  # EIO: the child closed the terminal
                data = b""
            if not data:
                process.wait(5)
                return Run(None, first_byte, f"closed the terminal (status "
                           f"{process.returncode}) before painting a frame", terminal.screen())
            at = time.perf_counter() - started
            first_byte = first_byte if first_byte is not None else at
            terminal.feed(data)
            if covered is None and all(terminal.painted) and app.title in terminal.line(0):
                covered = at
            if covered is not None and app.footer in terminal.line(ROWS - 1):
                return Run(at, first_byte, covered_s=covered, cpu_s=process_cpu(process.pid))
    finally:
        with contextlib.suppress(OSError):
            os.killpg(process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(10)
        os.close(master)


def process_cpu(pid: int) -> float | None:
    """The CPU a running process has used so far (user + system, /proc/PID/stat), None where
    there is no /proc. A load on the machine stretches the wall clock, not this."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def child_env(env: dict[str, str]) -> dict[str, str]:
    """A plain xterm-256color. Bytecode caching stays on (PYTHONDONTWRITEBYTECODE would make
    every start compile bbm_tui from source, which no installed copy does): the warm-up run
    writes the caches, as a user's first start would."""
    dropped = ("COLUMNS", "LINES", "COLORTERM", "NO_COLOR", "TERM_PROGRAM",
               "PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")
    env = {key: value for key, value in env.items()
           if not key.startswith("TEXTUAL") and key not in dropped}
    env["TERM"] = "xterm-256color"
    return env


def main() -> int:
    cli = parser("Time to first frame: bbm-tui against a bare Textual app.")
    cli.add_argument("--runs", type=int, help="runs of each app (default 21, quick 5)")
    opts = cli.parse_args()
    runs = opts.runs or (5 if opts.quick else 21)
    header("first frame: bbm-tui vs a bare Textual app (Header + Footer)", opts.quick)
    bbm = App("bbm-tui", [str(VENV_BIN / "bbm-tui")], title="new session")
    bare = App("bare Textual app", [PYTHON, str(ROOT / "bench" / "_bare_app.py")], title="bare")
    print(f"terminal {COLS}x{ROWS}, TERM=xterm-256color; {runs} runs of each, alternating, "
          "after one warm-up run of each")
    results: dict[str, list[Run]] = {bbm.name: [], bare.name: []}
    with private_home() as env:
        env = child_env(env)
        for app in (bbm, bare):  # warm-up: page cache, .pyc files, the store's first creation
            run = measure(app, env)
            if run.error:
                return failed(app, run)
        for index in range(runs):
            order = (bbm, bare) if index % 2 == 0 else (bare, bbm)
            for app in order:
                run = measure(app, env)
                if run.error:
                    return failed(app, run)
                results[app.name].append(run)
                time.sleep(0.05)
    print()
    for app in (bbm, bare):
        frames = [run.frame_s for run in results[app.name] if run.frame_s is not None]
        bytes_ = [run.first_byte_s for run in results[app.name] if run.first_byte_s is not None]
        covered = [run.covered_s for run in results[app.name] if run.covered_s is not None]
        print(f"{app.name:>18}  first frame  {spread(frames)}")
        print(f"{'':>18}  every row    {spread(covered)}  (before the Footer shows its keys)")
        print(f"{'':>18}  first output {spread(bytes_)}  (the driver starts: imports done)")
        cpu = [run.cpu_s for run in results[app.name] if run.cpu_s is not None]
        if cpu:
            print(f"{'':>18}  CPU to frame {spread(cpu)}  (user + system, in 10 ms ticks)")
    bbm_median = median([run.frame_s for run in results[bbm.name]])
    bare_median = median([run.frame_s for run in results[bare.name]])
    ratio = bbm_median / bare_median
    print(f"\nratio of medians: {bbm_median * 1000:.0f} ms / {bare_median * 1000:.0f} ms "
          f"= {ratio:.2f}x  (bbm-tui takes {(bbm_median - bare_median) * 1000:+.0f} ms more)")
    cpus = [[run.cpu_s for run in results[app.name] if run.cpu_s is not None]
            for app in (bbm, bare)]
    if all(cpus):
        bbm_cpu, bare_cpu = median(cpus[0]), median(cpus[1])
        print(f"CPU to the frame: {bbm_cpu * 1000:.0f} ms / {bare_cpu * 1000:.0f} ms = "
              f"{bbm_cpu / bare_cpu:.2f}x (what a loaded machine stretches less than the wall "
              "clock; the verdict is on the wall clock)")
    verdict("bbm-tui first frame / bare Textual app first frame", ratio,
            QUICK_TARGET if opts.quick else TARGET)
    return 0


def failed(app: App, run: Run) -> int:
    print(f"\nERROR: {app.name} ({' '.join(app.argv)}): {run.error}.", file=sys.stderr)
    print("The screen at that moment (a frame needs every row drawn, "
          f"{app.title!r} on the top row and {app.footer!r} on the bottom row):", file=sys.stderr)
    print(run.screen or "(nothing written)", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
