"""mcsim inspect on the test corpus equals the reference totals and the independent
per-session computation in tests/golden (corpus_reference.py, run once)."""

from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from mcsim.cli import cli

# From tests/data/corpus/README.md ("Reference figures"), written down once from the
# independent computation.
README_TOTALS = {
    "calls": 355,
    "input_tokens": 11_128,
    "cache_write_5m_tokens": 898_425,
    "cache_write_1h_tokens": 102_189,
    "cache_read_tokens": 17_891_534,
    "output_tokens": 93_290,
}
README_COST_USD = 14.0820


@pytest.fixture(scope="module")
def inspected(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    # A cache folder of its own: a module's fixture is made before the autouse fixture that
    # gives each test one (conftest.py), and the user's may hold other mcsims' entries.
    cache = tmp_path_factory.mktemp("cache")
    result = CliRunner().invoke(cli, ["inspect", str(corpus), "--json", "--cache-dir", str(cache)])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_the_copies_are_the_published_files(corpus: Path) -> None:
    sources = corpus.parents[1] / "SOURCES.tsv"
    rows = list(csv.DictReader(sources.read_text().splitlines(), delimiter="\t"))
    assert len(rows) == 10
    for row in rows:
        data = (corpus / row["relpath"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == row["sha256"], row["relpath"]
        assert (corpus.parents[1] / row["license_file"]).is_file()


def test_totals_equal_the_corpus_readme(inspected: dict, corpus_reference: dict) -> None:
    totals = inspected["totals"]
    for key, expected in README_TOTALS.items():
        assert totals[key] == expected == corpus_reference["totals"][key], key
    assert totals["cost_usd"] == pytest.approx(README_COST_USD, abs=0.0001)
    assert totals["unpriced_calls"] == 0
    assert totals["sessions"] == 8


def test_every_session_matches_the_independent_computation(
    inspected: dict, corpus_reference: dict
) -> None:
    got = {s["session_id"]: s for s in inspected["sessions"]}
    assert set(got) == set(corpus_reference["sessions"])
    for sid, expected in corpus_reference["sessions"].items():
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
    assert example["file"].endswith(
        "-home-dev-legacy-cli/aca1c40a-be75-4f50-9b4a-60b92b68d702.jsonl"
    )
    assert example["line"] == 42


def test_breaks_found_in_the_recording(inspected: dict, corpus_reference: dict) -> None:
    # The independent computation (the same rule, its own thread grouping): 7 idle gaps of at
    # least the TTL, the generated 1.0.90 compaction, 3 warm drops to a stable head and 1 warm
    # drop to zero. Timed from request to request (the last line before each call), the
    # sub-agent's drop to zero at call 17 of ef958aa1 is 321.6 s after the previous request:
    # past the 5-minute TTL (first line to first line it was under 300 s, an "unknown").
    # The drop after the compaction is no break: Claude Code's detector is told of a
    # compaction (it resets its baseline), so it is counted as a drop only.
    expected = {"ttl_expired": 7, "prefix_changed": 3, "unknown": 1}
    assert inspected["totals"]["breaks_by_cause"] == expected == corpus_reference["breaks_by_cause"]
    assert corpus_reference["drops_by_cause"] == {**expected, "compaction": 1}
    (legacy,) = [s for s in inspected["sessions"] if s["session_id"].startswith("aca1c40a")]
    assert (legacy["cache_breaks"], legacy["cache_drops"]) == (1, 2)
    assert not [b for b in inspected["breaks"] if b["cause"] == "compaction"]
    # A TTL expiry is explained ("expected"), a drop to a stable head on a warm cache is not.
    assert {b["cause"]: b["expected"] for b in inspected["breaks"]} == {
        "ttl_expired": True, "prefix_changed": False, "unknown": False,
    }  # fmt: skip


def test_the_generated_legacy_session_is_reproducible(corpus: Path, tmp_path: Path) -> None:
    import subprocess
    import sys

    script = corpus.parents[2] / "generate_legacy.py"
    subprocess.run([sys.executable, str(script), str(tmp_path)], check=True)
    (fresh,) = (tmp_path / "-home-dev-legacy-cli").glob("*.jsonl")
    committed = corpus / "-home-dev-legacy-cli" / fresh.name
    assert fresh.read_bytes() == committed.read_bytes()
