"""A numbered thought on the main screen: its status glyph, its text (growing as it streams),
its figures, and a mistake finder's mark beside it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.content import Content
from textual.geometry import Region, Size
from textual.reactive import Reactive
from textual.strip import Strip
from textual.style import Style as VisualStyle
from textual.visual import Visual
from textual.widget import Widget, _RenderCache

from bbm_tui.core.textsafe import one_line
from bbm_tui.ui.text import (
    CURSOR,
    DISABLED,
    GLYPH_MISTAKE,
    GLYPH_OK,
    GLYPH_PLAIN,
    GLYPH_STREAMING,
    GLYPH_UNPARSED,
    MUTED,
    safe,
    safe_cut,
    step_meta,
    styled,
)
from bbm_tui.ui.viewmodels.trace import Judgement, Status

if TYPE_CHECKING:
    from bbm_tui.core.store import Step


_GLYPHS: dict[Status, tuple[str, str]] = {
    "plain": (GLYPH_PLAIN, MUTED),
    "ok": (GLYPH_OK, "$text-success"),
    "mistake": (GLYPH_MISTAKE, "bold $text-error"),
    "after": (GLYPH_PLAIN, DISABLED),
}

_JUDGEMENTS: dict[Judgement, tuple[str, str]] = {
    "yes": (f"model: {GLYPH_OK}", "$text-success"),
    "no": (f"model: {GLYPH_MISTAKE}", "bold $text-error"),
    "unparsed": (f"model: {GLYPH_UNPARSED}", "bold $text-warning"),
    "first": (f"model: {GLYPH_MISTAKE} first mistake", "bold $text-error"),
    "pending": (f"model: {GLYPH_STREAMING}", "$accent"),
}


# The longest thought in the dataset has 2,568 characters; past SHOWN_LIMIT (ui/text.py) a
# thought is cut on screen.
GUTTER = 6  # "nnn ✓ ": the number, right-aligned, and the status glyph
# Blank cells in a style of their own (one that changes nothing), so that they are not one run
# with the text after them in an SVG screenshot (see `_gutter`).
_SPACER = "not strike"


class ThoughtView(Widget):
    """One numbered thought: a gutter (number and status glyph), the text wrapped beside it
    with a hanging indent, and a dim line with latency and tokens, and a mistake finder's
    verdict on it ("model: ✓") when there is one; its raw answer shows under it when expanded.

    One widget, drawing its own gutter, because a long trace has hundreds of these and a
    re-layout of the screen costs every widget on it. While the thought streams, a token
    repaints this widget alone, and asks for a re-layout only when the thought grows a line.
    """

    # A thought does not scroll: its virtual size is its size, given by the layout. Textual's
    # own `virtual_size` asks for a layout when it changes, which is just after a layout gave
    # the thought its new height: a second layout of the whole screen, for nothing, for each
    # line a streaming thought gained. Nor a repaint: the layout that changed it drew the
    # thought already (a new size marks it dirty), and the repaint drew every thought a moved
    # window handed on a second time, a frame later (bench/big_store.py).
    virtual_size: Reactive[Size] = Reactive(Size(0, 0), layout=False, repaint=False)

    # Its lines come wrapped already (`_lines`, which the layout needs for the height): not
    # wrapped again when drawn, which took as long as the wrapping itself.
    DEFAULT_CSS = """
    ThoughtView {
        height: auto;
        text-wrap: nowrap;
        text-overflow: clip;
    }
    """

    def __init__(self, number: int, *, streaming: bool = False) -> None:
        # No id: the thoughts pane hands a view on to another step when its window moves
        # (ui/widgets/thought_list.py), and a widget's id cannot change. `step` says which.
        # The classes given here, not set after: a class set works the styles out at once,
        # for a view that is not even mounted yet (a streamed thought's, 0.3 ms a thought).
        super().__init__(classes="thought -streaming" if streaming else "thought")
        self.number = number
        self.streaming = streaming
        self.status: Status = "plain"
        self.step: Step | None = None
        self._raw = ""
        self._note = ""
        self.judgement: Judgement | None = None
        self.judge_raw: str | None = None
        self.expanded = False
        # Presenter mode (a trace screen's P): no latency or token lines, for a clean demo.
        self.presenter = False
        self._lines_cache: tuple[int, list[Content]] | None = None
        # Text appended and not drawn yet (`paint_appended`).
        self._unpainted = False
        # How many of the first lines Textual's render cache holds are still those to draw
        # (`_changed` lowers it, a render raises it), and the style they were drawn in: a
        # thought that grew a line and was laid out again draws only the lines after them.
        self._lines_as_rendered = 0
        self._rendered_style: VisualStyle | None = None

    @classmethod
    def of_step(cls, step: Step, *, wall_clock: bool = True) -> ThoughtView:
        view = cls(step.number)
        view.finish(step, wall_clock=wall_clock)
        return view

    # -- what is on show (for tests and copying)

    @property
    def text(self) -> str:
        return self._raw

    @property
    def shown(self) -> str:
        """The body as drawn: text (with the cursor while streaming) and the dim line."""
        return self._body().plain

    @property
    def meta(self) -> str:
        """The dim line as drawn: latency and tokens (or origin), and the finder's mark."""
        return self._meta().plain

    # -- what the stepper reports

    def append(self, delta: str) -> None:
        """Add streamed text, drawn at the next `paint_appended` (the app's paint clock: one
        frame for what every trace streamed meanwhile)."""
        self._raw += delta
        self._note = ""
        self._unpainted = True

    def paint_appended(self) -> bool:
        """Draw the text appended since it was last drawn; True when the thought took more
        (or fewer) lines for it."""
        return self._unpainted and self._changed()

    def restart(self, reason: str) -> None:
        """A retry after text had streamed: what was shown is void."""
        self._raw = ""
        self._note = f"retrying ({reason})"
        self._changed()

    def finish(self, step: Step, *, wall_clock: bool = True) -> None:
        self.step = step
        self.streaming = False
        self.remove_class("-streaming")
        self._raw = step.text
        self._note = step_meta(step, wall_clock=wall_clock)
        self._changed()

    def show_step(self, step: Step, *, wall_clock: bool = True) -> None:
        """Show another finished step in this view (the window moved): its number and text;
        the finder's mark is cleared, and status and selection stay until the screen
        dresses the view again (`ThoughtList`'s `decorate`). Far cheaper than a new view:
        mounting 40 of them cost two layouts and their styles, most of a key's time."""
        self.number = step.number
        self.step = step
        self._raw = step.text
        self._note = step_meta(step, wall_clock=wall_clock)
        self.judgement = None
        self.judge_raw = None
        self.expanded = False
        self._lines_cache = None
        self._lines_as_rendered = 0
        self.refresh(layout=True)

    def set_status(self, status: Status) -> None:
        if status == self.status:
            return
        self.status = status
        for name in ("plain", "ok", "mistake", "after"):
            self.set_class(name == status, f"-{name}")
        self._changed()

    def set_judgement(self, judgement: Judgement | None, raw: str | None = None) -> None:
        """A finder's verdict on this thought (None: none), and its raw answer."""
        if (judgement, raw) == (self.judgement, self.judge_raw):
            return
        self.judgement = judgement
        self.judge_raw = raw
        if raw is None:
            self.expanded = False
        self._changed()

    def set_expanded(self, expanded: bool) -> None:
        """Show (or hide) the finder's raw answer under the thought."""
        expanded = expanded and self.judge_raw is not None
        if expanded != self.expanded:
            self.expanded = expanded
            self._changed()

    def set_presenter(self, presenter: bool) -> None:
        if presenter != self.presenter:
            self.presenter = presenter
            self._changed()

    # -- drawing

    def _changed(self) -> bool:
        """Redraw the thought after its text or state changed; True when it is laid out
        again (it took more, or fewer, lines than its height). When it keeps its height,
        only the lines that differ are redrawn (a token changes the last line or two of a
        thought of ten or more: redrawing all of them a frame was the biggest part of a
        streaming frame, bench/thinking_stream.py)."""
        self._unpainted = False
        width = self.content_size.width
        cached = self._lines_cache
        before = self._lines(width) if cached and width > 0 else None
        self._lines_cache = None
        after = self._lines(width) if width > 0 else None
        self._lines_as_rendered = min(self._lines_as_rendered, _same_lines(before, after))
        if before is None or after is None or (
                len(before) != len(after)
                and self._height_for(len(after)) != self.content_size.height):
            self.refresh(layout=True)
            return True
        # Its height is kept: its lines are as many, or they grew (or shrank) within the
        # height its row gives it side by side (a thought gains the line another column's
        # thought of its number gained before it: `min-height`, ui/screens/model_column.py).
        # A layout of the whole screen for that one, as for the first, made a third of two
        # columns' layouts while they streamed (bench/side_by_side.py).
        if cached is None or cached[0] != width:  # drawn at another width: all of it
            self.refresh()
            return False
        changed = [Region(0, y, width, 1) for y in range(max(len(before), len(after)))
                   if y >= min(len(before), len(after)) or not _same_line(before[y], after[y])]
        if changed:
            self.refresh(*changed)
        return False

    def _height_for(self, lines: int) -> int:
        """The height of its content a layout would give it for `lines` lines: at least
        its min-height (less its border and padding: box-sizing border-box), where set in
        cells."""
        floor = self.styles.min_height
        if floor is None or not floor.is_cells:
            return lines
        return max(lines, int(floor.value) - self.styles.gutter.height)

    def _meta_line(self) -> str:
        if self.presenter:
            return ""
        return one_line(self._note or ("streaming…" if self.streaming else ""))

    def _meta(self) -> Content:
        dim = DISABLED if self.status == "after" else MUTED
        note = self._meta_line()
        if self.judgement is None:
            return styled(note, f"italic {dim}")
        mark, style = _JUDGEMENTS[self.judgement]
        # The separator in the note's run, so that no run starts with a space (see _gutter).
        return styled(f"{note} · " if note else "", f"italic {dim}").append(styled(mark, style))

    def _body(self) -> Content:
        if self.streaming:
            text = self._shown_text().append(styled(CURSOR, "$accent"))
        elif self._raw:
            text = self._shown_text()
        else:
            text = styled("(empty thought)", f"italic {MUTED}")
        meta = self._meta()
        if meta.plain:
            text = text.append("\n").append(meta)
        if self.expanded and self.judge_raw is not None:
            answer = safe(self.judge_raw.strip()) if self.judge_raw.strip() else styled(
                "(an empty answer)", "italic")
            text = (text.append("\n").append(styled("The model's answer: ", f"bold {MUTED}"))
                    .append(answer.stylize(MUTED)))
        return text

    def _shown_text(self) -> Content:
        """The thought's text, cut at SHOWN_LIMIT characters: wrapping a megabyte on every
        repaint and keypress would freeze the screen (copying still takes all of it)."""
        return safe_cut(self._raw, "y copies the whole thought")

    def _gutter(self) -> Content:
        if self.streaming:
            glyph, style = GLYPH_STREAMING, "$accent"
        else:
            glyph, style = _GLYPHS[self.status]
        # Spaces end a run of one style and never start one: librsvg drops the leading
        # spaces of a run when it draws an SVG screenshot (the text then slides left).
        number = str(self.number)
        return Content.assemble((" " * (3 - len(number)), _SPACER), (f"{number} ", MUTED),
                                (f"{glyph} ", style))

    def _lines(self, width: int) -> list[Content]:
        """The thought drawn at `width`: gutter, then the body with a hanging indent."""
        if self._lines_cache is not None and self._lines_cache[0] == width:
            return self._lines_cache[1]
        body = self._body().wrap(max(width - GUTTER, 8))
        indent = Content.styled(" " * GUTTER, _SPACER)
        lines = [(self._gutter() if i == 0 else indent).append(line)
                 for i, line in enumerate(body)]
        self._lines_cache = (width, lines)
        return lines

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self._lines(width))

    def render(self) -> Content:
        return Content("\n").join(self._lines(self.content_size.width))

    def render_line(self, y: int) -> Strip:
        # Textual renders every line of a widget again when any part of it is dirty; the
        # lines `_changed` marked are redrawn alone (the others are the same strips).
        if self._dirty_regions:
            self._render_dirty_lines()
        return super().render_line(y)

    def _render_content(self) -> None:
        """Textual's render of every line, remembered as drawn (`_lines_as_rendered`)."""
        super()._render_content()
        self._rendered()

    def _rendered(self) -> None:
        self._lines_as_rendered = len(self._render_cache.lines)
        self._rendered_style = self.visual_style

    def _render_dirty_lines(self) -> None:
        """Render the dirty lines into Textual's render cache, in place, when only some lines
        are dirty, or when the thought was laid out again at its width for lines it gained
        (or lost): the lines before them are kept. Otherwise (the whole widget dirty at its
        size, another width or style, a text selection) leave them to Textual, which renders
        them all."""
        cache, size = self._render_cache, self.size
        if self.text_selection is not None:
            return
        if cache.size != size:
            self._render_resized()
            return
        if self.outer_size.region in self._dirty_regions:
            return
        lines = self._lines(size.width)
        if len(cache.lines) != min(len(lines), size.height):
            return
        offset = self.content_offset
        drawn: dict[int, Strip] = {}
        for region in self._dirty_regions:
            for y in region.translate(-offset).line_range:
                if 0 <= y < len(cache.lines) and y not in drawn:
                    strip = self._render_one_line(lines, y)
                    if strip is None:
                        return  # not one line: Textual renders them all
                    drawn[y] = strip
        for y, strip in drawn.items():
            cache.lines[y] = strip
        self._dirty_regions.clear()

    def _render_resized(self) -> None:
        """A thought laid out again for the lines it gained, at the width it was drawn at: a
        paragraph is ten lines and more, and it is laid out for each it gains (about ten a
        second as a reasoning streams), each time rendered whole (bench/thinking_stream.py).
        The lines still as drawn are kept, the others rendered; the same strips a whole
        render draws (tests/ui/test_ui_paint_clock.py)."""
        cache, size = self._render_cache, self.size
        if (cache.size.width != size.width or not cache.lines
                or self.visual_style != self._rendered_style):
            return
        lines = self._lines(size.width)
        if len(lines) != size.height:
            return  # a floor (min-height) or a cut: Textual renders them all
        kept = min(self._lines_as_rendered, len(cache.lines), len(lines))
        strips = list(cache.lines[:kept])
        for y in range(kept, len(lines)):
            strip = self._render_one_line(lines, y)
            if strip is None:
                return
            strips.append(strip)
        self._render_cache = _RenderCache(size, strips)
        self._dirty_regions.clear()
        self._rendered()

    def _render_one_line(self, lines: list[Content], y: int) -> Strip | None:
        """Line y as a whole render draws it (None: it does not draw as one line)."""
        # Under y empty lines: its text's offsets (which a mouse selection reads) say line y,
        # as in a whole render.
        line = Content("\n" * y).append(lines[y])
        strips = Visual.to_strips(self, line, self.size.width, y + 1, self.visual_style)
        return strips[y] if len(strips) == y + 1 else None


def _same_lines(before: list[Content] | None, after: list[Content] | None) -> int:
    """How many of the first lines are drawn the same (none where either is unknown)."""
    if before is None or after is None:
        return 0
    same = 0
    for old, new in zip(before, after, strict=False):
        if not _same_line(old, new):
            break
        same += 1
    return same


def _same_line(old: Content, new: Content) -> bool:
    """The two lines draw the same (Content's == compares the text alone)."""
    return old.plain == new.plain and old.spans == new.spans
