"""The main screen (docs/DESIGN.md §10), as a widget and a screen around it.

- view.py: `TraceView`, one trace and its keys, a widget that a screen may hold more than
  once (side by side); its parts: finding.py (f, V) and branching.py (b, w, < >, t, v, l),
  which use the view through host.py's `TraceHost` and tell it what happened through
  messages.py; question_pane.py, its left pane.
- screen.py: `TraceScreen`, one view under the title bar, over the footer.

Imports inside the package go one way: screen, view, the parts, then host and messages
(pyproject.toml holds it).
"""

from bbm_tui.ui.screens.trace.screen import TraceScreen
from bbm_tui.ui.screens.trace.view import TraceView

__all__ = ["TraceScreen", "TraceView"]
