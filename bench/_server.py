"""Run tests/openai_server.py's FakeOpenAI in its own process for a benchmark (a real server
is another process too, and this keeps its CPU off the measured client's GIL).

It answers generation prompts like a model that wrote the bundled dataset (the next recorded
step, then the following thought, which `stop` cuts off), word by word, after `--latency-ms`.
Prints its base URL on stdout, then serves until stdin closes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.openai_server import FakeOpenAI, dataset_responder  # noqa: E402


def main() -> None:
    options = argparse.ArgumentParser()
    options.add_argument("--latency-ms", type=float, default=0.0)
    args = options.parse_args()
    server = FakeOpenAI(latency_s=args.latency_ms / 1000).start()
    server.responder = dataset_responder
    server.requests = _Discard()  # a long benchmark must not keep every request body
    print(server.base_url, flush=True)
    sys.stdin.read()
    server.stop()


class _Discard(list):
    def append(self, item: object) -> None:
        return None


if __name__ == "__main__":
    main()
