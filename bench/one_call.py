"""One call for many steps against one call a step (issue 27): calls, prompt tokens and wall time
per trace, through `run_batch` (what `bbm-tui run` uses) one trace at a time.

1. The local server (tests/openai_server.py in its own process, `_server.py --trace --serial`):
   one request at a time, 50 ms a call, answering like the dataset's model that goes on with
   the prompt's format (each following thought on its line with its label). Traces of the
   bundled dataset (every task).
2. llama.cpp's `llama-server` with the tiny model of ../shared/realsrv (started here when the
   kit is built, else skipped; `--llama URL` uses one already running), on `/v1/completions`.
   The tiny model never writes a `Thought N:` label itself (its weights are a table over ~50
   words), so one-call mode takes one step from each call there and saves nothing: measured
   as it is. Then again with llama.cpp's grammar making it write each label (a router file
   whose deployment sends `extra_body.grammar`: lines, each after the first begun with
   `Thought k:`), which is a model that follows the format.

Prompt tokens are those of each call's prompt as the server counts them (the local server: a
word is a token; llama-server: its /tokenize), summed over the calls a trace made.

`--compare N` instead runs the faithfulness comparison of docs/scale.md: N questions of each task
the tiny model can run (multistep arithmetic's prompt is longer than its 2,048-token context),
one call a step against one call (with the grammar) at temperature 0, and how many traces
match step for step, with the first difference of each that does not.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from _common import PYTHON, ROOT, header, parser, private_home, verdict

from bbm_tui.core import llm
from bbm_tui.core.batch.run import RunJob, jobs_from_bundled, run_batch
from bbm_tui.core.generation.stepper import StepperSettings
from bbm_tui.core.prompts.generation import next_step_prompt
from bbm_tui.core.store import Store

LATENCY_MS = 50.0
CALLS_TARGET = 0.2
WALL_TARGET = 0.5
TASKS = ("word_sorting", "tracking_shuffled_objects", "logical_deduction",
         "multistep_arithmetic", "dyck_languages")
# The tasks whose prompt fits the tiny model's 2,048-token context.
TINY_TASKS = ("word_sorting", "tracking_shuffled_objects", "logical_deduction",
              "dyck_languages")
REALSRV = Path(os.environ.get("REALSRV", Path.home() / ".cache" / "bbm-realsrv"))
KIT = ROOT.parent / "shared" / "realsrv"
TINY_STEP_LIMIT = 12


@dataclass
class Figures:
    traces: int
    steps: int
    calls: int
    prompt_tokens: int
    wall_s: float
    texts: list[list[str]]

    def per_trace(self, value: float) -> float:
        return value / max(self.traces, 1)


def local_jobs(count: int) -> list[RunJob]:
    """Multi-step traces of every task, the same ones for both modes."""
    per_task = max(1, count // len(TASKS))
    return [job for task in TASKS for job in jobs_from_bundled(task, per_task)]


async def measure(jobs: list[RunJob], spec: llm.ModelSpec, settings: StepperSettings,
                  folder: Path, name: str, count_prompt: Callable[[str], int]) -> Figures:
    out = folder / f"{name}.jsonl"
    started = time.perf_counter()
    with Store.open(folder / f"{name}.sqlite3") as store:
        await run_batch(jobs, spec, store, out, concurrency=1, settings=settings)
        wall = time.perf_counter() - started
        steps = calls = prompt_tokens = 0
        texts = []
        for summary in sorted(store.sessions(), key=lambda s: s.session.id):
            session = summary.session
            branch = store.branch(session.id)
            texts.append([step.text for step in branch])
            steps += len(branch)
            calls += store.totals(session.id).calls
            previous = None
            for index, step in enumerate(branch):
                if step.one_call is None or step.one_call != previous:
                    prompt = next_step_prompt(session.task, session.input,
                                              [s.text for s in branch[:index]])
                    prompt_tokens += count_prompt(prompt)
                previous = step.one_call
    return Figures(len(texts), steps, calls, prompt_tokens, wall, texts)


def words(prompt: str) -> int:
    return len(prompt.split())


def report(title: str, per_step: Figures, one_call: Figures, judge: bool,
           judge_wall: bool = True) -> None:
    print(f"-- {title}: {per_step.traces} traces, {per_step.steps} steps one call a step, "
          f"{one_call.steps} one call")
    print(f"{'':22}{'calls/trace':>12}{'prompt tok/trace':>18}{'wall s/trace':>14}")
    for name, figures in (("one call a step", per_step), ("one call", one_call)):
        print(f"{name:22}{figures.per_trace(figures.calls):12.2f}"
              f"{figures.per_trace(figures.prompt_tokens):18.0f}"
              f"{figures.per_trace(figures.wall_s):14.3f}")
    calls = one_call.calls / max(per_step.calls, 1)
    tokens = one_call.prompt_tokens / max(per_step.prompt_tokens, 1)
    wall = one_call.wall_s / max(per_step.wall_s, 1e-9)
    print(f"{'ratio':22}{calls:12.3f}{tokens:18.3f}{wall:14.3f}")
    same = sum(a == b for a, b in zip(per_step.texts, one_call.texts, strict=False))
    print(f"traces the same step for step: {same} of {per_step.traces}")
    if not judge:
        return
    # One call a trace is the least one-call mode can make: on traces of fewer than five steps
    # (the tiny model's) that floor is above the target, and the line is the floor.
    floor = per_step.traces / max(per_step.calls, 1)
    calls_line = max(CALLS_TARGET, floor)
    if calls_line > CALLS_TARGET:
        print(f"the floor for these traces: one call a trace against "
              f"{per_step.per_trace(per_step.calls):.2f} a step = {floor:.3f}x, the line "
              f"(the {CALLS_TARGET}x target cannot be reached on them)")
    verdict(f"{title}: calls, one call / one call a step", calls, calls_line, digits=3)
    if judge_wall:
        verdict(f"{title}: wall time, one call / one call a step", wall, WALL_TARGET)
    else:
        print(f"wall time not judged here (the {WALL_TARGET}x target is for a server taking "
              f"{LATENCY_MS:.0f} ms a call, judged on the local server above): llama-server's "
              "prefix cache makes a call of a few tokens cost a few ms, its grammar sampling "
              "costs more a token, and the traces differ, so the ratio is printed only")


def start_local(env: dict[str, str]) -> tuple[subprocess.Popen, str]:
    server = subprocess.Popen(
        [PYTHON, str(ROOT / "bench" / "_server.py"), "--trace", "--serial", "--latency-ms",
         str(LATENCY_MS)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
        cwd=ROOT)
    assert server.stdout is not None
    return server, server.stdout.readline().strip()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_llama() -> tuple[int | None, str | None]:
    """The kit's llama-server on a free port (its pid, its /v1 base), or (None, None)."""
    if not (REALSRV / "bin" / "llama-server").exists() or not (KIT / "start").exists():
        return None, None
    port = free_port()
    done = subprocess.run([str(KIT / "start"), str(port)], capture_output=True, text=True,
                          env={**os.environ, "NP": "4"}, timeout=120)
    if done.returncode != 0:
        print(f"llama-server did not start: {done.stderr.strip()}")
        return None, None
    return int(done.stdout.strip()), f"http://127.0.0.1:{port}/v1"


def llama_tokens(base: str) -> Callable[[str], int]:
    root = base.removesuffix("/v1")

    def count(prompt: str) -> int:
        request = urllib.request.Request(f"{root}/tokenize", method="POST",
                                         data=json.dumps({"content": prompt}).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as answer:
            return len(json.loads(answer.read())["tokens"])

    return count


def label_grammar(first: int, last: int) -> str:
    """llama.cpp's GBNF for lines whose every one after the first begins with its label
    (`Thought k:`, k from first + 1 to last): a model made to write the labels."""
    rules = ["root ::= line n" + str(first + 1), 'line ::= [^\\n]+']
    for number in range(first + 1, last + 1):
        tail = f" n{number + 1}" if number < last else ""
        rules.append(f'n{number} ::= ("\\nThought {number}:" line{tail})?')
    return "\n".join(rules)


def router_file(folder: Path, base: str, name: str, grammar: str | None) -> Path:
    import yaml

    params: dict = {"model": "text-completion-openai/tiny", "api_base": base,
                    "api_key": "no-key"}
    if grammar is not None:
        params["extra_body"] = {"grammar": grammar}
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"model_list": [
        {"model_name": "tiny", "litellm_params": params, "model_info": {"id": name}}]}))
    return path


def tiny_specs(folder: Path, base: str) -> tuple[llm.ModelSpec, llm.ModelSpec]:
    plain = router_file(folder, base, "plain", None)
    labelled = router_file(folder, base, "labelled", label_grammar(1, TINY_STEP_LIMIT))
    return (llm.ModelSpec("tiny", mode="completion", router=str(plain)),
            llm.ModelSpec("tiny", mode="completion", router=str(labelled)))


SETTINGS = StepperSettings(call=llm.CallSettings(temperature=0.0))
TINY = StepperSettings(step_limit=TINY_STEP_LIMIT, call=llm.CallSettings(temperature=0.0))


async def local_part(count: int, folder: Path, env: dict[str, str]) -> None:
    server, base = start_local(env)
    llm.warm_up()  # litellm's import (seconds) is neither side's
    try:
        spec = llm.ModelSpec("openai/test", base)
        jobs = local_jobs(count)
        per_step = await measure(jobs, spec, SETTINGS, folder, "local-per-step", words)
        one_call = await measure(jobs, spec, replace(SETTINGS, one_call=True), folder,
                                 "local-one-call", words)
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(10)
    report(f"local server, one request at a time, {LATENCY_MS:.0f} ms a call", per_step,
           one_call, judge=True)


async def llama_part(count: int, folder: Path, base: str) -> None:
    plain, labelled = tiny_specs(folder, base)
    jobs = [job for task in TINY_TASKS[:1] for job in jobs_from_bundled(task, count)]
    count_tokens = llama_tokens(base)
    # Untimed, first: the server's slots then hold the prompts' prefixes for every run alike.
    await measure(jobs, plain, TINY, folder, "tiny-warm-up", count_tokens)
    per_step = await measure(jobs, plain, TINY, folder, "tiny-per-step", count_tokens)
    as_is = await measure(jobs, plain, replace(TINY, one_call=True), folder, "tiny-one-call",
                          count_tokens)
    report("llama-server, the tiny model as it is (it writes no labels)", per_step, as_is,
           judge=False)
    made = await measure(jobs, labelled, replace(TINY, one_call=True), folder,
                         "tiny-one-call-grammar", count_tokens)
    report("llama-server, the tiny model made to write the labels (grammar)", per_step, made,
           judge=True, judge_wall=False)


async def compare(count: int, folder: Path, base: str, tasks: Sequence[str]) -> None:
    plain, labelled = tiny_specs(folder, base)
    for task in tasks:
        jobs = jobs_from_bundled(task, count)
        first = await batch_texts(jobs, plain, TINY, folder, f"{task}-per-step")
        again = await batch_texts(jobs, plain, TINY, folder, f"{task}-per-step-again")
        one = await batch_texts(jobs, labelled, replace(TINY, one_call=True), folder,
                                f"{task}-one-call")
        same = [a == b for a, b in zip(first, one, strict=True)]
        print(f"{task}: {len(jobs)} traces; one call a step twice: "
              f"{sum(a == b for a, b in zip(first, again, strict=True))} the same; one call "
              f"(labels by grammar) against one call a step: {sum(same)} the same step for "
              f"step")
        for index, (a, b) in enumerate(zip(first, one, strict=True)):
            if a != b:
                at = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                          min(len(a), len(b)))
                shown_a = a[at] if at < len(a) else "(none)"
                shown_b = b[at] if at < len(b) else "(none)"
                print(f"   row {index}: Thought {at + 1}: {shown_a!r} / {shown_b!r}")
        sys.stdout.flush()


async def batch_texts(jobs: list[RunJob], spec: llm.ModelSpec, settings: StepperSettings,
                      folder: Path, name: str) -> list[list[str]]:
    with Store.open(folder / f"{name}.sqlite3") as store:
        await run_batch(jobs, spec, store, folder / f"{name}.jsonl", concurrency=4,
                        settings=settings)
        by_input = {s.session.input: [step.text for step in store.branch(s.session.id)]
                    for s in store.sessions()}
    return [by_input.get(job.row.input, []) for job in jobs]


def main() -> int:
    options = parser(__doc__.splitlines()[0])
    options.add_argument("--llama", help="a running llama-server's /v1 base (else the kit's)")
    options.add_argument("--compare", type=int, metavar="N",
                         help="the faithfulness comparison on llama-server, N questions a task")
    options.add_argument("--no-llama", action="store_true", help="the local server only")
    options.add_argument("--tasks", nargs="+", choices=TINY_TASKS, default=TINY_TASKS,
                         metavar="TASK", help="--compare on these tasks only (default: "
                         f"{', '.join(TINY_TASKS)})")
    args = options.parse_args()
    header("one call for many steps vs one call a step", args.quick)
    with private_home() as env, tempfile.TemporaryDirectory(prefix="bbm-one-call-") as tmp:
        os.environ.update(env)
        folder = Path(tmp)
        if args.compare is None:
            asyncio.run(local_part(10 if args.quick else 40, folder, env))
        if args.no_llama:
            return 0
        pid, base = (None, args.llama) if args.llama else start_llama()
        if base is None:
            print("\nllama-server: skipped (the ../shared/realsrv kit is not built here; "
                  "--llama URL uses a running one)")
            return 0
        try:
            if args.compare is not None:
                asyncio.run(compare(args.compare, folder, base, args.tasks))
            else:
                asyncio.run(llama_part(2 if args.quick else 8, folder, base))
        finally:
            if pid is not None:
                os.kill(pid, 15)
    return 0


if __name__ == "__main__":
    sys.exit(main())
