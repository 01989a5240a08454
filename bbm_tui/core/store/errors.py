"""What can go wrong with the store, each with a message naming the file and what to do."""

from __future__ import annotations


class StoreError(Exception):
    """The store cannot be used; the message names the file."""


class SessionDeleted(StoreError):
    """The session is not in the store (another process deleted it, or it never was)."""

    def __init__(self, message: str, session_id: int) -> None:
        super().__init__(message)
        self.session_id = session_id
