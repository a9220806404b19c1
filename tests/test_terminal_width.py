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
SAMPLES = REPO / "sample_transcripts"
CLAUDE_CODE = REPO / "policies" / "claude-code.yaml"


def run(monkeypatch: pytest.MonkeyPatch, columns: int | None, *args: str) -> str:
    import mcsim.cli

    monkeypatch.setattr(terminal, "terminal_width", lambda: columns)
    monkeypatch.setattr(mcsim.cli, "terminal_width", lambda: columns)
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


def numbers(text: str) -> list[str]:
    return sorted(re.findall(r"[-+]?\d[\d,.]*[%kM]?", text))


@pytest.mark.slow
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
    # Every line fits, but one holding a single word longer than a line (a path, kept whole).
    assert all(len(line) <= 80 or len(line.split()) == 1 for line in narrow.splitlines())
    table_of = lambda text: text.split("\nfidelity")[0].split("\ncache breaks")[0]  # noqa: E731
    # Each block repeats the name columns (the project and session, or the policy) and holds
    # other columns: once those are set aside, the figures are the same, none cut.
    names = r"^\S+(\s+([0-9a-f]{8}|\d+ sess))?"
    wide_figures = numbers(re.sub(names, "", table_of(piped), flags=re.M))
    narrow_figures = numbers(re.sub(names, "", table_of(narrow), flags=re.M))
    assert narrow_figures == wide_figures


def test_long_names_get_an_ellipsis_and_notes_wrap(monkeypatch: pytest.MonkeyPatch) -> None:
    narrow = run(monkeypatch, 80, "inspect", str(CORPUS))
    # -Users-dain-workspace-claude-code-log-sample, shortened in the middle: the name columns
    # get half of 80 less the 2 between them, 38; the session ids keep their 8, the project 30.
    assert "-Users-dain-wor…ode-log-sample" in narrow
    # 40 columns: "note: " and 7 words make 40; a continuation is indented 2, so 7 words.
    assert fit_lines("note: " + "word " * 30, 40).splitlines() == [
        "note: " + " ".join(["word"] * 7),
        *["  " + " ".join(["word"] * 7)] * 3,
        "  word word",
    ]
    # A path longer than a line stays whole, to be copied; the words after it wrap.
    path = "  /a/very/long/path/that/cannot/fit/in/twenty/columns.jsonl:42: bad thing"
    wrapped = fit_lines(path, 20).splitlines()
    assert wrapped == ["  /a/very/long/path/that/cannot/fit/in/twenty/columns.jsonl:42:",
                       "    bad thing"]  # fmt: skip
    assert fit_lines("short\nlines", None) == "short\nlines"


def test_blocks_are_balanced_and_names_are_shown_not_obeyed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A 10-column name and ten 8-column figures, two apart: 10 + 10 * (8 + 2) = 110 columns.
    # At 80, as many as fit first would give blocks of 7 and 3 figures (10 + 7 * 10 = 80);
    # the same two blocks, evenly cut, hold 5 and 5.
    monkeypatch.setattr(terminal, "terminal_width", lambda: 80)
    headers = ["name", *(f"c{i}" for i in range(1, 11))]
    rows = [["[bold]x[/]", *["1234.567"] * 10], ["plain-name", *["1"] * 10]]
    lines = terminal.table(headers, rows, right=set(range(1, 11)))
    heads = [line.split() for line in lines if line.startswith("name")]
    assert heads == [
        ["name", "c1", "c2", "c3", "c4", "c5"],
        ["name", "c6", "c7", "c8", "c9", "c10"],
    ]
    assert all(len(line) == 60 for line in lines if line.startswith("[bold]x[/]"))
    assert lines[1] == "─" * 60  # rich's rule under the header
    # Piped: the whole table on one line per row, the plain rule, nothing drawn by rich.
    monkeypatch.setattr(terminal, "terminal_width", lambda: None)
    piped = terminal.table(headers, rows, right=set(range(1, 11)))
    assert len(piped) == 4 and len(piped[2]) == 110 and set(piped[1]) == {"-", " "}


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [
        ["inspect", str(SAMPLES)],
        ["inspect", str(SAMPLES), "--by", "model"],
        ["replay", str(SAMPLES), "--policy", str(CLAUDE_CODE), "--no-cache"],
        [
            "sweep",
            str(SAMPLES),
            "--policy",
            str(CLAUDE_CODE),
            "--name",
            "cache-edits-only",
            "--grid",
            "keep_recent=1,3",
            "--no-cache",
        ],
    ],
    ids=["inspect", "inspect-by-model", "replay", "sweep"],
)
def test_every_piped_column_has_a_header(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, args: list[str]
) -> None:
    """Under each run of dashes of the rule, the header line holds a name: no column is only
    dashes (the sweep's column of marks, "<- recommended", had none)."""
    out = args if args[0] == "inspect" else [*args, "--out", str(tmp_path / "run")]
    lines = run(monkeypatch, None, *out).splitlines()
    rule = next(i for i, line in enumerate(lines) if line and set(line) == {"-", " "})
    header = lines[rule - 1]
    dashes = [m.span() for m in re.finditer(r"-+", lines[rule])]
    assert len(dashes) >= 8
    assert [(a, b) for a, b in dashes if not header[a:b].strip()] == []  # dashes under no name
    if args[0] == "sweep":
        assert header.split()[-1] == "pick"
        assert any(line.endswith("  <- recommended") for line in lines[rule + 1 :])
