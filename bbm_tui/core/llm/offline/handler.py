"""The offline models as litellm custom providers (docs/DESIGN.md §6): `replay/bbm` and
`simulated/rm-X`, served by the engine in replay.py; `solver/bbm` (solver.py) and
`solver/thinking` (thinking.py, a thinking model: reasoning_content, then content)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from bbm_tui.core.llm.records import UsageCounts, usage_watch


def _told(usage: dict[str, int]) -> dict[str, int]:
    """An offline call's usage, told to the call's usage watch (records.usage_watch) as a
    provider's own counts, as the reply guard tells an HTTP provider's: the reader then has
    them when the stream ends, without litellm's usage chunk (the answer assembled again in
    a thread: core/llm/transport.py's `_provider_done`). Returned for the last chunk, which
    litellm's own readers count from."""
    watch = usage_watch.get()
    if watch is not None:
        watch.usage = UsageCounts(prompt=usage["prompt_tokens"],
                                  completion=usage["completion_tokens"])
        watch.provider_usage = True
    return usage


def make_offline_handler(litellm: Any, engine: Any, provider: str = "replay") -> Any:
    """A litellm CustomLLM over the offline replay engine (docs/DESIGN.md §6)."""
    # litellm is the module the loader imported (core/llm/loader.py, the one that imports it).
    CustomLLM, ModelResponse = litellm.CustomLLM, litellm.ModelResponse

    from bbm_tui.core.llm.offline.replay import ReplayError, paced_pieces, tokens_of

    def respond(model: str, messages: list[dict], optional_params: dict) -> str:
        if "/" not in model:
            model = f"{provider}/{model}"
        try:
            text = engine.respond(model, messages, optional_params)
        except ReplayError as error:
            raise litellm.BadRequestError(
                message=str(error), model=model, llm_provider=model.split("/")[0]
            ) from None
        for stop in optional_params.get("stop") or []:
            if stop and stop in text:
                text = text[: text.index(stop)]
        return text

    def usage(messages: list[dict], text: str) -> dict[str, int]:
        prompt_tokens = sum(len(tokens_of(str(m.get("content", "")))) for m in messages)
        completion_tokens = len(tokens_of(text))
        return {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }

    def full_response(model: str, messages: list[dict], optional_params: dict) -> Any:
        text = respond(model, messages, optional_params)
        # `n`: the replay is deterministic, so every choice is the recorded one.
        count = max(1, int(optional_params.get("n") or 1))
        return ModelResponse(
            model=model,
            choices=[
                {
                    "index": index,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": text},
                }
                for index in range(count)
            ],
            usage=usage(messages, text),
        )

    def chunk(text: str, finished: bool = False, usage_: dict | None = None) -> dict:
        return {
            "text": text,
            "is_finished": finished,
            "finish_reason": "stop" if finished else None,
            "index": 0,
            "usage": usage_,
            "tool_use": None,
        }

    class OfflineLLM(CustomLLM):
        def completion(self, *args: Any, **kwargs: Any) -> Any:
            return full_response(kwargs["model"], kwargs["messages"], kwargs["optional_params"])

        async def acompletion(self, *args: Any, **kwargs: Any) -> Any:
            return full_response(kwargs["model"], kwargs["messages"], kwargs["optional_params"])

        def streaming(self, *args: Any, **kwargs: Any) -> Any:
            model, messages = kwargs["model"], kwargs["messages"]
            text = respond(model, messages, kwargs["optional_params"])
            pace = engine.seconds_per_token()
            for piece in paced_pieces(text, pace):
                if pace:
                    time.sleep(pace)
                yield chunk(piece)
            yield chunk("", True, usage(messages, text))

        async def astreaming(self, *args: Any, **kwargs: Any) -> Any:
            model, messages = kwargs["model"], kwargs["messages"]
            text = respond(model, messages, kwargs["optional_params"])
            pace = engine.seconds_per_token()
            for piece in paced_pieces(text, pace):
                if pace:
                    await asyncio.sleep(pace)
                yield chunk(piece)
            yield chunk("", True, _told(usage(messages, text)))

    return OfflineLLM()


def make_solver_handler(litellm: Any) -> Any:
    """`solver/bbm` as a litellm CustomLLM: whole answers with `n` choices and token
    log-probabilities (asked for or not: they cost nothing here), streamed steps at the
    replay's pace."""
    # litellm is the module the loader imported (core/llm/loader.py, the one that imports it).
    CustomLLM, ModelResponse = litellm.CustomLLM, litellm.ModelResponse

    from bbm_tui.core.llm.offline import solver
    from bbm_tui.core.llm.offline.replay import engine, paced_pieces, tokens_of

    def choices(model: str, messages: list[dict], optional_params: dict) -> list:
        if "/" not in model:
            model = f"{solver.PROVIDER}/{model}"
        try:
            return solver.respond(model, messages, optional_params)
        except solver.SolverModelError as error:
            raise litellm.BadRequestError(message=str(error), model=model,
                                          llm_provider=solver.PROVIDER) from None

    def usage(messages: list[dict], texts: list[str]) -> dict[str, int]:
        prompt_tokens = sum(len(tokens_of(str(m.get("content", "")))) for m in messages)
        completion_tokens = sum(len(tokens_of(text)) for text in texts)
        return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens}

    def full_response(model: str, messages: list[dict], optional_params: dict) -> Any:
        found = choices(model, messages, optional_params)
        return ModelResponse(
            model=model,
            choices=[
                {
                    "index": index,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": choice.text},
                    "logprobs": {"content": [
                        {"token": token.text, "logprob": token.logprob, "top_logprobs": []}
                        for token in choice.tokens
                    ]},
                }
                for index, choice in enumerate(found)
            ],
            usage=usage(messages, [choice.text for choice in found]),
        )

    def chunk(text: str, finished: bool = False, usage_: dict | None = None) -> dict:
        return {"text": text, "is_finished": finished,
                "finish_reason": "stop" if finished else None, "index": 0, "usage": usage_,
                "tool_use": None}

    thinking = _ThinkingModel(litellm)

    class SolverLLM(CustomLLM):
        def completion(self, *args: Any, **kwargs: Any) -> Any:
            if thinking.serves(kwargs["model"]):
                return thinking.full_response(kwargs["model"], kwargs["messages"])
            return full_response(kwargs["model"], kwargs["messages"], kwargs["optional_params"])

        async def acompletion(self, *args: Any, **kwargs: Any) -> Any:
            if thinking.serves(kwargs["model"]):
                return thinking.full_response(kwargs["model"], kwargs["messages"])
            return full_response(kwargs["model"], kwargs["messages"], kwargs["optional_params"])

        def streaming(self, *args: Any, **kwargs: Any) -> Any:
            if thinking.serves(kwargs["model"]):
                yield from thinking.chunks(kwargs["model"], kwargs["messages"], time.sleep)
                return
            messages = kwargs["messages"]
            text = choices(kwargs["model"], messages, kwargs["optional_params"])[0].text
            pace = engine().seconds_per_token()
            for piece in paced_pieces(text, pace):
                if pace:
                    time.sleep(pace)
                yield chunk(piece)
            yield chunk("", True, usage(messages, [text]))

        async def astreaming(self, *args: Any, **kwargs: Any) -> Any:
            if thinking.serves(kwargs["model"]):
                for chunk_, pause in thinking.paced_chunks(kwargs["model"], kwargs["messages"]):
                    if pause:
                        await asyncio.sleep(pause)
                    yield chunk_
                return
            messages = kwargs["messages"]
            text = choices(kwargs["model"], messages, kwargs["optional_params"])[0].text
            pace = engine().seconds_per_token()
            for piece in paced_pieces(text, pace):
                if pace:
                    await asyncio.sleep(pace)
                yield chunk(piece)
            yield chunk("", True, _told(usage(messages, [text])))

    return SolverLLM()


class _ThinkingModel:
    """`solver/thinking` (offline/thinking.py) over litellm: the reasoning streamed as
    `reasoning_content`, then the answer as `content`, at the replay's pace; the usage counts
    the reasoning's tokens as reasoning tokens."""

    def __init__(self, litellm: Any) -> None:
        self.litellm = litellm

    @staticmethod
    def serves(model: str) -> bool:
        from bbm_tui.core.llm.offline import thinking

        return model.rpartition("/")[2] == thinking.NAME

    def reply(self, model: str, messages: list[dict]) -> Any:
        from bbm_tui.core.llm.offline import thinking

        try:
            return thinking.respond(model, messages)
        except thinking.ThinkingModelError as error:
            raise self.litellm.BadRequestError(
                message=str(error), model=thinking.MODEL, llm_provider="solver") from None

    def usage(self, messages: list[dict], reasoning: str, content: str) -> Any:
        from bbm_tui.core.llm.offline.replay import tokens_of

        prompt_tokens = sum(len(tokens_of(str(m.get("content", "")))) for m in messages)
        reasoning_tokens = len(tokens_of(reasoning))
        completion_tokens = reasoning_tokens + len(tokens_of(content))
        return self.litellm.Usage(
            prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
            total_tokens=prompt_tokens + completion_tokens,
            completion_tokens_details={"reasoning_tokens": reasoning_tokens})

    def full_response(self, model: str, messages: list[dict]) -> Any:
        reply = self.reply(model, messages)
        return self.litellm.ModelResponse(
            model=model,
            choices=[{"index": 0, "finish_reason": "stop",
                      "message": {"role": "assistant", "content": reply.content,
                                  "reasoning_content": reply.reasoning}}],
            usage=self.usage(messages, reply.reasoning, reply.content))

    def paced_chunks(self, model: str, messages: list[dict]) -> Any:
        """(chunk, seconds to wait before it): the reasoning's pieces, the answer's, the end."""
        from bbm_tui.core.llm.offline.replay import engine, paced_pieces

        types = self.litellm.types.utils
        Delta, ModelResponseStream = types.Delta, types.ModelResponseStream
        StreamingChoices = types.StreamingChoices

        reply = self.reply(model, messages)
        pace = engine().seconds_per_token()

        def piece_chunk(delta: Any, finish_reason: str | None = None) -> Any:
            return ModelResponseStream(model=model, choices=[
                StreamingChoices(index=0, delta=delta, finish_reason=finish_reason)])

        for piece in paced_pieces(reply.reasoning, pace):
            yield piece_chunk(Delta(reasoning_content=piece, content=None)), pace
        for piece in paced_pieces(reply.content, pace):
            yield piece_chunk(Delta(content=piece)), pace
        last = piece_chunk(Delta(), "stop")
        last.usage = self.usage(messages, reply.reasoning, reply.content)
        yield last, 0.0

    def chunks(self, model: str, messages: list[dict], sleep: Any) -> Any:
        for chunk, pause in self.paced_chunks(model, messages):
            if pause:
                sleep(pause)
            yield chunk
