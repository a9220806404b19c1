"""A full replay of a real multi-call Codex CLI rollout (tests/data/codex-multi-call): counts
exact, presets clear shell output by class, re-fetch risk assessed, figures worked by hand."""

from __future__ import annotations

import json
import runpy
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner
from conftest import REPO, replay_doc, replay_report

from mcsim.cli import cli
from mcsim.outputs.replay_tables import summary_frame
from mcsim.outputs.tables import write_parquet

DATA = REPO / "tests" / "data" / "codex-multi-call"
ROLLOUT = DATA / "codemie-ai-codemie-code-real-codex-0.125.jsonl"
GOLDEN = REPO / "tests" / "golden"


def _run(tmp_path: Path, *args: str) -> dict[str, Any]:
    result = CliRunner().invoke(cli, [*args, "--json", "--no-cache"])
    assert result.exit_code == 0, result.output
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def _policies(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["name"]: p for p in doc["policies"]}


def test_the_rollout_is_the_manifests() -> None:
    rows = [line.split("\t") for line in (DATA / "MANIFEST.tsv").read_text().splitlines()]
    header, (row,) = rows[0], rows[1:]
    entry = dict(zip(header, row, strict=True))
    assert entry["file"] == ROLLOUT.name and entry["license"] == "Apache-2.0"
    assert int(entry["bytes"]) == ROLLOUT.stat().st_size
    assert (DATA / entry["license_file"]).read_text().startswith(" " * 33 + "Apache License")


def test_inspect_counts_every_call_exactly(tmp_path: Path) -> None:
    reference = runpy.run_path(str(GOLDEN / "codex_reference.py"))
    expected = reference["totals"](str(DATA))
    # one call per token_count (0.125 writes no repeats): 66; 6,055,836 input of which
    # 4,929,536 cached: 1,126,300 uncached; 9,118 output
    assert expected == {
        "calls": 66,
        "input_tokens": 1_126_300,
        "cache_read_tokens": 4_929_536,
        "cache_write_5m_tokens": 0,
        "output_tokens": 9_118,
    }
    doc = _run(tmp_path, "inspect", str(DATA))
    assert {k: doc["totals"][k] for k in expected} == expected
    # gpt-5.5 at $5 / $0.50 / $30 per million: 5.6315 + 2.464768 + 0.27354
    assert doc["totals"]["cost_usd"] == pytest.approx(8.369808, abs=1e-9)


def test_masking_clears_shell_output_and_assesses_the_risk(tmp_path: Path) -> None:
    """masking-study-n10 keeps the newest 10 of the rollout's 102 tool results (99 function
    outputs, 3 apply_patch outputs): 92 cleared. Two are update_plan's "Plan updated", which no
    later call can fetch again: not assessed. Of the 90 assessed, 19 were needed again (the
    independent count of tests/golden/codex_refetch_reference.py, e.g. the `sed -n` of
    opencode.plugin.ts at call 17, patched at call 46): risk 19/90, never 0 by blindness."""
    reference = runpy.run_path(str(GOLDEN / "codex_refetch_reference.py"))
    assert reference["masking"](str(ROLLOUT), 10) == {
        "calls": 66, "results": 102, "cleared": 92, "unassessed": 2, "hazards": 19,
    }  # fmt: skip
    report = replay_report([str(DATA)], "masking")
    n10 = _policies(replay_doc([str(DATA)], "masking", report))["masking-study-n10"]
    assert (n10["cleared_results"], n10["refetch_unassessed"], n10["refetch_hazards"]) == (
        92,
        2,
        19,
    )
    assert n10["refetch_risk"] == pytest.approx(19 / 90, abs=1e-6)
    summary_file = tmp_path / "summary.parquet"  # as the command writes it
    write_parquet(summary_frame(report), summary_file)
    summary = pl.read_parquet(summary_file)
    row = summary.filter(pl.col("policy") == "masking-study-n10").row(0, named=True)
    assert row["refetch_risk"] == pytest.approx(19 / 90)
    assert row["refetch_unassessed"] == 2


def test_what_is_cleared_is_shell_output_by_class(tmp_path: Path) -> None:
    """The same masking with class:shell excluded clears only the 5 results that are not
    shell output (3 apply_patch, 2 update_plan): so 87 of the 92 above were shell output
    (exec_command and write_stdin). The 3 patched files are all printed again by `nl -ba` at
    the last call with tools: 3 hazards of 3 assessed."""
    policy = tmp_path / "p.yaml"
    policy.write_text(
        "policies:\n"
        "  - {name: n10-but-shell, kind: keep_last_n, n: 10, exclude_tools: [class:shell]}\n"
    )
    kept = _policies(replay_doc([str(DATA)], str(policy)))["n10-but-shell"]
    assert (kept["cleared_results"], kept["refetch_unassessed"], kept["refetch_hazards"]) == (
        5,
        2,
        3,
    )
    assert kept["refetch_risk"] == 1.0


def test_claude_codes_pruning_on_codex(tmp_path: Path) -> None:
    """On OpenAI's cache the claude-code stack can only clear after an idle hour (no cache
    edits there), and this session's longest pause is 5.4 minutes: nothing, and the notes say
    why. On Anthropic's cache, its cache edits clear by class: of the 100 results of
    compactable classes (all but the 2 update_plan ones), all but the newest 5: 95."""
    doc = replay_doc([str(DATA)], "claude-code")
    assert _policies(doc)["claude-code"]["cleared_tokens"] == 0
    assert (
        "time-based-only cleared nothing: never fired: no idle gap reached 60 min "
        "(longest 5.4 min on a main thread)"
    ) in doc["notes"]
    assert (
        "claude-code cleared nothing: its 54 cache edits were not made: only Anthropic's cache "
        "deletes from a cached prefix (OpenAI's has no cache edits)"
    ) in doc["notes"]
    policy = tmp_path / "p.yaml"
    policy.write_text(
        "policies:\n"
        "  - name: claude-code-on-anthropic\n"
        "    provider: anthropic\n"
        "    stack:\n"
        "      - {kind: time_based_microcompact, gap_threshold_minutes: 60, keep_recent: 5}\n"
        "      - {kind: cached_microcompact, trigger_threshold: 12, keep_recent: 5}\n"
    )
    moved = _policies(replay_doc([str(DATA)], str(policy)))["claude-code-on-anthropic"]
    assert (moved["cleared_results"], moved["refetch_unassessed"]) == (95, 0)
    assert moved["refetch_hazards"] > 0 and moved["cleared_tokens"] > 100_000


def test_a_risk_nothing_could_assess_is_unknown_everywhere(tmp_path: Path) -> None:
    """Keeping only plans clearable, the two update_plan results are all that is cleared, and
    no later call could fetch a plan again: the risk is unknown, not 0%, in the printed table,
    the JSON, summary.parquet (null) and the report."""
    policy = tmp_path / "p.yaml"
    policy.write_text(
        "policies:\n"
        "  - name: plans-only\n"
        "    kind: keep_last_n\n"
        "    n: 1\n"
        "    exclude_tools: [class:shell, class:edit, class:web]\n"
    )
    out = tmp_path / "run"
    args = ["replay", str(DATA), "--policy", str(policy), "--no-cache", "--out", str(out)]
    printed = CliRunner().invoke(cli, args)
    assert printed.exit_code == 0, printed.output
    (row,) = [line for line in printed.stdout.splitlines() if line.startswith("plans-only")]
    assert "unknown (2 not assessed)" in row
    plans = _policies(replay_doc([str(DATA)], str(policy)))["plans-only"]
    assert (plans["cleared_results"], plans["refetch_unassessed"]) == (2, 2)
    assert plans["refetch_risk"] is None
    summary = pl.read_parquet(out / "summary.parquet")
    assert summary.filter(pl.col("policy") == "plans-only")["refetch_risk"].to_list() == [None]
    assert CliRunner().invoke(cli, ["report", str(out)]).exit_code == 0
    report = (out / "report.md").read_text()
    (line,) = [x for x in report.splitlines() if "plans-only" in x and "|" in x]
    assert "unknown" in line
