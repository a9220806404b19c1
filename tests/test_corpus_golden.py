"""mcsim inspect on the real corpus equals the reference totals and the independent
per-session computation in tests/golden (corpus_reference.py, run once)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from mcsim.cli import cli

# From ../shared/corpus/README.md ("Reference totals over all of claude/projects/").
README_TOTALS = {
    "calls": 407,
    "input_tokens": 11_317,
    "cache_write_5m_tokens": 1_332_420,
    "cache_write_1h_tokens": 102_189,
    "cache_read_tokens": 23_794_961,
    "output_tokens": 122_711,
}
README_COST_USD = 30.5146


@pytest.fixture(scope="module")
def inspected(corpus: Path) -> dict:
    result = CliRunner().invoke(cli, ["inspect", str(corpus), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_totals_equal_the_corpus_readme(inspected: dict) -> None:
    totals = inspected["totals"]
    for key, expected in README_TOTALS.items():
        assert totals[key] == expected, key
    assert totals["cost_usd"] == pytest.approx(README_COST_USD, abs=0.0001)
    assert totals["unpriced_calls"] == 0
    assert totals["sessions"] == 8


def test_every_session_matches_the_independent_computation(
    inspected: dict, corpus_reference: dict
) -> None:
    got = {s["session_id"]: s for s in inspected["sessions"]}
    assert set(got) == set(corpus_reference)
    for sid, expected in corpus_reference.items():
        for key, value in expected.items():
            if key == "cost_usd":
                assert got[sid][key] == pytest.approx(value, abs=1e-6), (sid, key)
            else:
                assert got[sid][key] == value, (sid, key)


def test_the_only_skipped_line_is_the_synthetic_api_error(inspected: dict) -> None:
    skipped = inspected["skipped"]
    assert skipped["by_reason"] == {"synthetic": 1}
    assert skipped["invalid_lines"] == 0
    (example,) = skipped["examples"]
    assert example["file"].endswith("e1ffaf02-1289-4b61-ae2e-694bf373993b.jsonl")
    assert example["line"] == 211


def test_breaks_found_in_the_recording(inspected: dict) -> None:
    # Worked out by reading the recorded reads: 7 idle gaps past the TTL, the 1.0.90
    # compaction, 4 warm drops to a stable head and 2 warm drops to zero.
    assert inspected["totals"]["breaks_by_cause"] == {
        "ttl_expired": 7,
        "compaction": 1,
        "prefix_changed": 4,
        "unknown": 2,
    }
    compaction = [b for b in inspected["breaks"] if b["cause"] == "compaction"]
    assert compaction[0]["session_id"].startswith("e1ffaf02")
    assert compaction[0]["previous_read_tokens"] == 154_418
    assert compaction[0]["read_tokens"] == 39_096
    assert compaction[0]["expected"] is True
