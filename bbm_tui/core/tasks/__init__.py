"""Tasks (docs/DESIGN.md §3, §13): the paper's five and the user's own, in one shape.

A task is data: how its question is written (a template with `{input}`), the prompt every
generation prompt begins with (a few-shot prompt, or our zero-shot instruction), the answer
regex, how an answer is compared with its target, and optionally few-shot mistake-finding
prompts in the paper's JSON shape and a description for the zero-shot finders. The paper's
five are built from the shipped files the first time one is asked for; the user's come from
task files (core/tasks/files.py) and are put here with `use_tasks` when the app or a command
starts, so every part of the code finds any task by its name. The questions of the field's
step-level datasets (ProcessBench, PRM800K, ...: core/dataset/formats/) belong by default to a
task named after their format: zero-shot, described in prompts/ours/field_tasks.json.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache, cached_property
from pathlib import Path
from typing import Any

from bbm_tui.core import patterns
from bbm_tui.core.errors import UserError
from bbm_tui.core.resources import prompts_dir
from bbm_tui.core.tasks.compare import EXACT, REGEX, Comparison, exact_match, parse_compare

# The paper's answer regex, applied to one step at a time (a step is a single line).
PAPER_ANSWER_PATTERN = r"(?<=[Tt]he answer is).*$"
ANSWER_RE = re.compile(PAPER_ANSWER_PATTERN)
# Where a question template puts the question's text.
INPUT_FIELD = "{input}"
DEFAULT_QUESTION_TEMPLATE = "Q: {input}"


@dataclass(frozen=True, eq=False)
class Task:
    """One task: how its question is written, what precedes it, how answers are read and
    scored. `prompt` is the text every generation prompt begins with (the few-shot prompt, or
    with `few_shot` False our zero-shot instruction); `finding_prompts` is one task's entry in
    the shape of the paper's mistake_finding_prompts.json (None: it has none); `path` is the
    task file it was read from (None: one of the paper's, or a task a session stored).

    A task file's prompt files are read when the task first needs them (`prompt_source`,
    `finding_source`), not when it loads: `stats`, `export` and the sessions list never use
    a prompt, and a huge or blocking prompt file must not stop them (issue 33)."""

    name: str
    title: str
    question_template: str
    # The prompt's text, or None: `prompt_source` reads it when it is first needed.
    prompt_text: str | None
    few_shot: bool = True
    answer_pattern: str = PAPER_ANSWER_PATTERN
    compare: str = EXACT
    description: str = ""
    # The finding prompts themselves, unless `finding_source` reads them when first needed.
    finding_given: Mapping[str, Any] | None = field(default=None, repr=False)
    multiple_choice: bool = False
    path: Path | None = None
    # A file of questions for it (dataset JSONL, or rows of `input` and `target`), which the
    # new-session screen lists as it lists the paper's dataset.
    questions_path: Path | None = None
    # Readers of a task file's prompt files (picklable: tasks go to batch workers); each
    # raises the task file's own error (naming file, line and key) when the file cannot be
    # used.
    prompt_source: Callable[[], str] | None = field(default=None, repr=False)
    finding_source: Callable[[], Mapping[str, Any]] | None = field(default=None, repr=False)

    @cached_property
    def prompt(self) -> str:
        if self.prompt_text is not None:
            return self.prompt_text
        if self.prompt_source is None:
            raise ValueError(f"the task {self.name!r} has no prompt")
        return self.prompt_source()

    @cached_property
    def finding_prompts(self) -> Mapping[str, Any] | None:
        if self.finding_source is not None:
            return self.finding_source()
        return self.finding_given

    @property
    def has_finding_prompts(self) -> bool:
        """Whether it brings few-shot finding prompts, known without reading them."""
        return self.finding_source is not None or self.finding_given is not None

    def read_files(self) -> Task:
        """The task, its prompt files read (and checked) now: what a command about to use
        them calls before its first call or session, so a bad file stops it there."""
        _ = self.prompt, self.finding_prompts
        return self

    def _content(self) -> tuple[object, ...]:
        return (self.name, self.title, self.question_template, self.prompt, self.few_shot,
                self.answer_pattern, self.compare, self.description, self.finding_prompts,
                self.multiple_choice)

    def __eq__(self, other: object) -> bool:
        # What the task is (prompt texts read if need be), not where it was read from.
        if not isinstance(other, Task):
            return NotImplemented
        return self is other or self._content() == other._content()

    def __hash__(self) -> int:
        # Equal tasks have equal hashes without reading a prompt file.
        return hash((self.name, self.title, self.question_template, self.answer_pattern,
                     self.compare))

    @property
    def is_paper(self) -> bool:
        """One of the paper's five (a user's task may not take their names)."""
        return self.name in TASK_NAMES

    def question(self, input_text: str) -> str:
        """The question line(s) that follow the prompt: the template with `{input}` replaced
        (for the paper's five, exactly as the paper wrote them). Other braces are text."""
        return self.question_template.replace(INPUT_FIELD, input_text)

    @property
    def question_prefix(self) -> str:
        """What the template puts before the question's text."""
        return self.question_template.split(INPUT_FIELD, 1)[0]

    def extract_answer(self, step: str) -> str | None:
        """The answer a step states, stripped, or None when it states none: the answer
        regex's first group that matched where it has groups, else its whole match."""
        if self.answer_pattern == PAPER_ANSWER_PATTERN:
            return extract_answer(step)
        match = patterns.search(self.answer_pattern, step, self.where("answer_regex"))
        if match is None:
            return None
        if not match.re.groups:
            return match.group(0).strip()
        # The first group that took part: a pattern of alternatives has a group in each.
        return next((found for found in match.groups() if found is not None), "").strip()

    def is_correct(self, answer: str | None, target: str) -> bool:
        """The answer matches the target by the task's comparison (the paper's: exact)."""
        return answer is not None and _comparison(self.compare).matches(
            answer, target, self.where("compare"))

    def same_answer(self, one: str | None, other: str | None) -> bool:
        """Whether two answers (of two models) are one: by the task's comparison, each way,
        except where that reads one as a pattern (`regex`): a model's output is never a
        pattern (`.*` would agree with anything), so there they are compared as text. No
        answer is one only with no answer."""
        if one is None or other is None:
            return one is other
        if _comparison(self.compare).kind == REGEX:
            return exact_match(one, other)
        return self.is_correct(one, other) or self.is_correct(other, one)

    def where(self, key: str) -> str:
        """Where a key of the task comes from, for messages: its file, or the session that
        stored it."""
        source = str(self.path) if self.path is not None else f"the task {self.name!r}"
        return f"{source}: {key!r}"


@cache
def _comparison(text: str) -> Comparison:
    return parse_compare(text)


# --------------------------------------------------------------------------- the paper's five

# name, title, multiple choice, what the paper writes before the question's text.
_PAPER = (
    ("word_sorting", "Word sorting", False,
     "Q: Sort the following words alphabetically: List: "),
    ("tracking_shuffled_objects", "Tracking shuffled objects", True, "Q: "),
    # logical_deduction inputs already hold their own "Q:" line and the options.
    ("logical_deduction", "Logical deduction", True, ""),
    ("multistep_arithmetic", "Multistep arithmetic", False, "Q: "),
    ("dyck_languages", "Dyck languages", False,
     "Q: Complete the rest of the sequence, making sure that the parentheses are closed "
     "properly. Input: "),
)
TASK_NAMES: tuple[str, ...] = tuple(name for name, *_ in _PAPER)
PAPER_TITLES: dict[str, str] = {name: title for name, title, *_ in _PAPER}


def _shipped_json(*parts: str) -> Any:
    """A shipped prompts/ JSON file, parsed (json imported here: the app's first frame, which
    lists the tasks by name, reads none)."""
    import json

    return json.loads(prompts_dir().joinpath(*parts).read_bytes().decode("utf-8"))


@cache
def paper_finding_prompts() -> dict[str, dict[str, Any]]:
    """prompts/mistake_finding_prompts.json, as shipped."""
    return _shipped_json("mistake_finding_prompts.json")


@cache
def paper_tasks() -> dict[str, Task]:
    """The paper's five, from the shipped prompts (read once, when first asked for)."""
    descriptions = _shipped_json("ours", "paper_task_descriptions.json")
    findings = paper_finding_prompts()
    tasks = {}
    for name, title, multiple_choice, prefix in _PAPER:
        prompt = (prompts_dir() / "generation_prompts" / f"{name}_prompt.txt").read_bytes()
        tasks[name] = Task(name, title, prefix + INPUT_FIELD, prompt.decode("utf-8"),
                           description=descriptions[name], finding_given=findings[name],
                           multiple_choice=multiple_choice)
    return tasks


@cache
def zero_shot_instruction() -> str:
    """Ours: what a task without a few-shot prompt begins its generation prompts with
    (prompts/ours/zero_shot_instruction.txt, no trailing newline, like the paper's prompts)."""
    return (prompts_dir() / "ours" / "zero_shot_instruction.txt").read_bytes().decode("utf-8")


# --------------------------------------------------------------------------- the field's

# The tasks the questions of the field's step-level datasets belong to unless --task says
# otherwise: one per format, named after it, zero-shot (no few-shot prompt, so the zero-shot
# finders and the critic judge them).
FIELD_TITLES: dict[str, str] = {
    "processbench": "ProcessBench",
    "prm800k": "PRM800K",
    "mr-gsm8k": "MR-GSM8K",
    "mr-ben": "MR-BEN",
    "math-shepherd": "Math-Shepherd",
    "prmbench": "PRMBench",
    "trl": "TRL stepwise",
    "reasoning": "Reasoning",
    "deltabench": "DeltaBench",
}
FIELD_TASK_NAMES: tuple[str, ...] = tuple(FIELD_TITLES)


@cache
def field_tasks() -> dict[str, Task]:
    """The field's tasks, from prompts/ours/field_tasks.json (read when first asked for)."""
    data = _shipped_json("ours", "field_tasks.json")
    return {
        name: Task(name, title, INPUT_FIELD, zero_shot_instruction(), few_shot=False,
                   answer_pattern=data[name]["answer_regex"], compare=data[name]["compare"],
                   description=data[name]["description"])
        for name, title in FIELD_TITLES.items()
    }


# --------------------------------------------------------------------------- the user's tasks

_user_tasks: dict[str, Task] = {}


def use_tasks(tasks: Iterable[Task]) -> None:
    """The user's tasks from now on (the config folder's and those named on the command
    line), replacing any put here before."""
    chosen = {task.name: task for task in tasks}
    shadowing = sorted(set(chosen) & set(TASK_NAMES))
    if shadowing:
        raise ValueError(f"a task of one's own may not be called {shadowing[0]!r}, the name "
                         "of one of the paper's tasks")
    _user_tasks.clear()
    _user_tasks.update(chosen)


def user_tasks() -> tuple[Task, ...]:
    return tuple(_user_tasks.values())


def task_names() -> tuple[str, ...]:
    """Every task there is: the paper's five in the paper's order, then the user's, then the
    field's formats' (a user's task of the same name wins)."""
    users = tuple(name for name in _user_tasks if name not in TASK_NAMES)
    return TASK_NAMES + users + tuple(name for name in FIELD_TASK_NAMES if name not in users)


def task_titles() -> dict[str, str]:
    """The title of every task one starts sessions on (the paper's and the user's; not the
    field's formats', whose questions come in their files), without reading the paper's
    prompts."""
    return {**PAPER_TITLES, **{task.name: task.title for task in _user_tasks.values()}}


def task_order(name: str) -> tuple[int, int, str]:
    """A sort key: the paper's five in the paper's order, then the others by name."""
    if name in TASK_NAMES:
        return (0, TASK_NAMES.index(name), "")
    return (1, 0, name)


class UnknownTaskError(UserError, ValueError):
    title = "Unknown task"

    def __init__(self, name: str, message: str | None = None) -> None:
        super().__init__(message or f"unknown task {name!r}; known tasks: "
                         f"{', '.join(task_names())}")
        self.name = name


def get_task(task: Task | str) -> Task:
    """The task itself (a Task is handed back as it is), or UnknownTaskError."""
    if isinstance(task, Task):
        return task
    if task in TASK_NAMES:
        return paper_tasks()[task]
    if task in _user_tasks:
        return _user_tasks[task]
    if task in FIELD_TITLES:
        return field_tasks()[task]
    raise UnknownTaskError(task)


def task_name(task: Task | str) -> str:
    return task.name if isinstance(task, Task) else task


def extract_answer(step: str) -> str | None:
    """The answer a step states by the paper's regex, stripped, or None when it states none.
    The regex's `.*$` matches only on the step's last line, so the search starts there: from
    the start, every "the answer is" on an earlier line was tried to its line's end (a 160 KB
    step of them with a line break near its end took 10 s)."""
    end = len(step) - 1 if step.endswith("\n") else len(step)
    match = ANSWER_RE.search(step, step.rfind("\n", 0, end) + 1)
    return match.group(0).strip() if match else None


def is_correct(answer: str | None, target: str) -> bool:
    """The paper's rule: answer == target, both sides stripped, as the paper's counts require
    (two tracking rows store their answer with a leading space)."""
    return answer is not None and exact_match(answer, target)
