"""How calls' tokens and cost read, the same in the app and on the command line. Unknown stays
unknown (docs/DESIGN.md §3): a cost no one knows is "—" and a note names the model, never
"$0.0000"; a count that is an estimate is marked "~"."""

from __future__ import annotations

import math
from collections.abc import Sequence

UNKNOWN = "—"


def format_cost(cost: float | None) -> str:
    """Dollars, to four places, or to two significant figures below a cent, so that a cached
    step's fraction of a cent shows ("$0.0031", "$0.00042", "$0.000031"); "$0" for nothing
    spent; "—" unknown."""
    if cost is None:
        return UNKNOWN
    if cost == 0:
        return "$0"
    places = max(4, 1 - math.floor(math.log10(cost)))
    return f"${cost:.{places}f}"


def format_total_cost(cost: float, calls: int, unpriced_calls: int) -> str:
    """The cost of several calls: "—" when no call's price is known, "≥$…" (a lower bound)
    when some are not."""
    if calls and unpriced_calls >= calls:
        return UNKNOWN
    shown = format_cost(cost)
    return f"≥{shown}" if unpriced_calls else shown


def format_count(count: int, estimated: bool = False) -> str:
    """A token count; "~" before one that is an estimate, not the provider's own count."""
    return f"{'~' if estimated else ''}{count:,}"


def format_tokens_in_out(prompt: int, cached: int, completion: int,
                         estimated: bool = False, prompt_estimated: bool = False) -> str:
    """"9,100 in / 7,168 cached / 60 out": the prompt's tokens (all of them), the part read
    from the provider's prompt cache, and the answer's; "~" on the output's count, and the
    prompt's, where they are estimates."""
    return (f"{format_count(prompt, prompt_estimated)} in / {format_count(cached)} cached / "
            f"{format_count(completion, estimated)} out")


def unknown_cost_note(models: Sequence[str], calls: int) -> str:
    """What a summary says of calls whose price is unknown."""
    plural = "" if calls == 1 else "s"
    return (f"cost unknown for {', '.join(models)} ({calls:,} call{plural}): litellm has no "
            "price for the model, or the provider reported no usage")
