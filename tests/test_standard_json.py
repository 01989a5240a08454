"""Every file bbm-tui writes is standard JSON (RFC 8259): no NaN, Infinity or -Infinity, which
Python writes by default and strict readers (JavaScript, jq, Go, serde) refuse. Each
`json.dumps` in the code says whether it may write them (only the reply guard, which hands a
provider's reply on to litellm unchanged, does); the suite's own check (tests/conftest.py)
reads every JSON and JSONL file each test leaves with a strict reader. Input files holding
such constants are refused, naming the file and line, since what a command copies from them
would not be standard either."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from bbm_tui.core.dataset import DatasetError, read_rows
from tests.strict_json import NotStandardJson, nonstandard_json_files, strict_loads

PACKAGE = Path(__file__).resolve().parents[1] / "bbm_tui"
# The one place a non-standard constant may be written: a reply on its way to litellm.
PASSES_THROUGH = {"core/llm/http_guard.py"}


def json_dumps_calls() -> list[tuple[str, int, ast.Call]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("dumps", "dump")
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "json"):
                found.append((str(path.relative_to(PACKAGE)), node.lineno, node))
    return found


def test_every_json_dump_refuses_nan_and_infinity() -> None:
    calls = json_dumps_calls()
    assert len(calls) >= 15
    for where, line, call in calls:
        allow = {k.arg: k.value for k in call.keywords}.get("allow_nan")
        assert isinstance(allow, ast.Constant), f"{where}:{line} says nothing of allow_nan"
        assert allow.value is (where in PASSES_THROUGH), f"{where}:{line}"


def test_the_strict_reader_refuses_what_python_takes(tmp_path: Path) -> None:
    for text in ("NaN", "[Infinity]", '{"a": -Infinity}'):
        json.loads(text)
        with pytest.raises(NotStandardJson):
            strict_loads(text)
    assert strict_loads('{"text": "NaN and Infinity"}') == {"text": "NaN and Infinity"}
    (tmp_path / "out.jsonl").write_text('{"a": 1}\n{"step_logprobs": [Infinity]}\n')
    (tmp_path / "broken.jsonl").write_text('{"a": NaN\n')  # not JSON to anyone: not counted
    (tmp_path / "ok.json").write_text('{"note": "NaN"}')
    assert nonstandard_json_files(tmp_path) == [
        f"{tmp_path / 'out.jsonl'}:2: Infinity is not JSON"]
    (tmp_path / "out.jsonl").unlink()


@pytest.mark.nonstandard_json_inputs
@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_an_input_row_holding_such_a_constant_is_refused(tmp_path: Path, constant: str) -> None:
    path = tmp_path / "word_sorting.jsonl"
    path.write_text('{"input": "b a", "steps": [], "answer": null, "target": "a b"}\n'
                    f'{{"input": "b a", "steps": [], "answer": null, "target": "a b", '
                    f'"score": {constant}}}\n')
    with pytest.raises(DatasetError) as raised:
        read_rows(path)
    assert str(raised.value) == (f"{path}:2: {constant} is not a JSON number (standard JSON "
                                 "has no NaN or Infinity)")
