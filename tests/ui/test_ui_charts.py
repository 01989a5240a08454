"""The app's charts: the dataset view (from the new-session screen's key and the palette) and
the agreement summary (from the annotation screens), played with Pilot; every number a chart
of theirs draws checked against the table the same command prints (`stats`, `find`,
`backtrack`, `agreement`, run through the real command line); and an SVG snapshot of each
chart at 80x24 and 120x40.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console
from textual.pilot import Pilot
from ui_helpers import make_app, steady_frame, wait_for

from bbm_tui.cli import main
from bbm_tui.core.annotation import protocol
from bbm_tui.core.annotation.queue import AnnotationQueue, read_queue_file
from bbm_tui.core.dataset import bundled_path, bundled_rows
from bbm_tui.core.store import Store
from bbm_tui.core.tasks import TASK_NAMES
from bbm_tui.plotting import numbers
from bbm_tui.ui.app import AnnotateRequest
from bbm_tui.ui.screens.dataset import DatasetFilesDialog, DatasetScreen
from bbm_tui.ui.widgets.chart import ChartView
from tests.test_charts import table_rows

SIZES = pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
DATASET = [bundled_path(task) for task in TASK_NAMES]


def command(*args: str) -> str:
    """Run a command of the real command line; what it printed."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert main(list(args)) == 0
    return out.getvalue()


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    """A find PREDS file (the simulated reward model, direct trace-level, 40 traces each of
    two tasks) and a backtrack OUT file (gold locations, 4 traces each of two tasks), made by
    the commands once for the module, with the tables they printed."""
    folder = tmp_path_factory.mktemp("charts")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BBM_TUI_HOME", str(folder / "home"))
        patch.setenv("BBM_TUI_CONFIG", str(folder / "config.toml"))
        patch.setenv("BBM_TUI_REPLAY_TPS", "0")
        inputs = [str(bundled_path("word_sorting")), str(bundled_path("multistep_arithmetic"))]
        preds, out = folder / "preds.jsonl", folder / "bt.jsonl"
        found = command("find", "--model", "simulated/rm-0.65", "--method", "direct-trace",
                        "--input", *inputs, "--limit", "40", "--out", str(preds), "--paper",
                        "gpt-4", "--no-progress")
        backtracked = command("backtrack", "--model", "replay/bbm", "--input", *inputs,
                              "--locations", "gold", "--limit", "4", "--out", str(out),
                              "--no-progress")
        yield {"preds": preds, "out": out, "find": found, "backtrack": backtracked}


async def open_view(pilot: Pilot, paths: list[Path], **kwargs) -> DatasetScreen:
    app = pilot.app
    await wait_for(pilot, lambda: type(app.screen).__name__ == "NewSessionScreen")
    await app.push_screen(DatasetScreen(paths, **kwargs))
    await wait_for(pilot, lambda: isinstance(app.screen, DatasetScreen)
                   and app.screen.summary is not None, timeout=20)
    return app.screen


def shown(screen: DatasetScreen) -> list[list[str]]:
    """The numbers of the chart on show, as its table (`t`) lists them."""
    chart = screen.query_one(ChartView).chart
    assert chart is not None
    return numbers(chart)[1]


# --------------------------------------------------------------------------- the numbers


async def test_the_dataset_views_numbers_are_the_stats_tables() -> None:
    out = command("stats", *map(str, DATASET))
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_view(pilot, DATASET)
        titles = {"first mistake: thought": "First mistake at thought N",
                  "first mistake: place": "First mistake by place in the trace",
                  "trace lengths": "Trace lengths (steps; traces)"}
        for page, title in titles.items():
            printed = {cells[0]: cells[1:] for cells in table_rows(out, title)}
            assert screen.current_page.name == page
            for task in ["overall", *TASK_NAMES]:  # the first task is all of them
                assert [cells[1] for cells in shown(screen)] == printed[task], (page, task)
                await pilot.press("down")
            await pilot.press("right")
        assert screen.current_page.name == "with / without a mistake"
        table_2 = {cells[0]: cells for cells in table_rows(out, "Traces per task")}
        for task, with_mistake, without in shown(screen):
            assert [with_mistake, without] == table_2[task][3:5]


async def test_the_finder_and_backtracking_charts_are_the_commands_tables(outputs) -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_view(pilot, [outputs["preds"]], chart="finder vs the paper")
        assert screen.current_page.name == "finder vs the paper"
        printed = {cells[0]: cells for cells in
                   table_rows(outputs["find"], "first-mistake location")}
        # The table: task, n, accuracy, paper (gpt-4), ...; the chart: ours, paper: gpt-4.
        for task, ours, paper in shown(screen):
            assert [ours, paper] == printed[task][2:4], task
        assert screen.paper_models[screen.paper_index] == "gpt-4"
        await pilot.press("m")  # another of the paper's models
        assert screen.paper_models[screen.paper_index] != "gpt-4"
        assert numbers(screen.query_one(ChartView).chart)[0][2] == \
            f"paper: {screen.paper_models[screen.paper_index]}"

        await pilot.press("escape")
        screen = await open_view(pilot, [outputs["out"]], chart="backtracking: answer was "
                                 "right")
        printed = {cells[0]: cells for cells in
                   table_rows(outputs["backtrack"], "the paper's Table 6)")}
        for task, ours, gold_paper, _random_paper in shown(screen):
            assert [ours, gold_paper] == [printed[task][3], printed[task][6]], task
        await pilot.press("right")
        for task, ours, gold_paper, _random_paper in shown(screen):
            assert [ours, gold_paper] == [printed[task][5], printed[task][7]], task


async def test_keys_numbers_and_the_new_session_screens_key() -> None:
    app = make_app(task="logical_deduction")
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: type(app.screen).__name__ == "NewSessionScreen")
        await pilot.press("ctrl+d")
        await wait_for(pilot, lambda: isinstance(app.screen, DatasetScreen)
                       and app.screen.summary is not None, timeout=20)
        screen = app.screen
        assert screen.paths == [bundled_path("logical_deduction")]
        assert screen.task == "logical_deduction"
        view = screen.query_one(ChartView)
        assert not view.numbers_shown
        await pilot.press("t")
        assert view.numbers_shown
        await pilot.press("right")  # the numbers stay on show from chart to chart
        assert view.numbers_shown and screen.current_page.name == "first mistake: place"
        await pilot.press("t", "left", "left")
        assert not view.numbers_shown and screen.current_page.name == "with / without a mistake"
        assert screen.check_action("task", (1,)) is None  # a chart across the tasks
        await pilot.press("escape")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "NewSessionScreen")


async def test_the_palette_asks_for_files_and_says_what_is_wrong(tmp_path: Path) -> None:
    broken = tmp_path / "word_sorting.jsonl"
    broken.write_text('{"input": "x"\n')
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: type(app.screen).__name__ == "NewSessionScreen")
        await app.action_dataset_view()
        await wait_for(pilot, lambda: isinstance(app.screen, DatasetFilesDialog))
        field = app.screen.query_one("#dataset-files")
        assert field.value == str(bundled_path("word_sorting"))  # the task's, to start with
        field.value = str(broken)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, DatasetScreen))
        where = app.screen.query_one("#dataset-where")
        await wait_for(pilot, lambda: "Cannot read the files" in str(where.render()))
        assert f"{broken}:2: malformed JSON" in str(where.render())
        assert not app.screen.query_one(ChartView).display


def drawn(renderable) -> str:
    console = Console(width=120, record=True, file=io.StringIO(), color_system=None)
    console.print(renderable)
    return console.export_text()


def label(store: Store, path: Path, name: str, labels: list[int | None]) -> None:
    queue = AnnotationQueue(store, name, read_queue_file(path)[:len(labels)])
    for found in labels:
        for mark in protocol.judged_for(found, len(queue.current.row.steps)):
            queue.judge(mark == protocol.CORRECT)
        queue.submit()


ANNOTATORS = {"alice": [1, None, 0, 3, 2, 2], "bob": [1, 2, 0, 3, 2, None],
              "carol": [1, None, 0, 1, 2, 2]}


def annotated(tmp_path: Path) -> Path:
    path = tmp_path / "word_sorting.jsonl"
    path.write_text("".join(row.to_line() + "\n" for row in bundled_rows("word_sorting")[:6]))
    with Store.open() as store:
        for name, labels in ANNOTATORS.items():
            label(store, path, name, labels)
    return path


async def test_the_agreement_summary_from_the_queue_is_the_commands_report(
        tmp_path: Path) -> None:
    path = annotated(tmp_path)
    out = command("agreement")
    printed = dict(re.findall(r"Cohen's kappa (\w+ / \w+): (-?[0-9.]+)", out))
    app = make_app(annotate=AnnotateRequest("alice", read_queue_file(path)))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: type(app.screen).__name__ == "AnnotateScreen")
        await pilot.press("a")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "AgreementScreen"
                       and app.screen.result is not None, timeout=20)
        screen = app.screen
        kappas = screen.result["cohen_kappa"]
        assert {pair.replace("|", " / "): f"{value:.3f}" for pair, value in kappas.items()} \
            == printed
        matrix = drawn(screen.query_one("#agreement-matrix").content)
        assert screen.query_one("#agreement-matrix-pane").border_title == \
            "Cohen's kappa between annotators"
        for pair, kappa in printed.items():
            first, second = pair.split(" / ")
            row = next(line for line in matrix.splitlines() if line.startswith(f"│ {first} "))
            names = list(ANNOTATORS)
            cell = row.strip("│").split("│")[1 + names.index(second)]
            assert cell.strip().endswith(kappa)
        await pilot.press("t")
        assert screen.numbers
        assert "raw agreement" in drawn(screen.query_one("#agreement-matrix").content)
        assert screen.pages == ["kappa between annotators", "alpha per task vs the paper"]
        await pilot.press("escape")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "AnnotateScreen")


# --------------------------------------------------------------------------- snapshots

PAGES = {
    "thought": ("first mistake: thought", None),
    "place": ("first mistake: place", "dyck_languages"),
    "lengths": ("trace lengths", None),
    "counts": ("with / without a mistake", None),
}


@SIZES
@pytest.mark.parametrize("page", list(PAGES))
def test_dataset_view_snapshots(snap_compare, size, page: str) -> None:
    chart, task = PAGES[page]

    async def run_before(pilot: Pilot) -> None:
        await open_view(pilot, DATASET, chart=chart, task=task)
        await steady_frame(pilot)

    assert snap_compare(make_app(), terminal_size=size, run_before=run_before)


OUTPUT_PAGES = {
    "finder": ("preds", "finder vs the paper", ()),
    "finder-numbers": ("preds", "finder vs the paper", ("t",)),
    "backtrack-right": ("out", "backtracking: answer was right", ()),
    "backtrack-wrong": ("out", "backtracking: answer was wrong", ()),
}


@SIZES
@pytest.mark.parametrize("page", list(OUTPUT_PAGES))
def test_run_output_snapshots(snap_compare, outputs, size, page: str) -> None:
    key, chart, keys = OUTPUT_PAGES[page]

    async def run_before(pilot: Pilot) -> None:
        await open_view(pilot, [outputs[key]], chart=chart)
        await pilot.press(*keys)
        await steady_frame(pilot)

    assert snap_compare(make_app(), terminal_size=size, run_before=run_before)


@SIZES
@pytest.mark.parametrize("page", ["matrix", "alpha"])
def test_agreement_snapshots(snap_compare, tmp_path: Path, size, page: str) -> None:
    annotated(tmp_path)

    async def run_before(pilot: Pilot) -> None:
        app = pilot.app
        await wait_for(pilot, lambda: app.store is not None
                       and type(app.screen).__name__ == "NewSessionScreen")
        await app.action_agreement()
        await wait_for(pilot, lambda: type(app.screen).__name__ == "AgreementScreen"
                       and app.screen.result is not None, timeout=20)
        if page == "alpha":
            await pilot.press("right")
        await steady_frame(pilot)

    assert snap_compare(make_app(), terminal_size=size, run_before=run_before)


def test_stats_json_and_view_agree_on_a_file_of_two_tasks(tmp_path: Path) -> None:
    """A `find` PREDS file over two bundled files names no task: each row's task is told by
    its content, by `stats` as by the view."""
    preds = tmp_path / "preds.jsonl"
    command("find", "--method", "verify", "--input", str(bundled_path("word_sorting")),
            str(bundled_path("dyck_languages")), "--limit", "5", "--out", str(preds))
    result = json.loads(command("stats", "--json", str(preds)))
    assert {task: figures["traces"] for task, figures in result["tasks"].items()} == {
        "word_sorting": 5, "dyck_languages": 5}


async def test_a_file_of_one_task_offers_the_task_once() -> None:
    """One task: "all tasks" and the task were one chart twice (issue 34, item 14)."""
    from bbm_tui.core.dataset import bundled_path

    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_view(pilot, [bundled_path("dyck_languages")])
        assert screen.tasks == ["dyck_languages"]
        await pilot.press("down")
        assert screen.task == "dyck_languages"
