"""What the sessions screen lists, from what is typed in its search line (no widgets).

A search line is words and filters, in any order: `task:dyck`, `model:gpt`, `label:mistake`
(or `none`, `unlabelled`), `since:2026-11-01`, `before:2026-12-01`, `date:2026-11-24` (that
day); the other words are looked for in the sessions' names and questions. The store does the
filtering, in SQL, on the paged query."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

from bbm_tui.core.records import LabelFilter, SessionQuery, SessionSort

# Short enough for the search line at 80 columns; LABEL_HELP goes in its tooltip.
SEARCH_HELP = "words · task:… model:… label:… since:YYYY-MM-DD before:… date:…"
LABEL_HELP = "label:mistake, label:none (no mistake) or label:unlabelled"

_LABELS = {
    "mistake": LabelFilter.MISTAKE, "mistakes": LabelFilter.MISTAKE,
    "none": LabelFilter.NO_MISTAKE, "no-mistake": LabelFilter.NO_MISTAKE,
    "no_mistake": LabelFilter.NO_MISTAKE, "ok": LabelFilter.NO_MISTAKE,
    "unlabelled": LabelFilter.UNLABELLED, "unlabeled": LabelFilter.UNLABELLED,
    "-": LabelFilter.UNLABELLED,
}

SORT_CYCLE = (SessionSort.UPDATED, SessionSort.NAME, SessionSort.TASK, SessionSort.MODEL,
              SessionSort.STEPS, SessionSort.LABEL)

# Each sort's natural direction: the newest, the longest first; names A to Z.
_DESCENDING_FIRST = {SessionSort.UPDATED, SessionSort.STEPS}

_SORT_WORDS = {
    SessionSort.UPDATED: ("newest first", "oldest first"),
    SessionSort.NAME: ("by name, A-Z", "by name, Z-A"),
    SessionSort.TASK: ("by task, A-Z", "by task, Z-A"),
    SessionSort.MODEL: ("by model, A-Z", "by model, Z-A"),
    SessionSort.STEPS: ("most thoughts first", "fewest thoughts first"),
    SessionSort.LABEL: ("unlabelled first", "flagged mistakes first"),
}


@dataclass(frozen=True)
class ParsedSearch:
    query: SessionQuery
    problems: tuple[str, ...] = ()


def parse_search(line: str, sort: SessionSort = SessionSort.UPDATED,
                 descending: bool = True) -> ParsedSearch:
    """The query a search line asks for; a filter that cannot be read is left out and named in
    `problems`."""
    words: list[str] = []
    problems: list[str] = []
    fields: dict[str, object] = {}
    for token in line.split():
        key, colon, value = token.partition(":")
        key = key.lower()
        if not colon or key not in ("task", "model", "label", "since", "before", "date"):
            words.append(token)
            continue
        if not value:
            problems.append(f"{key}: needs a value")
        elif key in ("task", "model"):
            fields[key] = value
        elif key == "label":
            label = _LABELS.get(value.lower())
            if label is None:
                problems.append(f"label:{value} (use mistake, none or unlabelled)")
            else:
                fields["label"] = label
        else:
            day = _day_start(value)
            if day is None:
                problems.append(f"{key}:{value} (a date is YYYY-MM-DD)")
            elif key == "since":
                fields["since"] = day
            elif key == "before":
                fields["before"] = day
            else:
                fields["since"], fields["before"] = day, _next_day(day)
    query = SessionQuery(text=" ".join(words), sort=sort, descending=descending)
    return ParsedSearch(replace(query, **fields), tuple(problems))


def next_sort(query: SessionQuery) -> SessionQuery:
    """The next order in the cycle, in its natural direction."""
    following = SORT_CYCLE[(SORT_CYCLE.index(query.sort) + 1) % len(SORT_CYCLE)]
    return sorted_by(query, following)


def sorted_by(query: SessionQuery, sort: SessionSort) -> SessionQuery:
    """Ordered by `sort`; asked again for the order it has, the other way round."""
    if sort == query.sort:
        return replace(query, descending=not query.descending)
    return replace(query, sort=sort, descending=sort in _DESCENDING_FIRST)


def describe(query: SessionQuery, total: int, everything: int | None = None) -> str:
    """"12 of 340 sessions · by name, A-Z" (or "340 sessions · newest first")."""
    noun = "session" if (everything if everything is not None else total) == 1 else "sessions"
    count = f"{total:,} {noun}" if everything is None else f"{total:,} of {everything:,} {noun}"
    natural = query.descending == (query.sort in _DESCENDING_FIRST)
    order = _SORT_WORDS[query.sort][0 if natural else 1]
    return f"{count} · {order}"


def is_filtered(query: SessionQuery) -> bool:
    return any((query.text.strip(), query.task, query.model, query.label,
                query.since is not None, query.before is not None))


def _day_start(text: str) -> float | None:
    try:
        return time.mktime(time.strptime(text, "%Y-%m-%d"))
    except (ValueError, OverflowError):
        return None


def _next_day(start: float) -> float:
    day = time.localtime(start + 36 * 3600)  # past any daylight-saving change
    return time.mktime((day.tm_year, day.tm_mon, day.tm_mday, 0, 0, 0, 0, 0, -1))
