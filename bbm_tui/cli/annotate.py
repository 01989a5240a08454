"""`bbm-tui annotate`: label dataset files in the app, as one annotator, with the paper's
protocol or PRM800K's per-step one. The files are read first, so that a bad line is named
here, on stderr."""

from __future__ import annotations

import argparse
import gc
from pathlib import Path

from bbm_tui.cli.app import open_app
from bbm_tui.cli.errors import UsageError, given
from bbm_tui.cli.inputs import check_task, reasoning_cut
from bbm_tui.core.annotation.queue import QueuedTrace, read_queue_file
from bbm_tui.core.dataset.formats import StepCut
from bbm_tui.core.types import ADJUDICATOR


def command(args: argparse.Namespace) -> int:
    annotator = " ".join(args.annotator.split())
    if not annotator or annotator == ADJUDICATOR:
        raise UsageError(f"--annotator: {args.annotator!r} is not a name an annotator can have")
    with given():
        check_task(args.task)
        traces = read_annotation_files(args.files, args.task, args.dataset_format,
                                       reasoning_cut(args))
    from bbm_tui.ui.app import AnnotateRequest  # Textual: after the files (see open_app)

    return open_app(args, AnnotateRequest(annotator, traces, protocol=args.protocol))


def read_annotation_files(files: list[Path], task: str | None,
                          fmt: str | None = None, cut: StepCut | None = None
                          ) -> list[QueuedTrace]:
    """The traces of `bbm-tui annotate`'s files, kept until the process ends. They are then
    frozen out of the cycle collector's sight (gc.freeze): its full passes while the app
    starts walked every row again, a tenth of opening 10,000 traces (bench/annotate_queue.py)."""
    traces = [trace for path in files for trace in read_queue_file(path, task, fmt, cut)]
    gc.freeze()
    return traces
