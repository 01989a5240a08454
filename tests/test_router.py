"""Many servers behind one model name (core/llm/router.py, litellm's Router) over HTTP: two local
servers in a router file; a batch over both, one stopped mid-batch, finishes with every trace
written once, each trace's steps from one deployment until that one failed; the router file's
mistakes named with its line."""

from __future__ import annotations

import itertools
import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from bbm_tui.core import llm
from bbm_tui.core.batch.run import jobs_from_bundled, run_batch
from bbm_tui.core.generation.stepper import StepperSettings
from bbm_tui.core.llm.loader import cooldown_deployments, router_class
from bbm_tui.core.llm.router import read_router_file
from bbm_tui.core.store import Store
from tests.fake_server import last_prompt
from tests.openai_server import FakeOpenAI, Reply, dataset_responder

RETRIES = llm.RetryPolicy(attempts=4, base_delay_s=0.05, max_delay_s=0.2)
SETTINGS = StepperSettings(call=llm.CallSettings(retry=RETRIES))


def router_yaml(path: Path, *servers: tuple[str, FakeOpenAI], extra: str = "") -> Path:
    lines = ["model_list:"]
    for name, server in servers:
        lines += ["  - model_name: tiny",
                  "    litellm_params:",
                  "      model: openai/test",
                  f"      api_base: {server.base_url}",
                  "      api_key: no-key",
                  "    model_info:",
                  f"      id: {name}"]
    path.write_text("\n".join(lines) + "\n" + extra, encoding="utf-8")
    return path


@pytest.fixture
def two_servers() -> Any:
    left, right = FakeOpenAI().start(), FakeOpenAI().start()
    yield left, right
    left.stop()
    right.stop()


async def test_a_batch_over_two_servers_survives_one_stopped_midway(
    two_servers: tuple[FakeOpenAI, FakeOpenAI], tmp_path: Path
) -> None:
    left, right = two_servers
    served = {"left": 0}
    stopping = threading.Event()

    def left_then_gone(path: str, body: dict[str, Any]) -> Reply:
        served["left"] += 1
        if served["left"] == 25 and not stopping.is_set():
            stopping.set()
            threading.Thread(target=left.stop, daemon=True).start()
        return dataset_responder(path, body)

    left.responder = left_then_gone
    right.responder = dataset_responder
    router = router_yaml(tmp_path / "router.yaml", ("left", left), ("right", right))
    spec = llm.ModelSpec("tiny", mode="chat", router=str(router))
    jobs = jobs_from_bundled("word_sorting", 16)
    out = tmp_path / "out.jsonl"
    with Store.open(tmp_path / "store.sqlite3") as store:
        progress = await run_batch(jobs, spec, store, out, concurrency=8, settings=SETTINGS)
        assert stopping.is_set()
        assert (progress.done, progress.failed) == (16, 0), progress.errors
        rows = [json.loads(line) for line in out.read_text().splitlines()]
        assert [row["dataset_index"] for row in rows] == list(range(16))  # each once, in order
        moved = 0
        for session in store.sessions():
            deployments = [step.deployment for step in store.branch(session.session.id)]
            assert None not in deployments
            # One deployment while it was healthy; at most one move, off the stopped one.
            changes = [(a, b) for a, b in itertools.pairwise(deployments) if a != b]
            assert changes in ([], [("left", "right")]), deployments
            moved += bool(changes)
        assert moved >= 1  # some traces were on the left server when it stopped
        used = {step.deployment for session in store.sessions()
                for step in store.branch(session.session.id)}
        assert used == {"left", "right"}


async def test_the_steps_of_a_trace_stay_on_one_deployment(
    two_servers: tuple[FakeOpenAI, FakeOpenAI], tmp_path: Path
) -> None:
    left, right = two_servers
    left.responder = right.responder = dataset_responder
    router = router_yaml(tmp_path / "router.yaml", ("left", left), ("right", right))
    spec = llm.ModelSpec("tiny", router=str(router))
    with Store.open(tmp_path / "store.sqlite3") as store:
        progress = await run_batch(jobs_from_bundled("logical_deduction", 8), spec, store,
                                   tmp_path / "out.jsonl", concurrency=4, settings=SETTINGS)
        assert progress.done == 8
        for session in store.sessions():
            assert len({step.deployment for step in store.branch(session.session.id)}) == 1
    assert left.requests and right.requests  # both served


def test_the_router_files_mistakes_are_named_with_their_line(tmp_path: Path) -> None:
    path = tmp_path / "router.yaml"
    path.write_text("model_list:\n  - model_name: a\n    litellm_params:\n      model: x\n"
                    "  - model_name: b\n    litellm_params: {}\n", encoding="utf-8")
    with pytest.raises(llm.RouterFileError, match=r"router.yaml, line 5: .*litellm_params.model"):
        read_router_file(path)
    path.write_text("model_list: [\n", encoding="utf-8")
    with pytest.raises(llm.RouterFileError, match=r"line 2: not valid YAML"):
        read_router_file(path)
    path.write_text("model_list: []\n", encoding="utf-8")
    with pytest.raises(llm.RouterFileError, match="non-empty list"):
        read_router_file(path)
    # Names: the file's id, else the api base (its key redacted), else the model; unique.
    path.write_text("model_list:\n"
                    "  - {model_name: a, litellm_params: {model: x, api_base: 'http://h:1/v1'}}\n"
                    "  - {model_name: a, litellm_params: {model: x, api_base: 'http://h:1/v1'}}\n"
                    "  - {model_name: a, litellm_params: {model: y}, model_info: {id: mine}}\n",
                    encoding="utf-8")
    names = [d.name for d in read_router_file(path).deployments]
    assert names == ["http://h:1/v1", "http://h:1/v1 #2", "mine"]


async def test_a_model_the_router_file_has_no_group_for_is_refused_before_any_call(
    openai_server: FakeOpenAI, tmp_path: Path
) -> None:
    router = router_yaml(tmp_path / "router.yaml", ("only", openai_server))
    spec = llm.ModelSpec("other", router=str(router))
    with pytest.raises(llm.LLMError, match="has no model group 'other'") as raised:
        async for _ in llm.stream_step(spec, "Q\nThought 1:"):
            pass
    assert raised.value.kind in llm.STOPS_A_BATCH
    assert openai_server.requests == []


async def test_unknown_router_settings_are_refused(
    openai_server: FakeOpenAI, tmp_path: Path
) -> None:
    router = router_yaml(tmp_path / "router.yaml", ("only", openai_server),
                         extra="router_settings:\n  no_such_setting: 3\n")
    spec = llm.ModelSpec("tiny", router=str(router))
    with pytest.raises(llm.LLMError, match="no_such_setting"):
        async for _ in llm.stream_step(spec, "Q\nThought 1:"):
            pass


def test_a_group_named_off_is_told_to_be_quoted(tmp_path: Path) -> None:
    """YAML reads `model_name: off` as false: the message says so, and how to write it (it
    said "has no model_name", though the line plainly has one; issue 34, item 13)."""
    path = tmp_path / "router.yaml"
    path.write_text("model_list:\n  - model_name: off\n    litellm_params:\n      model: x\n",
                    encoding="utf-8")
    with pytest.raises(llm.RouterFileError) as raised:
        read_router_file(path)
    message = str(raised.value)
    assert "line 2" in message and "read as false" in message
    assert 'model_name: "off"' in message and "has no `model_name`" not in message


def closed_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


async def test_an_unreachable_deployment_is_said_without_the_routers_state(
        tmp_path: Path) -> None:
    """Nothing listens: the message is the connection's, without litellm's "Received Model
    Group=… Available Model Group Fallbacks=…" (issue 34, item 13)."""
    path = tmp_path / "router.yaml"
    path.write_text("model_list:\n  - model_name: tiny\n    litellm_params:\n"
                    "      model: openai/test\n"
                    f"      api_base: http://127.0.0.1:{closed_port()}/v1\n"
                    "      api_key: no-key\n", encoding="utf-8")
    spec = llm.ModelSpec("tiny", router=str(path))
    once = llm.CallSettings(retry=llm.RetryPolicy(attempts=1, base_delay_s=0.01,
                                                  max_delay_s=0.01))
    with pytest.raises(llm.LLMError) as raised:
        async for _ in llm.stream_step(spec, "Q\nThought 1:", once):
            pass
    message = raised.value.message
    assert message.startswith("cannot reach tiny: "), message
    assert "Model Group" not in message and "Fallbacks" not in message and ".." not in message


def test_an_unreachable_hosts_tls_context_is_left_out() -> None:
    """aiohttp names the TLS context it would have used: not a person's business."""
    from bbm_tui.core.llm.errors import classify_error
    from bbm_tui.core.llm.loader import litellm_module

    litellm = litellm_module()
    error = litellm.APIConnectionError(
        message="Cannot connect to host nowhere.invalid:443 ssl:<ssl.SSLContext object at "
        "0x7f3a2c1b9e40> [Name or service not known]. Received Model Group=tiny\n"
        "Available Model Group Fallbacks=None", llm_provider="openai", model="openai/test")
    message = classify_error(error, llm.ModelSpec("tiny")).message
    assert "SSLContext" not in message and "Model Group" not in message, message
    assert "Cannot connect to host nowhere.invalid:443 [Name or service not known]" in message


@pytest.mark.parametrize(("key", "said"), [
    ("os.environ/VLLM_AUTH", "needs an API key: set VLLM_AUTH"),
    ("sk-written-here", "rejected the API key in the `api_key` written in"),
])
async def test_a_401_through_a_router_names_where_its_key_comes_from(
    openai_server: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, key: str,
    said: str
) -> None:
    """Before: "set OPENAI_API_KEY", a variable the router file never reads (issue 33, item
    15)."""
    openai_server.responder = lambda path, body: Reply(status=401)
    router = router_yaml(tmp_path / "router.yaml", ("only", openai_server))
    router.write_text(router.read_text().replace("api_key: no-key", f"api_key: {key}"))
    monkeypatch.setenv("OPENAI_API_KEY", "not-this-one")
    spec = llm.ModelSpec("tiny", router=str(router))
    with pytest.raises(llm.LLMError) as raised:
        async for _ in llm.stream_step(spec, "Q\nThought 1:"):
            pass
    assert said in raised.value.message
    assert "OPENAI_API_KEY" not in raised.value.message
    assert "sk-written-here" not in raised.value.message


@pytest.mark.parametrize(("line", "said"), [
    ("      max_parallel_requests: zz", "`litellm_params.max_parallel_requests` must be a number"),
    ("      rpm: true", "`litellm_params.rpm` must be a number"),
    ("      api_version: 2024", "`litellm_params.api_version` must be a string (quote it)"),
])
def test_router_params_of_the_wrong_type_are_named_by_the_file_check(
    openai_server: FakeOpenAI, tmp_path: Path, line: str, said: str
) -> None:
    router = router_yaml(tmp_path / "router.yaml", ("only", openai_server))
    router.write_text(router.read_text().replace("      api_key: no-key",
                                                 f"      api_key: no-key\n{line}"))
    with pytest.raises(llm.RouterFileError, match=r"router\.yaml, line 2: ") as raised:
        read_router_file(router)
    assert said in str(raised.value)


async def test_new_traces_are_not_split_by_count_but_go_where_a_place_frees_first(
    tmp_path: Path
) -> None:
    """Deployments that hold two live traces each (`model_info.max_traces: 2`): the
    traces beyond wait and go to whichever frees a place first, rather than being split
    by count when they all start at once: the fast server starts most of the batch. (At the
    tail, once no trace waits, the slow server may hand one of its two over to the idle fast
    one: the test below; here only where each trace started is counted.)"""
    fast, slow = FakeOpenAI(), FakeOpenAI(latency_s=0.5)
    fast.start()
    slow.start()
    try:
        fast.responder = slow.responder = dataset_responder
        router = with_max_traces(router_yaml(tmp_path / "router.yaml", ("fast", fast),
                                             ("slow", slow)), 2)
        spec = llm.ModelSpec("tiny", router=str(router))
        with Store.open(tmp_path / "store.sqlite3") as store:
            progress = await run_batch(jobs_from_bundled("dyck_languages", 8), spec, store,
                                       tmp_path / "out.jsonl", concurrency=8,
                                       settings=SETTINGS)
            assert (progress.done, progress.failed) == (8, 0), progress.errors
            started_on: dict[str, int] = {}
            for session in store.sessions():
                deployments = [step.deployment for step in store.branch(session.session.id)]
                # A trace stays where it started, or moves once, off the slow (busy) one.
                changes = [(a, b) for a, b in itertools.pairwise(deployments) if a != b]
                assert changes in ([], [("slow", "fast")]), deployments
                name = str(deployments[0])
                started_on[name] = started_on.get(name, 0) + 1
        # Split by count, the slow server would start 4 of the 8; here it starts 2 and gets
        # another only if it ends one (>= 9 steps, 4.5 s) before the fast server's 6 are all
        # through.
        assert started_on.get("slow", 0) <= 3, started_on
        assert started_on["fast"] >= 5, started_on
    finally:
        fast.stop()
        slow.stop()


def with_max_traces(router: Path, max_traces: int) -> Path:
    text = router.read_text(encoding="utf-8").replace(
        "    model_info:\n", f"    model_info:\n      max_traces: {max_traces}\n")
    router.write_text(text, encoding="utf-8")
    return router


# The step limit of the tail tests: a trace on the left server runs to it (the left never
# answers), one on the right ends at its first step (the right always does).
TAIL_STEPS = 12


def left_goes_on_right_answers(left: FakeOpenAI, right: FakeOpenAI) -> threading.Event:
    """The left server writes a step that is never an answer, each held until the right
    has answered once (its trace is over before the left's go on, however loaded the
    machine); the right answers at once. Returns the event the right sets."""
    answered = threading.Event()

    def right_answers(path: str, body: dict[str, Any]) -> Reply:
        answered.set()
        return Reply(text=" So the answer is ) ].\n")

    left.responder = lambda path, body: Reply(text=" We go on.\n", hold=answered, hold_s=30)
    right.responder = right_answers
    return answered


def steps_by_deployment(store: Store) -> list[list[str | None]]:
    return sorted(([step.deployment for step in store.branch(summary.session.id)]
                   for summary in store.sessions()), key=len)


async def test_at_the_tail_a_busy_deployment_hands_a_live_trace_to_an_idle_one(
    two_servers: tuple[FakeOpenAI, FakeOpenAI], tmp_path: Path
) -> None:
    """Three traces on two deployments of `max_traces: 2`: the left holds two, the right
    one, which ends at once. Nothing waits for a place any more, so the left hands one of its
    two over to the idle right (its prompt cache on the left given up once): that trace's
    later steps are served, and recorded, by the right. Before, both stayed on the left to
    their last step while the right sat idle."""
    left, right = two_servers
    left_goes_on_right_answers(left, right)
    router = with_max_traces(router_yaml(tmp_path / "router.yaml", ("left", left),
                                         ("right", right)), 2)
    alone, moved, stayed = await three_dyck_traces_by_deployment(router, tmp_path)
    # The first trace to ask went left, the second right, the third left (the file's order
    # breaks the tie).
    assert alone == ["right"]
    # Moved at its next step once the right was idle; there it was answered at once.
    assert moved[-1] == "right" and set(moved[:-1]) == {"left"}, moved
    assert stayed == ["left"] * TAIL_STEPS  # alone on the left then: no reason to move
    assert len(right.requests) == 2


async def test_at_the_tail_a_deployment_hands_a_trace_to_one_holding_two_fewer(
    two_servers: tuple[FakeOpenAI, FakeOpenAI], tmp_path: Path
) -> None:
    """Five traces on two deployments of `max_traces: 3`: the left holds three, the right
    two, one of which ends at once; the other stays live (its first call held). Nothing
    waits for a place any more and the left holds two traces more than the right, so one of
    the left's three goes on at the right while the right's own trace is still live: the
    right's turns are shared out rather than one server's three taking turns to the end.
    Before, a trace moved only to an idle deployment, and all three stayed left. Each step
    names the deployment that served it (the store against the servers' own requests)."""
    left, right = two_servers
    jobs = jobs_from_bundled("dyck_languages", 5)
    answered, moved = threading.Event(), threading.Event()
    first_on_right: list[int] = []  # the traces that started on the right, by job index

    def trace_of(body: dict[str, Any]) -> int:
        prompt = last_prompt(body)
        return next(index for index, job in enumerate(jobs) if job.row.input in prompt)

    def right_serves(path: str, body: dict[str, Any]) -> Reply:
        trace = trace_of(body)
        if "We go on." not in last_prompt(body):  # a trace's first step: it started here
            first_on_right.append(trace)
            if len(first_on_right) == 1:
                answered.set()
                return Reply(text=" So the answer is ) ].\n")
            return Reply(text=" We go on.\n", hold=moved, hold_s=30)  # live until a move
        if trace not in first_on_right:
            moved.set()  # a trace that started on the left
        return Reply(text=" We go on.\n")

    left.responder = lambda path, body: Reply(text=" We go on.\n", hold=answered, hold_s=30)
    right.responder = right_serves
    router = with_max_traces(router_yaml(tmp_path / "router.yaml", ("left", left),
                                         ("right", right)), 3)
    spec = llm.ModelSpec("tiny", router=str(router))
    settings = StepperSettings(step_limit=TAIL_STEPS, call=SETTINGS.call)
    with Store.open(tmp_path / "store.sqlite3") as store:
        progress = await run_batch(jobs, spec, store, tmp_path / "out.jsonl", concurrency=5,
                                   settings=settings)
        assert (progress.done, progress.failed) == (5, 0), progress.errors
        recorded = {next(index for index, job in enumerate(jobs)
                         if job.row.input == summary.session.input):
                    [step.deployment for step in store.branch(summary.session.id)]
                    for summary in store.sessions()}
    ended_at_once, stayed_live = first_on_right
    on_right = [trace_of(request.body) for request in right.requests]
    on_left = [trace_of(request.body) for request in left.requests]
    movers = [trace for trace in range(5) if trace not in first_on_right and trace in on_right]
    assert len(movers) == 1, on_right
    # It moved while the right's other trace was live: its first call there came before
    # that trace's second (whose first was held until the move).
    assert on_right.index(movers[0]) < [
        place for place, trace in enumerate(on_right) if trace == stayed_live][1], on_right
    assert recorded[ended_at_once] == ["right"]
    # Each step names the deployment that served it, a moved trace's too.
    for trace, deployments in recorded.items():
        assert deployments.count("right") == on_right.count(trace), (trace, deployments)
        assert deployments.count("left") == on_left.count(trace), (trace, deployments)


async def three_dyck_traces_by_deployment(router: Path, tmp_path: Path) -> list[list[str | None]]:
    """Three dyck_languages traces of TAIL_STEPS steps through `router`, three at once: the
    deployment that served each step, trace by trace."""
    spec = llm.ModelSpec("tiny", router=str(router))
    settings = StepperSettings(step_limit=TAIL_STEPS, call=SETTINGS.call)
    with Store.open(tmp_path / "store.sqlite3") as store:
        progress = await run_batch(jobs_from_bundled("dyck_languages", 3), spec, store,
                                   tmp_path / "out.jsonl", concurrency=3, settings=settings)
        assert (progress.done, progress.failed) == (3, 0), progress.errors
        return steps_by_deployment(store)


async def test_a_deployment_without_max_traces_keeps_its_traces_to_the_end(
    two_servers: tuple[FakeOpenAI, FakeOpenAI], tmp_path: Path
) -> None:
    """The same batch with no `max_traces`: nothing says the left's traces take turns (a
    provider that runs calls in parallel gains nothing from a move and would write the
    prompt's cache again), so each trace stays where it started."""
    left, right = two_servers
    left_goes_on_right_answers(left, right)
    router = router_yaml(tmp_path / "router.yaml", ("left", left), ("right", right))
    assert await three_dyck_traces_by_deployment(router, tmp_path) == [
        ["right"], ["left"] * TAIL_STEPS, ["left"] * TAIL_STEPS]
    assert len(right.requests) == 1


async def test_waiting_traces_get_places_in_the_order_they_asked(
    openai_server: FakeOpenAI, tmp_path: Path
) -> None:
    """One deployment that holds one trace at a time, eight traces asking at once: they
    get it in the batch's order (a batch's first traces first), not in whatever order a
    set of waiters woke in (a 40-step trace that asked eighth started last of sixteen in
    bench/router.py --quick, and ended the batch alone)."""
    openai_server.responder = lambda path, body: Reply(text=" So the answer is ) ].\n")
    router = with_max_traces(router_yaml(tmp_path / "router.yaml", ("only", openai_server)), 1)
    spec = llm.ModelSpec("tiny", router=str(router))
    jobs = jobs_from_bundled("dyck_languages", 8)
    with Store.open(tmp_path / "store.sqlite3") as store:
        progress = await run_batch(jobs, spec, store, tmp_path / "out.jsonl", concurrency=8,
                                   settings=SETTINGS)
        assert (progress.done, progress.failed) == (8, 0), progress.errors
    asked = [last_prompt(request.body) for request in openai_server.requests]
    order = [next(index for index, job in enumerate(jobs) if job.row.input in prompt)
             for prompt in asked]
    assert order == list(range(8))


@pytest.mark.parametrize(("limit", "assemblies"), [("", 0), ("      rpm: 600\n", 2)])
async def test_a_routers_stream_is_closed_at_the_last_chunk_unless_the_router_counts(
    openai_server: FakeOpenAI, tmp_path: Path, assembled: list[int], limit: str,
    assemblies: int
) -> None:
    """Through a router file that sets no limit the Router counts (`tpm`, `rpm`) nor a
    strategy that counts, a step's stream is closed once the provider's last chunk is in,
    as a direct call's is: litellm's work at the stream's end (its success callbacks, the
    answer assembled again twice) cost ~5 ms of CPU a step (bench/router.py: 16 ms a step
    through the Router, 11 ms after, 9 ms direct). With `rpm` set the Router counts each
    call there, so the stream is read to its end. The step, its usage and the deployment
    that served it are the same either way."""
    openai_server.enqueue(Reply(" Fine.\n"))
    router = router_yaml(tmp_path / "router.yaml", ("only", openai_server))
    router.write_text(router.read_text().replace("      api_key: no-key\n",
                                                 f"      api_key: no-key\n{limit}"))
    spec = llm.ModelSpec("tiny", router=str(router))
    results = [item async for item in llm.stream_step(spec, "Q\nThought 1:")
               if isinstance(item, llm.StepText)]
    [step] = results
    assert step.text == "Fine."
    assert step.call.deployment == "only"
    assert step.call.prompt_tokens and step.call.completion_tokens
    assert assembled[0] == assemblies


def test_a_router_file_is_read_again_when_it_changes_and_resolved_once_per_spelling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A step asks for its router file ~7 times: each asks the file's state (a stat), so an
    edited file is read again at once, but its path is resolved once per spelling and
    working folder (it was resolved every time: ~80 us each at load 10, 0.5 ms a step)."""
    from bbm_tui.core.llm.router import router_file

    resolved = [0]
    resolve = Path.resolve

    def counted(self: Path, strict: bool = False) -> Path:
        resolved[0] += 1
        return resolve(self, strict)

    monkeypatch.setattr(Path, "resolve", counted)
    path = tmp_path / "counted-router.yaml"
    path.write_text("model_list:\n  - {model_name: a, litellm_params: {model: x}}\n",
                    encoding="utf-8")
    for _ in range(5):
        assert [d.group for d in router_file(str(path)).deployments] == ["a"]
    monkeypatch.chdir(tmp_path)
    for _ in range(5):
        assert [d.group for d in router_file("counted-router.yaml").deployments] == ["a"]
    assert resolved[0] == 2  # one a spelling
    path.write_text("model_list:\n  - {model_name: a, litellm_params: {model: x}}\n"
                    "  - {model_name: b, litellm_params: {model: y}}\n", encoding="utf-8")
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    assert [d.group for d in router_file(str(path)).deployments] == ["a", "b"]


@pytest.fixture
def router_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The model each call entering litellm's `Router.acompletion` named (its fallbacks,
    retries and per-call count around the call of a deployment), while the test runs."""
    router = router_class()
    outer = router.acompletion
    named: list[str] = []

    async def counted(self: Any, model: str, *args: Any, **kwargs: Any) -> Any:
        named.append(model)
        return await outer(self, model, *args, **kwargs)

    monkeypatch.setattr(router, "acompletion", counted)
    return named


async def one_trace_through(router: Path, tmp_path: Path) -> list[str | None]:
    """One trace run to its end through `router`'s group "tiny", a call at a time: the
    deployment that served each of its steps, in order."""
    spec = llm.ModelSpec("tiny", router=str(router))
    with Store.open(tmp_path / "store.sqlite3") as store:
        progress = await run_batch(jobs_from_bundled("logical_deduction", 1), spec, store,
                                   tmp_path / "out.jsonl", concurrency=1, settings=SETTINGS)
        assert (progress.done, progress.failed) == (1, 0), progress.errors
        [steps] = steps_by_deployment(store)
    return steps


@pytest.mark.parametrize(("extra", "through_the_router"), [
    ("", False), ("router_settings:\n  default_fallbacks: [tiny]\n", True)])
async def test_a_pinned_call_skips_the_routers_outer_layers_unless_the_file_sets_fallbacks(
    openai_server: FakeOpenAI, tmp_path: Path, router_calls: list[str], extra: str,
    through_the_router: bool
) -> None:
    """A call of a trace pinned to its deployment goes to the Router's call of that
    deployment without the layers around it (~1 ms of CPU a call) where the file sets
    nothing they act on; with fallbacks every call goes through them, as before."""
    openai_server.responder = dataset_responder
    router = router_yaml(tmp_path / "router.yaml", ("only", openai_server), extra=extra)
    steps = await one_trace_through(router, tmp_path)
    assert len(steps) >= 2 and set(steps) == {"only"}
    assert len(openai_server.requests) == len(steps)
    assert router_calls == (["only"] * len(steps) if through_the_router else [])


async def test_a_pinned_call_that_fails_cools_its_deployment_down_and_goes_elsewhere(
    two_servers: tuple[FakeOpenAI, FakeOpenAI], tmp_path: Path, router_calls: list[str]
) -> None:
    """A call that skipped the Router's outer layers fails as one through them: the Router
    cools the deployment down (its failure callback), the trace is unpinned, and its next
    attempt goes to the model group through the Router, which serves it elsewhere; the
    trace is then pinned there, and its later calls skip the outer layers again."""
    from bbm_tui.core.llm import router as router_module

    left, right = two_servers
    served = {"left": 0}

    def left_fails_at_its_second(path: str, body: dict[str, Any]) -> Reply:
        served["left"] += 1
        if served["left"] >= 2:
            return Reply(status=500, error_message="the server broke")
        return dataset_responder(path, body)

    left.responder = left_fails_at_its_second
    right.responder = dataset_responder
    router = router_yaml(tmp_path / "router.yaml", ("left", left), ("right", right))
    steps = await one_trace_through(router, tmp_path)
    _, built = router_module._router(str(router))
    assert "left" in cooldown_deployments(built)
    assert steps[0] == "left" and set(steps[1:]) == {"right"} and len(steps) >= 3, steps
    assert served["left"] == 2  # the failed call was not sent there again
    assert router_calls == ["tiny"]  # only the attempt after the failure chose through it
