"""The command line's shape: one module per command behind one table, one place that says a
problem (every error a person can act on shares one base), and imports that stay lazy: a
command brings only what it needs, `--json` never rich, and no command litellm or Textual
that does not call a model or open the app."""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from bbm_tui.cli import COMMANDS, build_parser, main
from bbm_tui.cli.errors import EXIT_FAILURE, EXIT_USAGE, UsageError, given, say_problem
from bbm_tui.core.errors import UserError
from bbm_tui.core.store import DATABASE_NAME, StoreError

ROOT = Path(__file__).resolve().parents[1]


def test_every_command_is_one_module_in_the_table() -> None:
    parser = build_parser(["find"])
    [commands] = [action for action in parser._actions
                  if isinstance(action, argparse._SubParsersAction)]
    assert set(commands.choices) | {None} == set(COMMANDS)
    for name in COMMANDS.values():
        module = importlib.import_module(f"bbm_tui.cli.{name}")
        assert callable(module.command), name


def test_the_cores_errors_share_one_base_with_a_title_and_a_message() -> None:
    from bbm_tui.core.batch.runner import BatchStop
    from bbm_tui.core.config import ConfigError
    from bbm_tui.core.dataset import DatasetError
    from bbm_tui.core.llm import LLMError
    from bbm_tui.core.prompts.finding import MethodError
    from bbm_tui.core.tasks import UnknownTaskError
    from bbm_tui.core.tasks.files import TaskFileError
    from bbm_tui.core.tasks.verify import NoVerifierError

    errors = [
        DatasetError(Path("rows.jsonl"), "malformed JSON", 3),
        UnknownTaskError("sums"),
        NoVerifierError("prm800k"),
        TaskFileError(Path("sums.toml"), "not a string", line=2, key="name"),
        ConfigError("config.toml: line 1: a broken line"),
        StoreError("store.sqlite3: the disk is full"),
        BatchStop("openai/x needs an API key"),
        MethodError("no prompts for critic here"),
        LLMError("auth", "the provider rejected the key sk-0123456789abcdefghij"),
    ]
    for error in errors:
        assert isinstance(error, UserError), type(error)
        assert error.title and error.title != UserError.title, type(error)
        assert error.message == str(error) and error.message, type(error)
    # The located sentence is the message; the problem alone is kept apart.
    assert errors[0].message == "rows.jsonl:3: malformed JSON"
    assert errors[0].reason == "malformed JSON"
    assert "the task verifiers check the paper's five tasks only" in errors[2].message


def test_one_place_says_every_problem(capsys: pytest.CaptureFixture[str]) -> None:
    """Inside `given()`, a problem with what the person gave is a usage error (exit 2),
    whichever part of the core found it; elsewhere a failure (exit 1); the line is redacted."""
    with pytest.raises(UsageError) as raised, given():
        raise StoreError("store.sqlite3: cannot be opened")
    assert say_problem(raised.value) == EXIT_USAGE
    assert say_problem(StoreError("key sk-0123456789abcdefghijkl leaked")) == EXIT_FAILURE
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "bbm-tui: store.sqlite3: cannot be opened"
    assert err[1].startswith("bbm-tui: key ") and "sk-0123456789abcdefghijkl" not in err[1]


def test_a_core_error_from_any_command_is_one_line(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "a folder"
    folder.mkdir()
    (tmp_path / "home").mkdir(exist_ok=True)
    (tmp_path / "home" / DATABASE_NAME).write_text("not sqlite", encoding="utf-8")
    assert main(["sessions"]) == EXIT_FAILURE
    assert main(["stats", str(folder)]) == EXIT_USAGE
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and all(line.startswith("bbm-tui: ") for line in err), err
    assert "Traceback" not in "".join(err)


def run_fresh(script: str) -> subprocess.CompletedProcess[str]:
    """`script` run by a fresh interpreter in the checkout, which must end well."""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=ROOT, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    return done


def imported_by(*code: str) -> set[str]:
    """The modules a fresh interpreter holds after running `code` (the project's and the
    heavy libraries' names)."""
    script = "\n".join([*code, "import sys", "held = sorted(sys.modules)",  # before json's
                         "import json", "print(json.dumps(held))"])
    done = run_fresh(script)
    return set(json.loads(done.stdout.splitlines()[-1]))


def test_the_package_brings_no_command_until_one_is_run() -> None:
    """What a spawned worker process and `--help` pay for: the parser, the table, the errors."""
    modules = imported_by("import bbm_tui.cli")
    commands = {f"bbm_tui.cli.{name}" for name in COMMANDS.values()}
    assert not modules & commands
    assert not {name for name in modules if name.split(".")[0] in
                ("rich", "textual", "litellm", "sqlite3")}


def test_a_json_report_never_imports_rich_nor_a_headless_command_litellm(
        tmp_path: Path) -> None:
    rows = ROOT / "dataset" / "word_sorting.jsonl"
    for args in (["stats", str(rows), "--json"], ["verify", str(rows), "--json"]):
        modules = imported_by(
            "import contextlib, io, os, sys",
            f"os.environ['BBM_TUI_HOME'] = {str(tmp_path / 'home')!r}",
            "from bbm_tui.cli import main",
            "with contextlib.redirect_stdout(io.StringIO()):",
            f"    assert main({args!r}) == 0")
        heavy = {name.split(".")[0] for name in modules} & {"rich", "textual", "litellm"}
        assert heavy == set(), (args, heavy)


def test_opening_the_app_imports_only_what_its_first_screen_needs(tmp_path: Path) -> None:
    """Everything `bbm-tui` (no command) runs before the app's first frame: the parser, the
    task files, the config, the store's preflight, the app's module. The dataset formats, the
    trace session, the model layer, the store's queries, OpenSSL (hashlib) and the records and
    named values of the store and the calls (core/records.py) are imported after that frame,
    where they are used (bench/first_frame.py: they cost it ~90 ms, the records ~3.5 ms); so
    are the task files' reader when there is no task file, the redaction (for what goes
    wrong), Textual's checkboxes (the task and model pane's, filled after the frame), json
    and importlib.resources (for the shipped prompt files, read when a task is used)."""
    modules = imported_by(
        "import os",
        f"os.environ['BBM_TUI_HOME'] = {str(tmp_path / 'home')!r}",
        f"os.environ['BBM_TUI_CONFIG'] = {str(tmp_path / 'missing.toml')!r}",
        "from bbm_tui.cli import build_parser",
        "from bbm_tui.cli.inputs import config_of, use_task_files",
        "args = build_parser([]).parse_args([])",
        "use_task_files(args)",
        "config_of(args)",
        "import bbm_tui.cli.app",
        "from bbm_tui.core.store import preflight",
        "preflight()",
        "import bbm_tui.ui.app")
    late = {"bbm_tui.core.dataset", "bbm_tui.core.dataset.formats", "bbm_tui.core.llm",
            "bbm_tui.core.trace.session", "bbm_tui.core.annotation.export",
            "bbm_tui.core.generation.stepper", "bbm_tui.core.store.store", "hashlib", "sqlite3",
            "regex", "bbm_tui.core.records", "bbm_tui.core.tasks.files", "bbm_tui.core.redact",
            "textual.widgets._toggle_button", "json", "importlib.resources"}
    assert modules & late == set()
    assert "bbm_tui.ui.screens.new_session" in modules  # the first screen itself


def test_opening_the_app_builds_no_commands_options() -> None:
    """With no command named (the app opens), each command is its name and help line only
    (bench/first_frame.py: building every command's options cost ~10 ms of the start); a
    command named builds its parser whole."""
    def run_parser(argv: list[str]) -> argparse.ArgumentParser:
        [commands] = [action for action in build_parser(argv)._actions
                      if isinstance(action, argparse._SubParsersAction)]
        return commands.choices["run"]

    assert [action.dest for action in run_parser(["--task", "dyck"])._actions] == ["help"]
    assert "out" in [action.dest for action in run_parser(["run"])._actions]
    with pytest.raises(SystemExit):
        build_parser(["typo"]).parse_args(["typo"])


def test_bbm_tui_alone_builds_no_commands(capsys: pytest.CaptureFixture[str]) -> None:
    """`bbm-tui` with nothing after it (the app): not even the commands' names are added
    (bench/first_frame.py: ~2 ms of the start), and the app gets the same options as with
    the commands there; a mistyped command still lists them."""
    alone = build_parser([])
    assert not [action for action in alone._actions
                if isinstance(action, argparse._SubParsersAction)]
    with_commands = build_parser(["--task", "dyck"]).parse_args([])
    assert vars(alone.parse_args([])) == vars(with_commands)
    assert alone.parse_args([]).command is None
    with pytest.raises(SystemExit):
        main_parser = build_parser(["typo"])
        main_parser.parse_args(["typo"])
    assert "invalid choice: 'typo'" in capsys.readouterr().err


def test_opening_the_app_builds_none_of_the_records() -> None:
    """The store's and the calls' enums and records (core/records.py) are not on the way to
    the app's first frame (bench/first_frame.py: ~3.5 ms); the shared types are."""
    modules = imported_by("from bbm_tui.cli.inputs import config_of", "import bbm_tui.ui.app")
    assert "bbm_tui.core.types" in modules
    assert "bbm_tui.core.records" not in modules


def test_bbm_tui_alone_reads_its_start_with_the_collector_off() -> None:
    """`bbm-tui` alone (the app): the cycle collector is off from the start of `main`, so the
    parser, the config and the task table are read without its passes (bench/first_frame.py:
    ~7 ms of the start), until the app's first frame (ui/run.py turns it on); where the app
    never opens (no terminal here) it is on again after; a command runs with it on."""
    script = "\n".join([
        "import gc, sys",
        "seen = {}",
        "def hook(event, args):",
        "    if event == 'import' and args[0] == 'bbm_tui.cli.inputs' and 'start' not in seen:",
        "        seen['start'] = gc.isenabled()",
        "sys.addaudithook(hook)",
        "from bbm_tui.cli import main",
        "code = main([])",
        "print(code, seen['start'], gc.isenabled())",
        "import bbm_tui.cli.stats as stats",
        "def command(args):",
        "    seen['stats'] = gc.isenabled()",
        "    return 0",
        "stats.command = command",
        "print(main(['stats', 'dataset/word_sorting.jsonl']), seen['stats'], gc.isenabled())",
    ])
    done = run_fresh(script)
    assert "the app needs a terminal" in done.stderr
    assert done.stdout.split() == ["2", "False", "True", "0", "True", "True"]
