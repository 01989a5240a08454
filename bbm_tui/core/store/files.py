"""The store's file: where it lives; the checks that need no connection (for the app to make
before its first frame: a folder, a file that is not SQLite, a store from a newer bbm-tui);
and what to tell the person when the disk or the folder, not the store, is at fault."""

from __future__ import annotations

import os
import shutil
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING

from bbm_tui.core.store.errors import StoreError
from bbm_tui.core.store.schema import SCHEMA_VERSION

if TYPE_CHECKING:  # sqlite3 itself is not needed by the check before the first frame
    import sqlite3

HOME_ENV = "BBM_TUI_HOME"


DATABASE_NAME = "bbm-tui.sqlite3"


SQLITE_HEADER = b"SQLite format 3\x00"


def home_dir() -> Path:
    """Where bbm-tui keeps its data: $BBM_TUI_HOME, else the platform's user data folder."""
    override = os.environ.get(HOME_ENV)
    if override:
        return Path(override).expanduser()
    from platformdirs import user_data_path

    return user_data_path("bbm-tui", appauthor=False)


def default_path() -> Path:
    return home_dir() / DATABASE_NAME


def check_is_sqlite(path: Path) -> None:
    if not path.exists():
        check_data_folder(path.parent)
        return
    if path.is_dir():
        raise StoreError(f"{path}: is a folder, not a session store")
    try:
        with path.open("rb") as handle:
            header = handle.read(len(SQLITE_HEADER))
    except OSError as error:
        raise StoreError(f"{path}: cannot read the session store: {error.strerror}") from None
    if header and header != SQLITE_HEADER:
        raise StoreError(
            f"{path}: is not a SQLite file, so not a bbm-tui session store; "
            "the file was left untouched"
        )


def check_data_folder(folder: Path) -> None:
    """The data folder, or the nearest of its parents that exists, is a folder: a file there
    (BBM_TUI_HOME naming a file, or a folder under one) is said as such, not as "cannot
    create ... File exists"."""
    for place in (folder, *folder.parents):
        if place.exists():
            if not place.is_dir():
                raise StoreError(
                    f"{place}: is a file, not a folder, so the session store cannot be kept in "
                    f"it; set {HOME_ENV} to a folder (it is made if missing)")
            return


def newer_message(path: Path, version: int) -> str:
    return (
        f"{path}: this store was written by a newer bbm-tui (schema version {version}; this "
        f"version knows up to {SCHEMA_VERSION}). Upgrade bbm-tui, or point {HOME_ENV} "
        "somewhere else; the file was left untouched."
    )


def preflight(path: Path | str | None = None) -> None:
    """The checks that need no connection, no lock and no write, for the app to make before it
    starts (the store itself opens in a thread once the app is up): a folder, a file that is
    not SQLite, a store from a newer bbm-tui. Raises StoreError; a missing store is fine."""
    path = Path(path) if path is not None else default_path()
    check_is_sqlite(path)
    try:
        with path.open("rb") as handle:
            header = handle.read(100)
    except FileNotFoundError:
        return
    except OSError as error:
        raise StoreError(f"{path}: cannot read the session store: {error.strerror}") from None
    # The header's copy of PRAGMA user_version (big-endian, at offset 60). In WAL mode it may
    # lag behind the database, never run ahead of it.
    if len(header) == 100 and int.from_bytes(header[60:64], "big") > SCHEMA_VERSION:
        raise StoreError(newer_message(path, int.from_bytes(header[60:64], "big")))


def create_store_file(path: Path) -> None:
    """The data folder (0700) and an empty store file only its owner can read: sessions may
    hold private text. A folder that cannot be made gets one message saying what to do."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with suppress(FileExistsError):  # another process created it just now
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except OSError as error:
        where = error.filename or path.parent
        raise StoreError(
            f"{path}: cannot create the session store ({where}: {error.strerror}); create the "
            f"folder or make it writable, or set {HOME_ENV} to a folder that works"
        ) from None


def chmod_owner_only(path: Path) -> None:
    with suppress(OSError):
        os.chmod(path, 0o600)


def system_error(path: Path, error: sqlite3.Error) -> StoreError:
    """One message for what SQLite reports when the machine, not the store, is at fault, and
    for a store whose schema was changed by hand; each says what to do."""
    return known_failure(path, error) or StoreError(
        f"{path}: the session store failed: {error}")


def known_failure(path: Path, error: BaseException) -> StoreError | None:
    text = str(error).lower()
    if "disk is full" in text or ("i/o error" in text and _disk_is_full(path)):
        return StoreError(f"{path}: the disk is full, so nothing of this change was saved (the "
                          "store itself is fine); free some space and try again")
    if "readonly" in text or "read-only" in text:
        return StoreError(f"{path}: the store cannot be written (the file or its folder is "
                          f"read-only); make it writable, or set {HOME_ENV} to a folder that is")
    if "unable to open database file" in text:
        return StoreError(f"{path}: cannot open the store (its folder is missing or cannot be "
                          f"written); create the folder, or set {HOME_ENV} to one that works")
    if "disk i/o error" in text:
        return StoreError(f"{path}: the disk reported an I/O error; check the disk and try "
                          "again (the store was left as it was)")
    if "no such column" in text or "no such table" in text or "has no column" in text:
        return StoreError(f"{path}: the store's tables are not what this bbm-tui wrote "
                          f"({error}); it was left untouched: restore a backup, or set "
                          f"{HOME_ENV} to a new folder")
    return None


def _disk_is_full(path: Path) -> bool:
    """SQLite reports a disk that filled while it wrote the WAL as an I/O error."""
    try:
        return shutil.disk_usage(path.parent).free < 1 << 20
    except OSError:
        return False
