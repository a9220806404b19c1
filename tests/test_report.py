"""`mcsim report`: a self-contained review from a replay or a sweep run directory."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import REPO, SAMPLES

from mcsim.cli import cli


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


def test_replay_report_is_self_contained_and_complete(replay_dir: Path) -> None:
    page = (replay_dir / "report.html").read_text()
    no_external_references(page)
    for heading in [
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
    assert "| policy | cost | savings | net |" in md
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
