"""Tasks of one's own (docs/DESIGN.md §13): task files read and checked, each broken one with one
message naming the file, the line and the key; answers compared as the task says; the
definition a session stores, and its digest; the shipped examples."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bbm_tui.core.prompts.generation import next_step_prompt
from bbm_tui.core.tasks import (
    FIELD_TASK_NAMES,
    PAPER_ANSWER_PATTERN,
    TASK_NAMES,
    UnknownTaskError,
    get_task,
    task_names,
    use_tasks,
    user_tasks,
    zero_shot_instruction,
)
from bbm_tui.core.tasks.compare import (
    CompareError,
    choice_letter,
    first_number,
    parse_compare,
)
from bbm_tui.core.tasks.files import (
    TaskFileError,
    load_task_file,
    load_task_folder,
    load_user_tasks,
    task_definition,
    task_digest,
    task_from_definition,
)

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "tasks"


@pytest.fixture(autouse=True)
def no_user_tasks():
    yield
    use_tasks([])


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


# --------------------------------------------------------------------------- a good file


def test_a_complete_task_file(tmp_path: Path) -> None:
    write(tmp_path, "prompt.txt", "Solve it.\n\nQ: 1 + 1\nThought 1: So the answer is 2.\n\n")
    write(tmp_path, "qs.jsonl", '{"input": "2 + 2", "target": "4"}\n')
    finding = json.loads((EXAMPLES / "school_math_finding.json").read_text(encoding="utf-8"))
    write(tmp_path, "finding.json", json.dumps(finding))
    path = write(tmp_path, "sums.toml", """\
name = "sums"
title = "Sums"
prompt = "prompt.txt"
question = "Add: {input} = ?"
answer_regex = 'answer: (.*)$'
compare = "number"
finding_prompts = "finding.json"
description = '''Add
    numbers.'''
questions = "qs.jsonl"
""")
    task = load_task_file(path)
    assert (task.name, task.title, task.few_shot, task.compare) == ("sums", "Sums", True, "number")
    # The editor's trailing line breaks go: the paper's prompts end without one.
    assert task.prompt == "Solve it.\n\nQ: 1 + 1\nThought 1: So the answer is 2."
    assert task.question("3 + {4}") == "Add: 3 + {4} = ?"
    assert task.description == "Add numbers."
    assert task.finding_prompts == finding
    assert task.questions_path == tmp_path / "qs.jsonl"
    assert task.path == path
    assert not task.is_paper and not task.multiple_choice
    # The answer regex's group where it has one.
    assert task.extract_answer("So the answer: $1,000.") == "$1,000."
    assert task.extract_answer("So the answer is 3") is None
    assert task.is_correct("$1,000.", "1000")


def test_the_defaults_are_the_papers_and_zero_shot(tmp_path: Path) -> None:
    task = load_task_file(write(tmp_path, "t.toml", 'name = "t"\n'))
    assert task.title == "t"
    assert task.question_template == "Q: {input}"
    assert task.answer_pattern == PAPER_ANSWER_PATTERN
    assert task.compare == "exact"
    assert task.finding_prompts is None and task.questions_path is None
    assert not task.few_shot and task.prompt == zero_shot_instruction()
    assert task.extract_answer("so the answer is  7 ") == "7"
    assert task.is_correct(" 7", "7") and not task.is_correct("7.", "7")


def test_the_zero_shot_instruction_comes_before_the_question(tmp_path: Path) -> None:
    """The prompt of a zero-shot task is exactly our instruction + blank line + question +
    the thoughts, as for the paper's tasks (written out here, not built by the code)."""
    use_tasks([load_task_file(write(tmp_path, "t.toml", 'name = "t"\nquestion = "Q: {input}"'))])
    assert next_step_prompt("t", "Is 9 odd?", ["9 = 2 * 4 + 1."]) == (
        "Answer the question below by reasoning step by step. Write your reasoning as "
        "numbered thoughts, one thought per line, each beginning with its label: Thought 1, "
        "Thought 2, and so on. When you know the answer, write a last thought that ends with "
        '"So the answer is" followed by the answer.\n\n'
        "Q: Is 9 odd?\nThought 1: 9 = 2 * 4 + 1.\nThought 2:")


def test_registered_tasks_are_found_by_name_after_the_papers(tmp_path: Path) -> None:
    task = load_task_file(write(tmp_path, "t.toml", 'name = "mine"\n'))
    use_tasks([task])
    assert get_task("mine") is task and user_tasks() == (task,)
    # The user's, then the tasks of the field's formats (processbench, ...).
    assert task_names() == (*TASK_NAMES, "mine", *FIELD_TASK_NAMES)
    use_tasks([])
    with pytest.raises(UnknownTaskError, match="'mine'"):
        get_task("mine")


# --------------------------------------------------------------------------- broken files


BROKEN = [
    # (the file, the line, the key, words of the message)
    ('name = "t"\nanswer_regex = "(unclosed"\n', 2, "answer_regex",
     "not a valid regular expression: missing ), unterminated subpattern at position 0"),
    ('name = "t"\nanswer_regex = ".*"\n', 2, "answer_regex", "matches a thought with no text"),
    # Empty text at a position in any thought (issue 33, item 15): an answer "" at Thought 1.
    ('name = "t"\nanswer_regex = "(?<=.)"\n', 2, "answer_regex", "or empty text in any"),
    ('name = "t"\nanswer_regex = \'\\b\'\n', 2, "answer_regex", "or empty text in any"),
    ('name = "t"\nanswer_regex = \'(?<=a)(x?)\'\n', 2, "answer_regex", "or empty text in any"),
    ('name = "t"\n\nprompt = "nowhere.txt"\n', 3, "prompt", "no such file: "),
    ('name = "t"\ncompare = "fuzzy"\n', 2, "compare",
     "unknown comparison 'fuzzy' (one of: exact, number, choice, regex:PATTERN)"),
    ('name = "t"\ncompare = "regex:(a"\n', 2, "compare", "not a valid regular expression"),
    ('title = "x"\nname = "word_sorting"\n', 2, "name",
     "'word_sorting' is one of the paper's tasks (word_sorting)"),
    ('name = "Dyck_Languages"\n', 1, "name", "one of the paper's tasks (dyck_languages)"),
    ('name = "t"\nquestion = "Q: {question}"\n', 2, "question", "the template has no {input}"),
    ('name = "t"\nmodel = "x"\n', 2, "model", "unknown key (the keys: name, title, prompt"),
    ('name = "two words"\n', 1, "name", "is not a task name"),
    ('name = 3\n', 1, "name", "must be a string, not a number"),
    ('name = "t"\ndescription = ["a"]\n', 2, "description", "must be a string, not a list"),
    ('name = "t"\nfinding_prompts = "none.json"\n', 2, "finding_prompts", "no such file"),
    ('name = "t"\nquestions = "none.jsonl"\n', 2, "questions", "no such file"),
]


@pytest.mark.parametrize(("text", "line", "key", "words"), BROKEN,
                         ids=[case[2] + "-" + str(i) for i, case in enumerate(BROKEN)])
def test_each_broken_file_says_file_line_and_key(tmp_path: Path, text: str, line: int,
                                                 key: str, words: str) -> None:
    path = write(tmp_path, "broken.toml", text)
    with pytest.raises(TaskFileError) as raised:
        load_task_file(path)
    message = str(raised.value)
    assert message.startswith(f"{path.resolve()}: line {line}: {key!r}: "), message
    assert words in message
    assert "Traceback" not in message


def test_a_utf8_byte_order_mark_is_read(tmp_path: Path) -> None:
    """Some editors write one first; tomllib read it as an "Invalid statement"."""
    path = tmp_path / "bom.toml"
    path.write_bytes(b"\xef\xbb\xbf" + b'name = "bom"\ntitle = "With a BOM"\n')
    assert load_task_file(path).title == "With a BOM"


def test_toml_syntax_errors_say_their_line(tmp_path: Path) -> None:
    path = write(tmp_path, "bad.toml", 'name = "t"\ntitle = "unterminated\n')
    with pytest.raises(TaskFileError) as raised:
        load_task_file(path)
    assert str(raised.value) == (
        f"{path}: line 2, column 22: invalid TOML: Illegal character '\\n'")


@pytest.mark.parametrize(("nested", "line"), [
    ('name = "t"\nx = ' + "{a = " * 5000 + "1" + "}" * 5000 + "\n", 2),
    ("x = " + "[" * 100_000 + "\n", 1),
])
def test_nesting_too_deep_says_its_line(tmp_path: Path, nested: str, line: int) -> None:
    """tomllib recurses on each level: a RecursionError, "internal error ... please report
    it", before."""
    path = write(tmp_path, "deep.toml", nested)
    with pytest.raises(TaskFileError) as raised:
        load_task_file(path)
    assert str(raised.value) == f"{path}: line {line}: nested too deeply to read (invalid TOML)"


def test_finding_prompts_nested_too_deep(tmp_path: Path) -> None:
    write(tmp_path, "deep.json", "[" * 100_000)
    path = write(tmp_path, "t.toml", 'name = "t"\nfinding_prompts = "deep.json"\n')
    with pytest.raises(TaskFileError, match=r"line 2: 'finding_prompts': .*deep\.json: nested "
                                            r"too deeply to read"):
        load_task_file(path).read_files()


def test_a_missing_name_a_missing_file_and_not_utf8(tmp_path: Path) -> None:
    path = write(tmp_path, "t.toml", 'title = "x"\n')
    with pytest.raises(TaskFileError, match=r"t\.toml: 'name': missing: every task needs"):
        load_task_file(path)
    with pytest.raises(TaskFileError, match=r"nope\.toml: no such task file"):
        load_task_file(tmp_path / "nope.toml")
    (tmp_path / "latin.toml").write_bytes(b'name = "caf\xe9"\n')
    with pytest.raises(TaskFileError, match="not UTF-8 text"):
        load_task_file(tmp_path / "latin.toml")
    write(tmp_path, "empty.txt", "\n\n")
    with pytest.raises(TaskFileError, match=r"line 2: 'prompt': .*empty\.txt is empty"):
        task = load_task_file(write(tmp_path, "e.toml", 'name = "e"\nprompt = "empty.txt"\n'))
        task.read_files()


@pytest.mark.parametrize(("content", "words"), [
    ('{"DIRECT_TEMPLATE": "{input}\\n{steps}",\n "DIRECT_MESSAGES": [}',
     "line 2, column 22: malformed JSON"),
    ('["a"]', "must be a JSON object"),
    ('{"DIRECT_TEMPLATE": "{input} {steps}"}', "DIRECT_TEMPLATE needs DIRECT_MESSAGES beside it"),
    ('{"DIRECT_TEMPLATE": "{input}", "DIRECT_MESSAGES": []}',
     "DIRECT_TEMPLATE: the template has no {steps}"),
    ('{"DIRECT_TEMPLATE": "{steps} {current_step}", "DIRECT_MESSAGES": []}',
     "DIRECT_TEMPLATE: the template has a field {current_step} it cannot fill"),
    ('{"DIRECT_TEMPLATE": "{steps} {", "DIRECT_MESSAGES": []}', "braces do not pair up"),
    ('{"DIRECT_TEMPLATE": "{steps}", "DIRECT_MESSAGES": [{"role": "bot", "content": "x"}]}',
     "DIRECT_MESSAGES: message 1 must be"),
    ('{"COT_MAGIC": "{steps}"}', "unknown key 'COT_MAGIC'"),
    ('{"my_task": {"DIRECT_TEMPLATE": "{steps}", "DIRECT_MESSAGES": []}}',
     "holds a map of tasks; give one task's entry"),
])
def test_bad_finding_prompts_are_named_with_the_json_problem(tmp_path: Path, content: str,
                                                             words: str) -> None:
    json_path = write(tmp_path, "f.json", content)
    path = write(tmp_path, "t.toml", 'name = "t"\n\nfinding_prompts = "f.json"\n')
    with pytest.raises(TaskFileError) as raised:
        load_task_file(path).read_files()
    message = str(raised.value)
    assert message.startswith(f"{path}: line 3: 'finding_prompts': {json_path}: "), message
    assert words in message


def test_the_folder_loads_what_it_can_and_names_what_it_cannot(tmp_path: Path) -> None:
    write(tmp_path, "a.toml", 'name = "alpha"\n')
    write(tmp_path, "b.toml", 'name = "beta"\ncompare = "close enough"\n')
    write(tmp_path, "c.toml", 'name = "alpha"\n')
    write(tmp_path, "d.toml", 'name = "delta"\n')
    write(tmp_path, "notes.txt", "not a task")
    loaded = load_task_folder(tmp_path)
    assert [task.name for task in loaded.tasks] == ["alpha", "delta"]
    assert [str(problem) for problem in loaded.problems] == [
        f"{tmp_path / 'b.toml'}: line 2: 'compare': unknown comparison 'close enough' "
        "(one of: exact, number, choice, regex:PATTERN)",
        f"{tmp_path / 'c.toml'}: line 1: 'name': 'alpha' is the name of the task in "
        f"{tmp_path / 'a.toml'} too; give each task its own",
    ]
    assert load_task_folder(tmp_path / "none").tasks == []


def test_a_file_named_on_the_command_line_wins_and_must_load(tmp_path: Path) -> None:
    folder = tmp_path / "tasks"
    folder.mkdir()
    write(folder, "a.toml", 'name = "alpha"\ntitle = "from the folder"\n')
    named = write(tmp_path, "a.toml", 'name = "alpha"\ntitle = "named"\n')
    loaded = load_user_tasks(folder, [named])
    assert [task.title for task in loaded.tasks] == ["named"]
    with pytest.raises(TaskFileError, match=r"missing\.toml: no such task file"):
        load_user_tasks(folder, [tmp_path / "missing.toml"])


# --------------------------------------------------------------------------- comparing answers


@pytest.mark.parametrize(("answer", "target", "equal"), [
    ("1,000", "1000", True),
    ("$5", "5", True),
    ("5.0", "5", True),
    ("-3", "3", False),
    ("3", "-3", False),
    ("−3", "-3", True),  # a typographic minus
    ("18 apples.", "18", True),
    ("$1,234.50", "1234.5", True),
    ("1/2", "0.5", True),
    ("12", "12.01", False),
    ("COVID-19 cases", "19", True),  # a hyphen in a word is no minus
    ("about twelve", "12", False),
    ("twelve", "twelve", True),  # no number on either side: compared as text
])
def test_number_comparison_on_the_hard_cases(answer: str, target: str, equal: bool) -> None:
    assert parse_compare("number").matches(answer, target) is equal


def test_first_number_reads_the_first() -> None:
    assert first_number("5 km/h, not 7") == 5
    assert first_number("no number") is None


@pytest.mark.parametrize(("answer", "letter"), [
    ("(B)", "B"), ("B", "B"), ("b)", "B"), ("B. Paris", "B"), ("Option B", "B"),
    ("**B**", "B"), ("[b]", "B"), ("the (C) one", "C"), ("A cat", None), ("Paris", None),
])
def test_choice_letters_however_written(answer: str, letter: str | None) -> None:
    assert choice_letter(answer) == letter
    if letter is not None:
        assert parse_compare("choice").matches(answer, f"({letter})")


def test_regex_comparison_reads_the_target_as_a_pattern() -> None:
    plain = parse_compare("regex")
    assert plain.matches(" yes ", "yes|y") and not plain.matches("yes!", "yes|y")
    assert not plain.matches("x", "(")  # a target that is no pattern matches nothing
    templated = parse_compare(r"regex:(?i)\W*{target}\b.*")
    assert templated.matches("Yes, it is.", "Yes") and templated.matches("yes", "Yes")
    assert not templated.matches("Not really", "No")
    with pytest.raises(CompareError, match="needs a pattern"):
        parse_compare("regex:")


# --------------------------------------------------------------------------- stored definitions


def test_the_definition_round_trips_and_the_digest_follows_the_content(tmp_path: Path) -> None:
    write(tmp_path, "p.txt", "Prompt one.")
    task = load_task_file(write(tmp_path, "t.toml", 'name = "t"\nprompt = "p.txt"\n'))
    stored = json.loads(json.dumps(task_definition(task)))
    again = task_from_definition(stored)
    assert again == task and task_digest(again) == task_digest(task)
    assert len(task_digest(task)) == 64
    # The prompt's text is part of the content; where the file lies is not.
    write(tmp_path, "p.txt", "Prompt two.")
    changed = load_task_file(tmp_path / "t.toml")
    assert task_digest(changed) != task_digest(task)
    moved = tmp_path / "elsewhere"
    moved.mkdir()
    write(moved, "p.txt", "Prompt one.")
    write(moved, "t.toml", 'name = "t"\nprompt = "p.txt"\n')
    assert task_digest(load_task_file(moved / "t.toml")) == task_digest(task)
    with pytest.raises(ValueError, match="not a stored task definition"):
        task_from_definition({"name": "t"})


# --------------------------------------------------------------------------- the examples


def test_the_shipped_examples_load() -> None:
    math = load_task_file(EXAMPLES / "school_math.toml")
    assert math.few_shot and math.compare == "number" and math.finding_prompts is None
    assert math.prompt.startswith("Solve grade-school math word problems.")
    assert math.prompt.count("So the answer is") == 3
    yes_no = load_task_file(EXAMPLES / "yes_no.toml")
    assert not yes_no.few_shot and yes_no.description.startswith("Yes/no questions")
    assert yes_no.is_correct("Yes, it is.", "Yes") and not yes_no.is_correct("No", "Yes")
    for task in (math, yes_no):
        assert task.questions_path is not None and task.questions_path.is_file()
    # The example finding prompts are one task's entry of the paper's shape.
    write_with_finding = (EXAMPLES / "school_math.toml").read_text(encoding="utf-8")
    assert "finding_prompts" not in write_with_finding
