"""The command palette (ctrl+p): the app's commands that have no key, and the commands that the
app, the screen below the palette and the focused widget there (a trace view) declare next to
their bindings. A `PALETTE` class attribute maps a binding id to the command's title; the
command's help is the binding's tooltip, and it runs the binding's action on the node that
declares it, so that a command on a trace acts on the trace that has the focus."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from textual.actions import parse
from textual.app import SystemCommand

from bbm_tui.ui.keys import declared_bindings

if TYPE_CHECKING:
    from textual.dom import DOMNode
    from textual.screen import Screen


def declared_commands(screen: Screen, app: DOMNode) -> Iterator[SystemCommand]:
    """The commands declared by the focused widget on `screen` and the widgets around it,
    `screen` itself, then the app: innermost first, each in the order it declares them."""
    node = screen.focused or screen
    for owner in node.ancestors_with_self:
        if owner is app:
            break
        yield from _commands_of(owner)
    yield from _commands_of(app)


def _commands_of(node: DOMNode) -> Iterator[SystemCommand]:
    titles: dict[str, str] = getattr(type(node), "PALETTE", {})
    if not titles:
        return
    bindings = {binding.id: binding for binding in declared_bindings(type(node)) if binding.id}
    for binding_id, title in titles.items():
        binding = bindings[binding_id]
        yield SystemCommand(title, binding.tooltip, _action(node, binding.action))


def _action(node: DOMNode, action: str) -> Callable[[], object]:
    """The method `action` ("version(-1)") names on `node`, with its arguments, to call now."""
    _, name, arguments = parse(action)
    method = getattr(node, f"action_{name}")
    return lambda: method(*arguments)


def screenshot_folder() -> Path:
    """Screenshots go beside the session store, in the platform's data folder."""
    from bbm_tui.core.store import default_path

    return default_path().parent / "screenshots"
