"""The keys as bound: each binding's keys after the user's `[keymap]`, shown the way the Footer
shows them (`App.get_key_display`: "x", "esc", "^n", "⏎"). The help screen lists them from
here, and every hint that names a key asks `key_for`, so that a remapped key is named right
everywhere (a hint that said "x flags the first mistake" after `flag_mistake = "m"` sent the
person to a key that no longer does it)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from textual.binding import Binding

from bbm_tui.core.textsafe import one_line
from bbm_tui.ui.context import context

if TYPE_CHECKING:
    from textual.dom import DOMNode

# What a hint names when a binding has no key left (the keymap gave its keys to another).
NO_KEY = "(no key)"


def declared_bindings(owner: type) -> list[Binding]:
    """The bindings a class and its bases declare, the bases' first (the order Textual merges
    them in), one Binding per key."""
    declared: list[Binding] = []
    for cls in reversed(owner.__mro__):
        declared.extend(Binding.make_bindings(cls.__dict__.get("BINDINGS", [])))
    return declared


def bound_keys(binding: Binding, keymap: Mapping[str, str]) -> list[str]:
    """The keys `binding` has once the keymap is applied: the keymap's for its id, else its
    own."""
    keys = keymap.get(binding.id or "")
    if keys is None:
        return [binding.key]
    return [key.strip() for key in keys.split(",") if key.strip()]


def bindings_as_bound(owners: Iterable[type], keymap: Mapping[str, str]) -> list[Binding]:
    """Every binding of the owners' classes, in the order they declare them, one per key as
    the keymap has it (a remapped binding keeps its place). A key the keymap gives is that
    binding's, as in Textual (`BindingsMap.apply_keymap`): the binding that had it by default
    loses it. Otherwise a priority binding wins a key, as in Textual (the side-by-side
    screen's n, r, esc and tab act before the focused column's own), then the first owner's
    binding."""
    declared = [binding for owner in owners for binding in declared_bindings(owner)]
    claimed = {key for binding in declared if binding.id in keymap
               for key in bound_keys(binding, keymap)}
    found: dict[str, Binding] = {}
    # Priority bindings first, each list in the owners' order; the result keeps the order of
    # the first binding met for each key.
    places: dict[str, int] = {}
    for place, binding in enumerate(declared):
        for key in bound_keys(binding, keymap):
            places.setdefault(key, place)
    for binding in sorted(declared, key=lambda binding: not binding.priority):
        remapped = binding.id in keymap
        for key in bound_keys(binding, keymap):
            if key in claimed and not remapped:
                continue
            # A remapped key is shown as typed (Textual drops key_display on a remap).
            shown = replace(binding, key=key, key_display=None) if remapped else \
                replace(binding, key=key)
            found.setdefault(key, shown)
    return [found[key] for key in sorted(found, key=places.__getitem__)]


def binding_owners(node: DOMNode) -> list[type]:
    """The classes whose bindings act where `node` is, in the order Textual looks a key up:
    `node` and the widgets around it that declare keys of their own (a trace view), its screen,
    then the app."""
    screen = node.screen
    owners: list[type] = []
    for around in node.ancestors_with_self:
        if around is screen:
            break
        if any(binding.id for binding in declared_bindings(type(around))):
            owners.append(type(around))
    return [*owners, type(screen), type(node.app)]


def key_for(node: DOMNode, binding_id: str) -> str:
    """The key bound to `binding_id` where `node` is (its own keys, its screen's, the app's),
    as the Footer shows it: the first of its keys after the user's keymap. A hint names the key
    through this."""
    app = node.app
    keymap = context(node).config.keymap
    owners = binding_owners(node)
    for binding in bindings_as_bound(owners, keymap):
        if binding.id == binding_id:
            return one_line(app.get_key_display(binding))  # the key is the user's text
    if not any(binding.id == binding_id for owner in owners
               for binding in declared_bindings(owner)):
        raise KeyError(f"no binding {binding_id!r} on {type(node).__name__}, its screen or "
                       "the app")
    return NO_KEY  # the keymap gave its keys to another binding
