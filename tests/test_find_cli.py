"""`bbm-tui find`: the offline finders score as they must over the shipped dataset, PREDS lines
and resume, the JSON shape, the paper's figures, and clear errors.

Speed: a finder call through litellm's custom provider costs ~5 ms, and the step-level methods
make one call per judged thought (17,447 per method over the dataset when stopping at the first
"No"). So the everyday run does direct trace-level on all 2,186 traces (replay/bbm and
simulated/rm-0.65), CoT trace-level on all 300 word-sorting traces, and the step-level methods
on the first 25 traces of each task; the test marked `slow` runs both step-level methods on
every trace (a few minutes; `scripts/test -m "not slow"` leaves it out). The engine-level test in
test_finding_run.py checks the oracle's answer to every step-level prompt of every row.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bbm_tui.cli import main
from bbm_tui.core import llm
from bbm_tui.core.batch.find import find_batch, jobs_from_files
from bbm_tui.core.dataset import all_bundled, bundled_path
from bbm_tui.core.tasks import TASK_NAMES
from tests.openai_server import FakeOpenAI, Reply

ALL = [str(bundled_path(task)) for task in TASK_NAMES]
SCORE_KEYS = {"n", "accuracy", "accuracy_with_mistake", "accuracy_without_mistake",
              "processbench_f1", "answer_weighted_f1", "unparseable"}


def find(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["find", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def find_json(capsys, *args: str) -> dict:
    code, out, err = find(capsys, *args, "--json")
    assert code == 0, err
    return json.loads(out)


# The tests of the run below go to one worker under pytest-xdist (scripts/test runs
# `--dist loadgroup`): each worker that took one would make the run again.
ON_THE_WHOLE_DATASET = pytest.mark.xdist_group("find_cli-whole_dataset")


@pytest.fixture(scope="module")
def whole_dataset(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """replay/bbm and simulated/rm-0.65, direct trace-level, on all 2,186 traces (run once)."""
    folder = tmp_path_factory.mktemp("find")
    results = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BBM_TUI_HOME", str(folder / "home"))
        patch.setenv("BBM_TUI_CONFIG", str(folder / "config.toml"))
        for model in ("replay/bbm", "simulated/rm-0.65"):
            out = folder / f"{model.replace('/', '_')}.jsonl"
            code = main(["find", "--model", model, "--method", "direct-trace", "--input", *ALL,
                         "--out", str(out), "--concurrency", "8", "--json", "--no-progress"])
            assert code == 0
            results[model] = out
        yield results


def read_preds(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@ON_THE_WHOLE_DATASET
def test_replay_scores_100_on_every_task_direct_trace(whole_dataset, capsys) -> None:
    preds = read_preds(whole_dataset["replay/bbm"])
    assert len(preds) == 2186
    assert all(p["predicted_mistake_index"] == p["mistake_index"] and p["parsed"] for p in preds)
    # Re-running reads everything back from PREDS: no call, the same scores.
    data = find_json(capsys, "--model", "replay/bbm", "--method", "direct-trace", "--input", *ALL,
                     "--out", str(whole_dataset["replay/bbm"]))
    for task in TASK_NAMES:
        scores = data["tasks"][task]
        assert set(scores) == SCORE_KEYS
        assert scores["accuracy"] == 100.0, task
        assert scores["accuracy_with_mistake"] == 100.0
        assert scores["accuracy_without_mistake"] == 100.0
        assert scores["processbench_f1"] == 100.0
        assert scores["unparseable"] == 0
    assert data["overall"]["accuracy"] == 100.0
    assert data["overall"]["n"] == 2186
    assert [data["tasks"][t]["n"] for t in TASK_NAMES] == [300, 300, 300, 300, 986]


@ON_THE_WHOLE_DATASET
def test_simulated_rm_065_scores_65_over_all_traces(whole_dataset, capsys) -> None:
    preds = read_preds(whole_dataset["simulated/rm-0.65"])
    assert len(preds) == 2186
    pooled = 100 * sum(p["predicted_mistake_index"] == p["mistake_index"] for p in preds) / 2186
    assert 62 <= pooled <= 68
    data = find_json(capsys, "--model", "simulated/rm-0.65", "--method", "direct-trace",
                     "--input", *ALL, "--out", str(whole_dataset["simulated/rm-0.65"]))
    assert 62 <= data["overall"]["accuracy"] <= 68
    assert data["overall"]["unparseable"] == 0


@ON_THE_WHOLE_DATASET
def test_preds_lines_are_the_input_row_plus_the_finders_keys(whole_dataset) -> None:
    first = whole_dataset["replay/bbm"].read_text(encoding="utf-8").splitlines()
    rows = {json.dumps(r.to_json()): r for _, rs in all_bundled() for r in rs}
    for line in first[:50]:
        pred = json.loads(line)
        keys = list(pred)
        assert keys[-5:] == ["method", "model", "predicted_mistake_index", "parsed", "raw"]
        base = {k: pred[k] for k in keys[:-5]}
        assert json.dumps(base) in rows  # the input row, its key order kept
        assert pred["method"] == "direct-trace" and pred["model"] == "replay/bbm"
        assert isinstance(pred["raw"], list) and len(pred["raw"]) == 1


def test_cot_trace_scores_100_on_word_sorting(tmp_path: Path, capsys) -> None:
    data = find_json(capsys, "--model", "replay/bbm", "--method", "cot-trace", "--input",
                     ALL[0], "--out", str(tmp_path / "p.jsonl"))
    assert data["tasks"]["word_sorting"]["accuracy"] == 100.0
    assert data["tasks"]["word_sorting"]["n"] == 300


@pytest.mark.parametrize("method", ["direct-step", "cot-step"])
def test_step_level_methods_score_100_on_a_sample_of_every_task(
    tmp_path: Path, capsys, method: str
) -> None:
    data = find_json(capsys, "--model", "replay/bbm", "--method", method, "--input", *ALL,
                     "--limit", "25", "--out", str(tmp_path / "p.jsonl"))
    for task in TASK_NAMES:
        assert data["tasks"][task]["n"] == 25
        assert data["tasks"][task]["accuracy"] == 100.0, task
    preds = read_preds(tmp_path / "p.jsonl")
    one = next(p for p in preds if p["mistake_index"] == 2)
    assert len(one["raw"]) == 3  # Yes, Yes, No: stopped at the first No


@pytest.mark.slow
@pytest.mark.parametrize("method", ["direct-step", "cot-step"])
def test_step_level_methods_score_100_on_every_trace(tmp_path: Path, capsys, method) -> None:
    data = find_json(capsys, "--model", "replay/bbm", "--method", method, "--input", *ALL,
                     "--concurrency", "8", "--out", str(tmp_path / "p.jsonl"))
    for task in TASK_NAMES:
        assert data["tasks"][task]["accuracy"] == 100.0, task
    assert data["overall"]["n"] == 2186


def test_resume_from_preds_and_mend_a_cut_line(tmp_path: Path, capsys) -> None:
    out = tmp_path / "p.jsonl"
    args = ["--model", "replay/bbm", "--method", "direct-step", "--input", ALL[1], ALL[3],
            "--out", str(out)]
    code, _, err = find(capsys, *args, "--limit", "5")
    assert code == 0 and "10 traces judged" in err
    lines = out.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 10
    # A killed run leaves at most one cut line: it is dropped and that trace redone.
    out.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:40], encoding="utf-8")
    code, stdout, err = find(capsys, *args, "--limit", "8", "--json")
    assert code == 0
    assert "7 traces judged" in err and "9 already there" in err
    assert len(out.read_text(encoding="utf-8").splitlines()) == 16
    data = json.loads(stdout)
    assert data["overall"]["n"] == 16 and data["overall"]["accuracy"] == 100.0
    assert out.stat().st_mode & 0o777 == 0o600


def test_limit_zero_and_the_table(tmp_path: Path, capsys) -> None:
    code, out, _ = find(capsys, "--model", "replay/bbm", "--method", "direct-trace", "--input",
                        ALL[0], "--limit", "30", "--out", str(tmp_path / "p.jsonl"),
                        "--paper", "gpt-4")
    assert code == 0
    assert "word_sorting" in out and "overall" in out
    assert "100.00" in out and "35.00" in out and "88.24" in out and "28.20" in out


def test_paper_figures_in_the_json(tmp_path: Path, capsys) -> None:
    """--paper with --json: the paper's figures ride along under "paper", ours unchanged."""
    data = find_json(capsys, "--model", "replay/bbm", "--method", "direct-trace", "--input",
                     ALL[0], "--limit", "30", "--out", str(tmp_path / "p.jsonl"),
                     "--paper", "gpt-4")
    assert data["tasks"]["word_sorting"]["accuracy"] == 100.0
    paper = data["paper"]
    assert paper["model"] == "gpt-4"
    assert paper["tasks"]["word_sorting"]["accuracy"] == 35.00
    assert paper["tasks"]["word_sorting"]["accuracy_with_mistake"] == 28.20
    assert paper["tasks"]["word_sorting"]["accuracy_without_mistake"] == 88.24
    assert set(paper["tasks"]) == set(TASK_NAMES)
    assert "accuracy" in paper["overall"]


def test_the_papers_overall_beside_a_run_of_fewer_tasks_is_over_those_tasks(
        tmp_path: Path, capsys) -> None:
    """Beside a run over one task, the paper's "overall" was its five-task mean (gpt-4's
    direct-trace accuracy over all five), not the figure for the task that ran; it is now the
    mean of the paper's own figures over the run's tasks, read from the shipped tables."""
    tables = json.loads((Path(__file__).parent.parent / "prompts" / "paper_tables.json")
                        .read_text(encoding="utf-8"))
    word_sorting = tables["table_4_location_accuracy"]["gpt-4"]["word_sorting"]["direct-trace"]
    data = find_json(capsys, "--model", "replay/bbm", "--method", "direct-trace", "--input",
                     ALL[0], "--limit", "30", "--out", str(tmp_path / "p.jsonl"),
                     "--paper", "gpt-4")
    assert set(data["tasks"]) == {"word_sorting"}
    assert data["paper"]["overall"]["accuracy"] == word_sorting
    assert data["paper"]["overall_tasks"] == ["word_sorting"]


def test_paper_without_figures_for_the_method(tmp_path: Path, capsys) -> None:
    code, out, _ = find(capsys, "--model", "replay/bbm", "--method", "cot-trace", "--input",
                        ALL[0], "--limit", "3", "--out", str(tmp_path / "p.jsonl"),
                        "--paper", "gpt-4")
    assert code == 0 and "reports no figures for cot-trace" in out


def test_rpm_spaces_the_calls(tmp_path: Path, capsys) -> None:
    started = time.perf_counter()
    code, _, _ = find(capsys, "--model", "replay/bbm", "--method", "direct-trace", "--input",
                      ALL[0], "--limit", "4", "--rpm", "600", "--concurrency", "4",
                      "--out", str(tmp_path / "p.jsonl"))
    assert code == 0
    assert time.perf_counter() - started >= 0.3  # 4 calls, 0.1 s apart


# --------------------------------------------------------------------------- errors


def assert_clear_error(code: int, err: str, *needles: str) -> None:
    assert code != 0
    assert "Traceback" not in err
    assert err.startswith("bbm-tui: ")
    for needle in needles:
        assert needle in err


def test_malformed_input_line(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "word_sorting.jsonl"
    good = Path(ALL[0]).read_text(encoding="utf-8").splitlines()
    bad.write_text(good[0] + "\n" + good[1][:-5] + "\n", encoding="utf-8")
    code, _, err = find(capsys, "--model", "replay/bbm", "--method", "direct-trace",
                        "--input", str(bad), "--out", str(tmp_path / "p.jsonl"))
    assert_clear_error(code, err, f"{bad}:2", "malformed JSON")
    assert not (tmp_path / "p.jsonl").exists()


def test_unknown_task_and_unnamed_file(tmp_path: Path, capsys) -> None:
    code, _, err = find(capsys, "--method", "direct-trace", "--input", ALL[0], "--task", "nope",
                        "--out", str(tmp_path / "p.jsonl"))
    assert_clear_error(code, err, "unknown task 'nope'")
    other = tmp_path / "mine.jsonl"
    other.write_text(Path(ALL[0]).read_text(encoding="utf-8"), encoding="utf-8")
    code, _, err = find(capsys, "--method", "direct-trace", "--input", str(other),
                        "--out", str(tmp_path / "p.jsonl"))
    assert_clear_error(code, err, str(other), "pass --task")


def test_cot_trace_is_for_word_sorting_only(tmp_path: Path, capsys) -> None:
    code, _, err = find(capsys, "--model", "replay/bbm", "--method", "cot-trace",
                        "--input", *ALL, "--out", str(tmp_path / "p.jsonl"))
    assert_clear_error(code, err, "tracking_shuffled_objects.jsonl", "word sorting only")


def test_preds_of_another_run(tmp_path: Path, capsys) -> None:
    out = tmp_path / "p.jsonl"
    assert find(capsys, "--model", "replay/bbm", "--method", "direct-trace", "--input", ALL[0],
                "--limit", "2", "--out", str(out))[0] == 0
    code, _, err = find(capsys, "--model", "replay/bbm", "--method", "direct-step",
                        "--input", ALL[0], "--limit", "2", "--out", str(out))
    assert_clear_error(code, err, f"{out}:1", "use another --out")
    junk = tmp_path / "junk.jsonl"
    junk.write_text(Path(ALL[0]).read_text(encoding="utf-8").splitlines()[0] + "\n")
    code, _, err = find(capsys, "--model", "replay/bbm", "--method", "direct-step",
                        "--input", ALL[0], "--out", str(junk))
    assert_clear_error(code, err, f"{junk}:1", "not a predictions line")


@pytest.mark.parametrize(("args", "needle"), [
    (["--concurrency", "0"], "--concurrency must be at least 1"),
    (["--limit", "-1"], "--limit must be 0 or more"),
    (["--rpm", "0"], "--rpm must be more than 0"),
    (["--paper", "gpt-5"], "the paper has no figures for 'gpt-5'"),
])
def test_bad_options(tmp_path: Path, capsys, args: list[str], needle: str) -> None:
    code, _, err = find(capsys, "--model", "replay/bbm", "--method", "direct-trace",
                        "--input", ALL[0], "--out", str(tmp_path / "p.jsonl"), *args)
    assert_clear_error(code, err, needle)


def test_a_model_that_cannot_work_stops_the_run(tmp_path: Path, capsys) -> None:
    code, _, err = find(capsys, "--model", "replay/nope", "--method", "direct-trace",
                        "--input", ALL[0], "--limit", "3", "--out", str(tmp_path / "p.jsonl"))
    assert_clear_error(code, err, "find stopped", "replay/nope")


def test_unknown_method_is_an_argparse_error(capsys) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["find", "--method", "cot", "--input", ALL[0], "--out", "x.jsonl"])
    assert caught.value.code == 2
    assert "invalid choice: 'cot'" in capsys.readouterr().err


# --------------------------------------------------------------------------- over HTTP


async def test_batch_over_http_counts_failures_and_cost(tmp_path: Path,
                                                        openai_server: FakeOpenAI) -> None:
    jobs = jobs_from_files([Path(ALL[3])], None, "direct-trace", limit=6)
    failing = jobs[2].row.input

    def respond(path: str, body: dict) -> Reply:
        if failing in body["messages"][-1]["content"]:
            return Reply(status=500)
        return Reply("No")

    openai_server.responder = respond
    spec = llm.ModelSpec("openai/test", api_base=openai_server.base_url)
    settings = llm.CallSettings(max_tokens=64, retry=llm.RetryPolicy(attempts=2,
                                                                     base_delay_s=0.01))
    out = tmp_path / "p.jsonl"
    outcome = await find_batch(jobs, "direct-trace", spec, out, concurrency=3,
                               settings=settings)
    progress = outcome.progress
    assert (progress.done, progress.failed, progress.calls) == (5, 1, 5)
    assert progress.errors and "server error" in progress.errors[0]
    # litellm has no price for openai/test: the running cost says so instead of guessing.
    assert progress.unpriced_calls + (progress.cost > 0) >= 1
    assert len(read_preds(out)) == 5
    assert outcome.report.tasks["multistep_arithmetic"].n == 5
    sent = openai_server.requests[0].body
    assert sent["temperature"] == 0 and "stop" not in sent
