"""What the trace view's calls that go on from a prefix of a thinking trace's reasoning share
(`b`, `I`, and `r` on a stopped thinking trace): the chat template the person gave, the calls'
settings, and the sentence that refuses one before any call."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from bbm_tui.core.llm.prefix import PrefixSettings
from bbm_tui.core.types import StepperSettings
from bbm_tui.ui.screens.trace.host import TraceHost


def chat_template(settings: StepperSettings) -> Path | None:
    """The model's chat template (--chat-template, the config's), if given; None: the server
    applies its own (llama-server)."""
    return Path(settings.chat_template) if settings.chat_template else None


def prefix_settings(settings: StepperSettings, *, logprobs: bool = True,
                    temperature: float | None = None) -> PrefixSettings:
    """A call going on from a prefix: it may take as long as a step may; at `temperature`
    where given (else PrefixSettings' own, the paper's samples' 1)."""
    prefix = PrefixSettings(logprobs=logprobs, timeout_s=max(PrefixSettings.timeout_s,
                                                              settings.call.step_timeout_s))
    return prefix if temperature is None else replace(prefix, temperature=temperature)


def say_refused(view: TraceHost, what: str, refusal: str) -> None:
    """`what` is not done, said with why (before any call) and the key that changes the
    model."""
    view.say(f"{what}: {refusal}.", error=True,
             then=f"{view.key('trace_edit_model')} changes the model.")
