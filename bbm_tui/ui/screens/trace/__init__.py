"""The main screen (docs/DESIGN.md §10), as a widget and a screen around it.

- view.py: `TraceView`, one trace and its keys (keys.py), a widget that a screen may hold more
  than once (side by side), each with its own session, state and workers.
- host.py: `TraceHost`, the view's base class: its reactive state and the means to show it,
  which is all its parts use of it; question_pane.py, its left pane.
- The view's parts, plain classes holding the view as a `TraceHost`: generation.py (n, r),
  labelling.py (x, c, u, g), finding.py (f, V), branching.py (b, w, < >, t, v, l) and
  sharing.py (another bbm-tui generating the session: read-only here). They tell the view
  what happened through messages.py, as the view tells its screen (`TitleChanged`).
- screen.py: `TraceScreen`, one view under the title bar, over the footer.

Imports inside the package go one way: screen, view, the parts, host, then the pane and the
messages (pyproject.toml holds it).
"""

from bbm_tui.ui.screens.trace.screen import TraceScreen
from bbm_tui.ui.screens.trace.view import TraceView

__all__ = ["TraceScreen", "TraceView"]
