"""`bbm-tui users add NAME --role annotator|lead`: who may sign in to `bbm-tui serve`. The
password is asked twice on a terminal, or read as one line of standard input; only its salted
hash is kept (bbm_tui/serve/users.py), in a file only its owner can read."""

from __future__ import annotations

import argparse
import getpass
import sys
from pathlib import Path

from bbm_tui.cli.errors import UsageError


def command(args: argparse.Namespace) -> int:
    from bbm_tui.serve.users import Role, UsersFileError, add_user, default_users_path

    users_path: Path = args.users or default_users_path()
    password = _read_password(args.name)
    try:
        user = add_user(users_path, args.name, Role(args.role), password)
    except (ValueError, UsersFileError) as error:
        raise UsageError(str(error)) from None
    except OSError as error:
        raise UsageError(f"{users_path}: cannot write: {error.strerror}") from None
    print(f"{user.name} ({user.role}) saved in {users_path}", file=sys.stderr)
    return 0


def _read_password(name: str) -> str:
    """Asked twice on a terminal (not echoed); else one line of standard input."""
    if sys.stdin.isatty():
        first = getpass.getpass(f"Password for {name}: ")
        if getpass.getpass("The same again: ") != first:
            raise UsageError("the two passwords differ; nothing saved")
        return first
    line = sys.stdin.readline()
    return line[:-1] if line.endswith("\n") else line
