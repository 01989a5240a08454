"""Run tests/openai_server.py's FakeOpenAI in its own process for a benchmark (a real server
is another process too, and this keeps its CPU off the measured client's GIL).

It answers generation prompts like a model that wrote the bundled dataset (the next recorded
step, then the following thought, which `stop` cuts off), word by word, after `--latency-ms`;
with `--tokens-per-s`, a word every 1/N seconds (a model writing at N tokens a second).
Prints its base URL on stdout, then serves until stdin closes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.openai_server import FakeOpenAI, Reply, dataset_responder  # noqa: E402


def main() -> None:
    options = argparse.ArgumentParser()
    options.add_argument("--latency-ms", type=float, default=0.0)
    options.add_argument("--tokens-per-s", type=float, default=0.0,
                         help="stream a word every 1/N seconds (0: as fast as it can)")
    args = options.parse_args()
    server = FakeOpenAI(latency_s=args.latency_ms / 1000).start()
    server.responder = dataset_responder
    if args.tokens_per_s > 0:
        server.responder = paced(1 / args.tokens_per_s)
    server.requests = _Discard()  # a long benchmark must not keep every request body
    print(server.base_url, flush=True)
    sys.stdin.read()
    server.stop()


def paced(chunk_delay_s: float):
    def respond(path: str, body: dict) -> Reply:
        reply = dataset_responder(path, body)
        reply.chunk_delay_s = chunk_delay_s
        return reply
    return respond


class _Discard(list):
    def append(self, item: object) -> None:
        return None


if __name__ == "__main__":
    main()
