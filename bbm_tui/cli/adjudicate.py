"""`bbm-tui adjudicate`: settle, in the app, the traces the annotators disagree on."""

from __future__ import annotations

import argparse

from bbm_tui.cli.app import open_app


def command(args: argparse.Namespace) -> int:
    from bbm_tui.ui.app import AnnotateRequest  # Textual: only once the app opens

    return open_app(args, AnnotateRequest("", adjudicate=True))
