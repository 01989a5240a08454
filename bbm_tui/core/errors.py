"""The base of every error a person can act on: their file, their option, their task, their
disk, their provider. Each says what went wrong in one sentence that names the thing
(`message`), and what kind of problem it is (`title`, e.g. a dialog's or a report's
heading). The command line turns any of them into its one line on stderr in one place; a
bug is anything else."""

from __future__ import annotations

from typing import ClassVar


class UserError(Exception):
    """A problem the person can act on; `message` is what they read (never a traceback)."""

    title: ClassVar[str] = "Cannot go on"

    @property
    def message(self) -> str:
        return str(self)


class InvalidValue(UserError, ValueError):
    """A value given (an option, a setting) that cannot be used; the message says which and
    what would do."""

    title = "Not a usable value"
