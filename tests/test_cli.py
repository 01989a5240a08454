"""The headless commands, run as a user runs them: `stats` reproduces the paper's Table 2 and
`run` writes dataset-format traces, resumes, and fails with one clear line."""

from __future__ import annotations

import dataclasses
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from bbm_tui.cli import main
from bbm_tui.core.dataset import bundled_path, bundled_rows, read_rows
from bbm_tui.core.store import Store
from bbm_tui.core.tasks import TASK_NAMES
from tests.cli_helpers import run_here
from tests.openai_server import FakeOpenAI, Reply, dataset_responder

ROOT = Path(__file__).resolve().parents[1]
DATASET_FILES = [str(bundled_path(task)) for task in TASK_NAMES]


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """The console entry point's `main`, in this process as its own process would run it
    (tests/cli_helpers.py)."""
    result = run_here(args, env)
    return subprocess.CompletedProcess(args, result.code, result.out, result.err)


def run_in_a_child(*args: str) -> subprocess.CompletedProcess:
    """The real console entry point in a child process (what a user's shell runs)."""
    return subprocess.run(
        [sys.executable, "-m", "bbm_tui", *args],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )


# ---------------------------------------------------------------------------- stats

def test_stats_json_reproduces_the_issue_figures(capsys: pytest.CaptureFixture) -> None:
    assert main(["stats", "--json", *DATASET_FILES]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["tasks"]["word_sorting"] == {
        "traces": 300, "correct": 45, "with_mistake": 266, "without_mistake": 34,
        "mean_steps": 11.69, "unlabelled": 0,
    }
    assert result["tasks"]["dyck_languages"] == {
        "traces": 986, "correct": 482, "with_mistake": 650, "without_mistake": 336,
        "mean_steps": 24.52, "unlabelled": 0,
    }
    assert result["overall"]["traces"] == 2186
    assert result["overall"]["correct"] == sum(t["correct"] for t in result["tasks"].values())


def test_stats_reproduces_paper_table_2(reference_bbm: Path, capsys: pytest.CaptureFixture) -> None:
    table = json.loads((reference_bbm / "paper_tables.json").read_text())["table_2_dataset"]
    assert main(["stats", "--json", *DATASET_FILES]) == 0
    result = json.loads(capsys.readouterr().out)
    for task in TASK_NAMES:
        ours = result["tasks"][task]
        for key in ("traces", "correct", "with_mistake", "without_mistake"):
            assert ours[key] == table[task][key], (task, key)
        assert ours["mean_steps"] == pytest.approx(table[task]["mean_steps"], abs=0.005)


def test_stats_table_in_a_real_process() -> None:
    result = run_in_a_child("stats", *DATASET_FILES)
    assert result.returncode == 0, result.stderr
    first_table = result.stdout.split("Traces per file")[0]  # then the files, the histogram
    lines = {line.split()[1]: line for line in first_table.splitlines()
             if line.startswith("│") and len(line.split()) > 2}
    assert "300" in lines["word_sorting"] and "11.69" in lines["word_sorting"]
    assert "986" in lines["dyck_languages"] and "24.52" in lines["dyck_languages"]
    assert "2186" in lines["overall"]


def test_stats_with_task_flag_and_several_files(tmp_path: Path, capsys) -> None:
    part = tmp_path / "part.jsonl"
    lines = bundled_path("word_sorting").read_text().splitlines()
    part.write_text("\n".join(lines[:10]) + "\n")
    assert main(["stats", "--json", "--task", "word_sorting", str(part), str(part)]) == 0
    assert json.loads(capsys.readouterr().out)["tasks"]["word_sorting"]["traces"] == 20


def test_stats_bad_line_is_one_clear_message(tmp_path: Path) -> None:
    bad = tmp_path / "word_sorting.jsonl"
    bad.write_text(bundled_path("word_sorting").read_text().splitlines()[0] + "\n{oops\n")
    result = run_cli("stats", str(bad))
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"bbm-tui: {bad}:2: malformed JSON: Expecting property name enclosed in double "
        "quotes (column 2)"
    )
    assert "Traceback" not in result.stderr


def test_stats_unknown_task(capsys) -> None:
    assert main(["stats", "--task", "sorting", DATASET_FILES[0]]) == 2
    assert "unknown task 'sorting'" in capsys.readouterr().err


# ---------------------------------------------------------------------------- run

def test_run_replays_dataset_questions_and_resumes(tmp_path: Path, capsys) -> None:
    out = tmp_path / "ws.jsonl"
    args = ["run", "--task", "word_sorting", "--dataset", "--concurrency", "3", "--out", str(out)]
    assert main([*args, "--limit", "3"]) == 0
    rows = read_rows(out)
    expected = bundled_rows("word_sorting")
    assert [row.input for row in rows] == [row.input for row in expected[:3]] or sorted(
        row.input for row in rows) == sorted(row.input for row in expected[:3])
    by_input = {row.input: row for row in expected}
    for row in rows:
        assert row.steps == by_input[row.input].steps
        assert row.answer == by_input[row.input].answer
        assert row.target == by_input[row.input].target
        assert row.mistake_index is None
        assert row.extra["model"] == "replay/bbm"
        assert isinstance(row.extra["latency_s"], float)
    assert out.stat().st_mode & 0o777 == 0o600
    assert "3 traces written" in capsys.readouterr().err

    assert main([*args, "--limit", "5"]) == 0
    rows = read_rows(out)
    assert len(rows) == 5 and len({row.input for row in rows}) == 5
    assert "2 traces written" in capsys.readouterr().err
    with Store.open() as store:
        assert len([s for s in store.sessions() if s.session.source == "run"]) == 5


def test_counts_read_right_for_one_and_for_many(tmp_path: Path, capsys) -> None:
    """"1 trace written", "2 traces written"; "1 row holds", "2 rows hold"."""
    rows = bundled_rows("word_sorting")
    source = tmp_path / "word_sorting.jsonl"
    source.write_text(json.dumps(rows[0].to_json()) + "\n")
    out = tmp_path / "one.jsonl"
    assert main(["run", "--input", str(source), "--out", str(out), "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert f"{source}: 1 row holds steps, answer or mistake_index" in err
    assert f"1 trace written to {out}, 0 already there, 0 failed;" in err

    source.write_text("".join(json.dumps(row.to_json()) + "\n" for row in rows[:3]))
    assert main(["run", "--input", str(source), "--out", str(out), "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert f"{source}: 3 rows hold steps, answer or mistake_index" in err
    assert f"2 traces written to {out}, 1 already there, 0 failed;" in err


def test_run_mends_a_line_cut_off_by_a_kill(tmp_path: Path) -> None:
    out = tmp_path / "ws.jsonl"
    args = ["run", "--task", "word_sorting", "--dataset", "--out", str(out)]
    assert main([*args, "--limit", "2"]) == 0
    whole = out.read_bytes()
    out.write_bytes(whole + b'{"input": "cut off by a ki')
    assert main([*args, "--limit", "3"]) == 0
    rows = read_rows(out)
    assert len(rows) == 3
    assert out.read_bytes().startswith(whole)


def test_run_refuses_a_damaged_out_file_and_leaves_it(tmp_path: Path, capsys) -> None:
    out = tmp_path / "ws.jsonl"
    out.write_text('{"broken": \n' + bundled_path("word_sorting").read_text().splitlines()[0]
                   + "\n")
    before = out.read_bytes()
    code = main(["run", "--task", "word_sorting", "--dataset", "--limit", "1", "--out", str(out)])
    assert code == 2
    assert f"{out}:1: malformed JSON" in capsys.readouterr().err
    assert out.read_bytes() == before


def test_run_input_file_errors_name_file_and_line(tmp_path: Path, capsys) -> None:
    source = tmp_path / "word_sorting.jsonl"
    source.write_text(bundled_path("word_sorting").read_text().splitlines()[0] + "\n[]\n")
    out = tmp_path / "out.jsonl"
    assert main(["run", "--input", str(source), "--out", str(out)]) == 2
    assert f"{source}:2: expected a JSON object, found list" in capsys.readouterr().err
    assert not out.exists()


def test_run_dataset_needs_a_task(tmp_path: Path, capsys) -> None:
    # (Files of several tasks are one run since issue 10: see tests/test_unlabelled.py.)
    out = tmp_path / "out.jsonl"
    assert main(["run", "--dataset", "--out", str(out)]) == 2
    assert "--dataset needs --task" in capsys.readouterr().err


def test_run_against_a_local_server(openai_server: FakeOpenAI, tmp_path: Path) -> None:
    openai_server.responder = dataset_responder
    source = tmp_path / "multistep_arithmetic.jsonl"
    source.write_text("\n".join(bundled_path("multistep_arithmetic").read_text()
                                .splitlines()[:4]) + "\n")
    out = tmp_path / "out.jsonl"
    code = main(["run", "--model", "openai/test", "--api-base", openai_server.base_url,
                 "--input", str(source), "--concurrency", "4", "--out", str(out)])
    assert code == 0
    rows = {row.input: row for row in read_rows(out)}
    for row in read_rows(source):
        assert rows[row.input].steps == row.steps
        assert rows[row.input].extra["model"] == "openai/test"
    steps = sum(len(row.steps) for row in rows.values())
    assert len(openai_server.requests) == steps
    assert all(r.body["temperature"] == 0 and r.body["stop"] == ["\n"]
               for r in openai_server.requests)


def test_run_records_log_probabilities_when_asked(
    openai_server: FakeOpenAI, tmp_path: Path
) -> None:
    """`--logprobs`: each step's token log-probabilities reach the store, and their sums the
    row's "step_logprobs"; without it nothing is asked for."""
    openai_server.responder = lambda path, body: dataclasses.replace(
        dataset_responder(path, body), logprob_per_token=-0.25)
    out = tmp_path / "out.jsonl"
    args = ["run", "--model", "openai/test", "--api-base", openai_server.base_url,
            "--task", "word_sorting", "--dataset", "--limit", "2"]
    assert main([*args, "--logprobs", "--out", str(out)]) == 0
    assert all(r.body["logprobs"] is True for r in openai_server.requests)
    store = Store.open()
    try:
        for row in read_rows(out):
            session = store.find_session(task="word_sorting", input=row.input,
                                         model="openai/test", source="run")
            steps = store.branch(session.id)
            with sqlite3.connect(store.path) as connection:
                calls = [json.loads(connection.execute(
                    "SELECT logprobs FROM calls WHERE step_id = ?", (step.id,)).fetchone()[0])
                    for step in steps]
            # One log-probability per streamed piece of the step's line, -0.25 each.
            assert all(len(logprobs) >= 1 and set(logprobs) == {-0.25} for logprobs in calls)
            assert row.extra["step_logprobs"] == [sum(logprobs) for logprobs in calls]
            assert row.extra["step_logprobs"] == [step.logprob for step in steps]
    finally:
        store.close()

    openai_server.requests.clear()
    assert main([*args, "--out", str(tmp_path / "plain.jsonl")]) == 0
    assert not any("logprobs" in r.body for r in openai_server.requests)
    assert all("step_logprobs" not in row.extra for row in read_rows(tmp_path / "plain.jsonl"))


def test_run_refuses_log_probabilities_in_completion_mode(tmp_path: Path, capsys) -> None:
    out = tmp_path / "out.jsonl"
    code = main(["run", "--task", "word_sorting", "--dataset", "--limit", "1", "--logprobs",
                 "--mode", "completion", "--out", str(out)])
    assert code == 2
    assert "log-probabilities are recorded in chat mode only" in capsys.readouterr().err
    assert not out.exists()


def test_run_stops_on_a_missing_key(openai_server: FakeOpenAI, tmp_path: Path) -> None:
    openai_server.responder = lambda path, body: Reply(status=401)
    out = tmp_path / "out.jsonl"
    result = run_cli("run", "--model", "openai/test", "--api-base", openai_server.base_url,
                     "--task", "word_sorting", "--dataset", "--limit", "3", "--out", str(out))
    assert result.returncode == 1
    assert "needs an API key: set OPENAI_API_KEY" in result.stderr
    assert "Traceback" not in result.stderr
    assert out.read_text() == ""


def test_broken_config_is_named_with_its_line(tmp_path: Path) -> None:
    config = Path(os.environ["BBM_TUI_CONFIG"])
    config.write_text('model = "replay/bbm"\nmode = chat\n')
    result = run_cli("run", "--task", "word_sorting", "--dataset", "--limit", "1",
                     "--out", str(tmp_path / "o.jsonl"))
    assert result.returncode == 2
    assert result.stderr.startswith(f"bbm-tui: {config}: line 2, column 8: invalid TOML")
    assert config.read_text() == 'model = "replay/bbm"\nmode = chat\n'


def test_help_lists_the_tasks_and_explains_the_files(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "tasks: " + ", ".join(TASK_NAMES) in out
    for words in ("sessions", "config", "JSONL", "no key = unlabelled", "solver/bbm"):
        assert words in out


def test_help_names_every_key_the_config_file_takes(capsys) -> None:
    """`--help`'s files section lists the config's keys: all of them (it left out
    temperature, router and one_call), each once, from the Config the file is read into."""
    from bbm_tui.core.config import CONFIG_KEYS

    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    config_lines = out.split("\n  config ", 1)[1].split("\n  JSONL ", 1)[0].splitlines()[1:]
    keys = " ".join(" ".join(config_lines).split()).split(" and a [keymap]", 1)[0]
    assert keys.split(", ") == list(CONFIG_KEYS)
    assert {"temperature", "router", "one_call"} <= set(CONFIG_KEYS)


@pytest.mark.parametrize("command", ["run", "find", "backtrack", "export", "annotate"])
def test_a_commands_help_is_its_own(command: str, capsys) -> None:
    """A command's --help shows its options, without the main help's epilog run together
    into one paragraph ("... dyck_languages files: sessions /root/...")."""
    with pytest.raises(SystemExit):
        main([command, "--help"])
    out = capsys.readouterr().out
    assert out.startswith(f"usage: bbm-tui {command} "), out
    assert ("--annotator" if command == "annotate" else "--out") in out
    assert "files:" not in out and "tasks: " not in out


def test_a_dash_means_standard_output_for_every_command_that_writes_a_file(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    """`--out -` (and `agreement --consensus -`) write to standard output, never a file named
    "-"; what the command says besides goes to standard error (the table too), and --json,
    which would write there as well, is refused."""
    monkeypatch.chdir(tmp_path)
    source = tmp_path / "multistep_arithmetic.jsonl"
    source.write_text("".join(row.to_line() + "\n"
                              for row in bundled_rows("multistep_arithmetic")[:2]))

    def written(*args: str, code: int = 0) -> tuple[list[dict], str]:
        assert main(list(args)) == code
        out, err = capsys.readouterr()
        return [json.loads(line) for line in out.splitlines()], err

    assert main(["import", str(source)]) == 0
    capsys.readouterr()
    rows, err = written("export", "--format", "jsonl", "--out", "-")
    assert [row["steps"] for row in rows] == [row.steps for row in read_rows(source)]
    assert "2 traces written to standard output" in err
    assert main(["export", "--format", "csv", "--out", "-"]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[0].startswith("session_id,name,task") and len(out.splitlines()) == 3
    rows, err = written("run", "--task", "word_sorting", "--dataset", "--limit", "2",
                        "--no-progress", "--out", "-")
    assert [row["input"] for row in rows] == [row.input for row in
                                             bundled_rows("word_sorting")[:2]]
    assert "2 traces written to standard output" in err
    rows, err = written("find", "--method", "verify", "--input", str(source), "--no-progress",
                        "--out", "-")
    assert len(rows) == 2 and "first-mistake location" in err  # the table, on stderr
    _, err = written("find", "--method", "verify", "--input", str(source), "--out", "-",
                     "--json", code=2)
    assert "--json and --out - would both write to standard output" in err
    rows, err = written("backtrack", "--input", str(source), "--locations", "gold",
                        "--no-progress", "--out", "-")
    assert len(rows) == 2 and all("new_steps" in row for row in rows)
    assert "Backtracking from gold locations" in err
    other = tmp_path / "bob.jsonl"  # another annotator, who differs on the first trace
    rows_of_bob = [json.loads(line) for line in source.read_text().splitlines()]
    rows_of_bob[0]["mistake_index"] = None if rows_of_bob[0]["mistake_index"] else 0
    other.write_text("".join(json.dumps(row) + "\n" for row in rows_of_bob))
    rows, err = written("agreement", str(source), str(other), "--consensus", "-")
    assert len(rows) == 2 and "Krippendorff" in err
    assert not (tmp_path / "-").exists()


def _figures(scores: dict) -> set[str]:
    """Every figure a find --json report holds, as the table prints it."""
    found = set()
    for entry in [*scores["tasks"].values(), scores["overall"]]:
        for value in entry.values():
            if isinstance(value, float):
                found.add(f"{value:.2f}")
    return found


def test_tables_never_cut_a_number_nor_a_reason(tmp_path: Path) -> None:
    """At 80 columns in a terminal, find's table with the paper's figures beside ours once
    cut its numbers ("100…"); piped, a table was hard-wrapped at 120 columns; verify --report
    cut the reason. Now a terminal gets the table or, too narrow for it, plain rows, with
    every number whole; a pipe gets every row on one line; the reason is whole."""
    from tests.cli_helpers import run_all

    inputs = [str(bundled_path(task)) for task in ("word_sorting", "multistep_arithmetic")]
    find = ("find", "--method", "direct-trace", "--model", "replay/bbm", "--paper", "gpt-4",
            "--limit", "4", "--input", *inputs, "--no-progress", "--out")
    terminal = {"TTY_COMPATIBLE": "1", "NO_COLOR": "1", "COLUMNS": "80",
                "BBM_TUI_HOME": str(tmp_path / "home")}
    pipe = {"TTY_COMPATIBLE": "", "COLUMNS": "80", "BBM_TUI_HOME": str(tmp_path / "home2")}
    verify = ("verify", "--report", str(bundled_path("word_sorting")))
    results = run_all([(*find, str(tmp_path / "a.jsonl"), "--json")], env=pipe)
    results += run_all([(*find, str(tmp_path / "b.jsonl"))], env=terminal)
    results += run_all([(*find, str(tmp_path / "c.jsonl")), (*verify, "--json")], env=pipe)
    results += run_all([verify], env=terminal)
    results += run_all([verify], env=pipe)
    scores, in_terminal, piped, reasons, verified_80, verified_piped = results
    assert all(result.code == 0 for result in results), results
    import re

    for result in (in_terminal, verified_80):  # bold is drawn with escapes, colour or not
        result.out = re.sub(r"\x1b\[[0-9;]*m", "", result.out)
    figures = _figures(json.loads(scores.out))
    assert "…" not in in_terminal.out and "…" not in piped.out
    assert max(len(line) for line in in_terminal.out.splitlines()) <= 80
    for figure in figures:
        assert figure in in_terminal.out and figure in piped.out, figure
    # Piped: each task's row whole on one line.
    for task in ("word_sorting", "multistep_arithmetic", "overall"):
        [line] = [line for line in piped.out.splitlines() if f" {task} " in line]
        assert len([cell for cell in line.split("│") if cell.strip()]) == 12, line
    whole = [item["reason"] for entry in json.loads(reasons.out)["tasks"].values()
             for item in entry["disagreements"]]
    assert whole
    for output in (verified_80.out, verified_piped.out):
        text = " ".join(output.replace("│", " ").split())
        for reason in whole:
            assert " ".join(reason.split()) in text, reason
    assert max(len(line) for line in verified_80.out.splitlines()) <= 80


def test_no_change_is_never_minus_zero() -> None:
    from bbm_tui.cli.phrases import signed as _signed

    assert [_signed(value) for value in (-0.004, -0.0, 0.0, 0.004, -2.5, 2.5, None)] == [
        "+0.00", "+0.00", "+0.00", "+0.00", "-2.50", "+2.50", "—"]


def test_run_replays_at_full_speed_unless_asked(tmp_path: Path, monkeypatch) -> None:
    """Headless, the replay streams at once: the app's pace (30 tokens a second) is for a
    person watching. --pace sets it, for this command and the processes it starts."""
    from bbm_tui.core import llm

    monkeypatch.setenv("BBM_TUI_REPLAY_TPS", "30")  # the app's pace, left in the shell
    args = ["run", "--task", "dyck_languages", "--dataset", "--limit", "1", "--no-progress"]
    assert main([*args, "--out", str(tmp_path / "a.jsonl")]) == 0
    assert llm.replay_pace() == 0 and os.environ["BBM_TUI_REPLAY_TPS"] == "0"
    assert main([*args, "--out", str(tmp_path / "b.jsonl"), "--pace", "12.5"]) == 0
    assert llm.replay_pace() == 12.5 and os.environ["BBM_TUI_REPLAY_TPS"] == "12.5"
    assert main([*args, "--out", str(tmp_path / "c.jsonl"), "--pace", "-1"]) == 2
