"""The app's annotation work (docs/DESIGN.md §12): a queue of traces to label (`bbm-tui annotate`,
or the palette's "Annotate files"), the traces the annotators disagree on (`bbm-tui adjudicate`,
"Adjudicate"), and every session's labels to a file ("Export labels"). The app holds one
`Queues`; its workers are the app's, so that a failure reaches the app's one handler, each
named by its description."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual.app import SystemCommand

from bbm_tui.ui.context import context
from bbm_tui.ui.screens.base import SplashScreen
from bbm_tui.ui.screens.new_session import NewSessionScreen

if TYPE_CHECKING:
    from textual.app import App

    from bbm_tui.core.annotation.queue import QueuedTrace
    from bbm_tui.core.store import Store
    from bbm_tui.ui.screens.annotate_dialogs import ExportRequest, QueueRequest


@dataclass(frozen=True)
class AnnotateRequest:
    """A queue to open at start: an annotator over traces read already (`bbm-tui annotate`),
    or, with `adjudicate`, the traces the annotators disagree on."""

    annotator: str
    traces: list[QueuedTrace] = field(default_factory=list)
    adjudicate: bool = False
    # The labelling protocol: the paper's, or PRM800K's per-step one.
    protocol: str = "paper"
    # Served to a browser (`bbm-tui serve`): the signed-in user's queue and nothing else;
    # with `lead`, the agreement and every annotator's progress over `traces` instead, from
    # which the lead adjudicates.
    served: bool = False
    lead: bool = False

    def __repr__(self) -> str:
        # Short: a worker's description is built from its arguments' reprs, and the default
        # one of 10^4 traces took over a second (bench/annotate_queue.py).
        what = "adjudicate" if self.adjudicate else f"{len(self.traces)} traces"
        return f"AnnotateRequest({self.annotator!r}, {what})"


class Queues:
    """The annotation queues, the adjudication and the export of one app."""

    def __init__(self, app: App[Any]) -> None:
        self.app = app

    def commands(self) -> Iterator[SystemCommand]:
        """The palette's commands for them (they have no key)."""
        yield SystemCommand("Annotate files", "Label dataset-format files with the paper's "
                            "protocol, as one annotator", self.annotate)
        yield SystemCommand("Adjudicate", "Settle the traces the annotators disagree on",
                            self.adjudicate)
        yield SystemCommand("Export labels", "Every session's labels to a file (JSONL, "
                            "the field's step-level formats, DPO pairs, Markdown, CSV)",
                            self.export)

    def open(self, request: AnnotateRequest) -> None:
        """Open the queue `request` asks for, over the bottom screen."""
        self.app.run_worker(self._show(request), name="show_queue", group="open",
                            exclusive=True, exit_on_error=False,
                            description="Opening the queue")

    async def _show(self, request: AnnotateRequest) -> None:
        app, ask = self.app, context(self.app)
        store = await ask.wait_for_store()
        if store is None:
            return
        if request.adjudicate:
            await self._adjudicate(store, request.served)
            return
        if request.lead:
            from bbm_tui.ui.screens.agreement import AgreementScreen

            await ask.pop_to(1)
            await app.push_screen(AgreementScreen(team=request.traces))
            return
        from bbm_tui.core.annotation.queue import AnnotationQueue
        from bbm_tui.ui.screens.annotate import AnnotateScreen, PerStepAnnotateScreen

        queue = await asyncio.to_thread(AnnotationQueue, store, request.annotator,
                                        request.traces, protocol_name=request.protocol)
        await ask.pop_to(1)
        screen = PerStepAnnotateScreen if queue.per_step else AnnotateScreen
        await app.push_screen(screen(queue))

    async def _adjudicate(self, store: Store, served: bool = False) -> None:
        from bbm_tui.core.annotation.adjudication import AdjudicationQueue
        from bbm_tui.ui.screens.adjudicate import AdjudicateScreen

        app, ask = self.app, context(self.app)
        adjudication = await asyncio.to_thread(AdjudicationQueue.open, store)
        if not adjudication.items:
            app.notify("No trace to adjudicate: the annotators agree everywhere (or "
                       "fewer than two labelled any trace).", markup=False, timeout=8)
            if isinstance(app.screen, SplashScreen):
                await app.push_screen(NewSessionScreen(ask.config))
            return
        if not served:
            await ask.pop_to(1)
        await app.push_screen(AdjudicateScreen(adjudication))

    def adjudicate(self, served: bool = False) -> None:
        """The adjudication, over the bottom screen (served: over the lead's agreement
        screen, which Esc comes back to)."""
        if context(self.app).store_error is None:
            self.open(AnnotateRequest("", adjudicate=True, served=served))

    async def annotate(self) -> None:
        """Ask for the files and the annotator, read them, open the queue."""
        from bbm_tui.core.types import DEFAULT_ANNOTATOR
        from bbm_tui.ui.screens.annotate_dialogs import OpenQueueDialog

        if context(self.app).store_error is not None:
            return

        def chosen(request: QueueRequest | None) -> None:
            if request is not None:
                self.app.run_worker(self._read(request), name="read_queue", group="open",
                                    exclusive=True, exit_on_error=False,
                                    description="Reading the files")

        await self.app.push_screen(OpenQueueDialog(DEFAULT_ANNOTATOR), chosen)

    async def _read(self, request: QueueRequest) -> None:
        from bbm_tui.core.annotation.queue import read_queue_file
        from bbm_tui.core.dataset import DatasetError
        from bbm_tui.core.tasks import UnknownTaskError

        try:
            traces = [trace for path in request.paths
                      for trace in await asyncio.to_thread(read_queue_file, Path(path))]
        except (DatasetError, UnknownTaskError) as error:
            self.app.notify(str(error), title="Cannot annotate", severity="error",
                            markup=False, timeout=10)
            return
        self.open(AnnotateRequest(request.annotator, traces))

    async def export(self) -> None:
        """Every session's labels to a file, as `bbm-tui export` writes it."""
        from bbm_tui.core.annotation.export import FORMATS
        from bbm_tui.ui.screens.annotate_dialogs import ExportDialog

        if context(self.app).store_error is not None:
            return

        def chosen(request: ExportRequest | None) -> None:
            if request is not None:
                self.app.run_worker(self._export(request.fmt, Path(request.path).expanduser()),
                                    name="export", group="export", exit_on_error=False,
                                    description="Exporting")

        await self.app.push_screen(ExportDialog(FORMATS), chosen)

    async def _export(self, fmt: str, path: Path) -> None:
        from bbm_tui.core.annotation.export import export_file
        from bbm_tui.core.dataset import DatasetError

        store = await context(self.app).wait_for_store()
        if store is None:
            return
        try:
            result = await asyncio.to_thread(export_file, store, fmt, path)
        except DatasetError as error:  # refused: the message names the file and why
            self.app.notify(str(error), title="Not exported", severity="error", markup=False,
                            timeout=10)
            return
        except OSError as error:
            self.app.notify(f"{path}: cannot write: {error.strerror}", title="Not exported",
                            severity="error", markup=False)
            return
        note = f" ({result.skipped} unlabelled left out)" if result.skipped else ""
        if result.why_none:
            note = f" ({result.why_none})"
        self.app.notify(f"{result.written} written to {path}{note}", title="Exported",
                        markup=False)
