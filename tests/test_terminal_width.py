"""Terminal output that fits: on an 80-column terminal every line fits, no number is cut,
long names get an ellipsis; piped output is the whole table as before."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from mcsim.cli import cli
from mcsim.outputs import terminal
from mcsim.text import fit_lines

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO / "tests" / "data" / "corpus" / "claude" / "projects"


def run(monkeypatch: pytest.MonkeyPatch, columns: int | None, *args: str) -> str:
    import mcsim.cli

    monkeypatch.setattr(terminal, "terminal_width", lambda: columns)
    monkeypatch.setattr(mcsim.cli, "terminal_width", lambda: columns)
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


def numbers(text: str) -> list[str]:
    return sorted(re.findall(r"[-+]?\d[\d,.]*[%kM]?", text))


@pytest.mark.parametrize("command", ["inspect", "replay"])
def test_tables_fit_80_columns_and_keep_every_number(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, command: str
) -> None:
    args = [command, str(CORPUS)]
    if command == "replay":
        args += ["--policy", "all", "--no-cache", "--out", str(tmp_path / "r")]
    piped = run(monkeypatch, None, *args)
    if command == "replay":
        args[-1] = str(tmp_path / "r2")
    narrow = run(monkeypatch, 80, *args)
    assert max(len(line) for line in piped.splitlines()) > 80  # the whole table, as before
    assert max(len(line) for line in narrow.splitlines()) <= 80
    table_of = lambda text: text.split("\nfidelity")[0].split("\ncache breaks")[0]  # noqa: E731
    # Each block repeats the name columns (the project and session, or the policy) and holds
    # other columns: once those are set aside, the figures are the same, none cut.
    names = r"^\S+(\s+([0-9a-f]{8}|\d+ sess))?"
    wide_figures = numbers(re.sub(names, "", table_of(piped), flags=re.M))
    narrow_figures = numbers(re.sub(names, "", table_of(narrow), flags=re.M))
    assert narrow_figures == wide_figures


def test_long_names_get_an_ellipsis_and_notes_wrap(monkeypatch: pytest.MonkeyPatch) -> None:
    narrow = run(monkeypatch, 80, "inspect", str(CORPUS))
    # -Users-dain-workspace-claude-code-log-sample, shortened to 19 columns in the middle
    assert "-Users-da…og-sample" in narrow
    # 40 columns: "note: " and 7 words make 40; a continuation is indented 2, so 7 words.
    assert fit_lines("note: " + "word " * 30, 40).splitlines() == [
        "note: " + " ".join(["word"] * 7),
        *["  " + " ".join(["word"] * 7)] * 3,
        "  word word",
    ]
    path = "  /a/very/long/path/that/cannot/fit/in/twenty/columns.jsonl:42: bad"
    wrapped = fit_lines(path, 20).splitlines()
    assert max(len(line) for line in wrapped) <= 20
    assert "".join(wrapped).replace(" ", "") == path.replace(" ", "")
    assert fit_lines("short\nlines", None) == "short\nlines"
