"""The command line of one call for many steps, many servers and many machines: `run --shard
I/N` on three "machines" (each its own store) and `bbm-tui merge` give one machine's OUT byte
for byte; `--router` and `--one-call` on `run` against local servers; their mistakes said in
one line with exit code 2."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from bbm_tui.core.dataset import bundled_rows
from bbm_tui.core.llm import one_call, transport
from tests.cli_helpers import run_all
from tests.fake_server import dataset_trace_responder
from tests.openai_server import FakeOpenAI

RUN = ("run", "--task", "logical_deduction", "--dataset", "--limit", "9", "--no-progress",
       "--concurrency", "3")


@pytest.fixture
def still_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every call takes no time: each row's `latency_s` is the same on every machine."""
    for module in (transport, one_call):
        monkeypatch.setattr(module, "time", SimpleNamespace(perf_counter=lambda: 0.0))


def machine(tmp_path: Path, name: str) -> dict[str, str]:
    """A machine of its own: its own store (the input is all they share)."""
    return {"BBM_TUI_HOME": str(tmp_path / name)}


@pytest.mark.usefixtures("still_clock")
def test_three_machines_then_merge_write_what_one_machine_writes(tmp_path: Path) -> None:
    [whole] = run_all([(*RUN, "--out", str(tmp_path / "whole.jsonl"))],
                      machine(tmp_path, "one"))
    assert whole.code == 0, whole.err
    parts = []
    for index in (1, 2, 3):
        out = tmp_path / f"part{index}.jsonl"
        [part] = run_all([(*RUN, "--shard", f"{index}/3", "--out", str(out))],
                         machine(tmp_path, f"m{index}"))
        assert part.code == 0, part.err
        parts.append(str(out))
    [merged] = run_all([("merge", *parts, "--out", str(tmp_path / "merged.jsonl"))])
    assert merged.code == 0, merged.err
    assert "9 rows from 3 files (shards 1/3, 2/3, 3/3)" in merged.err
    assert (tmp_path / "merged.jsonl").read_bytes() == (tmp_path / "whole.jsonl").read_bytes()
    # Merging again refuses to replace the file; a conflict is named, and nothing written.
    [again] = run_all([("merge", *parts, "--out", str(tmp_path / "merged.jsonl"))])
    assert again.code == 2 and "already exists" in again.err
    rows = Path(parts[0]).read_text().splitlines()
    changed = json.loads(rows[0]) | {"steps": ["another thought"]}
    Path(parts[1]).write_text(Path(parts[1]).read_text() + json.dumps(changed) + "\n")
    [conflict] = run_all([("merge", *parts, "--out", str(tmp_path / "other.jsonl"))])
    assert conflict.code == 2 and "a conflict:" in conflict.err
    assert "part1.jsonl, line 1" in conflict.err and "part2.jsonl" in conflict.err
    assert not (tmp_path / "other.jsonl").exists()


def test_shard_mistakes_are_said_in_one_line(tmp_path: Path) -> None:
    [bad, mixed] = run_all([
        (*RUN, "--shard", "4/3", "--out", str(tmp_path / "a.jsonl")),
        (*RUN, "--shard", "1/3", "--out", str(tmp_path / "b.jsonl")),
    ])
    assert bad.code == 2 and "I must be from 1 to N" in bad.err
    assert mixed.code == 0, mixed.err
    [other] = run_all([(*RUN, "--shard", "2/3", "--out", str(tmp_path / "b.jsonl"))])
    assert other.code == 1 and "give each shard its own --out" in other.err


def router_file(path: Path, *servers: FakeOpenAI) -> Path:
    path.write_text("model_list:\n" + "".join(
        f"  - model_name: tiny\n    litellm_params:\n      model: openai/test\n"
        f"      api_base: {server.base_url}\n      api_key: no-key\n"
        f"    model_info: {{id: server-{index}}}\n"
        for index, server in enumerate(servers, start=1)), encoding="utf-8")
    return path


def test_run_through_a_router_file_with_one_call(openai_server: FakeOpenAI,
                                                 tmp_path: Path) -> None:
    openai_server.responder = dataset_trace_responder
    router = router_file(tmp_path / "servers.yaml", openai_server)
    out = tmp_path / "out.jsonl"
    [result] = run_all([("run", "--router", str(router), "--model", "tiny", "--one-call",
                         "--task", "word_sorting", "--dataset", "--limit", "3",
                         "--no-progress", "--out", str(out))])
    assert result.code == 0, result.err
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [row["steps"] for row in rows] == [row.steps for row in
                                              bundled_rows("word_sorting")[:3]]
    assert len(openai_server.requests) == 3  # one call a trace
    assert "35 steps, 3 calls," in result.err
    assert all("stop" not in request.body for request in openai_server.requests)


def test_router_mistakes_are_said_with_the_file(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("model_list:\n  - model_name: tiny\n    litellm_params: [1\n")
    fine = tmp_path / "fine.yaml"
    fine.write_text("model_list:\n  - {model_name: tiny, litellm_params: {model: openai/x}}\n")
    out = str(tmp_path / "out.jsonl")
    [unreadable, no_group] = run_all([
        ("run", "--router", str(broken), "--model", "tiny", "--task", "word_sorting",
         "--dataset", "--out", out),
        ("run", "--router", str(fine), "--model", "other", "--task", "word_sorting",
         "--dataset", "--out", out),
    ])
    assert unreadable.code == 2 and "broken.yaml, line" in unreadable.err
    assert "not valid YAML" in unreadable.err and "Traceback" not in unreadable.err
    assert no_group.code == 2 and "no model group 'other'" in no_group.err
    assert "give --model one of tiny" in no_group.err


@pytest.mark.usefixtures("still_clock")
def test_two_models_in_one_call_on_two_machines_then_merge_write_what_one_machine_writes(
    openai_server: FakeOpenAI, tmp_path: Path
) -> None:
    """Models side by side, one call for many steps and shards together: the share is per
    question and model (a row of OUT each), every model's trace is one call, and the two
    machines' files merge into exactly the one machine's."""
    openai_server.responder = dataset_trace_responder
    both = ("run", "--model", "openai/a", "--model", "openai/b", "--api-base",
            openai_server.base_url, "--one-call", "--task", "word_sorting", "--dataset",
            "--limit", "4", "--no-progress", "--concurrency", "2")
    [whole] = run_all([(*both, "--out", str(tmp_path / "whole.jsonl"))],
                      machine(tmp_path, "one"))
    assert whole.code == 0, whole.err
    rows = [json.loads(line) for line in (tmp_path / "whole.jsonl").read_text().splitlines()]
    recorded = [row.steps for row in bundled_rows("word_sorting")[:4]]
    assert [(row["model"], row["steps"]) for row in rows] == [
        (model, steps) for steps in recorded for model in ("openai/a", "openai/b")]
    assert len(openai_server.requests) == 8  # one call a trace, each model's own
    assert all(row["usage"]["calls"] == 1 for row in rows)  # and each row says so
    assert {request.body["model"] for request in openai_server.requests} == {"a", "b"}
    parts = []
    for index in (1, 2):
        out = tmp_path / f"part{index}.jsonl"
        [part] = run_all([(*both, "--shard", f"{index}/2", "--out", str(out))],
                         machine(tmp_path, f"m{index}"))
        assert part.code == 0, part.err
        parts.append(str(out))
    shares = [{(row["input"], row["model"]) for row in
               map(json.loads, Path(part).read_text().splitlines())} for part in parts]
    assert not shares[0] & shares[1] and len(shares[0]) + len(shares[1]) == 8
    [merged] = run_all([("merge", *parts, "--out", str(tmp_path / "merged.jsonl"))])
    assert merged.code == 0, merged.err
    assert (tmp_path / "merged.jsonl").read_bytes() == (tmp_path / "whole.jsonl").read_bytes()


def test_two_models_behind_one_router_file(openai_server: FakeOpenAI, tmp_path: Path) -> None:
    """With --router every --model names a model group of the file: two groups side by side
    run, each through its deployment; a model the file has not is refused before any call,
    and so is --api-base (the file's deployments name their servers)."""
    openai_server.responder = dataset_trace_responder
    router = tmp_path / "servers.yaml"
    router.write_text("model_list:\n" + "".join(
        f"  - model_name: {group}\n    litellm_params:\n      model: openai/{group}\n"
        f"      api_base: {openai_server.base_url}\n      api_key: no-key\n"
        f"    model_info: {{id: {group}-server}}\n" for group in ("tiny", "small")),
        encoding="utf-8")
    base = ("run", "--router", str(router), "--task", "word_sorting", "--dataset", "--limit",
            "2", "--no-progress")
    [both, unknown, api_base] = run_all([
        (*base, "--model", "tiny", "--model", "small", "--json", "--out",
         str(tmp_path / "both.jsonl")),
        (*base, "--model", "tiny", "--model", "openai/gpt-4o", "--out",
         str(tmp_path / "unknown.jsonl")),
        (*base, "--model", "tiny", "--api-base", openai_server.base_url, "--out",
         str(tmp_path / "api_base.jsonl")),
    ])
    assert both.code == 0, both.err
    rows = [json.loads(line) for line in (tmp_path / "both.jsonl").read_text().splitlines()]
    assert [row["model"] for row in rows] == ["tiny", "small"] * 2
    assert {request.body["model"] for request in openai_server.requests} == {"tiny", "small"}
    # Who served the calls: in --json's usage, and in the summary.
    usage = json.loads(both.out)["usage"]
    assert set(usage["calls_by_deployment"]) == {"tiny-server", "small-server"}
    assert sum(usage["calls_by_deployment"].values()) == usage["calls"] == len(
        openai_server.requests)
    # A local model behind the file has no price: unknown, not $0 (litellm's Router puts an
    # entry without a price in litellm's price map for each deployment's model).
    assert usage["cost"] is None and both.err.strip().endswith("tokens, cost unknown")
    halves = usage["calls_by_deployment"]
    assert (f"note: served by small-server {halves['small-server']} calls, tiny-server "
            f"{halves['tiny-server']} calls") in both.err
    assert unknown.code == 2 and "no model group 'openai/gpt-4o'" in unknown.err
    assert api_base.code == 2 and "--api-base" in api_base.err and "--router" in api_base.err
    assert not (tmp_path / "unknown.jsonl").exists()
    assert not (tmp_path / "api_base.jsonl").exists()


def test_the_configs_one_call_is_turned_off_for_one_run(openai_server: FakeOpenAI,
                                                       tmp_path: Path) -> None:
    """`one_call = true` in the config: a run makes one call a trace; --no-one-call makes it
    one call a step (the paper's protocol) without touching the config."""
    import os

    Path(os.environ["BBM_TUI_CONFIG"]).write_text("one_call = true\n", encoding="utf-8")
    openai_server.responder = dataset_trace_responder
    run = ("run", "--model", "openai/test", "--api-base", openai_server.base_url, "--task",
           "word_sorting", "--dataset", "--limit", "2", "--no-progress")
    [configured] = run_all([(*run, "--out", str(tmp_path / "one.jsonl"))])
    assert configured.code == 0, configured.err
    assert len(openai_server.requests) == 2
    [per_step] = run_all([(*run, "--no-one-call", "--out", str(tmp_path / "per-step.jsonl"))],
                         machine(tmp_path, "other"))
    assert per_step.code == 0, per_step.err
    steps = sum(len(row.steps) for row in bundled_rows("word_sorting")[:2])
    asked = openai_server.requests[2:]
    assert len(asked) == steps and all("stop" in request.body for request in asked)
    assert (tmp_path / "one.jsonl").read_text().count("\n") == 2


def test_find_on_two_machines_then_merge_writes_what_one_machine_writes(tmp_path: Path) -> None:
    """--shard on find (the task verifiers: no model, the same on every machine): the two
    shares are disjoint and merge into exactly one machine's PREDS, in the input's order (find
    writes each trace as it finishes: one machine at --concurrency 1 writes that order)."""
    source = tmp_path / "dyck_languages.jsonl"
    source.write_text("".join(row.to_line() + "\n"
                              for row in bundled_rows("dyck_languages")[:12]))
    find = ("find", "--method", "verify", "--input", str(source), "--no-progress")
    [whole] = run_all([(*find, "--concurrency", "1", "--out", str(tmp_path / "whole.jsonl"))])
    assert whole.code == 0, whole.err
    parts = [str(tmp_path / f"part{index}.jsonl") for index in (1, 2)]
    results = run_all([(*find, "--shard", f"{index}/2", "--out", part)
                       for index, part in enumerate(parts, start=1)])
    assert all(result.code == 0 for result in results), [r.err for r in results]
    counts = [len(Path(part).read_text().splitlines()) for part in parts]
    assert all(counts) and sum(counts) == 12
    [merged] = run_all([("merge", *parts, "--out", str(tmp_path / "merged.jsonl"))])
    assert merged.code == 0, merged.err
    assert (tmp_path / "merged.jsonl").read_bytes() == (tmp_path / "whole.jsonl").read_bytes()
