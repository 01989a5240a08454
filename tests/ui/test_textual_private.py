"""The two private details of Textual the app still uses, where Textual 8.2.8 has no public
way (issue 9, item 8). Each is used in one place; these tests fail on a Textual upgrade that
renames or drops them, so that whoever upgrades looks again."""

from __future__ import annotations

import textual
from textual.widgets import Footer, RadioButton, RadioSet
from textual.widgets._footer import FooterKey

from bbm_tui.ui.widgets.chrome import KeysFooter
from tests.ui.ui_helpers import make_app, wait_for


def test_the_pinned_textual() -> None:
    assert textual.__version__ == "8.2.8"


def test_footer_bindings_ready_still_exists() -> None:
    """bbm_tui/ui/widgets.py KeysFooter sets Footer._bindings_ready so that the keys are in
    the first frame (Textual's Footer waits a frame for the screen to announce them)."""
    assert "_bindings_ready" in Footer._reactives  # type: ignore[attr-defined]


async def test_the_keys_are_in_the_first_frame() -> None:
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        footer = app.screen.query_one(KeysFooter)
        await pilot.pause()
        assert footer.query(FooterKey), "the footer drew no keys in its first frame"


def test_radio_set_selected_still_exists() -> None:
    """bbm_tui/ui/dialogs.py MethodSet moves RadioSet._selected (the highlight) onto the
    pressed button when the dialog opens; there is no public setter."""
    assert "_selected" in RadioSet._reactives  # type: ignore[attr-defined]


async def test_the_finder_dialog_highlights_the_chosen_method() -> None:
    from bbm_tui.ui.dialogs import MethodSet

    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        choice = MethodSet(RadioButton("a"), RadioButton("b", value=True))
        await app.screen.mount(choice)
        await wait_for(pilot, lambda: choice._selected == 1)  # type: ignore[attr-defined]
