"""The manual (docs/, built by mkdocs) against the code: every option of every command's
parser, every config key and every key of the screens it tables is written down, so a flag,
key or binding added without its line in the docs fails here; and the README, the landing
page, stays short and its links land. (`mkdocs build --strict` in .ci/run checks the site's
own links and anchors.)"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from bbm_tui.cli import COMMANDS, build_parser
from bbm_tui.core.config import CONFIG_KEYS

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
# Where each parser's options are tabled: the app's in the getting-started page, each
# command's in its section of a page of docs/commands/ (the heading "## `bbm-tui NAME`").
APP_SECTION = (DOCS / "usage.md", "## The app's command line")


def the_parsers() -> dict[str, argparse.ArgumentParser]:
    """The app's parser (under "") and each command's, built as `bbm-tui` builds them (with
    `find`'s methods)."""
    parser = build_parser(["find"])
    commands = next(action for action in parser._actions
                    if isinstance(action, argparse._SubParsersAction))
    return {"": parser, **commands.choices}


def section(page: Path, heading: str) -> str:
    """The text under `heading` up to the next heading of its level or above."""
    text = "\n" + page.read_text(encoding="utf-8")
    assert f"\n{heading}\n" in text, f"{page.relative_to(ROOT)} has no heading {heading!r}"
    level = heading.split(" ", 1)[0]
    body = text.split(f"\n{heading}\n", 1)[1]
    ends = [body.index(f"\n{'#' * depth} ") for depth in range(1, len(level) + 1)
            if f"\n{'#' * depth} " in body]
    return body[:min(ends)] if ends else body


def command_section(name: str) -> str:
    heading = f"## `bbm-tui {name}`"
    pages = [page for page in sorted((DOCS / "commands").glob("*.md"))
             if f"\n{heading}\n" in page.read_text(encoding="utf-8")]
    assert len(pages) == 1, f"`bbm-tui {name}` needs one section in docs/commands/: {pages}"
    return section(pages[0], heading)


def options_of(parser: argparse.ArgumentParser) -> list[str]:
    return [option for action in parser._actions for option in action.option_strings
            if option.startswith("--") and option != "--help"]


def named(text: str, option: str) -> bool:
    """`option` written as code in `text` (`--out OUT.jsonl`, `--plot[=WHEN]`), not as the
    start of a longer option (`--one-call` is not `--one`)."""
    return re.search(rf"`{re.escape(option)}(?![\w-])", text) is not None


def test_every_command_has_a_page() -> None:
    parsers = the_parsers()
    assert set(parsers) - {""} == {name for name in COMMANDS if name}
    for name in parsers:
        if name:
            command_section(name)


@pytest.mark.parametrize("name", sorted(the_parsers()), ids=lambda name: name or "app")
def test_every_option_is_in_the_docs(name: str) -> None:
    """Each option of `bbm-tui [COMMAND] --help` is in the command's section of the docs."""
    text = section(*APP_SECTION) if name == "" else command_section(name)
    missing = [option for option in options_of(the_parsers()[name]) if not named(text, option)]
    assert not missing, f"bbm-tui {name} options not in its docs section: {missing}"


def test_every_config_key_is_in_the_config_page() -> None:
    """The config page's table has a row for each key config.toml takes, and its example
    file sets each."""
    table = section(DOCS / "config.md", "## Config")
    rows = {match for match in re.findall(r"^\| `([a-z_\[\]]+)` \|", table, re.MULTILINE)}
    assert rows == {*CONFIG_KEYS, "[keymap]"}
    example = table.split("```toml\n", 1)[1].split("```", 1)[0]
    assert set(re.findall(r"^([a-z_]+) =", example, re.MULTILINE)) >= set(CONFIG_KEYS)


def documented_ids(page: Path, heading: str) -> set[str]:
    """The binding ids in the third column of the key table under `heading`."""
    ids = set()
    for row in section(page, heading).splitlines():
        cells = [cell.strip() for cell in row.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[2].startswith("`"):
            ids.update(re.findall(r"`([a-z_0-9]+)`", cells[2]))
    return ids


def binding_ids(screen: type) -> set[str]:
    return {binding.id for binding in screen.BINDINGS if getattr(binding, "id", None)}


def test_the_screen_pages_table_every_key() -> None:
    """The key tables of the screens' pages list their screen's binding ids, all of them and
    no other (the trace screen's own, with the app's keys, is checked through the help in
    tests/ui/test_ui_trace_keys.py)."""
    from bbm_tui.ui.dialogs import MessagesScreen
    from bbm_tui.ui.screens.adjudicate import AdjudicateScreen
    from bbm_tui.ui.screens.agreement import AgreementScreen
    from bbm_tui.ui.screens.annotate import AnnotateScreen, PerStepAnnotateScreen
    from bbm_tui.ui.screens.backtrack import CandidatesScreen, EditThoughtScreen
    from bbm_tui.ui.screens.branch_tree import BranchTreeScreen
    from bbm_tui.ui.screens.compare import CompareScreen
    from bbm_tui.ui.screens.dataset import DatasetScreen
    from bbm_tui.ui.screens.importance import ImportanceScreen, RolloutsDialog
    from bbm_tui.ui.screens.new_session import NewSessionScreen
    from bbm_tui.ui.screens.sessions import SessionsScreen
    from bbm_tui.ui.screens.side_by_side import SideBySideScreen
    from bbm_tui.ui.screens.tokens import TokenScreen

    screens = DOCS / "screens"
    assert documented_ids(screens / "new-session.md", "# New session") == binding_ids(
        NewSessionScreen)
    assert documented_ids(screens / "sessions.md", "## Keys") == binding_ids(SessionsScreen)
    assert documented_ids(screens / "side-by-side.md", "## Keys") == binding_ids(
        SideBySideScreen)
    assert documented_ids(screens / "charts.md", "## The dataset view") == binding_ids(
        DatasetScreen)
    assert documented_ids(screens / "charts.md", "## The agreement summary") == binding_ids(
        AgreementScreen)
    trace = screens / "trace.md"
    for heading, screen in (("### Backtracking's samples (`b`)", CandidatesScreen),
                            ("### Rewriting a thought (`w`)", EditThoughtScreen),
                            ("### The branch tree (`t`)", BranchTreeScreen),
                            ("### Two branches side by side (`v`)", CompareScreen),
                            ("### Messages (`M`)", MessagesScreen),
                            ("### Each thought's importance (`I`)", ImportanceScreen),
                            ("### The rollouts' dialog (`I`, `s`)", RolloutsDialog),
                            ("### Token by token (`l`)", TokenScreen)):
        assert documented_ids(trace, heading) == binding_ids(screen), heading
    annotation = DOCS / "annotation.md"
    assert documented_ids(annotation, "## Keys (annotation queue)") == binding_ids(
        AnnotateScreen)
    # The per-step protocol's table lists what it adds or changes; the rest are the queue's.
    assert (documented_ids(annotation, "## Keys (annotation queue)")
            | documented_ids(annotation, "## Per-step labelling (PRM800K's protocol)")
            ) == binding_ids(PerStepAnnotateScreen)
    assert documented_ids(annotation, "## Keys (adjudication)") == binding_ids(AdjudicateScreen)


def test_the_readme_is_a_landing_page() -> None:
    """Under 250 lines, with the two set-up commands and a link to the manual."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) < 250
    for line in ("scripts/app     # opens the app on the bundled offline replay model",
                 "scripts/test    # runs the whole test suite", "](docs/index.md)"):
        assert line in readme


def heading_anchors(page: Path) -> set[str]:
    """The anchors of a page's headings, as mkdocs (Python-Markdown's toc) and GitHub make
    them for the headings this manual uses."""
    from markdown.extensions.toc import slugify

    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL)
    return {slugify(heading.replace("`", ""), "-")
            for heading in re.findall(r"^#+ (.+)$", text, re.MULTILINE)}


def test_the_readmes_links_and_pictures_land() -> None:
    """Every relative link and picture of the README is a file of the repository (the
    screenshots are in docs/screenshots/, where the site finds them too), and every anchor
    a heading of its page."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)\s]+)\)", readme)
    local = [target for target in targets if not re.match(r"[a-z]+:", target)]
    assert any(target.endswith(".svg") for target in local)
    for target in local:
        path, _, anchor = target.partition("#")
        page = ROOT / path if path else ROOT / "README.md"
        assert page.is_file(), f"README links to {target}, which is not a file"
        if anchor:
            assert anchor in heading_anchors(page), f"README links to {target}: no such heading"
