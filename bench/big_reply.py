"""A reply of log-probabilities far bigger than asked for: `bbm-tui backtrack` over two traces
whose sampling call (8 choices, `top_logprobs=5` asked) comes back with 11,200 alternatives for
each of a choice's 5 tokens, 56,000 a choice: a 30.7 MiB reply, under the reply guard's 32 MiB
cap. The continuation is streamed as usual. Prints the command's wall time and its peak RSS
(the child's own, from wait4) at concurrency 1 and 4, beside the same with an honest reply (5
alternatives a token, as asked). Then `bbm-tui run --logprobs` over one question whose steps
stream 40 tokens each with 11,200 alternatives a token (the same with 5), for streams.

Before the guard kept at most the alternatives asked for, litellm parsed every one of them
(34 s and 1.48 GB for the two traces, 1.9 GB at concurrency 4). Run this file with
`--code DIR` to measure another checkout of bbm_tui (the server and this script stay these).

    .venv/bin/python bench/big_reply.py [--quick] [--code DIR]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PYTHON, ROOT, header, parser, private_home

from tests.openai_server import FakeOpenAI, Reply
from tests.test_backtrack import ORIGINAL, QUESTION, TARGET, responder

TOKENS = ["2 ", "+ ", "2 ", "= ", "4\n"]
PER_TOKEN = 11_200  # 56,000 a choice
CHOICES = 8
TARGET_MB = 300  # what a two-trace backtrack may take at its peak with such a reply


def big_reply(per_token: int = PER_TOKEN) -> bytes:
    """The sampling call's answer, built once: the chat form, `per_token` alternatives a
    token sent (5 is what an honest server sends for `top_logprobs=5`)."""
    def alternatives(word: str) -> list[dict]:
        return [{"token": word, "logprob": -0.5, "bytes": list(word.encode())}] + [
            {"token": f"w{index}", "logprob": round(-1 - index / per_token, 4),
             "bytes": list(f"w{index}".encode())} for index in range(per_token - 1)]

    content = [{"token": word, "logprob": -0.5, "bytes": list(word.encode()),
                "top_logprobs": alternatives(word)} for word in TOKENS]
    body = {"id": "big", "object": "chat.completion", "created": 1, "model": "test",
            "choices": [{"index": index, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "".join(TOKENS)},
                         "logprobs": {"content": content}} for index in range(CHOICES)],
            "usage": {"prompt_tokens": 50, "completion_tokens": 40, "total_tokens": 90}}
    return json.dumps(body).encode()


def serve(reply: bytes) -> FakeOpenAI:
    server = FakeOpenAI().start()
    continuation = responder()

    def respond(path: str, body: dict) -> Reply:
        if body.get("stream"):
            return continuation(path, body)
        return Reply(raw_body=reply, headers={"Content-Type": "application/json"})

    server.responder = respond
    return server


STREAMED_TOKENS = 40


def serve_streams(per_token: int) -> FakeOpenAI:
    """Each step streamed word by word, `per_token` alternatives a token (every one sent)."""
    server = FakeOpenAI().start()
    steps = iter([f"step {n}: " + " ".join(f"w{i}" for i in range(STREAMED_TOKENS - 2))
                  for n in range(1, 3)] + ["So the answer is 4"])

    def alternatives(piece: str, value: float) -> list[tuple[str, float]]:
        return [(piece, value)] + [(f"a{index}", round(value - 1 - index / per_token, 4))
                                   for index in range(per_token - 1)]

    server.responder = lambda path, body: Reply(
        next(steps, "So the answer is 4") + "\n", logprob_per_token=-0.5,
        alternatives=alternatives, every_alternative=True)
    return server


def run_logprobs(base_url: str, code: Path) -> tuple[float, float, str]:
    """`bbm-tui run --logprobs` over one question: wall seconds, peak RSS in MB, stderr."""
    with private_home() as env:
        folder = Path(env["BBM_TUI_HOME"]).parent
        source = folder / "multistep_arithmetic.jsonl"
        source.write_text(json.dumps({"input": QUESTION, "target": TARGET}) + "\n")
        return _timed(code, env, ["run", "--model", "openai/test", "--api-base", base_url,
                                  "--input", str(source), "--out", str(folder / "out.jsonl"),
                                  "--logprobs", "--no-progress"])


def traces_file(folder: Path) -> Path:
    path = folder / "multistep_arithmetic.jsonl"
    rows = [{"input": question, "steps": ORIGINAL, "answer": "5", "target": TARGET,
             "mistake_index": 1} for question in (QUESTION, QUESTION + " ?")]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def backtrack(base_url: str, code: Path, concurrency: int) -> tuple[float, float, str]:
    """One `bbm-tui backtrack` over the two traces: wall seconds, peak RSS in MB, stderr."""
    with private_home() as env:
        folder = Path(env["BBM_TUI_HOME"]).parent
        source = traces_file(folder)
        return _timed(code, env, [
            "backtrack", "--model", "openai/test", "--api-base", base_url, "--input",
            str(source), "--locations", "gold", "--out", str(folder / "out.jsonl"),
            "--no-progress", "--concurrency", str(concurrency)])


def _timed(code: Path, env: dict[str, str], argv: list[str]) -> tuple[float, float, str]:
    """`python -m bbm_tui ARGV` with `code`'s bbm_tui: wall seconds, the child's peak RSS in
    MB, the last line it wrote on stderr."""
    env["PYTHONPATH"] = str(code)
    started = time.perf_counter()
    child = subprocess.Popen([PYTHON, "-m", "bbm_tui", *argv], cwd=code, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert child.stderr is not None
    err = child.stderr.read().decode(errors="replace")
    _, status, usage = os.wait4(child.pid, 0)
    code_ = os.waitstatus_to_exitcode(status)
    elapsed = time.perf_counter() - started
    if code_ != 0:
        raise SystemExit(f"bbm-tui {argv[0]} failed ({code_}): {err}")
    return elapsed, usage.ru_maxrss / 1024, err.strip().splitlines()[-1]


def main() -> int:
    options = parser(__doc__.splitlines()[0])
    options.add_argument("--code", type=Path, default=ROOT,
                         help="the checkout whose bbm_tui runs the command (default: this one)")
    args = options.parse_args()
    header("backtrack, a reply of 56,000 alternatives a choice", args.quick, args.code)
    for per_token in (5, PER_TOKEN):
        reply = big_reply(per_token)
        print(f"the sampling call's reply: {len(reply) / 2**20:.1f} MiB, {CHOICES} choices x "
              f"{len(TOKENS)} tokens x {per_token:,} alternatives"
              + (" (what was asked for)" if per_token == 5 else ""))
        server = serve(reply)
        try:
            for concurrency in (1,) if args.quick else (1, 4):
                elapsed, peak, said = backtrack(server.base_url, args.code.resolve(),
                                                concurrency)
                print(f"  concurrency {concurrency}: {elapsed:6.2f} s, peak RSS {peak:7.1f} MB "
                      f"({said})")
                if peak > TARGET_MB:
                    print(f"!!! TARGET MISSED: peak RSS {peak:.0f} MB > {TARGET_MB} MB")
        finally:
            server.stop()
    for per_token in (5, PER_TOKEN):
        server = serve_streams(per_token)
        try:
            elapsed, peak, said = run_logprobs(server.base_url, args.code.resolve())
        finally:
            server.stop()
        print(f"run --logprobs, 3 steps streamed, {STREAMED_TOKENS} tokens x {per_token:,} "
              f"alternatives each: {elapsed:6.2f} s, peak RSS {peak:7.1f} MB ({said})")
        if peak > TARGET_MB:
            print(f"!!! TARGET MISSED: peak RSS {peak:.0f} MB > {TARGET_MB} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
