"""The user's config file: `config.toml` in the platform's config folder (or $BBM_TUI_CONFIG).

    model = "openai/gpt-4o-mini"     # any litellm model string; default replay/bbm
    api_base = "http://localhost:8000/v1"
    mode = "chat"                    # or "completion" (text completion, for base models),
                                     # or "thinking" (one call a trace, its reasoning cut
                                     # into steps)
    split = "paragraph"              # thinking mode's rule: paragraph, sentence or line
    thinking_effort = "medium"       # thinking mode: low, medium or high, where taken
    thinking_budget = 4096           # thinking mode: tokens it may think, where taken
    temperature = 0                  # generation's, 0 to 2 (the paper's: 0)
    step_limit = 160
    max_tokens = 1024                # per step
    logprobs = true                  # record each step's log-probabilities (chat mode)
    timeout = 60                     # seconds a call may wait to connect, per read, and
                                     # for a stream's first text (raise for reasoning models)
    step_timeout = 300               # seconds one step may take in all; then it is cut
    idle_timeout = 30                # seconds a stream may go silent once it has begun
    answer_timeout = 600             # seconds a finder's whole answer may take in all
    verify_live = true               # the task verifier marks each thought as it finishes
    caching = true                   # mark the few-shot prefix for the provider's prompt
                                     # cache where it needs a mark (Anthropic); false: don't
    router = "~/servers.yaml"        # a litellm Router model_list: `model` names its group
    chat_template = "~/qwen3.jinja"  # thinking mode's `b` on vLLM or Ollama: the model's
                                     # chat template (Jinja) for going on from a prefix
    one_call = true                  # one call for many steps (opt-in; the paper's is one a step)

    [keymap]                         # binding id = keys, as in Textual's App.set_keymap
    step = "n,space"

Command-line flags override the file. A broken file gets a message naming it (and the line);
it is never rewritten by the app. API keys do not belong here: they stay in the environment.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from bbm_tui.core.errors import UserError
from bbm_tui.core.tomltext import (
    line_of,
    toml_error_message,
    toml_text,
    too_deep_message,
    too_long_number_message,
)
from bbm_tui.core.types import (
    DEFAULT_ANSWER_TIMEOUT_S,
    DEFAULT_FINDER_MAX_TOKENS,
    DEFAULT_IDLE_TIMEOUT_S,
    DEFAULT_MODEL,
    DEFAULT_SPLIT_RULE,
    DEFAULT_STEP_LIMIT,
    DEFAULT_STEP_MAX_TOKENS,
    DEFAULT_STEP_TIMEOUT_S,
    DEFAULT_TIMEOUT_S,
    MAX_TEMPERATURE,
    MIN_TEMPERATURE,
    MODES,
    CallSettings,
    Mode,
    ModelSpec,
    SplitRule,
    StepperSettings,
)

EFFORTS = ("low", "medium", "high")

CONFIG_ENV = "BBM_TUI_CONFIG"


class ConfigError(UserError):
    """A broken config file; the message names the file and, where known, the line."""

    title = "The config file did not load"


@dataclass(frozen=True)
class Config:
    """The user's config file, read (defaults where it says nothing)."""

    model: str = DEFAULT_MODEL
    api_base: str | None = None
    mode: Mode = "chat"
    step_limit: int = DEFAULT_STEP_LIMIT
    max_tokens: int = DEFAULT_STEP_MAX_TOKENS
    logprobs: bool = False
    timeout: float = DEFAULT_TIMEOUT_S
    keymap: dict[str, str] = field(default_factory=dict)
    path: Path | None = None
    step_timeout: float = DEFAULT_STEP_TIMEOUT_S
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT_S
    answer_timeout: float = DEFAULT_ANSWER_TIMEOUT_S
    verify_live: bool = False
    temperature: float = 0.0  # generation's; the paper's is 0
    caching: bool = True  # mark prompts' unchanging prefixes for the provider's cache
    # A litellm Router file (core/llm/router.py); `model` then names one of its groups.
    router: str | None = None
    # One streamed call for many steps, not the paper's one a step (opt-in).
    one_call: bool = False
    # Thinking mode (docs/DESIGN.md §16): the split rule, and how long the model may think.
    split: SplitRule = DEFAULT_SPLIT_RULE
    thinking_effort: str | None = None
    thinking_budget: int | None = None
    # The model's chat template (a Jinja file) for going on from a prefix of its reasoning
    # (`b` on a thinking trace, core/llm/prefix.py): vLLM's /v1/completions, Ollama's raw.
    chat_template: str | None = None

    def with_overrides(self, **overrides: Any) -> Config:
        """Command-line values win over the file's; None means "not given"."""
        given = {key: value for key, value in overrides.items() if value is not None}
        for key in ("api_base", "router", "chat_template"):
            if given.get(key) == "":
                given[key] = None
        return replace(self, **given)

    def stepper_settings(self, step_limit: int | None = None) -> StepperSettings:
        """How a trace is generated: the step limit, and each step's call."""
        call = CallSettings(temperature=self.temperature, max_tokens=self.max_tokens,
                            logprobs=self.logprobs,
                            timeout_s=self.timeout, step_timeout_s=self.step_timeout,
                            idle_timeout_s=self.idle_timeout, caching=self.caching)
        return StepperSettings(step_limit=step_limit or self.step_limit, call=call,
                               one_call=self.one_call, split=SplitRule(self.split),
                               thinking_effort=self.thinking_effort,
                               thinking_budget=self.thinking_budget,
                               chat_template=self.chat_template)

    def model_spec(self) -> ModelSpec:
        """The model the config names, behind its router file if it gives one."""
        return ModelSpec(self.model, self.api_base, self.mode, router=self.router)

    def finder_settings(self) -> CallSettings:
        """A mistake finder's calls: the paper's (temperature 0, no stop, room for CoT
        reasoning), with this config's timeouts."""
        return CallSettings(temperature=0.0, max_tokens=DEFAULT_FINDER_MAX_TOKENS,
                            timeout_s=self.timeout, idle_timeout_s=self.idle_timeout,
                            answer_timeout_s=self.answer_timeout, caching=self.caching)


# The keys config.toml takes besides its [keymap] table, in the order of the fields (what
# `bbm-tui --help` lists; `path` is where the file was read from, not a key).
CONFIG_KEYS: tuple[str, ...] = tuple(
    item.name for item in fields(Config) if item.name not in ("path", "keymap"))


def config_path() -> Path:
    override = os.environ.get(CONFIG_ENV)
    if override:
        return Path(override).expanduser()
    from platformdirs import user_config_path

    return user_config_path("bbm-tui", appauthor=False) / "config.toml"


def tasks_folder() -> Path:
    """Where the user's task files live: `tasks/` beside the config file (each `*.toml` there
    is read at start, docs/DESIGN.md §13)."""
    return config_path().parent / "tasks"


_SECRET_KEY = re.compile(
    r"(^|_)(api_?key|secret|password)($|_)|^(key|token|access_token|auth_token)$", re.IGNORECASE
)


def load_config(path: Path | None = None) -> Config:
    """Read the config file; a missing file means the defaults."""
    path = path or config_path()
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return Config(path=path)
    except OSError as error:
        raise ConfigError(f"{path}: cannot read the config file: {error.strerror}") from None
    import tomllib  # here, not at the top: without a config file the start does without it

    try:
        text = toml_text(raw)
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: the config file is not UTF-8 text") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: {toml_error_message(error)}") from None
    except RecursionError:  # tomllib recurses on each level of nesting
        raise ConfigError(f"{path}: {too_deep_message(text)}") from None
    except ValueError:  # an integer of more digits than Python converts
        raise ConfigError(f"{path}: {too_long_number_message(text)}") from None
    return _config_from(data, path, text)


def _config_from(data: dict[str, Any], path: Path, text: str) -> Config:
    def fail(key: str, message: str) -> ConfigError:
        return ConfigError(f"{path}: {line_of(key, text)}{message}")

    for key in data:
        if _SECRET_KEY.search(key):
            raise fail(
                key,
                f"{key!r}: API keys do not belong in the config file; set them in the "
                "environment (e.g. OPENAI_API_KEY)",
            )
    known = {"model", "api_base", "mode", "step_limit", "max_tokens", "temperature",
             "logprobs", "timeout", "step_timeout", "idle_timeout", "answer_timeout",
             "verify_live", "caching", "keymap", "router", "one_call", "split",
             "thinking_effort", "thinking_budget", "chat_template"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise fail(
            unknown[0], f"unknown setting {unknown[0]!r} (known: {', '.join(sorted(known))})"
        )
    values: dict[str, Any] = {}
    for key in ("model", "api_base", "mode", "router", "split", "thinking_effort",
                "chat_template"):
        if key in data:
            if not isinstance(data[key], str):
                raise fail(key, f"{key!r} must be a string")
            values[key] = data[key]
    if values.get("mode", "chat") not in MODES:
        raise fail("mode", f"'mode' must be one of {', '.join(MODES)}, not {values['mode']!r}")
    if values.get("split", DEFAULT_SPLIT_RULE) not in tuple(SplitRule):
        raise fail("split", "'split' must be one of paragraph, sentence, line, not "
                   f"{values['split']!r}")
    if "split" in values:
        values["split"] = SplitRule(values["split"])
    if values.get("thinking_effort", "low") not in EFFORTS:
        raise fail("thinking_effort", "'thinking_effort' must be one of low, medium, high, "
                   f"not {values['thinking_effort']!r}")
    if values.get("model") == "":
        raise fail("model", "'model' must not be empty")
    if values.get("api_base") == "":
        values["api_base"] = None
    for key in ("router", "chat_template"):
        if key in values:
            # A path from the config file: `~` is the user's home, a relative one beside it.
            given = Path(values[key]).expanduser() if values[key] else None
            values[key] = str(given if given is None or given.is_absolute()
                              else path.parent / given) if given else None
    for key in ("step_limit", "max_tokens", "thinking_budget"):
        if key in data:
            value = data[key]
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise fail(key, f"{key!r} must be a whole number of at least 1")
            values[key] = value
    if "temperature" in data:
        value = data["temperature"]
        if isinstance(value, bool) or not isinstance(value, int | float) or not (
            MIN_TEMPERATURE <= value <= MAX_TEMPERATURE
        ):
            raise fail("temperature", f"'temperature' must be a number from {MIN_TEMPERATURE:g} "
                       f"to {MAX_TEMPERATURE:g}")
        values["temperature"] = float(value)
    for key in ("logprobs", "verify_live", "caching", "one_call"):
        if key in data:
            if not isinstance(data[key], bool):
                raise fail(key, f"{key!r} must be true or false")
            values[key] = data[key]
    for key in ("timeout", "step_timeout", "idle_timeout", "answer_timeout"):
        if key in data:
            value = data[key]
            if isinstance(value, bool) or not isinstance(value, int | float) or not (
                0 < value < float("inf")
            ):
                raise fail(key, f"{key!r} must be a number of seconds above 0")
            values[key] = float(value)
    keymap = data.get("keymap", {})
    if not isinstance(keymap, dict) or not all(
        isinstance(keys, str) for keys in keymap.values()
    ):
        raise fail("keymap", "[keymap] must map binding ids to key strings, e.g. step = \"n\"")
    return Config(**values, keymap=dict(keymap), path=path)
