"""Tasks of one's own on the command line: `--task-file` on every command, the config folder's
tasks/ read at start, and `run`, `find` (every method), `backtrack`, `stats`, `import` and
`export` on a task file over HTTP, where the prompts sent are the documented template, written
out here in full."""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import shutil
import sqlite3
from pathlib import Path

import pytest

from bbm_tui.cli import build_parser, main
from bbm_tui.core.store.files import default_path
from tests.openai_server import FakeOpenAI, Reply

ROOT = Path(__file__).resolve().parents[1]
PROMPT = ("Add the numbers.\n\nQ: What is 1 + 1?\nThought 1: 1 + 1 = 2.\nThought 2: So the "
          "answer is 2.")
DESCRIPTION = "Adding two whole numbers."


@pytest.fixture
def task_file(tmp_path: Path) -> Path:
    folder = tmp_path / "sums"
    folder.mkdir()
    (folder / "sums_prompt.txt").write_text(PROMPT + "\n", encoding="utf-8")
    (folder / "sums_questions.jsonl").write_text(
        '{"input": "2 + 3", "target": "5"}\n{"input": "1,000 + 0", "target": "1,000"}\n',
        encoding="utf-8")
    path = folder / "sums.toml"
    path.write_text(f'''name = "sums"
title = "Sums"
prompt = "sums_prompt.txt"
question = "Q: What is {{input}}?"
compare = "number"
description = "{DESCRIPTION}"
questions = "sums_questions.jsonl"
''', encoding="utf-8")
    return path


def responder(path: str, body: dict) -> Reply:
    """A model that adds: the first thought says it adds, the second gives the sum in dollars
    with thousands commas; backtracking's samples are one new first thought; the finders find
    nothing wrong."""
    prompt = body["messages"][-1]["content"]
    if int(body.get("n") or 1) > 1:
        return Reply(choices=["I add them up."] * int(body["n"]), honor_stop=False)
    asked = re.search(r"Thought (\d+):$", prompt)
    if asked is not None:
        question = re.findall(r"Q: What is (.*)\?", prompt)[-1]
        total = sum(int(part.replace(",", "")) for part in question.split(" + "))
        if asked.group(1) == "1":
            return Reply(" I add the two numbers.\n")
        return Reply(f" So the answer is ${total:,}.\n")
    if "\\boxed{}" in prompt:
        return Reply("Both thoughts hold. \\boxed{-1}")
    if "Is there a mistake in this sequence?" in prompt:
        return Reply("No")
    return Reply("Yes")


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def model(server: FakeOpenAI) -> list[str]:
    return ["--model", "openai/test", "--api-base", server.base_url]


def sent(server: FakeOpenAI) -> list[list[dict]]:
    return [request.body["messages"] for request in server.requests]


def labelled_file(tmp_path: Path) -> Path:
    path = tmp_path / "labelled.jsonl"
    rows = [
        {"input": "2 + 3", "steps": ["2 + 3 = 6.", "So the answer is 6."], "answer": "6",
         "target": "5", "mistake_index": 0},
        {"input": "4 + 4", "steps": ["4 + 4 = 8.", "So the answer is $8."], "answer": "$8",
         "target": "8.0", "mistake_index": None},
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


# --------------------------------------------------------------------------- the flag


def test_every_command_takes_task_file() -> None:
    parser = build_parser(["find"])
    [commands] = [action for action in parser._actions
                  if isinstance(action, argparse._SubParsersAction)]
    for command in ("run", "find", "backtrack", "stats", "annotate", "import", "export"):
        options = {option: action.dest for action in commands.choices[command]._actions
                   for option in action.option_strings}
        assert options.get("--task-file") == "task_files", command
    args = build_parser(["stats"]).parse_args(["stats", "x.jsonl", "--task-file", "a.toml",
                                               "--task-file", "b.toml"])
    assert args.task_files == [Path("a.toml"), Path("b.toml")]
    # The app's own, before a command's, is kept when the command gives none.
    args = build_parser(["stats"]).parse_args(["--task-file", "a.toml", "stats", "x.jsonl"])
    assert args.task_files == [Path("a.toml")]
    assert build_parser([]).parse_args(["--task-file", "c.toml"]).task_files == [Path("c.toml")]


def test_a_broken_task_file_is_one_line_and_exit_2(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "t"\n\ncompare = "roughly"\n', encoding="utf-8")
    code, out, err = cli(capsys, "stats", "--task-file", str(bad), "x.jsonl")
    assert code == 2 and out == ""
    assert err == (f"bbm-tui: {bad}: line 3: 'compare': unknown comparison 'roughly' (one of: "
                   "exact, number, choice, regex:PATTERN)\n")


def test_the_config_folders_tasks_load_and_a_broken_one_is_named(
        tmp_path: Path, task_file: Path, capsys) -> None:
    folder = tmp_path / "tasks"  # beside BBM_TUI_CONFIG (tmp_path/config.toml)
    shutil.copytree(task_file.parent, folder)
    (folder / "broken.toml").write_text('name = "x"\nquestion = "no field"\n', encoding="utf-8")
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"input": "2 + 3", "steps": ["So the answer is $5."], "answer": "$5", '
                    '"target": "5", "task": "sums"}\n', encoding="utf-8")
    code, out, err = cli(capsys, "stats", str(rows), "--json")
    assert code == 0
    assert json.loads(out)["tasks"]["sums"]["correct"] == 1
    assert err == (f"bbm-tui: {folder / 'broken.toml'}: line 2: 'question': the template has "
                   "no {input} (where the question's text goes), e.g. \"Q: {input}\" (that "
                   "task is left out; the others load)\n")
    from bbm_tui.core.tasks import use_tasks

    use_tasks([])  # as in a new process: the help reads the folder itself
    with pytest.raises(SystemExit):
        main(["--help"])
    assert f"your tasks: sums (task files: {folder}/*.toml, or --task-file)" in (
        capsys.readouterr().out)


# --------------------------------------------------------------------------- run, stats, export


def test_run_stats_import_and_export_on_a_task_file(
        tmp_path: Path, task_file: Path, openai_server: FakeOpenAI, capsys) -> None:
    openai_server.responder = responder
    out = tmp_path / "run.jsonl"
    questions = task_file.parent / "sums_questions.jsonl"
    code, _, err = cli(capsys, "run", *model(openai_server), "--task-file", str(task_file),
                       "--input", str(questions), "--out", str(out), "--concurrency", "1",
                       "--no-progress")
    assert code == 0, err
    # The documented template: the prompt file (its final newline dropped), a blank line,
    # the question line, the thoughts so far and the label of the next.
    assert [messages[-1]["content"] for messages in sent(openai_server)] == [
        "Add the numbers.\n\nQ: What is 1 + 1?\nThought 1: 1 + 1 = 2.\nThought 2: So the "
        "answer is 2.\n\nQ: What is 2 + 3?\nThought 1:",
        "Add the numbers.\n\nQ: What is 1 + 1?\nThought 1: 1 + 1 = 2.\nThought 2: So the "
        "answer is 2.\n\nQ: What is 2 + 3?\nThought 1: I add the two numbers.\nThought 2:",
        "Add the numbers.\n\nQ: What is 1 + 1?\nThought 1: 1 + 1 = 2.\nThought 2: So the "
        "answer is 2.\n\nQ: What is 1,000 + 0?\nThought 1:",
        "Add the numbers.\n\nQ: What is 1 + 1?\nThought 1: 1 + 1 = 2.\nThought 2: So the "
        "answer is 2.\n\nQ: What is 1,000 + 0?\nThought 1: I add the two numbers.\nThought 2:",
    ]
    assert all(len(messages) == 1 and messages[0]["role"] == "user"
               for messages in sent(openai_server))
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [(row["task"], row["answer"], row["target"], row["source_index"]) for row in rows] == [
        ("sums", "$5.", "5", 0), ("sums", "$1,000.", "1,000", 1)]
    # stats compares as the task says: "$1,000." is 1,000.
    code, out_text, err = cli(capsys, "stats", "--task-file", str(task_file), str(out), "--json")
    assert code == 0, err
    assert json.loads(out_text)["tasks"]["sums"] == {
        "traces": 2, "correct": 2, "with_mistake": 0, "without_mistake": 0,
        "mean_steps": 2.0, "unlabelled": 2}
    # The sessions run made export with the task's question and comparison.
    exported = tmp_path / "export.jsonl"
    code, _, err = cli(capsys, "export", "--task-file", str(task_file), "--out", str(exported))
    assert code == 0, err
    assert [json.loads(line)["answer"] for line in exported.read_text().splitlines()] == [
        "$5.", "$1,000."]
    # Imported labelled rows export to ProcessBench with the task's question line.
    code, _, err = cli(capsys, "import", "--task-file", str(task_file),
                       str(labelled_file(tmp_path)))
    assert code == 0, err
    bench = tmp_path / "bench.jsonl"
    code, _, err = cli(capsys, "export", "--format", "processbench", "--out", str(bench))
    assert code == 0, err
    assert [(row["problem"], row["label"], row["final_answer_correct"]) for row in
            map(json.loads, bench.read_text().splitlines())] == [
        ("Q: What is 2 + 3?", 0, False), ("Q: What is 4 + 4?", -1, True)]


def test_run_dataset_runs_the_tasks_own_questions(
        tmp_path: Path, task_file: Path, openai_server: FakeOpenAI, capsys) -> None:
    openai_server.responder = responder
    out = tmp_path / "run.jsonl"
    code, _, err = cli(capsys, "run", *model(openai_server), "--task-file", str(task_file),
                       "--dataset", "--out", str(out), "--no-progress")
    assert code == 0, err
    assert [json.loads(line)["input"] for line in out.read_text().splitlines()] == [
        "2 + 3", "1,000 + 0"]


def test_run_over_processes_knows_the_task_file(
        tmp_path: Path, task_file: Path, openai_server: FakeOpenAI, capsys) -> None:
    """The children are spawned (fresh interpreters): they get the task from the command."""
    openai_server.responder = responder
    out = tmp_path / "run.jsonl"
    code, _, err = cli(capsys, "run", *model(openai_server), "--task-file", str(task_file),
                       "--dataset", "--out", str(out), "--no-progress", "--concurrency", "2",
                       "--processes", "2")
    assert code == 0, err
    assert [json.loads(line)["answer"] for line in out.read_text().splitlines()] == [
        "$5.", "$1,000."]


@pytest.mark.parametrize("offline", ["replay/bbm", "solver/bbm"])
def test_offline_models_refuse_a_task_file(tmp_path: Path, task_file: Path, capsys,
                                           offline: str) -> None:
    code, _, err = cli(capsys, "run", "--model", offline, "--task-file", str(task_file),
                       "--dataset", "--out", str(tmp_path / "o.jsonl"), "--no-progress")
    assert code == 1
    assert f"run stopped: {offline} " in err and "'sums' is a task of your own" in err


# --------------------------------------------------------------------------- find


def test_find_with_every_method_a_task_file_offers(
        tmp_path: Path, task_file: Path, openai_server: FakeOpenAI, capsys) -> None:
    openai_server.responder = responder
    source = labelled_file(tmp_path)
    scores = {}
    for method in ("direct-trace-zero-shot", "direct-step-zero-shot", "critic"):
        openai_server.requests.clear()
        code, out, err = cli(capsys, "find", *model(openai_server), "--task-file",
                             str(task_file), "--method", method, "--input", str(source),
                             "--out", str(tmp_path / f"{method}.jsonl"), "--json",
                             "--no-progress", "--concurrency", "1")
        assert code == 0, err
        scores[method] = json.loads(out)["tasks"]["sums"]
        first = sent(openai_server)[0]
        if method == "direct-trace-zero-shot":
            assert first == [
                {"role": "user", "content": "For each sequence of steps, identify the first "
                 "mistake made, if any."},
                {"role": "user", "content": "The sequences of steps solve this task: "
                 f"{DESCRIPTION}"},
                {"role": "user", "content": "Q: What is 2 + 3?\nThought 1: 2 + 3 = 6.\n"
                 "Thought 2: So the answer is 6.\nQ: Is there a mistake in this sequence? "
                 'Write "No" if there are no mistakes, or the number N if there is a mistake '
                 "in Thought N."}]
        elif method == "direct-step-zero-shot":
            assert first[-1] == {"role": "user", "content": (
                "Q: What is 2 + 3?\nThought 1: 2 + 3 = 6.\nQ: Is Thought 1 correct? Write "
                '"Yes" if it is correct, and "No" if it is not.')}
        else:
            assert first == [{"role": "user", "content": (
                "The following is a question of a task and a solution to it, written as "
                "numbered thoughts starting from Thought 1.\n\n"
                f"[Task]\n\n{DESCRIPTION}\n\n[Question]\n\nQ: What is 2 + 3?\n\n"
                "[Solution]\n\nThought 1: 2 + 3 = 6.\nThought 2: So the answer is 6.\n\n"
                "Review the solution thought by thought. Once you find a thought that is wrong "
                "(a false statement, a wrong calculation, or a conclusion that does not follow "
                "from what came before), stop: your answer is the number of the earliest "
                "wrong thought. If every thought is correct, your answer is -1.\n\n"
                "Reason first, then put your final answer (the number of the earliest wrong "
                "thought, or -1) in \\boxed{}.")}]
    # A finder that always says "no mistake": right on the trace without one only. The
    # answer "$8" is the target "8.0" by the task's comparison, so one answer of two is right
    # and "no mistake" predicts it (weighted F1 33.33; compared exactly, both would be wrong
    # and the F1 0).
    for method, figures in scores.items():
        assert (figures["n"], figures["accuracy"], figures["accuracy_with_mistake"],
                figures["accuracy_without_mistake"], figures["unparseable"]) == (
            2, 50.0, 0.0, 100.0, 0), method
        assert figures["answer_weighted_f1"] == 33.33, method
    # The paper's methods on a task without few-shot finding prompts: refused, saying which.
    code, _, err = cli(capsys, "find", *model(openai_server), "--task-file", str(task_file),
                       "--method", "direct-step", "--input", str(source),
                       "--out", str(tmp_path / "p.jsonl"))
    assert code == 2
    assert "'sums' has no few-shot finding prompts" in err and "critic" in err


def test_find_with_a_tasks_own_few_shot_finding_prompts(
        tmp_path: Path, task_file: Path, openai_server: FakeOpenAI, capsys) -> None:
    openai_server.responder = responder
    shutil.copy(ROOT / "examples" / "tasks" / "school_math_finding.json",
                task_file.parent / "finding.json")
    with task_file.open("a", encoding="utf-8") as out:
        out.write('finding_prompts = "finding.json"\n')
    example = json.loads((task_file.parent / "finding.json").read_text(encoding="utf-8"))
    for method, key in (("direct-trace", "DIRECT"), ("direct-step", "DIRECT_PERSTEP")):
        openai_server.requests.clear()
        code, out_text, err = cli(capsys, "find", *model(openai_server), "--task-file",
                                  str(task_file), "--method", method, "--input",
                                  str(labelled_file(tmp_path)), "--out",
                                  str(tmp_path / f"{method}.jsonl"), "--json", "--no-progress",
                                  "--concurrency", "1")
        assert code == 0, err
        # The paper's shape: the file's few-shot messages, then its template with the input
        # as the row has it.
        question = example[f"{key}_TEMPLATE"].format(
            input="2 + 3", steps="Thought 1: 2 + 3 = 6.", current_step=1)
        if method == "direct-trace":
            question = example[f"{key}_TEMPLATE"].format(
                input="2 + 3", steps="Thought 1: 2 + 3 = 6.\nThought 2: So the answer is 6.")
        assert sent(openai_server)[0] == [*example[f"{key}_MESSAGES"],
                                          {"role": "user", "content": question}]
        assert json.loads(out_text)["tasks"]["sums"]["n"] == 2


# --------------------------------------------------------------------------- backtrack


def test_backtrack_on_a_task_file(tmp_path: Path, task_file: Path,
                                  openai_server: FakeOpenAI, capsys) -> None:
    openai_server.responder = responder
    out = tmp_path / "bt.jsonl"
    code, text, err = cli(capsys, "backtrack", *model(openai_server), "--task-file",
                          str(task_file), "--input", str(labelled_file(tmp_path)),
                          "--locations", "gold", "--out", str(out), "--json", "--no-progress")
    assert code == 0, err
    samples = [r for r in openai_server.requests if int(r.body.get("n") or 1) > 1]
    assert [r.body["messages"][-1]["content"] for r in samples] == [
        "Add the numbers.\n\nQ: What is 1 + 1?\nThought 1: 1 + 1 = 2.\nThought 2: So the "
        "answer is 2.\n\nQ: What is 2 + 3?\nThought 1:"]
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows[0]["new_steps"] == ["I add them up.", "So the answer is $5."]
    assert rows[0]["new_correct"] is True  # "$5." is 5
    assert rows[1]["location"] is None and rows[1]["new_correct"] is True  # "$8" is 8.0
    assert json.loads(text)["tasks"]["sums"] == {
        "n": 2, "n_correct": 1, "n_incorrect": 1, "delta_accuracy_correct": 0.0,
        "delta_accuracy_incorrect": 100.0}


def test_the_critic_on_the_papers_tasks_in_the_same_tables(tmp_path: Path, capsys) -> None:
    """The critic is offered for the paper's five too: the offline oracle answers it from the
    gold label (100%), and its scores come in the tables the paper's methods fill."""
    from bbm_tui.core.dataset import bundled_path
    from bbm_tui.core.tasks import TASK_NAMES

    inputs = [str(bundled_path(task)) for task in TASK_NAMES]
    code, out, err = cli(capsys, "find", "--model", "replay/bbm", "--method", "critic",
                         "--input", *inputs, "--limit", "20", "--out",
                         str(tmp_path / "critic.jsonl"), "--json", "--no-progress")
    assert code == 0, err
    scores = json.loads(out)
    assert set(scores["tasks"]) == set(TASK_NAMES)
    assert all(task["accuracy"] == 100.0 and task["n"] == 20
               for task in scores["tasks"].values())
    code, out, err = cli(capsys, "find", "--model", "simulated/rm-0.65", "--method", "critic",
                         "--input", *inputs, "--limit", "20", "--out",
                         str(tmp_path / "rm.jsonl"), "--no-progress")
    assert code == 0, err
    assert "critic by simulated/rm-0.65: first-mistake location" in out
    assert "overall" in out


def test_the_task_verifiers_refuse_a_task_of_ones_own(tmp_path: Path, task_file: Path,
                                                      capsys) -> None:
    source = labelled_file(tmp_path)
    for args in (["verify", "--report", str(source)],
                 ["find", "--method", "verify", "--input", str(source),
                  "--out", str(tmp_path / "v.jsonl")]):
        code, out, err = cli(capsys, *args, "--task-file", str(task_file))
        assert code == 2 and out == "", err
        assert "the task verifiers check the paper's five tasks only" in err
        assert err.count("\n") == 1 and "Traceback" not in err


# --------------------------------------------------------------------------- offline (issue 34, 9)


def test_replay_runs_the_readmes_own_task_with_no_key(tmp_path: Path, capsys) -> None:
    """The README's own-task example runs offline: replay/bbm replays the traces recorded in
    the task's questions file (rows with `steps`), thought by thought, as it does the
    paper's dataset."""
    example = Path(__file__).resolve().parents[1] / "examples" / "tasks"
    out = tmp_path / "math.jsonl"
    code, _, err = cli(capsys, "run", "--task-file", str(example / "school_math.toml"),
                       "--dataset", "--model", "replay/bbm", "--out", str(out),
                       "--no-progress")
    assert code == 0, err
    recorded = [json.loads(line) for line in
                (example / "school_math_questions.jsonl").read_text().splitlines()]
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert [row["steps"] for row in written] == [row["steps"] for row in recorded]
    assert {row["model"] for row in written} == {"replay/bbm"}


def test_replay_says_which_questions_it_can_replay(tmp_path: Path, task_file: Path,
                                                    capsys) -> None:
    questions = task_file.parent / "sums_questions.jsonl"
    questions.write_text(
        '{"input": "2 + 3", "steps": ["2 + 3 = 5.", "So the answer is 5."], "answer": "5",'
        ' "target": "5", "mistake_index": null}\n{"input": "1,000 + 0", "target": "1,000"}\n',
        encoding="utf-8")
    out = tmp_path / "o.jsonl"
    code, _, err = cli(capsys, "run", "--model", "replay/bbm", "--task-file", str(task_file),
                       "--dataset", "--out", str(out), "--no-progress")
    assert code == 1  # the question with no recorded trace stops the run, saying why
    assert "replay/bbm does not know this sums question: it replays only recorded traces " \
        "(rows with steps in the task's questions file)" in err, err


def test_find_on_your_own_recorded_traces_runs_with_no_key(tmp_path: Path, capsys) -> None:
    """Issue 34 item 9: the manual's own-task commands run end to end with no key. replay/bbm
    answers every method the task offers from the recorded label of a trace in its questions
    file (as it answers the paper's from their gold labels), so each method scores 100%."""
    example = tmp_path / "tasks"
    shutil.copytree(ROOT / "examples" / "tasks", example)
    task = str(example / "school_math.toml")
    traces = tmp_path / "math.jsonl"
    code, _, err = cli(capsys, "run", "--task-file", task, "--dataset", "--model",
                       "replay/bbm", "--out", str(traces), "--no-progress")
    assert code == 0, err
    recorded = [json.loads(line) for line in
                (example / "school_math_questions.jsonl").read_text().splitlines()]
    labelled = traces.with_name("labelled.jsonl")
    labelled.write_text("".join(
        json.dumps({**json.loads(line), "mistake_index": row["mistake_index"]}) + "\n"
        for line, row in zip(traces.read_text().splitlines(), recorded, strict=True)))
    assert any(row["mistake_index"] is not None for row in recorded)
    methods = ["direct-trace-zero-shot", "direct-step-zero-shot", "critic", "direct-trace",
               "direct-step"]
    for method in methods:
        if method == "direct-trace":  # the paper's methods, with the task's own prompts
            with (example / "school_math.toml").open("a", encoding="utf-8") as out:
                out.write('finding_prompts = "school_math_finding.json"\n')
        code, out, err = cli(capsys, "find", "--task-file", task, "--method", method,
                             "--model", "replay/bbm", "--input", str(labelled), "--out",
                             str(tmp_path / f"{method}.jsonl"), "--json", "--no-progress")
        assert code == 0, (method, err)
        figures = json.loads(out)["tasks"]["school_math"]
        assert (figures["n"], figures["accuracy"]) == (len(recorded), 100.0), (method, figures)


def test_replay_refuses_a_trace_it_has_no_label_for_and_stores_no_run(
        tmp_path: Path, task_file: Path, capsys) -> None:
    """A recorded trace without `mistake_index`, or a trace not recorded: refused, saying
    why, and nothing is stored."""
    questions = task_file.parent / "sums_questions.jsonl"
    questions.write_text(
        '{"input": "2 + 3", "steps": ["2 + 3 = 5.", "So the answer is 5."], "answer": "5",'
        ' "target": "5"}\n', encoding="utf-8")
    rows = tmp_path / "rows.jsonl"
    rows.write_text(
        '{"input": "2 + 3", "steps": ["2 + 3 = 5.", "So the answer is 5."], "answer": "5",'
        ' "target": "5", "mistake_index": null}\n', encoding="utf-8")
    code, _, err = cli(capsys, "find", "--task-file", str(task_file), "--method", "critic",
                       "--model", "replay/bbm", "--input", str(rows), "--out",
                       str(tmp_path / "p.jsonl"), "--no-progress")
    assert code != 0
    assert "no `mistake_index` in its row of" in err and "sums_questions.jsonl" in err, err
    if default_path().exists():
        with contextlib.closing(sqlite3.connect(default_path())) as connection:
            assert connection.execute("SELECT count(*) FROM finder_runs").fetchone() == (0,)
