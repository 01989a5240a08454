"""`bbm-tui served-app`: the app as `bbm-tui serve` runs it in a browser, one process per
browser (through textual-serve). Not for typing: its user and role come from the front, in
the environment, never from the browser; an annotator gets only their own queue, a lead the
agreement, every annotator's progress and the adjudication."""

from __future__ import annotations

import argparse
import gc
import os

from bbm_tui.cli.errors import UsageError, given
from bbm_tui.cli.inputs import check_task, config_of, reasoning_cut
from bbm_tui.core.annotation.queue import read_queue_file
from bbm_tui.core.store import preflight
from bbm_tui.serve import ROLE_ENV, USER_ENV

ROLES = ("annotator", "lead")


def command(args: argparse.Namespace) -> int:
    name = " ".join(os.environ.get(USER_ENV, "").split())
    role = os.environ.get(ROLE_ENV, "")
    if not name or role not in ROLES:
        raise UsageError("served-app is started by `bbm-tui serve` for a signed-in user")
    with given():
        check_task(args.task)
        traces = [trace for path in args.files
                  for trace in read_queue_file(path, args.task, args.dataset_format,
                                               reasoning_cut(args))]
    config = config_of(args)
    preflight()
    gc.freeze()
    gc.disable()  # until the first frame (see cli/app.py's open_app)
    from bbm_tui.ui.queues import AnnotateRequest
    from bbm_tui.ui.run import run_app

    request = AnnotateRequest(name, traces, protocol=args.protocol, served=True,
                              lead=role == "lead")
    return run_app(config, annotate=request)
