"""Shared fixtures: an isolated home for every test, the local provider servers (OpenAI-compatible,
llama-server, Anthropic, Gemini, Ollama), and the reference data of ../shared/bbm where it
exists."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from tests.anthropic_server import FakeAnthropic
from tests.fake_server import FakeServer
from tests.gemini_server import FakeGemini
from tests.llama_server import FakeLlamaServer
from tests.ollama_server import FakeOllama
from tests.openai_server import FakeOpenAI
from tests.reference import build_reference_tree, mismatches_in_shipped
from tests.strict_json import nonstandard_json_files

ROOT = Path(__file__).resolve().parents[1]
SHARED_BBM = ROOT.parent / "shared" / "bbm"

# Keys from the developer's shell must never reach a test (or a test's failure message).
KEY_VARIABLES = (
    "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GROQ_API_KEY",
    "MISTRAL_API_KEY", "DEEPSEEK_API_KEY", "TOGETHERAI_API_KEY", "OPENROUTER_API_KEY",
    "HOSTED_VLLM_API_KEY", "AZURE_API_KEY", "COHERE_API_KEY", "FIREWORKS_AI_API_KEY",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """In a worker of pytest-xdist (scripts/test), the tests marked slow come first: one of
    them started last would keep its worker busy after the others have finished. (Every
    worker collects, and must collect in the same order: the sort is stable.)"""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(scope="session", autouse=True)
def litellm_imported_first() -> None:
    """In a worker of the whole suite (scripts/test), litellm is imported before the first
    test, as the app imports it in a thread after its first frame. Otherwise the first test
    of each worker that calls a model pays the import (3-5 s, several times that on a loaded
    machine) inside its own time limits, and which test that is depends on the scheduling.
    A single file run by hand imports it when it needs it, as before."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        from bbm_tui.core import llm

        llm.warm_up()


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                  request: pytest.FixtureRequest) -> Iterator[Path]:
    """Every test gets its own store and config location, an instant replay model, and no
    API keys from the environment. Afterwards, every JSON and JSONL file the test left (the
    outputs of every command the suite runs) must be standard JSON: no NaN or Infinity,
    which strict readers refuse."""
    home = tmp_path / "home"
    monkeypatch.setenv("BBM_TUI_HOME", str(home))
    monkeypatch.setenv("BBM_TUI_CONFIG", str(tmp_path / "config.toml"))
    monkeypatch.setenv("BBM_TUI_REPLAY_TPS", "0")
    for variable in KEY_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    yield home
    if request.node.get_closest_marker("nonstandard_json_inputs") is None:
        found = nonstandard_json_files(tmp_path)
        assert not found, "files that are not standard JSON:\n" + "\n".join(found)


# A server of any of the kinds (the fixtures keep its own type).
Served = TypeVar("Served", bound=FakeServer)


def _serving(server: Served) -> Iterator[Served]:
    server.start()
    yield server
    server.stop()


def _fresh(server: Served) -> Iterator[Served]:
    server.reset()
    yield server
    server.reset()


@pytest.fixture(autouse=True)
def no_user_tasks_after() -> Iterator[None]:
    """The user's tasks are the process's (the command line reads them at start): a test
    that put some there leaves none behind for the next."""
    yield
    from bbm_tui.core.tasks import use_tasks

    use_tasks([])


@pytest.fixture(scope="session")
def _server() -> Iterator[FakeServer]:
    yield from _serving(FakeOpenAI())


@pytest.fixture
def openai_server(_server: FakeOpenAI) -> Iterator[FakeOpenAI]:
    """The local OpenAI-compatible server, with an empty script for this test."""
    yield from _fresh(_server)


@pytest.fixture(scope="session")
def _second_server() -> Iterator[FakeServer]:
    yield from _serving(FakeOpenAI())


@pytest.fixture
def second_openai_server(_second_server: FakeOpenAI) -> Iterator[FakeOpenAI]:
    """Another local OpenAI-compatible server (another model, elsewhere: several models side
    by side), with an empty script for this test."""
    yield from _fresh(_second_server)


@pytest.fixture
def llama() -> Iterator[FakeLlamaServer]:
    """The suite's llama-server (tests/llama_server.py), one for this test alone: tests set
    its continuations, latencies and faults as they go."""
    yield from _serving(FakeLlamaServer())


@pytest.fixture(scope="session")
def _anthropic() -> Iterator[FakeServer]:
    yield from _serving(FakeAnthropic())


@pytest.fixture
def anthropic_server(_anthropic: FakeAnthropic) -> Iterator[FakeAnthropic]:
    """The local server speaking Anthropic's Messages API, with an empty script."""
    yield from _fresh(_anthropic)


@pytest.fixture(scope="session")
def _gemini() -> Iterator[FakeServer]:
    yield from _serving(FakeGemini())


@pytest.fixture
def gemini_server(_gemini: FakeGemini) -> Iterator[FakeGemini]:
    """The local server speaking the Gemini API, with an empty script."""
    yield from _fresh(_gemini)


@pytest.fixture(scope="session")
def _ollama() -> Iterator[FakeServer]:
    yield from _serving(FakeOllama())


@pytest.fixture
def ollama_server(_ollama: FakeOllama) -> Iterator[FakeOllama]:
    """The local server speaking Ollama's API, with an empty script."""
    yield from _fresh(_ollama)


def shared_bbm_present() -> bool:
    return SHARED_BBM.is_dir() and not os.environ.get("BBM_TUI_NO_SHARED")


@pytest.fixture(scope="session")
def reference_bbm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The paper's reference files: ../shared/bbm where it exists; in a user's clone, which has
    none, the shipped copies, once their SHA-256 match the paper's (tests/reference.py). So
    every fidelity test runs everywhere."""
    if shared_bbm_present():
        return SHARED_BBM
    problems = mismatches_in_shipped()
    if problems:
        pytest.fail("shipped reference files differ from the paper's:\n" + "\n".join(problems))
    return build_reference_tree(tmp_path_factory.mktemp("reference_bbm"))


@pytest.fixture
def shared_bbm() -> Path:
    """../shared/bbm itself, for the few tests that check the recorded checksums against it."""
    if not shared_bbm_present():
        pytest.skip("../shared/bbm is not present (a user's clone has no reference data)")
    return SHARED_BBM


@pytest.fixture
def assembled(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times litellm assembled a streamed answer again at its end (its
    `stream_chunk_builder`, which its stream wrapper runs before logging and pricing the call,
    and through which a Router's success callbacks count usage), counted while the test runs."""
    from bbm_tui.core import llm

    litellm = llm.litellm_module()
    builder = litellm.stream_chunk_builder
    count = [0]

    def counted(*args: object, **kwargs: object) -> object:
        count[0] += 1
        return builder(*args, **kwargs)

    monkeypatch.setattr(litellm, "stream_chunk_builder", counted)
    return count
