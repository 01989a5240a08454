"""Keep API keys out of text that is shown, printed or saved (DESIGN §8: keys are never written
anywhere).

Keys live only in the environment, but a provider may echo one back in an error body, and an
error message travels to the status line, a notification, stderr. `redact()` replaces, in any
such text, the value of every key-like environment variable (as is, base64-encoded and
URL-encoded) and anything shaped like a provider key (`sk-...`, `Bearer ...`).
"""

from __future__ import annotations

import base64
import os
import re
from urllib.parse import quote

REDACTED = "[redacted]"
# Names of environment variables that hold secrets: OPENAI_API_KEY, HF_TOKEN, AWS_SECRET_...
_SECRET_NAME = re.compile(r"API_?KEY|_KEY$|^KEY$|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL",
                          re.IGNORECASE)
# Shorter values are too likely to be ordinary words ("True", "1") to replace everywhere.
_MIN_SECRET = 8
# Provider-shaped keys: OpenAI/Anthropic/DeepSeek `sk-...`, Groq `gsk_...`, Google `AIza...`,
# xAI `xai-...`, and whatever follows `Bearer`.
_KEY_SHAPED = re.compile(
    r"\b(?:sk|pk|rk)-[A-Za-z0-9_\-]{8,}"
    r"|\bgsk_[A-Za-z0-9]{16,}"
    r"|\bAIza[A-Za-z0-9_\-]{20,}"
    r"|\bxai-[A-Za-z0-9]{16,}"
    r"|(?<=Bearer )[A-Za-z0-9._~+/=\-]{8,}",
)


def secret_values() -> list[str]:
    """The forms of every key-like environment variable's value, longest first."""
    forms: set[str] = set()
    for name, value in os.environ.items():
        value = value.strip()
        if len(value) < _MIN_SECRET or not _SECRET_NAME.search(name):
            continue
        encoded = base64.b64encode(value.encode()).decode()
        forms.update({value, quote(value, safe=""), encoded, encoded.rstrip("="),
                      base64.urlsafe_b64encode(value.encode()).decode().rstrip("=")})
    return sorted(forms, key=len, reverse=True)


def redact(text: str) -> str:
    """`text` with every secret it carries replaced by `[redacted]`."""
    for value in secret_values():
        if value in text:
            text = text.replace(value, REDACTED)
    return _KEY_SHAPED.sub(REDACTED, text)
