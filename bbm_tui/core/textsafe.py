"""Untrusted text (model output, dataset text, typed input, error messages) on its way to a
terminal: no control characters, no escape sequences, no bidi overrides.

Markup is a separate matter: widgets take this text as `rich.text.Text` / `markup=False`, so
`[bold]` stays literally `[bold]`. This module only makes the characters themselves harmless,
and shows what it removed as visible placeholders rather than dropping it silently.
"""

from __future__ import annotations

import re

# C0 controls except tab and newline, DEL, C1 controls (ESC, CSI 0x9b, OSC 0x9d ... included),
# bidi embeddings/overrides/isolates, the line/paragraph separators, and lone surrogates (a JSON
# "\ud800" decodes to one; no terminal encoding can write it, so it would crash the writer).
_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029\ud800-\udfff]"
)


def _placeholder(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    if code < 0x20:
        return chr(0x2400 + code)  # the Control Pictures block: ␛ for ESC, ␀ for NUL, ...
    if code == 0x7F:
        return "\u2421"  # ␡
    return f"<U+{code:04X}>"


def printable(text: str, *, keep_newlines: bool = True) -> str:
    """`text` with every unsafe character replaced by a visible stand-in."""
    safe = _UNSAFE.sub(_placeholder, text)
    if not keep_newlines:
        safe = safe.replace("\n", "\u2424")  # ␤
    return safe.replace("\t", "    ")


def one_line(text: str, limit: int | None = None) -> str:
    """A single safe line, e.g. for a list row or a notification title."""
    line = printable(" ".join(text.split()), keep_newlines=False)
    if limit is not None and len(line) > limit:
        return line[: max(0, limit - 1)] + "…"
    return line
