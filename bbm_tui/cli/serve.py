"""`bbm-tui serve`: the annotation queue served to a team's browsers (bbm_tui/serve), and
`bbm-tui users add`: who may sign in. The files are read here first, so that a bad line is
named on stderr before anything is served."""

from __future__ import annotations

import argparse
import ipaddress
import sys
from pathlib import Path

from bbm_tui.cli.errors import UsageError, given
from bbm_tui.cli.inputs import check_task, reasoning_cut
from bbm_tui.core.annotation.queue import read_queue_file
from bbm_tui.core.store import preflight


def command(args: argparse.Namespace) -> int:
    from bbm_tui.serve.users import default_users_path, load_users

    users_path: Path = args.users or default_users_path()
    with given():
        check_task(args.task)
        files = [path.resolve() for path in args.annotate]
        traces = [trace for path in files
                  for trace in read_queue_file(path, args.task, args.dataset_format,
                                               reasoning_cut(args))]
        users = load_users(users_path)
    if not traces:
        raise UsageError("--annotate: the files hold no trace to label")
    if not users:
        raise UsageError(f"{users_path}: no users yet; add one with `bbm-tui users add NAME "
                         f"--role annotator --users {users_path}`")
    preflight()
    from bbm_tui.serve.front import Front, FrontSettings, run_front

    settings = FrontSettings(
        users_path=users_path, app_argv=_app_argv(args, files),
        trusted_proxies=frozenset(args.trusted_proxy or ("127.0.0.1", "::1")),
        dataset=", ".join(path.name for path in files))
    if not _loopback(args.host):
        print(f"bbm-tui serve: listening on {args.host} over plain HTTP; for a team on a "
              "network put it behind a TLS proxy (docs/serve.md).",
              file=sys.stderr)

    def ready(url: str) -> None:
        print(f"bbm-tui serve: {len(traces)} traces for {len(users)} users on "
              f"http://{args.host}:{args.port}/ (Ctrl+C stops)", file=sys.stderr, flush=True)

    run_front(Front(settings), args.host, args.port, ready)
    return 0


def _app_argv(args: argparse.Namespace, files: list[Path]) -> list[str]:
    """The app process's command line: this Python, `served-app`, the queue's options."""
    argv = [sys.executable, "-m", "bbm_tui", "served-app", *map(str, files),
            "--protocol", args.protocol, "--split", args.split]
    if args.task:
        argv += ["--task", args.task]
    if args.dataset_format:
        argv += ["--format", args.dataset_format]
    for task_file in getattr(args, "task_files", None) or ():
        argv += ["--task-file", str(Path(task_file).resolve())]
    return argv


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"
