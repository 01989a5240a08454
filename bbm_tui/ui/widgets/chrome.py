"""The screens' chrome: a static line without a line-cache, the footer that shows its keys in
the first frame, and the one-line title bar (the tick box is in ui/widgets/tickbox.py: the
app's first frame has none)."""

from __future__ import annotations

import re

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import HorizontalGroup
from textual.content import Content
from textual.geometry import Size
from textual.widget import Widget
from textual.widgets import Footer, Static
from textual.widgets._footer import FooterKey, FooterLabel, KeyGroup

from bbm_tui.ui.message_log import keep_message
from bbm_tui.ui.text import fit_message, safe

SHOWN_AT_MOST = 4_000
# A footer drawn as one line first (KeysLine) has its keys by then, whatever happens.
KEYS_LINE_AT_MOST_S = 1.0
# A progress line ("Generating Thought 4…  (esc stops)"): soon replaced, never worth keeping.
PROGRESS = re.compile(r"…(\s+\([^)]*\))?$")


class LeanStatic(Static):
    """A Static that asks for a re-layout of the screen only when its size changes.

    A layout costs every widget on the screen (hundreds on a long trace), and most updates
    while a thought streams keep the size: then repainting this one widget is enough.
    """

    def __init__(self, *args, auto_width: bool = False, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._auto_width = auto_width
        self._shape: tuple[int, int] | None = None
        self._shown: Content | None = None

    def show(self, content: Content) -> None:
        shown = self._shown
        if shown is not None and shown.plain == content.plain and shown.spans == content.spans:
            return  # the same text and styles: nothing to repaint
        self._shown = content
        width = self.content_size.width
        # Textual's own widgets pass their styles here too (Widget.get_content_height): they
        # answer the .get() Content reads, though Textual types them apart from RulesMap.
        height = content.get_height(self.styles, width) if width > 0 else -1  # pyright: ignore[reportArgumentType]
        shape = (height, content.cell_length if self._auto_width else 0)
        self.update(content, layout=height < 0 or shape != self._shape)
        self._shape = shape


class StatusLine(LeanStatic):
    """A few lines saying what happened and what to do next: what happened is cut with an
    ellipsis to fit the lines there are, what to do is never cut (`fit_message`), and both
    are fitted again when the width changes."""

    def __init__(self, *, lines: int, **kwargs) -> None:
        super().__init__(**kwargs)
        self.lines = lines
        self._said = ("", "")
        self._error = False

    @property
    def said(self) -> str:
        """All of the last message, uncut."""
        return " ".join(part for part in self._said if part)

    def say(self, message: str, then: str = "", *, error: bool = False) -> None:
        self._said = (message, then)
        self._error = error
        self.set_class(error, "-error")
        if error:  # every error is kept whole for the messages screen, cut here or not
            keep_message(self, self.said, severity="error")
        self._fit()

    def on_resize(self) -> None:
        self._fit()

    def _fit(self) -> None:
        message, then = self._said
        # Never more than a few lines' worth is shown: a huge message (a server's whole
        # error page) is not measured whole on every resize.
        fitted = fit_message(message[:SHOWN_AT_MOST], then, self.content_size.width,
                             self.lines)
        if fitted != self.said and not self._error and not PROGRESS.search(message):
            # Cut here ("…"): kept whole for the messages screen (progress lines, soon
            # replaced, are not).
            keep_message(self, self.said)
        self.show(safe(fitted))


class KeysFooter(Footer):
    """A Footer that shows the screen's keys in its first frame, and only keys that fit.

    Textual's Footer draws nothing until the screen announces its bindings, and then
    recomposes a frame later; on the app's first screen that put the keys a few hundred
    milliseconds after everything else. The screen's and the app's bindings are known when
    the Footer is composed, so it may as well draw them then (later changes still recompose).

    Textual's Footer cuts off what does not fit (at 80 columns, the trace screen lost "? help",
    the key that lists all the others). This one leaves out whole keys from the end instead,
    always keeping help.
    """

    def __init__(self, *, drawn_first: bool = False, **kwargs) -> None:
        """`drawn_first`: the screen's first compose draws its keys as one line (`KeysLine`),
        replaced by the keys themselves at the first recompose (the screen announcing its
        bindings, a refresh later). For the app's first screen: ten keys, each a widget with
        its styles, events and task, were a third of the first frame's work."""
        super().__init__(**kwargs)
        self._bindings_ready = True  # Textual's own flag (textual 8): "bindings are known"
        self._draw_first = drawn_first

    def compose(self) -> ComposeResult:
        if self._draw_first and not self._grouped_keys():
            self._draw_first = False
            # Footer.compose yields the keys one by one here (no group: no `with` nesting).
            widgets = list(super().compose())
            keys = [widget for widget in widgets if isinstance(widget, FooterKey)
                    and not widget.has_class("-command-palette")]
            if keys:
                yield KeysLine(keys, compact=self.compact)
            yield from (widget for widget in widgets if widget not in keys)
            return
        self._draw_first = False
        for widget in super().compose():
            if isinstance(widget, FooterKey) and not widget.has_class("-command-palette"):
                # A FooterKey starts compact and is then bound to the Footer's own setting
                # (all but the palette's key, which stays compact): each key's style was
                # worked out three times before the first frame (as made, compact, and not).
                # Given the Footer's setting from the start, once.
                widget.set_reactive(FooterKey.compact, self.compact)
            yield widget

    def _grouped_keys(self) -> bool:
        """Some key shown is in a group (j/k with one label: a KeyGroup and a FooterLabel)."""
        return any(binding.group is not None for _node, binding, _enabled, _tooltip
                   in self.screen.active_bindings.values() if binding.show)

    def on_resize(self) -> None:
        self._fit()

    def on_mount(self) -> None:
        super().on_mount()
        self.call_after_refresh(self._fit)
        if self.query(KeysLine):
            # The screen announces its bindings after its first frame, and that recompose
            # brings the keys themselves; should it never come, they come here.
            self.set_timer(KEYS_LINE_AT_MOST_S, self._keys_instead_of_line)

    async def _keys_instead_of_line(self) -> None:
        if self.query(KeysLine):
            await self.recompose()

    async def recompose(self) -> None:
        await super().recompose()
        self._fit()

    def _fit(self) -> None:
        """Show the keys, in their order, that fit beside help and the palette key."""
        width = self.size.width
        if not width or self.query(KeysLine):  # the line fits its keys itself
            return
        items = [child for child in self.children if not child.has_class("-command-palette")]
        pinned = {id(child) for child in items if _is_help(child)}
        room = width - sum(_cells(child) for child in self.children
                           if child.has_class("-command-palette") or id(child) in pinned)
        for unit in _units(items):
            if any(id(child) in pinned for child in unit):
                continue
            cells = sum(_cells(child) for child in unit)
            fits = cells <= room
            if fits:
                room -= cells
            else:
                room = -1  # keep the order: nothing after a key left out
            for child in unit:
                if child.display != fits:
                    child.display = fits


class KeysLine(FooterKey):
    """A footer's keys drawn by one widget, as its FooterKeys draw them side by side (FooterKey's
    styles apply to it: each key and description in theirs, a disabled key dim), the keys that
    do not fit left out as KeysFooter leaves them out (from the end, help kept). What the
    app's first frame shows; the screen's first recompose of its footer puts the FooterKeys
    in its place (they take clicks and show tooltips: this one does neither)."""

    def __init__(self, keys: list[FooterKey], *, compact: bool) -> None:
        super().__init__("", "", "", "")
        self.set_reactive(FooterKey.compact, compact)
        # Each key: what it shows, its description, whether it is disabled, whether it is help.
        self._keys = [(key.key_display, key.description, key.has_class("-disabled"),
                       _is_help(key)) for key in keys]
        self._shown = [True] * len(self._keys)
        # Each key drawn in the styles of now (three times before the first frame, else):
        # made again once the styles change.
        self._drawn: list[Text] | None = None

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._drawn = None

    def get_content_width(self, container: Size, viewport: Size) -> int:
        self._fit(container.width)
        return self._line().cell_len

    def render(self) -> Text:
        return self._line()

    def on_mouse_down(self) -> None:
        """Not a key: a click does nothing (the keys come a refresh later)."""

    def _fit(self, width: int) -> None:
        """KeysFooter._fit on the line's keys, in `width` (the footer's, less the palette
        key docked at its right): beside help."""
        cells = [part.cell_len for part in self._parts()]
        room = width - sum(cell for cell, key in zip(cells, self._keys, strict=True) if key[3])
        shown = []
        for cell, key in zip(cells, self._keys, strict=True):
            is_help = key[3]
            fits = is_help or cell <= room
            if not is_help:
                room = room - cell if fits else -1  # nothing after a key left out
            shown.append(fits)
        self._shown = shown

    def _line(self) -> Text:
        line = Text()
        for part, shown in zip(self._parts(), self._shown, strict=True):
            if shown:
                line.append_text(part)
        return line

    def _parts(self) -> list[Text]:
        """Each key as FooterKey.render draws it."""
        if self._drawn is None:
            self._drawn = self._draw_parts()
        return self._drawn

    def _draw_parts(self) -> list[Text]:
        key_style = self.get_component_rich_style("footer-key--key")
        description_style = self.get_component_rich_style("footer-key--description")
        key_padding = self.get_component_styles("footer-key--key").padding
        description_padding = self.get_component_styles("footer-key--description").padding
        parts = []
        for key_display, description, disabled, _help in self._keys:
            if description:
                part = Text.assemble(
                    (" " * key_padding.left + key_display + " " * key_padding.right,
                     key_style),
                    (" " * description_padding.left + description
                     + " " * description_padding.right, description_style))
            else:
                part = Text.assemble((key_display, key_style))
            part.stylize_before(self.rich_style + Style(dim=True) if disabled
                                else self.rich_style)
            parts.append(part)
        return parts


def _units(items: list[Widget]) -> list[list[Widget]]:
    """The footer's items as they are shown or left out: a group of keys (j and k) with the
    label after it ("move") is one, so that the keys never show without what they do."""
    units: list[list[Widget]] = []
    for item in items:
        if isinstance(item, FooterLabel) and units and isinstance(units[-1][-1], KeyGroup):
            units[-1].append(item)
        else:
            units.append([item])
    return units


def _is_help(widget: Widget) -> bool:
    return isinstance(widget, FooterKey) and widget.action in ("help", "app.help")


def _cells(widget: Widget) -> int:
    """Columns `widget` takes in the footer's row, worked out whether shown or not."""
    styles = widget.styles
    outside = styles.margin.width + (
        styles.border.spacing.width if styles.border else 0)
    if isinstance(widget, FooterKey | FooterLabel):
        return outside + styles.padding.width + widget.get_content_width(Size(0, 0),
                                                                         Size(0, 0))
    return outside + styles.padding.width + sum(_cells(child) for child in widget.children)


class TitleBar(HorizontalGroup):
    """One line at the top of a screen: what is on show (left) and running figures (right).

    The left part may be given in several forms, longest first: the first that fits beside
    the right part is shown (the last, cut with an ellipsis, where none fits), so that a
    narrow terminal drops what matters least rather than cutting what matters most. The right
    part may be given in several forms too: the longest beside which the left's shortest form
    still fits; where that form is longer than half the bar, the longest that leaves it half
    the bar, or its first `keep` cells (what must stay whole: the model) if those are more.
    """

    def __init__(self, left: Content | str = "", right: Content | str = "", **kwargs) -> None:
        super().__init__(**kwargs)
        self._left = LeanStatic(left, classes="title-left", markup=False)
        self._right = LeanStatic(right, classes="title-right", markup=False, auto_width=True)
        self._left_forms: list[Content] = []
        self._left_keep = 0
        self._right_forms: list[Content] = []

    def compose(self) -> ComposeResult:
        yield self._left
        yield self._right

    def set_left(self, *forms: Content, keep: int = 0) -> None:
        self._left_forms = list(forms)
        self._left_keep = keep
        self._fit_right()
        self._fit_left()

    def set_right(self, *forms: Content) -> None:
        self._right_forms = list(forms)
        self._fit_right()
        self._fit_left()

    def on_resize(self) -> None:
        self._fit_right()
        self._fit_left()

    def _fit_right(self) -> None:
        if not self._right_forms:
            return
        width = self.content_size.width
        if width <= 0:  # not laid out yet: the longest, fitted again later
            self._right.show(self._right_forms[0])
            return
        shortest_left = min((form.cell_length for form in self._left_forms), default=0)
        left = min(shortest_left, max(width // 2, self._left_keep))
        room = width - self._right.styles.padding.width - left
        fits = (form for form in self._right_forms if form.cell_length <= room)
        self._right.show(next(fits, self._right_forms[-1]))

    def _fit_left(self) -> None:
        if not self._left_forms:
            return
        right = self._right.styles.padding.width + (self._right._shown or Content()).cell_length
        room = self.content_size.width - right
        if room <= 0:  # not laid out yet: the longest, fitted again once it is
            self._left.show(self._left_forms[0])
            return
        fits = (form for form in self._left_forms if form.cell_length <= room)
        self._left.show(next(fits, self._left_forms[-1]))
