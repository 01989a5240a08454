"""Panels (`.panel`: a bordered part of a screen) show which one has the focus without colour
(issue 34, item 16): a heavy border (ui/styles/app.tcss) and a "▸" before the title, as the
focused side-by-side column and radio button have. On the main screen the focus is on the
trace view itself, and its keys act on its thoughts: that pane (`keys-here`) is the one
marked. A panel's title is set through
`set_panel_title`, so that a title changed while the panel has the focus (the thoughts
count, after each step) keeps its marker; the screens re-mark their panels as the focus
moves (ui/screens/base.py)."""

from __future__ import annotations

from weakref import WeakKeyDictionary

from textual.content import Content
from textual.dom import DOMNode
from textual.widget import Widget

FOCUS_MARKER = "▸ "
# A panel of this class is drawn as focused while the widget that will have the focus is not
# mounted yet (the new-session screen's question list, after the app's first frame).
FOCUS_COMING = "-focus-coming"

# Each panel's title as set, without the marker, and whether the marker is on it now.
_titles: WeakKeyDictionary[Widget, str | Content] = WeakKeyDictionary()
_marked: WeakKeyDictionary[Widget, bool] = WeakKeyDictionary()


def set_panel_title(panel: Widget, title: str | Content) -> None:
    """Title a panel, with the focus marker while the focus is inside it. A str title is
    literal text here (Textual would read it as markup)."""
    _titles[panel] = title
    _show(panel, _focused(panel))


def mark_panels(root: DOMNode) -> None:
    """Put the marker on the panel under `root` that has the focus, and take it off the
    others (a title is set again only where that changes: a new title repaints the pane)."""
    for panel in root.query(".panel"):
        focused = _focused(panel)
        if _marked.get(panel, False) != focused:
            _show(panel, focused)


def _focused(panel: Widget) -> bool:
    """The focus is in the panel, or (a panel of class `keys-here`: the main screen's
    thoughts) on the widget it belongs to, whose keys act on it."""
    if panel.has_focus_within or panel.has_class(FOCUS_COMING):
        return True
    parent = panel.parent
    return panel.has_class("keys-here") and isinstance(parent, Widget) and parent.has_focus


def _show(panel: Widget, focused: bool) -> None:
    title = _titles.get(panel)
    if title is None:  # titled before it was a panel of ours (or not at all): as it is
        title = Content.from_markup(panel.border_title or "")
        title = Content(title.plain.removeprefix(FOCUS_MARKER)) if title.plain.startswith(
            FOCUS_MARKER) else title
        _titles[panel] = title
    text = Content(title) if isinstance(title, str) else title
    marked = focused and bool(text.plain)
    panel.border_title = Content.assemble(FOCUS_MARKER, text) if marked else text
    _marked[panel] = focused
