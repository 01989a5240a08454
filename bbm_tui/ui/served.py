"""What the app may do when it is served to a browser (`bbm-tui serve`, docs/DESIGN.md §17):
the keys an annotator and a lead keep, and where Esc goes. Kept apart from ui/app.py so the
app's own rules read without the served ones in the way."""

from __future__ import annotations

# The app's actions a served app keeps (app.check_action): for everyone, and for a lead.
SERVED_ACTIONS = frozenset({"help", "quit", "help_quit", "copy_text", "focus_next",
                            "focus_previous", "bell",
                            "simulate_key", "notify", "maximize", "minimize", "back"})
SERVED_LEAD_ACTIONS = frozenset({"agreement", "adjudicate"})

# Said when an annotator presses Esc on their own queue: there is nothing below it to go to.
NOTHING_TO_LEAVE = ("Every label is saved as you give it: close the tab or sign out when you "
                    "stop.")


def served_may(action: str, *, lead: bool) -> bool:
    """What the app's own keys may do in a browser: the help and quitting; a lead also the
    agreement and the adjudication. No sessions, no new session (no model is called on the
    server's keys), no palette (it opens files and exports on the server)."""
    if action in SERVED_ACTIONS:
        return True
    return lead and action in SERVED_LEAD_ACTIONS
