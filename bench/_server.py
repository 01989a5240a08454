"""Run tests/openai_server.py's FakeOpenAI in its own process for a benchmark (a real server
is another process too, and this keeps its CPU off the measured client's GIL).

It answers generation prompts like a model that wrote the bundled dataset (the next recorded
step, then the following thought, which `stop` cuts off), word by word, after `--latency-ms`.
`--trace` answers with the rest of the recorded trace instead, each following thought on its
own line with its label (a model that goes on with the prompt's format); `--serial` serves one
request at a time, the others waiting their turn (llama-server with one slot, a GPU server at
its batch limit), the latency paid by each in turn. `GET /bench/stats` says how many requests
it answered and how many prompt tokens they carried (a word is a token, as its usage counts).
`--tokens-per-s N` streams a word every 1/N seconds (a model writing at N tokens a second).
Prints its base URL on stdout, then serves until stdin closes.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from aiohttp import web  # noqa: E402

from tests.fake_server import Asked, dataset_trace_responder  # noqa: E402
from tests.openai_server import FakeOpenAI, Reply, dataset_responder  # noqa: E402


class BenchServer(FakeOpenAI):
    def __init__(self, latency_s: float, serial: bool) -> None:
        super().__init__(latency_s)
        self.serial = serial
        self._turn: asyncio.Lock | None = None
        self.answered = 0
        self.prompt_tokens = 0

    def add_routes(self, app: web.Application) -> None:
        super().add_routes(app)
        app.router.add_get("/bench/stats", self._stats)

    async def _stats(self, request: web.Request) -> web.StreamResponse:
        return web.json_response({"requests": self.answered, "prompt_tokens": self.prompt_tokens})

    def asked(self, body: dict[str, Any], request: web.Request) -> Asked:
        asked = super().asked(body, request)
        self.answered += 1
        self.prompt_tokens += len(self.tokenize(asked.prompt))
        return asked

    async def _handle(self, request: web.Request, chat: bool) -> web.StreamResponse:
        if not self.serial:
            return await super()._handle(request, chat)
        if self._turn is None:
            self._turn = asyncio.Lock()  # made on the server's own loop
        async with self._turn:
            return await super()._handle(request, chat)


def client_went_away(record: logging.LogRecord) -> bool:
    """False for aiohttp's traceback of a write to a client that closed its stream (the app
    stopping a stream: a benchmark window's end), which is no server error: it interleaved
    with the benchmark's figures."""
    error = record.exc_info[1] if record.exc_info else None
    return not isinstance(error, ConnectionResetError)


def main() -> None:
    logging.getLogger("aiohttp.server").addFilter(client_went_away)
    options = argparse.ArgumentParser()
    options.add_argument("--latency-ms", type=float, default=0.0)
    options.add_argument("--trace", action="store_true",
                         help="answer with the rest of the trace, each thought labelled")
    options.add_argument("--serial", action="store_true", help="one request at a time")
    options.add_argument("--tokens-per-s", type=float, default=0.0,
                         help="stream a word every 1/N seconds (0: as fast as it can)")
    options.add_argument("--thinking-words", type=int, default=0,
                         help="answer as a thinking model: a reasoning of N words (bundled "
                         "thoughts as paragraphs), then the answer")
    options.add_argument("--fast-words", type=int, default=0,
                         help="with --thinking-words: the first N words at once, the rest paced")
    args = options.parse_args()
    server = BenchServer(args.latency_ms / 1000, args.serial).start()
    responder = dataset_trace_responder if args.trace else dataset_responder
    if args.thinking_words:
        responder = thinking_responder(args.thinking_words, args.fast_words)
    server.responder = paced(responder, 1 / args.tokens_per_s) if args.tokens_per_s > 0 \
        else responder
    server.requests = _Discard()  # a long benchmark must not keep every request body
    print(server.base_url, flush=True)
    sys.stdin.read()
    server.stop()


def long_reasoning(words: int) -> str:
    """A thinking model's long reasoning of about `words` words: the bundled traces' thoughts,
    three to a paragraph (~120 words), with a "Wait," now and then, as R1 writes."""
    from bbm_tui.core.dataset import bundled_rows

    thoughts = [step for task in ("logical_deduction", "multistep_arithmetic",
                                  "tracking_shuffled_objects")
                for row in bundled_rows(task)[:200] for step in row.steps if step.strip()]
    paragraphs: list[str] = []
    count = index = 0
    while count < words:
        paragraph = " ".join(thoughts[(index + i) % len(thoughts)] for i in range(3))
        if len(paragraphs) % 7 == 6:
            paragraph = "Wait, let me check that again. " + paragraph
        index += 3
        paragraphs.append(paragraph)
        count += len(paragraph.split())
    return "\n\n".join(paragraphs)


def thinking_responder(words: int, fast_words: int) -> Callable[[str, dict], Reply]:
    reasoning = long_reasoning(words)

    def respond(path: str, body: dict) -> Reply:
        del path, body
        # Word by word, each piece a word and its space: `fast_words` of them at once.
        return Reply(text="So the answer is (A)", reasoning=reasoning, fast_chunks=fast_words)
    return respond


def paced(responder: Callable[[str, dict], Reply],
          chunk_delay_s: float) -> Callable[[str, dict], Reply]:
    def respond(path: str, body: dict) -> Reply:
        reply = responder(path, body)
        reply.chunk_delay_s = chunk_delay_s
        return reply
    return respond


class _Discard(list):
    def append(self, item: object) -> None:
        return None


if __name__ == "__main__":
    main()
