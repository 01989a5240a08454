"""The baseline of bench/first_frame.py: a bare Textual app with a Header and a Footer.

Started the same way as `bbm-tui` (a fresh interpreter from .venv), so the difference between
the two is what bbm-tui adds on the way to its first frame.
"""

from textual.app import App, ComposeResult
from textual.widgets import Footer, Header


class BareApp(App[None]):
    TITLE = "bare"

    def compose(self) -> ComposeResult:
        yield Header()
        yield Footer()


if __name__ == "__main__":
    BareApp().run()
