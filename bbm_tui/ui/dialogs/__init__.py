"""Modal screens, one module each: help (help.py), a yes/no confirmation, a one-line rename and
the store failure (confirm.py), a question of one's own (question.py), the model of a session
(model.py) and the mistake finder's settings (find.py), all on base.py's `Dialog`. The other
screens import them from here."""

from bbm_tui.ui.dialogs.base import Dialog
from bbm_tui.ui.dialogs.confirm import ConfirmScreen, RenameScreen, StoreErrorScreen
from bbm_tui.ui.dialogs.find import JUDGE_ALL, FindRequest, FindScreen, MethodSet, SpaceCheckbox
from bbm_tui.ui.dialogs.help import HelpScreen, KeyHelp
from bbm_tui.ui.dialogs.messages import MessagesScreen
from bbm_tui.ui.dialogs.model import ModelChoice, ModelScreen
from bbm_tui.ui.dialogs.question import TypedQuestionScreen

__all__ = [
    "JUDGE_ALL",
    "ConfirmScreen",
    "Dialog",
    "FindRequest",
    "FindScreen",
    "HelpScreen",
    "KeyHelp",
    "MessagesScreen",
    "MethodSet",
    "ModelChoice",
    "ModelScreen",
    "RenameScreen",
    "SpaceCheckbox",
    "StoreErrorScreen",
    "TypedQuestionScreen",
]
