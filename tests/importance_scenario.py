"""A thinking trace of eight thoughts and the suite's llama-server (tests/llama_server.py)
scripted so that each thought's importance is known by hand: the importance view's snapshots
(tests/ui/test_ui_importance_snapshots.py) and its screenshot (scripts/screenshots.py) show
these. One thought holds markup-like text, shown literally."""

from __future__ import annotations

from typing import Any

from bbm_tui.core import llm
from bbm_tui.core.generation.splitting import split_text
from bbm_tui.core.store import Store
from bbm_tui.core.trace.session import NewTrace, TraceSession
from bbm_tui.core.types import SplitRule
from tests.llama_server import FakeLlamaServer
from tests.openai_server import Reply

TASK = "multistep_arithmetic"
QUESTION = "((3 + 5) * 2 - 4) ="
TARGET = "12"
STEPS = [
    "Okay, I need ((3 + 5) * 2 - 4). Let me work from the inside out.",
    "First the sum: 3 + 5 = 8.",
    "Then the product: 8 * 2 = 16.",
    "Hmm, maybe [b]8 * 2 = 18[/b]? No, that is wrong.",
    "So far 16, and 4 is left to take away.",
    "Wait, let me check the order: the product comes before the subtraction, so "
    "16 - 4 = 12.",
    "Checking again: 3 + 5 = 8, 8 * 2 = 16, 16 - 4 = 12.",
    "So the answer is 12.",
]
REASONING = "\n\n".join(STEPS)
M = 4
# Of the M rollouts from prefix j (steps 0..j-1 kept), the first RIGHT[j] are right: so
# thought 2 adds 0.5, thought 4 takes 0.25 away and thought 6 adds 0.5.
RIGHT = [1, 1, 3, 3, 2, 2, 4, 4, 4]
IMPORTANCES = [(RIGHT[i + 1] - RIGHT[i]) / M for i in range(len(STEPS))]
MODEL = "openai/qwen3-8b"


def kept_steps(prompt: str) -> int:
    return len(split_text(prompt.split("<think>\n", 1)[1], SplitRule.PARAGRAPH))


def script(server: FakeLlamaServer) -> None:
    """Rollout r from prefix j is right when r < RIGHT[j]; even rollouts write the original
    step again, odd ones another."""

    def continuation(prompt: str, body: dict[str, Any]) -> str:
        kept, rollout = kept_steps(prompt), body["seed"]
        step = (STEPS[kept] if kept < len(STEPS) and rollout % 2 == 0
                else f"Let me try it another way, attempt {rollout}.")
        answer = TARGET if rollout < RIGHT[kept] else "14"
        return f"{step}\n\n</think>\n\nSo the answer is {answer}"

    server.continuation = continuation


async def thinking_trace(store: Store, server: FakeLlamaServer) -> TraceSession:
    """The trace, generated through the server's chat endpoint in thinking mode."""
    server.enqueue(Reply(text=f"So the answer is {TARGET}", reasoning=REASONING))
    spec = llm.ModelSpec(MODEL, api_base=server.base_url, mode="thinking")
    trace = TraceSession.create(store, NewTrace(TASK, QUESTION, TARGET), spec)
    async for _event in trace.generate():
        pass
    assert trace.texts == STEPS
    return trace


async def with_rollouts(store: Store, server: FakeLlamaServer,
                        prefixes: int | None = None) -> TraceSession:
    """The trace and its rollouts written where the app keeps them, by the command's own
    core code: every prefix's, or the first `prefixes` prefixes' only (a run stopped)."""
    from bbm_tui.core.batch.anchors import (
        AnchorsSettings,
        anchors_batch,
        prepare_folder,
        rollouts_path,
        session_trace,
    )
    from bbm_tui.core.judging.anchors import Similar, similar_by_words
    from bbm_tui.core.llm.prefix import PrefixSettings

    script(server)
    trace = await thinking_trace(store, server)
    reasoning, rule = trace.reasoning(), trace.split_rule()
    assert reasoning is not None and rule is not None
    anchored = session_trace(TASK, QUESTION, TARGET, trace.answer, reasoning.text, rule)
    path = rollouts_path(store.path, trace.id, trace.spec.model)
    prepare_folder(path)

    async def similar_for(_texts: list[str]) -> Similar:
        return similar_by_words

    if prefixes is not None:  # jobs are made for prefixes 0..len(raw): the first ones only
        anchored.raw = anchored.raw[: prefixes - 1]
    await anchors_batch([anchored], trace.spec, path,
                        settings=AnchorsSettings(PrefixSettings(logprobs=False), M),
                        similar_for=similar_for, concurrency=4)
    return trace
