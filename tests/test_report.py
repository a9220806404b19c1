"""`mcsim report`: a self-contained review from a replay or a sweep run directory."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner
from conftest import REPO, SAMPLES

from mcsim.cli import cli
from mcsim.outputs.report import CHART_MAX_BYTES
from mcsim.text import markdown


def run(args: list[str]) -> None:
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output


@pytest.fixture(scope="module")
def replay_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("r") / "run"
    run(
        [
            "replay",
            str(SAMPLES),
            "--policy",
            str(REPO / "policies" / "all.yaml"),
            "--out",
            str(out),
            "--no-cache",
        ]
    )
    run(["report", str(out)])
    return out


def no_external_references(page: str) -> None:
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", page)
    assert "<script" not in page and "<link" not in page and "url(" not in page
    assert "@import" not in page


@pytest.mark.slow
def test_replay_report_is_self_contained_and_complete(replay_dir: Path) -> None:
    page = (replay_dir / "report.html").read_text()
    no_external_references(page)
    for heading in [
        "Verdict",
        "What was analysed",
        "What it really cost",
        "When the cache broke, and why",
        "What each pruning policy would have cost",
        "How far to trust the numbers",
        "Caveats",
    ]:
        assert f"<h2>{heading}</h2>" in page, heading
    assert page.count('src="data:image/png;base64,') == 4
    assert "2 sessions of a coding agent" in page and "69 model calls" in page
    assert "claude-opus-4-6" in page and "-home-dev-shop-api" in page
    assert "claude-code" in page and "naive-keep-6" in page
    assert "anthropic-list-2026-08" in page
    assert "Cache edits (cached_microcompact) are modelled" in page
    md = (replay_dir / "report.md").read_text()
    assert md.startswith("# Prompt-cache and pruning cost review (replay)")
    assert "| policy | cost | saved | net saved | savings | net |" in md
    # It opens with the run's verdict, as the terminal and --json state it.
    verdict = json.loads((replay_dir / "run.json").read_text())["verdict"]["text"]
    assert verdict.startswith("verdict: no policy saves; the best, claude-code, costs ")
    opening = md.split("## Verdict\n\n", 1)[1].split("\n", 1)[0]
    assert opening == markdown("N" + verdict.removeprefix("verdict: n"), limit=None) + "."
    # The baseline is named where "savings" are explained.
    assert "the baseline: no pruning, cache as recorded (TTL 5m on 43 calls, 1h on 26 calls)" in md
    assert "![Cumulative cost over all calls" in md


def test_sweep_report_shows_the_recommendation(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    run(
        [
            "sweep",
            str(SAMPLES),
            "--policy",
            str(REPO / "policies" / "claude-code.yaml"),
            "--name",
            "claude-code",
            "--grid",
            "cached_microcompact.keep_recent=1..4",
            "--grid",
            "ttl=5m,1h",
            "--out",
            str(out),
            "--no-cache",
        ]
    )
    run(["report", str(out)])
    page = (out / "report.html").read_text()
    no_external_references(page)
    assert "<h2>Tuning: every variant of the policy</h2>" in page
    assert "Recommendation: cached_microcompact.keep_recent=" in page
    assert "(recommended)" in page
    assert page.count('src="data:image/png;base64,') == 2


def test_not_a_run_directory(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["report", str(tmp_path)])
    assert result.exit_code == 2
    assert result.stderr.strip() == f"Error: {tmp_path}: not a run directory (no run.json)"


def test_an_inspect_run_directory_is_refused_with_what_report_reads(tmp_path: Path) -> None:
    out = tmp_path / "usage"
    inspect = CliRunner().invoke(cli, ["inspect", str(SAMPLES), "--out", str(out), "--no-cache"])
    assert inspect.exit_code == 0, inspect.output
    result = CliRunner().invoke(cli, ["report", str(out)])
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f"Error: {out}: neither summary.parquet nor sweep.parquet is there; mcsim report "
        "reads the run directory of a replay or a sweep"
    )


@pytest.fixture
def damaged(replay_dir: Path, tmp_path: Path) -> Path:
    """A copy of a replay run directory (without its report) to damage."""
    out = tmp_path / "run"
    shutil.copytree(replay_dir, out, ignore=shutil.ignore_patterns("report.*"))
    return out


def bad_run(run_dir: Path, code: int = 2) -> str:
    """The one-line error of `mcsim report` on a run directory it cannot report on; nothing
    is written and no temporary file is left."""
    before = sorted(p.name for p in run_dir.iterdir())
    result = CliRunner().invoke(cli, ["report", str(run_dir)])
    assert result.exit_code == code, result.output
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("Error: ")
    assert sorted(p.name for p in run_dir.iterdir()) == before
    return result.stderr.removeprefix("Error: ").rstrip("\n")


def rewrite_run_json(run_dir: Path, change: Callable[[dict[str, Any]], object]) -> None:
    doc = json.loads((run_dir / "run.json").read_text())
    change(doc)
    (run_dir / "run.json").write_text(json.dumps(doc))


def test_a_run_json_that_is_not_an_object_is_refused(damaged: Path) -> None:
    (damaged / "run.json").write_text("[]")
    assert bad_run(damaged) == (
        f"{damaged / 'run.json'}: not a run.json written by mcsim (not a JSON object)"
    )


@pytest.mark.parametrize(
    ("change", "shown"),
    [
        (
            lambda d: d.update(analysed=[]),
            "0 sessions of a coding agent (Claude Code transcripts), 0 model calls, from ? to "
            "?, in 0 projects.",
        ),
        (
            lambda d: d["analysed"].update(calls="x"),
            "2 sessions of a coding agent (Claude Code transcripts), 0 model calls, from",
        ),
        (lambda d: d.update(notes=["", 7, "more"]), "<p>More.</p>"),
        (lambda d: d.update(paths=[1]), "over the default transcript folders; policy"),
        (
            lambda d: d["recorded"].update(breaks_by_cause=[], cost_usd="lots"),
            "Recorded spend at list prices: $0.0000.",
        ),
        (
            lambda d: d["fidelity"].update(sessions_over_threshold=3, overall_error=None),
            "its error is 0.000% overall",
        ),
    ],
)
def test_fields_of_the_wrong_type_read_as_absent(
    damaged: Path, change: Callable[[dict[str, Any]], object], shown: str
) -> None:
    rewrite_run_json(damaged, change)
    run(["report", str(damaged)])
    page = (damaged / "report.html").read_text()
    assert shown in page
    assert (damaged / "report.md").is_file()


def test_counts_of_one_read_in_the_singular(damaged: Path) -> None:
    def one(doc: dict[str, Any]) -> None:
        doc["analysed"].update(sessions=1, calls=1, projects=["p"])
        doc["fidelity"].update(sessions_over_threshold=[{"session_id": "s"}])

    rewrite_run_json(damaged, one)
    run(["report", str(damaged)])
    page = (damaged / "report.md").read_text()
    assert "1 session of a coding agent (Claude Code transcripts), 1 model call, from" in page
    assert ", in 1 project." in page
    assert "; 1 session exceeds the 5% threshold" in page


def test_a_fidelity_threshold_under_one_percent_is_shown_as_given(damaged: Path) -> None:
    """--fidelity-threshold 0.005 (a fraction) read "exceeds the 0% threshold"."""

    def low(doc: dict[str, Any]) -> None:
        doc["fidelity"].update(threshold=0.005, sessions_over_threshold=[{"session_id": "s"}])

    rewrite_run_json(damaged, low)
    run(["report", str(damaged)])
    assert "; 1 session exceeds the 0.5% threshold" in (damaged / "report.md").read_text()


def test_a_damaged_table_is_one_line(damaged: Path) -> None:
    summary = damaged / "summary.parquet"
    summary.write_bytes(summary.read_bytes()[:3000])  # cut short
    message = bad_run(damaged)
    assert message.startswith(f"{summary}: not a table of this run (parquet: ")
    summary.unlink()
    summary.mkdir()
    assert bad_run(damaged) == f"{summary}: a directory, not a regular file"
    summary.rmdir()
    pl.DataFrame({"policy": ["a"], "cost_usd": [1.0]}).write_parquet(summary)
    assert bad_run(damaged) == (
        f"{summary}: not a table of this run (unable to find column "
        '"refetch_cost_usd"; valid columns: ["policy", "cost_usd"])'
    )


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_charts_and_tables_are_read_without_blocking_and_within_a_bound(damaged: Path) -> None:
    chart = damaged / "savings.png"
    chart.unlink()
    os.mkfifo(chart)
    assert bad_run(damaged) == f"{chart}: a FIFO, not a regular file"
    chart.unlink()
    chart.symlink_to("/dev/zero")
    assert bad_run(damaged) == f"{chart}: a character device, not a regular file"
    chart.unlink()
    with chart.open("wb") as fh:  # sparse: no disk used
        fh.truncate(CHART_MAX_BYTES + 1)
    assert bad_run(damaged) == f"{chart}: larger than 64 MiB"
    chart.unlink()
    summary = damaged / "summary.parquet"
    summary.unlink()
    os.mkfifo(summary)
    assert bad_run(damaged) == f"{summary}: a FIFO, not a regular file"
    summary.unlink()
    (damaged / "run.json").unlink()
    os.mkfifo(damaged / "run.json")
    assert bad_run(damaged) == f"{damaged / 'run.json'}: a FIFO, not a regular file"


def test_a_report_that_is_a_directory_is_not_replaced(damaged: Path) -> None:
    (damaged / "report.html").mkdir()
    (damaged / "report.html" / "mine.txt").write_text("keep")
    assert bad_run(damaged) == f"{damaged / 'report.html'}: a directory; not replaced by the report"
    assert (damaged / "report.html" / "mine.txt").read_text() == "keep"


def test_a_failing_write_is_one_line_and_leaves_no_temporary_file(damaged: Path) -> None:
    """A real failing write (RLIMIT_FSIZE: EFBIG, as a full disk fails one), in a child
    process with the limit."""
    limited = (
        "import resource, sys; resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096)); "
        "from mcsim.cli import main; sys.argv[0] = 'mcsim'; main()"
    )
    before = sorted(p.name for p in damaged.iterdir())
    proc = subprocess.run(
        [sys.executable, "-c", limited, "report", str(damaged)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert (proc.returncode, proc.stdout, proc.stderr) == (1, "", (
        f"Error: {damaged / 'report.html'}: could not write the report (File too large)\n"
    ))  # fmt: skip
    assert sorted(p.name for p in damaged.iterdir()) == before


@pytest.mark.parametrize("mask", [0o022, 0o002, 0o077])
def test_the_report_has_the_permissions_of_any_new_file(damaged: Path, mask: int) -> None:
    previous = os.umask(mask)
    try:
        run(["report", str(damaged)])
    finally:
        os.umask(previous)
    for name in ("report.html", "report.md"):
        assert stat.S_IMODE((damaged / name).stat().st_mode) == 0o666 & ~mask
