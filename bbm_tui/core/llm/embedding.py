"""Whether two steps say the same thing, by an embedding model through litellm (issue 35:
Thought Anchors judged a resampled sentence by the cosine of its embedding and the
original's)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from bbm_tui.core.llm.capabilities import auth_kwargs
from bbm_tui.core.llm.errors import LLMError, classify_error
from bbm_tui.core.llm.loader import litellm_module
from bbm_tui.core.types import ModelSpec

# Texts a request embeds at most.
BATCH = 64


def cosine(first: Sequence[float], second: Sequence[float]) -> float:
    dot = sum(a * b for a, b in zip(first, second, strict=True))
    norms = math.sqrt(sum(a * a for a in first)) * math.sqrt(sum(b * b for b in second))
    return dot / norms if norms else 0.0


async def embeddings(spec: ModelSpec, texts: Sequence[str]) -> dict[str, list[float]]:
    """Each distinct text's embedding (`litellm.aembedding`). Raises LLMError."""
    litellm = litellm_module()
    unique = list(dict.fromkeys(texts))
    found: dict[str, list[float]] = {}
    for start in range(0, len(unique), BATCH):
        batch = unique[start:start + BATCH]
        kwargs: dict[str, Any] = {"model": spec.model, "input": batch, **auth_kwargs(spec)}
        if spec.api_base is not None:
            kwargs["api_base"] = spec.api_base
        try:
            response = await litellm.aembedding(**kwargs)
        except Exception as error:
            raise classify_error(error, spec) from None
        data = sorted(response.data, key=lambda item: item["index"])
        if len(data) != len(batch):
            raise LLMError("unknown", f"{spec.model} embedded {len(data)} of {len(batch)} "
                           "texts")
        for text, item in zip(batch, data, strict=True):
            found[text] = [float(value) for value in item["embedding"]]
    return found


async def similar_by_embedding(spec: ModelSpec, texts: Sequence[str],
                               threshold: float) -> Callable[[str, str], bool]:
    """A test of two of `texts`: the same meaning when their cosine is at least
    `threshold`."""
    vectors = await embeddings(spec, texts)
    return lambda first, second: cosine(vectors[first], vectors[second]) >= threshold
