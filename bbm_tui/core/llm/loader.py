"""litellm, imported once and lazily (docs/DESIGN.md §7): it costs 3-5 s and ~175 MB, so never at
module level, never on the way to the app's first frame; `warm_up()` imports it in a
background thread after the first frame. At import the offline providers are registered and
every reply is put behind the guard (http_guard.py)."""

from __future__ import annotations

import gc
import logging
import os
import threading
import warnings
from typing import Any

_import_lock = threading.Lock()


_litellm: Any = None


def litellm_module() -> Any:
    """Import and configure litellm once; safe to call from any thread."""
    global _litellm
    if _litellm is not None:
        return _litellm
    with _import_lock:
        if _litellm is None:
            # Without this, litellm fetches its price map from the internet at import time.
            os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            import litellm

            # Banners on stdout, or log lines on stderr, would wreck a full-screen app; so
            # would pydantic's warnings about a provider's odd usage values.
            warnings.filterwarnings("ignore", category=UserWarning, module="pydantic")
            litellm.suppress_debug_info = True
            # litellm's documented switch, which its __init__ imports without re-exporting.
            litellm.set_verbose = False  # pyright: ignore[reportPrivateImportUsage]
            _quiet_loggers()
            from bbm_tui.core.llm import http_guard

            http_guard.install(litellm)
            _register_offline_providers(litellm)
            # litellm's ~300,000 objects (modules, classes, price map) live as long as the
            # process: out of the cycle collector's sight, or each full collection walks them
            # all, a pause of 100-350 ms here in the middle of streaming (docs/NOTES.md).
            gc.freeze()
            _litellm = litellm
    return _litellm


class _UnclosedSessionFilter(logging.Filter):
    """litellm's whole (non-streamed) text completions leave an aiohttp session to the garbage
    collector, which then logs "Unclosed client session" on stderr (125 lines for 3 traces,
    docs/NOTES.md): across a full-screen app. The sessions are litellm's to close."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(("Unclosed client session", "Unclosed connector"))


def _quiet_loggers() -> None:
    logging.getLogger("asyncio").addFilter(_UnclosedSessionFilter())
    for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "httpx", "openai"):
        logger = logging.getLogger(name)
        for handler in list(logger.handlers):
            logger.removeHandler(handler)
        logger.addHandler(logging.NullHandler())
        logger.propagate = False
        logger.setLevel(logging.ERROR)


def router_class() -> Any:
    """litellm's Router (router.py builds one per router file)."""
    litellm_module()
    from litellm.router import Router

    return Router


def calls_a_deployment(router: Any) -> bool:
    """Whether `router` (litellm 1.103.7's Router) has the inner call `call_deployment` uses."""
    return callable(getattr(router, "_acompletion", None)) \
        and callable(getattr(router, "_update_kwargs_before_fallbacks", None))


async def call_deployment(router: Any, kwargs: dict[str, Any]) -> Any:
    """The chat call of the deployment `kwargs["model"]` names (its id) through `router`'s
    own call of one deployment (`Router._acompletion`: the deployment looked up by its id,
    its parameters and client, the metadata through which litellm's failure callback cools
    the deployment down, the stream wrapped as `acompletion` wraps it), without the layers
    `acompletion` puts around it: fallbacks, retries, the per-call usage count (a deep copy
    of the model's information), the response headers, the prompt-management check. The
    caller checks that the file sets nothing those layers act on (router.py)."""
    router._update_kwargs_before_fallbacks(model=kwargs["model"], kwargs=kwargs)
    return await router._acompletion(**kwargs)


def router_rate_limit_errors() -> tuple[type[BaseException], ...]:
    """What litellm's Router raises when every deployment of a group is cooling down."""
    litellm_module()
    from litellm.types.router import RouterRateLimitError, RouterRateLimitErrorBasic

    return (RouterRateLimitError, RouterRateLimitErrorBasic)


def cooldown_deployments(router: Any) -> list[str]:
    """The deployments `router` is cooling down now (litellm 1.103.7's own list; none where
    another version keeps it elsewhere)."""
    try:
        from litellm.router_utils.cooldown_handlers import _get_cooldown_deployments

        return [str(name) for name in _get_cooldown_deployments(router, None)]
    except Exception:
        return []


def is_loaded() -> bool:
    return _litellm is not None


def warm_up() -> None:
    """Import litellm now (call from a background thread after the first frame)."""
    litellm_module()


def _register_offline_providers(litellm: Any) -> None:
    from bbm_tui.core.llm.offline import replay, solver
    from bbm_tui.core.llm.offline.handler import make_offline_handler, make_solver_handler

    # One handler per provider: litellm hands a custom provider the model name without its
    # provider, and replay/ and simulated/ answer differently.
    providers = [
        {"provider": provider,
         "custom_handler": make_offline_handler(litellm, replay.engine(), provider)}
        for provider in replay.PROVIDERS
    ]
    providers.append({"provider": solver.PROVIDER,
                      "custom_handler": make_solver_handler(litellm)})
    ours = {entry["provider"] for entry in providers}
    existing = [
        entry
        for entry in (litellm.custom_provider_map or [])
        if entry.get("provider") not in ours
    ]
    litellm.custom_provider_map = existing + providers
    # custom_provider_map is read when litellm sets up its provider list.
    litellm.utils.custom_llm_setup()
