"""Keep API keys out of text that is shown, printed or saved (docs/DESIGN.md §8: keys are never
written anywhere).

Keys live only in the environment, but a provider may echo one back in an error body, and an
error message travels to the status line, a notification, stderr. `redact()` replaces, in any
such text, the value of every key-like environment variable (as is, base64-encoded and
URL-encoded), anything shaped like a provider key (`sk-...`, `Bearer ...`), and the secret
parts of a URL: its userinfo (`http://user:password@host`) and its query values
(`?key=...`), wherever a URL appears — an api base is stored and printed through
`redact_url()`.
"""

from __future__ import annotations

import base64
import os
import re
from typing import Any
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


# Secrets declared as such (a router file's `api_key` values, and the variables it names as
# `os.environ/NAME`, whatever the name): redacted like the key-like variables, from a shorter
# length, since they are known to be keys.
_declared_values: set[str] = set()
_declared_variables: set[str] = set()
_MIN_DECLARED = 6


def declare_secret(value: str) -> None:
    """`value` is a key: redact it from now on (in this process)."""
    value = value.strip()
    if len(value) >= _MIN_DECLARED:
        _declared_values.add(value)


def declare_secret_variable(name: str) -> None:
    """The environment variable `name` holds a key, whatever its name says."""
    if name:
        _declared_variables.add(name)


def secret_values() -> list[str]:
    """The forms of every key-like environment variable's value, and of every declared
    secret, longest first."""
    values = {value.strip() for name, value in os.environ.items()
              if len(value.strip()) >= _MIN_SECRET and _SECRET_NAME.search(name)}
    values.update(os.environ.get(name, "").strip() for name in _declared_variables)
    values.update(_declared_values)
    forms: set[str] = set()
    for value in values:
        if len(value) < _MIN_DECLARED:
            continue
        encoded = base64.b64encode(value.encode()).decode()
        forms.update({value, quote(value, safe=""), encoded, encoded.rstrip("="),
                      base64.urlsafe_b64encode(value.encode()).decode().rstrip("=")})
    return sorted(forms, key=len, reverse=True)


def redact(text: str) -> str:
    """`text` with every secret it carries replaced by `[redacted]`."""
    text = _URL.sub(lambda match: _redact_url_parts(match.group(0)), _without_secret_values(text))
    return _KEY_SHAPED.sub(REDACTED, text)


def redact_data(value: Any) -> Any:
    """`value` (JSON-ready data) with redact() applied to every string in it, keys included."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact_data(key): redact_data(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [redact_data(item) for item in value]
    return value


def _without_secret_values(text: str) -> str:
    for value in secret_values():
        if value in text:
            text = text.replace(value, REDACTED)
    return text


# A URL in running text: a scheme, then anything up to whitespace or a quote, less the
# punctuation that ends a sentence around it.
_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s'\"<>]*[^\s'\"<>.,;:!?)]")
_QUERY_VALUE = re.compile(r"(^|&)([^=&]*)=([^&]*)")


def redact_url(url: str | None) -> str | None:
    """An api base fit to store and show, with the same redaction as a message: userinfo (a
    user and password, or a token in the user part), every query value, a key-shaped token
    anywhere in it (a path such as `/ok/sk-proj-.../v1`) and the value of any key-like
    environment variable. `http://u:p@h:8000/v1?key=k&x=1` becomes
    `http://[redacted]@h:8000/v1?key=[redacted]&x=[redacted]`. Applying it twice changes
    nothing more."""
    if not url:
        return url
    return _KEY_SHAPED.sub(REDACTED, _redact_url_parts(_without_secret_values(url)))


def _redact_url_parts(url: str) -> str:
    """The userinfo and the query values of one URL."""
    redacted = _USERINFO.sub(lambda m: f"{m.group(1)}{REDACTED}@", url, count=1)
    head, question_mark, rest = redacted.partition("?")
    if not question_mark:
        return redacted
    query, hash_mark, fragment = rest.partition("#")
    query = _QUERY_VALUE.sub(lambda m: f"{m.group(1)}{m.group(2)}={REDACTED}", query)
    return f"{head}?{query}{hash_mark}{fragment}"


_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*://)([^/?#]*)@")
