"""`bbm-tui merge`: the OUT files of `--shard I/N` runs joined into what one machine writes
(core/batch/shard.py)."""

from __future__ import annotations

import argparse
import sys

from bbm_tui.cli.errors import EXIT_OK, UsageError, given
from bbm_tui.cli.phrases import os_problem, where
from bbm_tui.core.batch.shard import merge_outputs


def command(args: argparse.Namespace) -> int:
    try:
        with given():  # a conflict, a second split, a line that is not a row: usage errors
            merged = merge_outputs(args.files, args.out, allow_missing=args.allow_missing)
    except OSError as error:
        raise UsageError(os_problem(error, args.out)) from error
    shards = ", ".join(merged.shards) or "none"
    print(f"{merged.rows} rows from {len(args.files)} files (shards {shards}) written to "
          f"{where(args.out)}" + (f"; {merged.duplicates} rows held twice, kept once"
                                  if merged.duplicates else ""), file=sys.stderr)
    if merged.missing:  # --allow-missing: the partial file was asked for, and is said
        print(f"bbm-tui: a partial file: no file held a row of shard "
              f"{', '.join(merged.missing)}", file=sys.stderr)
    return EXIT_OK
