"""Many machines (core/batch/shard.py): `--shard I/N` gives each machine a fixed share of the
input, whatever the rows' order and the resumes; `merge` joins the shards' OUTs into exactly
what one machine writes, byte for byte, and names a conflict."""

from __future__ import annotations

import json
import random
from pathlib import Path
from types import SimpleNamespace

import pytest

from bbm_tui.core import llm
from bbm_tui.core.batch.run import RunJob, job_key, jobs_from_bundled, run_batch
from bbm_tui.core.batch.shard import Shard, ShardError, merge_outputs
from bbm_tui.core.dataset import DatasetError
from bbm_tui.core.llm import transport
from bbm_tui.core.store import Store

REPLAY = llm.ModelSpec("replay/bbm")


@pytest.fixture
def still_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every call takes no time: the `latency_s` each row carries is then the same on every
    machine, and one machine's OUT can be compared with the merged one byte for byte."""
    monkeypatch.setattr(transport, "time", SimpleNamespace(perf_counter=lambda: 0.0))


def mixed_jobs() -> list[RunJob]:
    jobs = jobs_from_bundled("logical_deduction", 14) + jobs_from_bundled("word_sorting", 10)
    return jobs + jobs[:3]  # an input may list a question twice: done once


async def one_machine(tmp_path: Path, name: str, jobs: list[RunJob],
                      shard: Shard | None = None, concurrency: int = 4) -> Path:
    out = tmp_path / f"{name}.jsonl"
    with Store.open(tmp_path / f"{name}.sqlite3") as store:
        progress = await run_batch(jobs, REPLAY, store, out, concurrency=concurrency,
                                   shard=shard)
    assert progress.failed == 0, progress.errors
    return out


@pytest.mark.usefixtures("still_clock")
async def test_three_shards_merged_are_one_machine_byte_for_byte(tmp_path: Path) -> None:
    jobs = mixed_jobs()
    whole = await one_machine(tmp_path, "whole", jobs)
    parts = [await one_machine(tmp_path, f"part{i}", jobs, Shard(i, 3)) for i in (1, 2, 3)]
    sizes = [len(part.read_text().splitlines()) for part in parts]
    assert sum(sizes) == 24 and all(sizes)  # every job once, each machine some
    merged = merge_outputs(parts, tmp_path / "merged.jsonl")
    assert (merged.rows, merged.duplicates, merged.missing) == (24, 0, [])
    assert (tmp_path / "merged.jsonl").read_bytes() == whole.read_bytes()
    # In any order: the shards' files, or their rows (a merge reads places, not files).
    shuffled = tmp_path / "shuffled.jsonl"
    lines = [line for part in parts for line in part.read_text().splitlines()]
    random.Random(3).shuffle(lines)
    shuffled.write_text("\n".join(lines) + "\n")
    merge_outputs([shuffled], tmp_path / "again.jsonl")
    assert (tmp_path / "again.jsonl").read_bytes() == whole.read_bytes()


def test_a_share_is_the_same_whatever_the_order() -> None:
    jobs = mixed_jobs()
    shard = Shard(2, 3)
    taken = {job_key(job) for job in jobs if shard.takes(job_key(job))}
    shuffled = jobs[::-1]
    assert {job_key(job) for job in shuffled if shard.takes(job_key(job))} == taken
    # Every job in exactly one share.
    for job in jobs:
        assert sum(Shard(i, 3).takes(job_key(job)) for i in (1, 2, 3)) == 1


@pytest.mark.usefixtures("still_clock")
async def test_a_shard_resumed_writes_the_same_file(tmp_path: Path) -> None:
    jobs = mixed_jobs()
    first = await one_machine(tmp_path, "first", jobs, Shard(1, 3))
    whole = first.read_text()
    lines = whole.splitlines()
    first.write_text("\n".join(lines[:2]) + "\n")  # killed after two rows
    await one_machine(tmp_path, "first", jobs, Shard(1, 3))
    assert first.read_text() == whole


async def test_an_out_of_another_shard_or_none_is_refused(tmp_path: Path) -> None:
    from bbm_tui.core.batch.runner import BatchStop

    jobs = mixed_jobs()[:6]
    out = await one_machine(tmp_path, "mine", jobs, Shard(1, 2))
    with Store.open(tmp_path / "other.sqlite3") as store:
        with pytest.raises(BatchStop, match="shard 1/2's, not shard 2/2's"):
            await run_batch(jobs, REPLAY, store, out, shard=Shard(2, 2))
        with pytest.raises(BatchStop, match="merge"):
            await run_batch(jobs, REPLAY, store, out)


def test_shard_numbers_are_checked() -> None:
    assert Shard.parse("2/3") == Shard(2, 3)
    for text in ("0/3", "4/3", "3", "a/b", "1/0"):
        with pytest.raises(ShardError):
            Shard.parse(text)


def tagged(row: dict, shard: str, place: int) -> str:
    return json.dumps({**row, "shard": shard, "shard_row": place})


ROW = {"input": "Q", "target": "A", "steps": ["s"], "answer": None, "model": "m"}


def test_merge_names_a_conflict_and_writes_nothing(tmp_path: Path) -> None:
    one, two = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    one.write_text(tagged(ROW, "1/2", 0) + "\n" + tagged(ROW | {"input": "R"}, "1/2", 2) + "\n")
    two.write_text(tagged(ROW | {"steps": ["other"]}, "2/2", 2) + "\n")
    out = tmp_path / "out.jsonl"
    with pytest.raises(ShardError, match=r"one.jsonl, line 2 and .*two.jsonl, line 1 .* job 3"):
        merge_outputs([one, two], out)
    assert not out.exists()
    # The same row twice (a file given twice, a machine run with the wrong shard) is one;
    # shard 2/2 missing, the partial file is written only when asked for.
    with pytest.raises(ShardError, match="no file held a row of shard 2/2"):
        merge_outputs([one, one], out)
    assert not out.exists()
    merged = merge_outputs([one, one], out, allow_missing=True)
    assert (merged.rows, merged.duplicates, merged.missing) == (2, 2, ["2/2"])
    assert out.read_text().splitlines() == [json.dumps(ROW), json.dumps(ROW | {"input": "R"})]


def test_merge_refuses_what_no_shard_wrote(tmp_path: Path) -> None:
    plain, broken = tmp_path / "plain.jsonl", tmp_path / "broken.jsonl"
    plain.write_text(json.dumps(ROW) + "\n")
    broken.write_text(tagged(ROW, "1/2", 0) + "\n{\"input\": \n")
    with pytest.raises(ShardError, match=r"plain.jsonl, line 1: not a row a --shard run wrote"):
        merge_outputs([plain], tmp_path / "out.jsonl")
    with pytest.raises(DatasetError, match=r"broken.jsonl.*2"):
        merge_outputs([broken], tmp_path / "out.jsonl")
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text(tagged(ROW, "1/2", 0) + "\n" + tagged(ROW | {"input": "R"}, "1/3", 1) + "\n")
    with pytest.raises(ShardError, match="different splits"):
        merge_outputs([mixed], tmp_path / "out.jsonl")
    (tmp_path / "taken.jsonl").write_text("")
    with pytest.raises(ShardError, match="already exists"):
        merge_outputs([plain], tmp_path / "taken.jsonl")
