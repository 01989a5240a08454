"""The user's [keymap] checked against the app's bindings (docs/config.md): an id no screen
has, or a key given to two actions of one screen, gets one message naming the config file and
the line, instead of being ignored (Textual's set_keymap skips unknown ids silently)."""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from textual.binding import Binding, BindingType


def screen_bindings() -> dict[str, list[Binding]]:
    """Every screen's, dialog's and keyed widget's bindings with an id, by the class's name:
    the classes of every module under bbm_tui/ui/screens/ (found on disk, so a new screen file
    is checked with no edit here) and under bbm_tui/ui/dialogs/. A screen's keyed widgets (a
    trace view) act on it together with it: each is checked with the screen's bindings too,
    as "TraceView on TraceScreen". Imported here, not at module level: the check runs after
    the first frame."""
    return {name: bindings for name, (bindings, _) in _keyed_classes().items()}


def screen_places() -> dict[str, str]:
    """What a person calls each place screen_bindings() checks: the screen's help title ("the
    main screen"), else its class name in words ("the flag dialog"); a keyed widget on a
    screen is that screen."""
    return {name: place for name, (_, place) in _keyed_classes().items()}


def _keyed_classes() -> dict[str, tuple[list[Binding], str]]:
    found: dict[str, tuple[list[Binding], str]] = {}
    keyed: set[str] = set()  # widgets checked with the screens they act on, not alone
    for module in ui_screen_modules():
        for name in dir(module):
            thing = getattr(module, name)
            if isinstance(thing, type) and thing.__module__ == module.__name__ and \
                    _bindings(thing):
                place = _place(thing)
                found[name] = (_bindings(thing), place)
                for widget in getattr(thing, "KEYED_WIDGETS", ()):
                    keyed.add(widget.__name__)
                    found[f"{widget.__name__} on {name}"] = (
                        [*_bindings(widget), *found[name][0]], place)
    return {name: found[name] for name in found if name not in keyed}


def _place(cls: type) -> str:
    title = getattr(cls, "HELP_TITLE", None)
    if isinstance(title, str) and title != "this screen":
        return title
    words = re.findall(r"[A-Z][a-z]*", cls.__name__.removesuffix("Screen")) or [cls.__name__]
    return "the " + " ".join(word.lower() for word in words)


def _bindings(owner: type) -> list[Binding]:
    """The bindings with an id that `owner` declares itself."""
    return [b for b in owner.__dict__.get("BINDINGS", []) if isinstance(b, Binding) and b.id]


def ui_screen_modules() -> list[ModuleType]:
    """Every module under the bbm_tui.ui.dialogs and bbm_tui.ui.screens packages."""
    from bbm_tui.ui import dialogs, screens

    return [importlib.import_module(info.name)
            for package in (dialogs, screens)
            for info in pkgutil.walk_packages(package.__path__, prefix=f"{package.__name__}.")]


def keymap_problems(keymap: dict[str, str], screens: dict[str, list[Binding]],
                    app_bindings: Iterable[BindingType], path: Path | None,
                    places: Mapping[str, str] | None = None) -> list[str]:
    """Each problem once: an unknown id, or a key given to two actions, with the places
    (`places`: what a person calls each of `screens`) where the two meet."""
    lines = _lines_of(path)
    where = str(path) if path else "the config"
    app = [b for b in app_bindings if isinstance(b, Binding) and b.id]
    known = {b.id for bindings in screens.values() for b in bindings} | {b.id for b in app}
    problems = []
    for binding_id in keymap:
        if binding_id not in known:
            line = lines.get(binding_id)
            at = f"{where}:{line}" if line else where
            problems.append(f"{at}: [keymap] has no binding {binding_id!r}: it is ignored "
                            "(the help screen, ?, lists every binding id)")
    # (key, the two ids) -> the places they meet: one conflict is said once, wherever it is.
    clashes: dict[tuple[str, str, str], list[str]] = {}
    for screen, bindings in screens.items():
        taken: dict[str, str] = {}
        for binding in [*bindings, *app]:
            keys = keymap.get(binding.id or "", binding.key)
            for key in (k.strip() for k in keys.split(",")):
                other = taken.get(key)
                if other is not None and other != binding.id and (
                    binding.id in keymap or other in keymap
                ):
                    place = (places or {}).get(screen, screen)
                    met = clashes.setdefault((key, other, binding.id or ""), [])
                    if place not in met:
                        met.append(place)
                taken.setdefault(key, binding.id or "")
    for (key, other, binding_id), met in clashes.items():
        remapped = binding_id if binding_id in keymap else other
        line = lines.get(remapped)
        at = f"{where}:{line}" if line else where
        problems.append(f"{at}: [keymap] gives {key!r} to both {other!r} and {binding_id!r} "
                        f"(on {', '.join(met)}): only one of them can have it")
    return problems


def _lines_of(path: Path | None) -> dict[str, int]:
    """The line of each binding id in the config's [keymap] table."""
    if path is None:
        return {}
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return {}
    found: dict[str, int] = {}
    in_keymap = False
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if line.startswith("["):
            in_keymap = line.split("#")[0].strip() == "[keymap]"
            continue
        if in_keymap and "=" in line:
            key = line.split("=", 1)[0].strip().strip('"').strip("'")
            found.setdefault(key, number)
    return found


def check_keymap(app: Any) -> None:
    """In a worker thread: the user's [keymap] checked against every screen's keys, its
    problems said in one notification. `app` is the BbmApp (not imported: the app imports
    this module)."""
    problems = keymap_problems(app.config.keymap, screen_bindings(), app.BINDINGS,
                               app.config.path, screen_places())
    if problems:
        app.call_from_thread(app.notify, "\n".join(problems[:5]), title="Keymap",
                             severity="error", timeout=20, markup=False)
