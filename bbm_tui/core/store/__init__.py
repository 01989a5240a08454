"""The session store (docs/DESIGN.md §8): SQLite, WAL, versioned schema. store.py opens,
migrates and checks it; its queries are by area (sessions.py, listing.py, steps.py,
labels.py, finders.py, calls.py) on base.py's connection and transactions.

The names below are imported from their modules when first asked for (PEP 562): the app's
check before its first frame (`preflight`) needs files.py alone, and the records and the
store class (dozens of dataclasses, sqlite3's connection code) cost a few milliseconds of
that first frame (bench/first_frame.py) for nothing.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bbm_tui.core.store.base import (
        BUSY_TIMEOUT_MS,
        WriteLockBusy,
        first_write_without_waiting,
    )
    from bbm_tui.core.store.calls import call_from_row
    from bbm_tui.core.store.errors import SessionBusy, SessionDeleted, StoreError
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
        ModelBranch,
        QueueWork,
        Reasoning,
        RecordedReasoning,
        Session,
        SessionSummary,
        Step,
        StoredCandidate,
        TaskDefinition,
        Totals,
        calls_latency,
        default_session_name,
        steps_calls,
    )
    from bbm_tui.core.store.schema import MIGRATIONS, SCHEMA_VERSION, expected_columns
    from bbm_tui.core.store.sessions import CLAIM_HEARTBEAT_S, CLAIM_STALE_S
    from bbm_tui.core.store.steps import ReasoningSlice
    from bbm_tui.core.store.store import Store

# Each name this package offers, and the module of the package that defines it.
_MODULE_OF = {
    "SessionBusy": "errors",
    "SessionDeleted": "errors",
    "StoreError": "errors",
    "DATABASE_NAME": "files",
    "HOME_ENV": "files",
    "SQLITE_HEADER": "files",
    "default_path": "files",
    "home_dir": "files",
    "preflight": "files",
    "system_error": "files",
    "AnnotatorLabel": "records",
    "FinderRun": "records",
    "FinderVerdict": "records",
    "Label": "records",
    "ModelBranch": "records",
    "QueueWork": "records",
    "Reasoning": "records",
    "ReasoningSlice": "steps",
    "RecordedReasoning": "records",
    "Session": "records",
    "SessionSummary": "records",
    "Step": "records",
    "StoredCandidate": "records",
    "TaskDefinition": "records",
    "Totals": "records",
    "default_session_name": "records",
    "calls_latency": "records",
    "steps_calls": "records",
    "MIGRATIONS": "schema",
    "SCHEMA_VERSION": "schema",
    "expected_columns": "schema",
    "BUSY_TIMEOUT_MS": "base",
    "WriteLockBusy": "base",
    "first_write_without_waiting": "base",
    "CLAIM_HEARTBEAT_S": "sessions",
    "CLAIM_STALE_S": "sessions",
    "Store": "store",
    "call_from_row": "calls",
}

__all__ = [
    "BUSY_TIMEOUT_MS",
    "CLAIM_HEARTBEAT_S",
    "CLAIM_STALE_S",
    "DATABASE_NAME",
    "HOME_ENV",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "SQLITE_HEADER",
    "AnnotatorLabel",
    "FinderRun",
    "FinderVerdict",
    "Label",
    "ModelBranch",
    "QueueWork",
    "Reasoning",
    "ReasoningSlice",
    "RecordedReasoning",
    "Session",
    "SessionBusy",
    "SessionDeleted",
    "SessionSummary",
    "Step",
    "Store",
    "StoreError",
    "StoredCandidate",
    "TaskDefinition",
    "Totals",
    "WriteLockBusy",
    "call_from_row",
    "calls_latency",
    "default_path",
    "default_session_name",
    "expected_columns",
    "first_write_without_waiting",
    "home_dir",
    "preflight",
    "steps_calls",
    "system_error",
]


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # asked once: the next lookup is an ordinary one
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_MODULE_OF))
