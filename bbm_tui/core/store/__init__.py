"""The session store (docs/DESIGN.md §8): SQLite, WAL, versioned schema; see store.py."""

from __future__ import annotations

from bbm_tui.core.store.errors import SessionDeleted, StoreError
from bbm_tui.core.store.files import (
    DATABASE_NAME,
    HOME_ENV,
    SQLITE_HEADER,
    default_path,
    home_dir,
    preflight,
    system_error,
)
from bbm_tui.core.store.records import (
    AnnotatorLabel,
    FinderRun,
    FinderVerdict,
    Label,
    QueueWork,
    Session,
    SessionSummary,
    Step,
    StoredCandidate,
    Totals,
    default_session_name,
)
from bbm_tui.core.store.schema import MIGRATIONS, SCHEMA_VERSION, expected_columns
from bbm_tui.core.store.store import BUSY_TIMEOUT_MS, Store, call_from_row

__all__ = [
    "BUSY_TIMEOUT_MS",
    "DATABASE_NAME",
    "HOME_ENV",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "SQLITE_HEADER",
    "AnnotatorLabel",
    "FinderRun",
    "FinderVerdict",
    "Label",
    "QueueWork",
    "Session",
    "SessionDeleted",
    "SessionSummary",
    "Step",
    "Store",
    "StoreError",
    "StoredCandidate",
    "Totals",
    "call_from_row",
    "default_path",
    "default_session_name",
    "expected_columns",
    "home_dir",
    "preflight",
    "system_error",
]
