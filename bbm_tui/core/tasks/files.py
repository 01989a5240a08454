"""Task files (docs/DESIGN.md §13): a task of one's own, written in TOML.

    name = "gsm8k"                       # how commands, rows' `task` keys and sessions name it
    title = "Grade-school math"          # how the app shows it (default: the name)
    prompt = "gsm8k_prompt.txt"          # a few-shot prompt, relative to this file; leave it
                                         # out for zero-shot (our instruction then)
    question = "Q: {input}"              # the question line(s); {input} is the question's text
    answer_regex = '(?<=[Tt]he answer is).*$'   # the paper's, by default
    compare = "number"                   # exact | number | choice | regex:PATTERN
    finding_prompts = "gsm8k_finding.json"      # optional: few-shot finding prompts, in the
                                                # shape of one task's entry of the paper's file
    description = "Word problems ..."    # for the zero-shot finders and the critic
    questions = "gsm8k_questions.jsonl"  # optional: questions the app lists for the task

A broken file gets one message naming the file, the line and the key, never a traceback; in
the config folder the other files still load. The whole definition, prompt texts included, is
what a session stores (`task_definition`), so it reopens with the prompt it was made with.
"""

from __future__ import annotations

import json
import re
import stat
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from bbm_tui.core.errors import UserError
from bbm_tui.core.patterns import PatternError, PatternTimeout, check_pattern, search
from bbm_tui.core.readfile import FileReadError, kind_of, read_regular_file
from bbm_tui.core.tasks import (
    DEFAULT_QUESTION_TEMPLATE,
    INPUT_FIELD,
    PAPER_ANSWER_PATTERN,
    TASK_NAMES,
    Task,
    zero_shot_instruction,
)
from bbm_tui.core.tasks.compare import CHOICE, EXACT, CompareError, parse_compare
from bbm_tui.core.tomltext import (
    key_line,
    toml_error_message,
    toml_text,
    too_deep_message,
    too_long_number_message,
)

KEYS = ("name", "title", "prompt", "question", "answer_regex", "compare", "finding_prompts",
        "description", "questions")
# A task file is a few keys; its prompts are files of their own (MAX_TEXT_FILE_BYTES each).
MAX_TASK_FILE_BYTES = 2**20
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")

# The paper's finding prompts, per method: the template key, its messages key, and whether
# it asks about one thought (`{current_step}`).
FINDING_KEYS = {
    "DIRECT_TEMPLATE": ("DIRECT_MESSAGES", False),
    "DIRECT_PERSTEP_TEMPLATE": ("DIRECT_PERSTEP_MESSAGES", True),
    "COT_PERSTEP_TEMPLATE": ("COT_PERSTEP_MESSAGES", True),
    "COT_TEMPLATE": ("COT_MESSAGES", False),
}
_ROLES = ("system", "user", "assistant")


class TaskFileError(UserError, ValueError):
    """A broken task file: the file, the line (where known) and the key, in one message
    (`reason` is the problem alone)."""

    title = "A task file did not load"

    def __init__(self, path: Path, reason: str, *, line: int | None = None,
                 key: str | None = None) -> None:
        self.path = path
        self.line = line
        self.key = key
        self.reason = reason
        where = f"{path}: line {line}: " if line is not None else f"{path}: "
        what = f"{key!r}: " if key is not None else ""
        super().__init__(f"{where}{what}{reason}")


@dataclass
class _Reader:
    """One task file being read: its values, its text (for line numbers) and its folder."""

    path: Path
    text: str
    data: dict[str, Any]

    def fail(self, key: str, message: str) -> TaskFileError:
        return TaskFileError(self.path, message, line=key_line(key, self.text), key=key)

    def string(self, key: str, default: str | None = None) -> str | None:
        value = self.data.get(key, default)
        if value is not None and not isinstance(value, str):
            raise self.fail(key, f"must be a string, not {_toml_type(value)}")
        return value

    def file(self, key: str, *, regular_now: bool = True) -> Path | None:
        """A file the key names, relative to the task file's folder and inside it (task files
        are shared: one must not read /proc/self/environ, ~/.ssh or a symlink out of its
        folder and send it to a model); it must be a regular file (checked now, or with
        `regular_now` False when it is read: read_regular_file refuses any other)."""
        value = self.string(key)
        if value is None:
            return None
        if not value.strip():
            raise self.fail(key, "names no file (leave the key out instead)")
        named = Path(value)
        if named.is_absolute() or value.startswith("~") or ".." in named.parts:
            raise self.fail(key, f"{value!r} must be a path relative to the task file's folder "
                            "and inside it (no absolute path, no '~', no '..'), e.g. "
                            "\"prompt.txt\" or \"prompts/prompt.txt\"")
        folder = self.path.parent
        found = (folder / named).resolve()
        if not found.is_relative_to(folder):
            raise self.fail(key, f"{value!r} leads out of the task file's folder (to {found}, "
                            "through a symbolic link); copy the file into the folder")
        if not found.exists():
            raise self.fail(key, f"no such file: {found}")
        if not regular_now:
            return found
        mode = found.stat().st_mode
        if not stat.S_ISREG(mode):
            raise self.fail(key, f"{found} is {kind_of(mode)}, not a regular file")
        return found

    def text_of(self, key: str, found: Path) -> str:
        try:
            raw = read_regular_file(found)
        except FileNotFoundError:
            raise self.fail(key, f"no such file: {found}") from None
        except FileReadError as error:
            raise self.fail(key, f"{found} {error}") from None
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail(key, f"{found} is not UTF-8 text") from None


def _toml_type(value: object) -> str:
    names = {bool: "true or false", int: "a number", float: "a number", list: "a list",
             dict: "a table"}
    return names.get(type(value), type(value).__name__)


def load_task_file(path: Path | str) -> Task:
    """Read and check one task file; TaskFileError says what is wrong with it, and where."""
    import tomllib

    path = Path(path).expanduser()
    try:
        raw = read_regular_file(path, MAX_TASK_FILE_BYTES)
    except FileNotFoundError:
        raise TaskFileError(path, "no such task file") from None
    except FileReadError as error:
        raise TaskFileError(path, f"the task file {error}") from None
    try:
        text = toml_text(raw)
    except UnicodeDecodeError:
        raise TaskFileError(path, "the task file is not UTF-8 text") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise TaskFileError(path, toml_error_message(error)) from None
    except RecursionError:  # tomllib recurses on each level of nesting
        raise TaskFileError(path, too_deep_message(text)) from None
    except ValueError:  # an integer of more digits than Python converts
        raise TaskFileError(path, too_long_number_message(text)) from None
    return _task_from(_Reader(path.resolve(), text, data))


def _task_from(reader: _Reader) -> Task:
    unknown = [key for key in reader.data if key not in KEYS]
    if unknown:
        raise reader.fail(unknown[0], f"unknown key (the keys: {', '.join(KEYS)})")
    name = _name(reader)
    title = (reader.string("title") or "").strip() or name
    question = reader.string("question", DEFAULT_QUESTION_TEMPLATE) or ""
    if INPUT_FIELD not in question:
        raise reader.fail("question", "the template has no {input} (where the question's "
                          "text goes), e.g. \"Q: {input}\"")
    # Prompt files are read when first needed (Task.prompt): a command that uses no prompt
    # never reads them, however large they are or whatever they are.
    prompt_file = reader.file("prompt", regular_now=False)
    answer_pattern = _answer_pattern(reader)
    compare = reader.string("compare", EXACT) or ""
    try:
        parse_compare(compare)
    except CompareError as error:
        raise reader.fail("compare", str(error)) from None
    finding_file = reader.file("finding_prompts", regular_now=False)
    description = " ".join((reader.string("description") or "").split())
    return Task(
        name, title, question, None if prompt_file else zero_shot_instruction(),
        few_shot=prompt_file is not None, answer_pattern=answer_pattern, compare=compare,
        description=description, multiple_choice=compare == CHOICE, path=reader.path,
        questions_path=reader.file("questions"),
        prompt_source=partial(_prompt_text, reader, prompt_file) if prompt_file else None,
        finding_source=(partial(_finding_prompts, reader, finding_file) if finding_file
                        else None),
    )


def _name(reader: _Reader) -> str:
    if "name" not in reader.data:
        raise TaskFileError(reader.path, "missing: every task needs a name, e.g. "
                            "name = \"gsm8k\"", key="name")
    name = reader.string("name") or ""
    if not _NAME.fullmatch(name):
        raise reader.fail("name", f"{name!r} is not a task name: letters, digits, '_', '-' "
                          "and '.', starting with a letter or digit (at most 64)")
    paper = next((task for task in TASK_NAMES if task.casefold() == name.casefold()), None)
    if paper is not None:
        raise reader.fail("name", f"{name!r} is one of the paper's tasks ({paper}); give "
                          "yours a name of its own")
    return name


def _prompt_text(reader: _Reader, found: Path) -> str:
    # The paper's prompts end without a line break, and the question follows a blank line;
    # an editor's final newline would add a second.
    text = reader.text_of("prompt", found).replace("\r\n", "\n").rstrip("\n")
    if not text.strip():
        raise reader.fail("prompt", f"{found} is empty (leave the key out for zero-shot)")
    return text


def _answer_pattern(reader: _Reader) -> str:
    pattern = reader.string("answer_regex", PAPER_ANSWER_PATTERN) or ""
    try:
        check_pattern(pattern)
    except PatternError as error:
        raise reader.fail("answer_regex", f"not a valid regular expression: {error}") from None
    where = f"{reader.path}: 'answer_regex'"
    try:
        reads_nothing = search(pattern, "", where) is not None or any(
            _states_nothing(search(pattern, text, where)) for text in _THOUGHTS_WITH_NO_ANSWER)
    except PatternTimeout as error:
        raise reader.fail("answer_regex", str(error).removeprefix(f"{where}: ")) from None
    if reads_nothing:
        raise reader.fail("answer_regex", "matches a thought with no text, or empty text in "
                          "any thought, so every trace would end at Thought 1 with no answer; "
                          "it must match only the thought that states the answer, e.g. "
                          "'(?<=[Tt]he answer is).*$'")
    return pattern


# Thoughts that state no answer: a pattern that matches empty text in them (`(?<=.)`, `\b`)
# would read an answer "" in every thought.
_THOUGHTS_WITH_NO_ANSWER = ("a", "I read the question, word by word.")


def _states_nothing(match: Any) -> bool:
    """The match reads an empty answer (its whole text, or the group it would give, blank)."""
    if match is None:
        return False
    if not match.re.groups:
        return not match.group(0).strip()
    found = next((group for group in match.groups() if group is not None), "")
    return not found.strip()


def _finding_prompts(reader: _Reader, found: Path) -> dict[str, Any]:
    text = reader.text_of("finding_prompts", found)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise reader.fail("finding_prompts", f"{found}: line {error.lineno}, column "
                          f"{error.colno}: malformed JSON: {error.msg}") from None
    except RecursionError:
        raise reader.fail("finding_prompts", f"{found}: nested too deeply to read (malformed "
                          "JSON)") from None
    problem = finding_prompts_problem(data)
    if problem is not None:
        raise reader.fail("finding_prompts", f"{found}: {problem}")
    return data


def finding_prompts_problem(data: object) -> str | None:
    """What keeps `data` from being one task's entry of the paper's finding prompts, if
    anything: templates with their few-shot messages, the fields {input}, {steps} and (for
    one thought) {current_step}."""
    if not isinstance(data, dict):
        return "must be a JSON object: one task's entry of the paper's finding prompts"
    if not any(key in data for key in FINDING_KEYS) and all(
            isinstance(value, dict) for value in data.values()) and data:
        return ("holds a map of tasks; give one task's entry (the object with "
                f"{', '.join(FINDING_KEYS)} and their messages)")
    known = set(FINDING_KEYS) | {messages for messages, _ in FINDING_KEYS.values()}
    unknown = sorted(set(data) - known)
    if unknown:
        return f"unknown key {unknown[0]!r} (the keys: {', '.join(sorted(known))})"
    if not any(key in data for key in FINDING_KEYS):
        return f"has no template ({', '.join(FINDING_KEYS)})"
    for template_key, (messages_key, one_thought) in FINDING_KEYS.items():
        if (template_key in data) != (messages_key in data):
            have, missing = ((template_key, messages_key) if template_key in data
                             else (messages_key, template_key))
            return f"{have} needs {missing} beside it"
        if template_key in data:
            problem = _template_problem(data[template_key], one_thought)
            if problem is not None:
                return f"{template_key}: {problem}"
            problem = _messages_problem(data[messages_key])
            if problem is not None:
                return f"{messages_key}: {problem}"
    return None


def _template_problem(template: object, one_thought: bool) -> str | None:
    if not isinstance(template, str):
        return "the template must be a string"
    try:
        parsed = [(name, spec, conversion) for _, name, spec, conversion
                  in string.Formatter().parse(template) if name is not None]
    except ValueError as error:
        return f"the template's braces do not pair up ({error}); write a literal brace twice"
    for name, spec, conversion in parsed:
        # Only plain fields: a format spec can ask for a 2 GB padding ({steps:>2000000000}),
        # fail on text ({steps:d}) or send a repr ({input!r}).
        if spec or conversion:
            written = "{" + name + (f"!{conversion}" if conversion else "") + (
                f":{spec}" if spec else "") + "}"
            return (f"the template's field {written} has a conversion or format spec; only "
                    f"plain fields such as {{{name}}} are filled")
    fields = {name for name, _, _ in parsed}
    allowed = {"input", "steps", "current_step"} if one_thought else {"input", "steps"}
    strange = sorted(fields - allowed)
    if strange:
        return (f"the template has a field {{{strange[0]}}} it cannot fill (its fields: "
                f"{', '.join('{' + name + '}' for name in sorted(allowed))})")
    if "steps" not in fields:
        return "the template has no {steps} (where the thoughts go)"
    return None


def _messages_problem(messages: object) -> str | None:
    if not isinstance(messages, list):
        return "must be a list of messages"
    for number, message in enumerate(messages, start=1):
        if not (isinstance(message, dict) and message.get("role") in _ROLES
                and isinstance(message.get("content"), str) and len(message) == 2):
            return (f"message {number} must be {{\"role\": \"user\" | \"assistant\" | "
                    "\"system\", \"content\": \"...\"}")
    return None


# --------------------------------------------------------------------------- the user's tasks


@dataclass
class LoadedTasks:
    """The user's tasks: the config folder's that loaded, then those named on the command
    line (one named there wins over a folder's of the same name); `problems` are the folder's
    files that did not load, each with its message."""

    tasks: list[Task] = field(default_factory=list)
    problems: list[TaskFileError] = field(default_factory=list)


def load_task_folder(folder: Path) -> LoadedTasks:
    """Every `*.toml` in `folder` (none when there is no folder), by file name; a broken file
    is a problem, and the others still load."""
    loaded = LoadedTasks()
    try:
        paths = sorted(path for path in folder.glob("*.toml") if path.is_file())
    except OSError:
        return loaded
    taken: dict[str, Path] = {}
    for path in paths:
        try:
            task = load_task_file(path)
        except TaskFileError as problem:
            loaded.problems.append(problem)
            continue
        if task.name in taken:
            text = path.read_text(encoding="utf-8", errors="replace")
            loaded.problems.append(TaskFileError(
                task.path or path, f"{task.name!r} is the name of the task in "
                f"{taken[task.name]} too; give each task its own", line=key_line("name", text),
                key="name"))
            continue
        taken[task.name] = path
        loaded.tasks.append(task)
    return loaded


def load_user_tasks(folder: Path | None, files: Sequence[Path | str] = ()) -> LoadedTasks:
    """The config folder's tasks and those of `files` (named on the command line). A named
    file that does not load raises TaskFileError: it was asked for by name."""
    loaded = load_task_folder(folder) if folder is not None else LoadedTasks()
    named = [load_task_file(path) for path in files]
    names = {task.name for task in named}
    loaded.tasks = [task for task in loaded.tasks if task.name not in names] + named
    return loaded


# --------------------------------------------------------------------------- stored definitions


def task_definition(task: Task) -> dict[str, Any]:
    """Everything a task is, as JSON-ready data (what a session stores)."""
    return {
        "name": task.name,
        "title": task.title,
        "question": task.question_template,
        "prompt": task.prompt,
        "few_shot": task.few_shot,
        "answer_regex": task.answer_pattern,
        "compare": task.compare,
        "description": task.description,
        "finding_prompts": task.finding_prompts,
        "multiple_choice": task.multiple_choice,
        "path": None if task.path is None else str(task.path),
    }


# Where the file was is not what the task is: moving the file changes no digest.
_NOT_CONTENT = ("path",)


def task_digest(task: Task) -> str:
    """SHA-256 of the task's content, prompt texts included: two tasks with one digest
    generate and judge alike."""
    content = {key: value for key, value in task_definition(task).items()
               if key not in _NOT_CONTENT}
    text = json.dumps(content, sort_keys=True, ensure_ascii=False, separators=(",", ":"),
                      allow_nan=False)
    import hashlib  # here: it loads OpenSSL, which the app's first frame need not wait for

    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def task_from_definition(data: Mapping[str, Any]) -> Task:
    """A task as a session stored it; ValueError when the stored data is not one."""
    try:
        finding = data.get("finding_prompts")
        if finding is not None and finding_prompts_problem(finding) is not None:
            raise ValueError(finding_prompts_problem(finding))
        parse_compare(str(data["compare"]))
        check_pattern(str(data["answer_regex"]))
        path = data.get("path")
        return Task(
            str(data["name"]), str(data["title"]), str(data["question"]), str(data["prompt"]),
            few_shot=bool(data["few_shot"]), answer_pattern=str(data["answer_regex"]),
            compare=str(data["compare"]), description=str(data.get("description", "")),
            finding_given=finding, multiple_choice=bool(data.get("multiple_choice")),
            path=Path(path) if isinstance(path, str) else None,
        )
    except (KeyError, TypeError, PatternError, CompareError) as error:
        raise ValueError(f"not a stored task definition: {error}") from None

