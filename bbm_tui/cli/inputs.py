"""What the commands read and check before they work: the user's tasks, the config, the
values of the options they share, and the files they are about to replace. A problem with
any of them is the person's to fix: a usage error (exit code 2)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from bbm_tui.cli.errors import UsageError, fail, given
from bbm_tui.core.config import Config, load_config, tasks_folder
from bbm_tui.core.errors import InvalidValue
from bbm_tui.core.tasks import get_task, use_tasks
from bbm_tui.core.types import MAX_TEMPERATURE, MIN_TEMPERATURE, ModelSpec

if TYPE_CHECKING:
    from bbm_tui.core.dataset.formats import StepCut
    from bbm_tui.core.llm.prefix import PrefixSettings


def use_task_files(args: argparse.Namespace) -> None:
    """Read the user's tasks (the config folder's tasks/, then every --task-file) so that
    every command and the app know them by name. A named file that does not load stops the
    command (exit code 2); a folder's file that does not load is named, on stderr (the app
    shows it too), and the other tasks load. With one --task-file and no --task, that task
    is the one meant."""
    named = getattr(args, "task_files", None) or []
    folder = tasks_folder()
    if not named and not _may_hold_tasks(folder):
        # Nothing of one's own to read: the task files' reader is not even imported (on the
        # way to the app's first frame, with its TOML and JSON checks: bench/first_frame.py).
        args.task_problems = []
        use_tasks([])
        return
    from bbm_tui.core.tasks.files import load_user_tasks

    with given():
        loaded = load_user_tasks(folder, named)
    args.task_problems = [str(problem) for problem in loaded.problems]
    for problem in args.task_problems:
        fail(f"{problem} (that task is left out; the others load)")
    use_tasks(loaded.tasks)
    if len(named) == 1 and getattr(args, "task", None) is None and hasattr(args, "task"):
        args.task = loaded.tasks[-1].name


def _may_hold_tasks(folder: Path) -> bool:
    """Whether the tasks folder has a `*.toml` in it (what load_task_folder reads); an
    unreadable or missing folder holds none, as there."""
    try:
        return any(True for _ in folder.glob("*.toml"))
    except OSError:
        return False


def check_task(name: str | None) -> None:
    """--task, if given, names a task (UnknownTaskError otherwise)."""
    if name is not None:
        get_task(name)


def config_of(args: argparse.Namespace) -> Config:
    """The config file, with what was typed (--model, --api-base, --mode, --logprobs,
    --router, --one-call) over it; a broken config file, or a router file that cannot be
    used or has no group of each model given, is a usage error."""
    with given():
        # Models side by side (`--model A --model B`): the first is the configured one.
        config = load_config().with_overrides(
            model=_first(args.model), api_base=_first(args.api_base), mode=_first(args.mode),
            logprobs=getattr(args, "logprobs", None), router=getattr(args, "router", None),
            one_call=getattr(args, "one_call", None),
            split=getattr(args, "split", None),
            thinking_effort=getattr(args, "thinking_effort", None),
            thinking_budget=getattr(args, "thinking_budget", None),
            temperature=_temperature(args),
            chat_template=_chat_template(args),
        )
        if config.router is not None:
            if as_list(getattr(args, "api_base", None)):
                raise UsageError("--api-base and --router: the router file's deployments name "
                                 "their servers (api_base in each one's litellm_params); leave "
                                 "out --api-base, or --router")
            check_router_groups(config.router, as_list(args.model) or [config.model])
    return config


def _temperature(args: argparse.Namespace) -> float | None:
    """--temperature, checked as the config's `temperature` is (None: not given)."""
    value = getattr(args, "generation_temperature", None)
    if value is not None and not (MIN_TEMPERATURE <= value <= MAX_TEMPERATURE):
        raise UsageError(f"--temperature must be from {MIN_TEMPERATURE:g} to "
                         f"{MAX_TEMPERATURE:g} (got {value:g})")
    return value


def _chat_template(args: argparse.Namespace) -> str | None:
    """The app's --chat-template (a string; backtrack's and anchors' own are read as Path)."""
    given = getattr(args, "chat_template", None)
    return given if isinstance(given, str) else None


def prefix_sampling(args: argparse.Namespace, *, logprobs: bool = True) -> PrefixSettings:
    """--temperature, --top-p and --chat-template of the commands that go on from a prefix of
    a thinking trace's reasoning (backtrack --mode thinking, anchors). Raises InvalidValue."""
    # Here, not at the top: every command reads this module, few call a model.
    from bbm_tui.core.llm.prefix import PrefixSettings

    if not 0.0 <= args.temperature <= 2.0:
        raise InvalidValue(f"--temperature must be from 0 to 2 (got {args.temperature:g})")
    if args.top_p is not None and not 0.0 < args.top_p <= 1.0:
        raise InvalidValue(f"--top-p must be above 0 and at most 1 (got {args.top_p:g})")
    if args.chat_template is not None and not args.chat_template.is_file():
        raise InvalidValue(f"--chat-template {args.chat_template}: no such file")
    return PrefixSettings(args.temperature, args.top_p, logprobs=logprobs)


def check_router_groups(router: str, models: Sequence[str]) -> None:
    """Each model names a model group of the router file (read here, before any call)."""
    from bbm_tui.core.llm.router import read_router_file

    groups = read_router_file(router).groups
    for model in models:
        if model not in groups:
            raise UsageError(f"{router} has no model group {model!r}: give --model one of "
                             f"{', '.join(groups)}")


def model_specs(args: argparse.Namespace, config: Config) -> list[ModelSpec]:
    """The models a command given --model once or more runs: the config's where none was
    given. --api-base and --mode pair with the models in order, or one goes for all. A
    count that pairs with nothing, or a model given twice, is a usage error."""
    models = as_list(args.model) or [config.model]
    if len(set(models)) < len(models):
        raise UsageError("--model: each model once (a model given twice would write the "
                         "same rows twice)")
    paired = []
    for option, values, default in (("--api-base", as_list(args.api_base), config.api_base),
                                    ("--mode", as_list(args.mode), config.mode)):
        if len(values) not in (0, 1, len(models)):
            raise UsageError(f"{option} given {len(values)} times for {len(models)} models: "
                             "give it once for all of them, or once for each in order")
        paired.append(values if len(values) == len(models) and len(models) > 1
                      else [values[0] if values else default] * len(models))
    bases, modes = paired
    return [ModelSpec(model, base or None, mode, router=config.router)
            for model, base, mode in zip(models, bases, modes, strict=True)]


def as_list(value: object) -> list:
    """An option given once (a value), several times (a list) or not at all (None)."""
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def _first(value: object) -> object:
    return value[0] if isinstance(value, list) else value


def check_json_beside(json_wanted: bool, out: Path | None, option: str) -> None:
    """--json prints one object to standard output: not where the rows go already."""
    from bbm_tui.cli.phrases import to_stdout  # see check_replaced_output

    if json_wanted and to_stdout(out):
        raise UsageError(f"--json and {option} - would both write to standard output: give "
                         f"{option} a file, or leave out --json (the table then goes to "
                         "standard error)")


def check_replaced_output(path: Path, force: bool, inputs: Sequence[Path] = (), *,
                          command: str = "export", flag: str = "--out") -> None:
    """What every file written whole is checked for: not the store, an input, a database, a
    special file; not an existing file unless --force (the message names `command` and the
    `flag` that gave the file)."""
    # Imported here: opening the app imports this module, and these bring the dataset
    # formats, the trace session and the model layer, which its first frame need not wait
    # for (bench/first_frame.py).
    from bbm_tui.core.annotation.export import check_not_a_database
    from bbm_tui.core.dataset.outfile import check_not_replacing, check_output_path
    from bbm_tui.core.store import default_path

    with given():
        check_output_path(path, store_path=default_path(), inputs=inputs)
        check_not_a_database(path)
        if not force:
            check_not_replacing(path, command, flag)


def reasoning_cut(args: argparse.Namespace) -> StepCut:
    """How the command cuts a reasoning it reads into steps (--split): the thinking
    generator's own split rules, so that an imported trace is cut as a live one."""
    # Imported here, as above: not before the app's first frame.
    from bbm_tui.core.generation.cuts import step_cut

    return step_cut(args.split)
