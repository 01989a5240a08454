"""The users of `bbm-tui serve`: a JSON file of names, roles and salted password hashes
(scrypt, from the standard library), never a password. Written whole through a temporary file
that only its owner can read (0600), so a reader never sees half of it.

    {"version": 1, "users": {"alice": {"role": "annotator", "hash": "scrypt$16384$8$1$SALT$KEY"}}}
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from bbm_tui.core.dataset import replacing
from bbm_tui.core.errors import UserError
from bbm_tui.core.textsafe import one_line
from bbm_tui.core.types import ADJUDICATOR, DEFAULT_ANNOTATOR

# scrypt's cost as OWASP's password storage cheat sheet gives it (N=2^17 uses 128 MiB a
# hash; 2^14 with r=8 is 16 MiB and ~50 ms here, which a sign-in can afford).
_N, _R, _P = 2**14, 8, 1
_KEY_BYTES = 32
_MAX_NAME = 64
# The longest password taken: scrypt reads all of it, and a megabyte posted would cost time.
MAX_PASSWORD = 1024
VERSION = 1


class Role(StrEnum):
    ANNOTATOR = "annotator"  # their own queue, nothing else
    LEAD = "lead"  # agreement, every annotator's progress, adjudication


class UsersFileError(UserError):
    title = "Cannot use the users file"


@dataclass(frozen=True)
class User:
    name: str
    role: Role
    password_hash: str


def default_users_path() -> Path:
    """Where the users file is when --users is not given: beside the session store."""
    from bbm_tui.core.store import home_dir

    return home_dir() / "users.json"


def hash_password(password: str) -> str:
    """A salted scrypt hash of `password`, with its parameters, as one string."""
    salt = secrets.token_bytes(16)
    key = hashlib.scrypt(password.encode("utf-8"), salt=salt, n=_N, r=_R, p=_P,
                         dklen=_KEY_BYTES, maxmem=64 * 1024 * 1024)
    return f"scrypt${_N}${_R}${_P}${salt.hex()}${key.hex()}"


def password_matches(password: str, stored: str) -> bool:
    """Whether `password` hashes to `stored` (compared in constant time)."""
    try:
        kind, n, r, p, salt, key = stored.split("$")
        if kind != "scrypt":
            return False
        expected = bytes.fromhex(key)
        found = hashlib.scrypt(password.encode("utf-8"), salt=bytes.fromhex(salt), n=int(n),
                               r=int(r), p=int(p), dklen=len(expected),
                               maxmem=64 * 1024 * 1024)
    except (ValueError, MemoryError):
        return False
    return hmac.compare_digest(found, expected)


# Checked against when the name is unknown, so that an unknown name takes as long to refuse
# as a wrong password (the time would tell which names exist).
_NOBODY = hash_password(secrets.token_hex(16))


def check_sign_in(users: dict[str, User], name: str, password: str) -> User | None:
    """The user whose name and password these are, or None."""
    user = users.get(name)
    if len(password) > MAX_PASSWORD:
        return None
    matches = password_matches(password, user.password_hash if user else _NOBODY)
    return user if user is not None and matches else None


def clean_name(name: str) -> str:
    """A user's name as kept: spaces joined, nothing unprintable; refused (ValueError) when
    empty, too long, or a name the annotation store keeps for itself."""
    cleaned = " ".join(name.split())
    if not cleaned or cleaned != one_line(cleaned) or len(cleaned) > _MAX_NAME:
        raise ValueError(f"{one_line(name, 80)!r} is not a user name (1-{_MAX_NAME} "
                         "printable characters)")
    if cleaned in (ADJUDICATOR, DEFAULT_ANNOTATOR):
        raise ValueError(f"{cleaned!r} is a name the store keeps for itself")
    return cleaned


def load_users(path: Path) -> dict[str, User]:
    """Every user in the file; a missing file has none. A bad file names itself and why."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as error:
        raise UsersFileError(f"{path}: cannot read: {error}") from None
    try:
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("version") != VERSION:
            raise ValueError(f"not a users file of version {VERSION}")
        users = {}
        for name, entry in data["users"].items():
            role = Role(entry["role"])
            password_hash = entry["hash"]
            if not isinstance(password_hash, str):
                raise ValueError(f"user {name!r}: no hash")
            users[clean_name(name)] = User(clean_name(name), role, password_hash)
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise UsersFileError(f"{path}: not a bbm-tui users file: {one_line(str(error), 200)}"
                             ) from None
    return users


def save_users(path: Path, users: dict[str, User]) -> None:
    data = {"version": VERSION, "users": {
        user.name: {"role": str(user.role), "hash": user.password_hash}
        for user in sorted(users.values(), key=lambda user: user.name)}}
    path.parent.mkdir(parents=True, exist_ok=True)
    with replacing(path) as out:  # a 0600 temporary file renamed over the old one
        out.write(json.dumps(data, indent=2) + "\n")
    os.chmod(path, 0o600)


def add_user(path: Path, name: str, role: Role, password: str) -> User:
    """Add `name` (or change their role and password) in the users file."""
    if not password:
        raise ValueError("the password is empty")
    if len(password) > MAX_PASSWORD:
        raise ValueError(f"the password is longer than {MAX_PASSWORD} characters")
    users = load_users(path)
    user = User(clean_name(name), role, hash_password(password))
    users[user.name] = user
    save_users(path, users)
    return user
