"""`bbm-tui merge`: the OUT files of `--shard I/N` runs joined into what one machine writes
(core/batch/shard.py)."""

from __future__ import annotations

import argparse
import sys

from bbm_tui.cli.errors import EXIT_OK, UsageError, fail, given
from bbm_tui.cli.phrases import os_problem
from bbm_tui.core.batch.shard import merge_outputs


def command(args: argparse.Namespace) -> int:
    try:
        with given():  # a conflict, a second split, a line that is not a row: usage errors
            merged = merge_outputs(args.files, args.out)
    except OSError as error:
        raise UsageError(os_problem(error, args.out)) from error
    shards = ", ".join(merged.shards) or "none"
    print(f"{merged.rows} rows from {len(args.files)} files (shards {shards}) written to "
          f"{args.out}" + (f"; {merged.duplicates} rows held twice, kept once"
                           if merged.duplicates else ""), file=sys.stderr)
    if merged.missing:
        fail(f"no file held a row of shard {', '.join(merged.missing)}: if that machine's "
             "run wrote rows, merge its file too (merging again replaces nothing: choose a "
             "new --out)")
    return EXIT_OK
