"""Per-step wall time through the stepper against a bare streamed `litellm.acompletion`.

The target: one step through `bbm_tui.core.stepper.run_steps` (max_new_steps=1: the
prompt built, streamed through `llm.stream_step`, cut, recorded) at most 1.05x the wall time of
a bare `litellm.acompletion` of the same prompt with the same parameters (stream=True,
stream_options include_usage, stop ["\\n"], max_tokens, temperature 0, timeout, max_retries 0),
its stream consumed to the end, against the same local server.

The server is tests/openai_server.py's FakeOpenAI in its own process (bench/_server.py). It
answers like a model that wrote the bundled dataset: the next recorded step, then the
following thought (which `stop` cuts off), word by word, after a per-call latency (default
10 ms; real models take 100s of ms, which would only shrink the ratio). The prompts are real
next-step prompts of dataset traces, chosen at random (fixed seed) across the five tasks; in
each round both sides send the same prompt, in alternating order, after a warm-up.

    .venv/bin/python bench/step_overhead.py             # 400 rounds
    .venv/bin/python bench/step_overhead.py --quick     # 40 rounds (CI)
    .venv/bin/python bench/step_overhead.py --profile   # and where the stepper's time goes
"""

from __future__ import annotations

import asyncio
import cProfile
import os
import pstats
import random
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PYTHON, ROOT, header, median, parser, spread, verdict

TARGET = 1.05
SEED = 2186
MODEL = "openai/bench-model"


def pick_prompts(count: int) -> list[tuple[str, str, list[str], str]]:
    """(task, input, steps so far, the recorded next step) of random dataset traces."""
    from bbm_tui.core.dataset import bundled_rows
    from bbm_tui.core.tasks import TASK_NAMES

    chooser = random.Random(SEED)
    picked = []
    while len(picked) < count:
        task = chooser.choice(TASK_NAMES)
        row = chooser.choice(bundled_rows(task))
        k = chooser.randrange(len(row.steps))
        if not row.steps[k].strip() or "\n" in row.steps[k]:
            continue  # an empty step makes the stepper ask twice
        picked.append((task, row.input, list(row.steps[:k]), row.steps[k]))
    return picked


async def through_stepper(spec, settings, task: str, input_text: str, steps: list[str]) -> str:
    from bbm_tui.core.generation.stepper import StepFailed, StepFinished, run_steps

    text = None
    async for event in run_steps(task, input_text, spec, steps, max_new_steps=1,
                                 settings=settings):
        if isinstance(event, StepFinished):
            text = event.text
        elif isinstance(event, StepFailed):
            raise RuntimeError(event.error.message)
    assert text is not None
    return text


async def bare(litellm, api_base: str, prompt: str, max_tokens: int) -> str:
    stream = await litellm.acompletion(
        model=MODEL,
        api_base=api_base,
        api_key="no-key-set",
        messages=[{"role": "user", "content": prompt}],
        stream=True,
        stream_options={"include_usage": True},
        stop=["\n"],
        max_tokens=max_tokens,
        temperature=0.0,
        timeout=60.0,
        max_retries=0,
    )
    pieces = []
    async for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            pieces.append(chunk.choices[0].delta.content)
    return "".join(pieces).strip()


async def measure(api_base: str, rounds: int, warmup: int, profile: bool) -> int:
    from bbm_tui.core import llm
    from bbm_tui.core.generation.stepper import StepperSettings
    from bbm_tui.core.prompts.generation import next_step_prompt

    started = time.perf_counter()
    litellm = llm.litellm_module()  # the stepper's own configuration, for both sides
    print(f"litellm {litellm.__version__ if hasattr(litellm, '__version__') else ''} imported "
          f"in {time.perf_counter() - started:.2f} s (not part of any figure)")
    spec = llm.ModelSpec(MODEL, api_base, "chat")
    settings = StepperSettings()
    max_tokens = settings.call.max_tokens
    items = pick_prompts(40)
    chars = sorted(len(item[3]) for item in items)
    print(f"{len(items)} different prompts ({min(len(next_step_prompt(*i[:3])) for i in items)}"
          f"-{max(len(next_step_prompt(*i[:3])) for i in items)} characters); reply steps "
          f"{chars[0]}-{chars[-1]} characters, median {chars[len(chars) // 2]}")

    cpu: dict[str, list[float]] = {"stepper": [], "bare": []}

    async def one(side: str, item, profiler: cProfile.Profile | None = None) -> float:
        task, input_text, steps, expected = item
        began, began_cpu = time.perf_counter(), time.process_time()
        if profiler is not None:
            profiler.enable()
        if side == "stepper":
            text = await through_stepper(spec, settings, task, input_text, steps)
        else:
            text = await bare(litellm, api_base, next_step_prompt(task, input_text, steps),
                              max_tokens)
        if profiler is not None:
            profiler.disable()
        elapsed = time.perf_counter() - began
        cpu[side].append(time.process_time() - began_cpu)
        if text != expected.strip():
            raise RuntimeError(f"{side} got {text!r}, the dataset has {expected!r}")
        return elapsed

    for index in range(warmup):
        await one("stepper", items[index % len(items)])
        await one("bare", items[index % len(items)])
    cpu["stepper"].clear()
    cpu["bare"].clear()
    times: dict[str, list[float]] = {"stepper": [], "bare": []}
    paired: list[float] = []
    for index in range(rounds):
        item = items[index % len(items)]
        order = ("stepper", "bare") if index % 2 == 0 else ("bare", "stepper")
        got = {side: await one(side, item) for side in order}
        for side in order:
            times[side].append(got[side])
        paired.append(got["stepper"] / got["bare"])
    print()
    print(f"  stepper (run_steps, 1 step)  wall {spread(times['stepper'])}")
    print(f"  bare litellm.acompletion     wall {spread(times['bare'])}")
    print(f"  stepper (run_steps, 1 step)  CPU  {spread(cpu['stepper'])}")
    print(f"  bare litellm.acompletion     CPU  {spread(cpu['bare'])}")
    print("  (CPU: this process's, all threads; the server is another process)")
    stepper_median, bare_median = median(times["stepper"]), median(times["bare"])
    ratio = stepper_median / bare_median
    print(f"\nratio of medians: {stepper_median * 1000:.2f} ms / {bare_median * 1000:.2f} ms = "
          f"{ratio:.3f}x; median of the {rounds} paired ratios {median(paired):.3f}x; the "
          f"stepper adds {(stepper_median - bare_median) * 1000:+.2f} ms a step")
    cpu_stepper, cpu_bare = median(cpu["stepper"]), median(cpu["bare"])
    print(f"CPU: {cpu_stepper * 1000:.2f} ms / {cpu_bare * 1000:.2f} ms = "
          f"{cpu_stepper / cpu_bare:.3f}x ({(cpu_stepper - cpu_bare) * 1000:+.2f} ms a step)")
    verdict("stepper step / bare litellm.acompletion", ratio, TARGET)
    if profile or ratio > TARGET:
        await where_time_goes(one, items)
    return 0


GROUPS = (
    ("waiting for the server (epoll)", ("select.epoll", "selectors.py")),
    ("bbm_tui", ("bbm_tui/",)),
    ("litellm", ("litellm/",)),
    ("openai SDK", ("openai/",)),
    ("httpx/httpcore/aiohttp", ("httpx/", "httpcore/", "aiohttp/", "anyio/", "h11/")),
    ("pydantic", ("pydantic",)),
    ("asyncio", ("asyncio/",)),
)


def _group(key: tuple[str, int, str]) -> str:
    where = f"{key[0]}:{key[2]}"
    for name, markers in GROUPS:
        if any(marker in where for marker in markers):
            return name
    return "other (stdlib, builtins)"


async def where_time_goes(one, items) -> None:
    """cProfile both sides, interleaved, over the same prompts: self time by package, and the
    functions the stepper side spends more in."""
    rounds = 100
    profilers = {"stepper": cProfile.Profile(), "bare": cProfile.Profile()}
    for index in range(rounds):
        order = ("stepper", "bare") if index % 2 == 0 else ("bare", "stepper")
        for side in order:
            await one(side, items[index % len(items)], profilers[side])
    stats = {side: pstats.Stats(profiler).stats  # type: ignore[attr-defined]
             for side, profiler in profilers.items()}
    print(f"\nWhere the time goes: cProfile of {rounds} steps of each side, interleaved; self "
          "time by package, ms a step (profiler overhead included):")
    by_group: dict[str, dict[str, float]] = {side: {} for side in stats}
    for side, table in stats.items():
        for key, value in table.items():
            by_group[side][_group(key)] = by_group[side].get(_group(key), 0.0) + value[2]
    names = [name for name, _ in GROUPS] + ["other (stdlib, builtins)"]
    print(f"    {'':32} {'stepper':>8} {'bare':>8} {'extra':>8}")
    for name in names:
        a = by_group["stepper"].get(name, 0.0) / rounds * 1000
        b = by_group["bare"].get(name, 0.0) / rounds * 1000
        print(f"    {name:32} {a:8.3f} {b:8.3f} {a - b:+8.3f}")
    print("  functions the stepper side spends more self time in (ms a step, calls a step):")
    stepper_table, bare_table = stats["stepper"], stats["bare"]
    rows = []
    for key, value in stepper_table.items():
        extra = value[2] - (bare_table[key][2] if key in bare_table else 0.0)
        if extra > 0:
            rows.append((extra, key, value[1], bare_table[key][1] if key in bare_table else 0))
    for extra, key, calls, bare_calls in sorted(rows, reverse=True)[:15]:
        name = f"{key[0].split('site-packages/')[-1].replace(str(ROOT) + '/', '')}:{key[1]}"
        print(f"    {extra / rounds * 1000:+7.3f} ms  {calls / rounds:6.1f} vs "
              f"{bare_calls / rounds:6.1f} calls  {name}({key[2]})")
    print("  the stepper's own functions, cumulative (ms a step):")
    for key, value in sorted(stepper_table.items(), key=lambda kv: -kv[1][3]):
        if "bbm_tui" in key[0] and value[3] / rounds * 1000 >= 0.02:
            name = f"{key[0].replace(str(ROOT) + '/', '')}:{key[1]}({key[2]})"
            print(f"    {value[3] / rounds * 1000:7.3f} ms  {value[1] / rounds:6.1f} calls  {name}")


def main() -> int:
    cli = parser("Per-step wall time: the stepper against a bare litellm.acompletion.")
    cli.add_argument("--rounds", type=int, help="rounds (default 400, quick 40)")
    cli.add_argument("--latency-ms", type=float, default=10.0,
                     help="the server's latency before each reply (default 10)")
    cli.add_argument("--profile", action="store_true", help="also profile where time goes")
    opts = cli.parse_args()
    rounds = opts.rounds or (40 if opts.quick else 400)
    warmup = 5 if opts.quick else 20
    header("per-step overhead: stepper vs bare litellm.acompletion", opts.quick)
    print(f"local server: FakeOpenAI in its own process, {opts.latency_ms:g} ms latency a call; "
          f"{rounds} rounds (A/B alternating) after {warmup} warm-up rounds")
    for variable in [name for name in os.environ if name.endswith("_API_KEY")]:
        del os.environ[variable]  # no key goes to the local server
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    server = subprocess.Popen(
        [PYTHON, str(ROOT / "bench" / "_server.py"), "--latency-ms", str(opts.latency_ms)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT,
    )
    try:
        assert server.stdout is not None
        api_base = server.stdout.readline().strip()
        if not api_base.startswith("http"):
            print("ERROR: the local server did not start", file=sys.stderr)
            return 1
        return asyncio.run(measure(api_base, rounds, warmup, opts.profile))
    finally:
        if server.stdin is not None:
            server.stdin.close()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()


if __name__ == "__main__":
    sys.exit(main())
