"""The library calls behind `mcsim replay` and `mcsim sweep`: a typed configuration in, a
written run folder out, the same folder the command line writes."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from conftest import SAMPLES
from polars.testing import assert_frame_equal

import mcsim
from mcsim.cli import cli
from mcsim.errors import NoCallsError, UsageError


@pytest.mark.slow
def test_replay_run_writes_the_folder_the_command_writes(tmp_path: Path) -> None:
    config = mcsim.ReplayConfig(paths=(str(SAMPLES),), policy="claude-code", use_cache=False,
                                out_dir=tmp_path / "library")  # fmt: skip
    run = mcsim.replay_run(config)
    assert run.out_dir == tmp_path / "library"
    assert run.report.baseline.cost_usd == pytest.approx(2.368017, abs=1e-6)
    result = CliRunner().invoke(cli, ["replay", str(SAMPLES), "--policy", "claude-code",
                                      "--no-cache", "--out", str(tmp_path / "cli")])  # fmt: skip
    assert result.exit_code == 0, result.output
    for table in ("summary.parquet", "calls.parquet", "sessions.parquet", "breaks.parquet"):
        assert_frame_equal(
            pl.read_parquet(tmp_path / "library" / table),
            pl.read_parquet(tmp_path / "cli" / table),
        )
    for chart in ("cumulative_cost.png", "context_size.png", "savings.png", "break_timeline.png"):
        assert (tmp_path / "library" / chart).read_bytes() == (
            tmp_path / "cli" / chart
        ).read_bytes()


def test_sweep_run_recommends_as_the_command_does(tmp_path: Path) -> None:
    config = mcsim.SweepConfig(paths=(str(SAMPLES),), policy="claude-code", name="claude-code",
                               grids=("cached_microcompact.keep_recent=2,5",), use_cache=False,
                               out_dir=tmp_path / "sweep", max_risk=1.0)  # fmt: skip
    run = mcsim.sweep_run(config)
    assert [o.variant.name for o in run.results] == [
        "cached_microcompact.keep_recent=2",
        "cached_microcompact.keep_recent=5",
    ]
    assert run.run["options"]["max_risk_pct"] == 100.0
    assert (tmp_path / "sweep" / "sweep.parquet").exists()


def test_a_bad_configuration_is_refused_before_any_transcript_is_read(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UsageError, match="since is after --until"):
        from datetime import datetime

        mcsim.replay_run(mcsim.ReplayConfig(paths=(str(empty),), since=datetime(2026, 2, 1),
                                            until=datetime(2026, 1, 1)))  # fmt: skip
    with pytest.raises(NoCallsError, match="nothing to replay") as caught:
        mcsim.replay_run(mcsim.ReplayConfig(paths=(str(empty),), use_cache=False,
                                            out_dir=tmp_path / "run"))  # fmt: skip
    assert caught.value.stats.files == 0
    assert not (tmp_path / "run").exists()


def test_inspect_run_writes_the_tables_the_command_writes(corpus: Path, tmp_path: Path) -> None:
    config = mcsim.InspectConfig(paths=(str(corpus),), use_cache=False,
                                 out_dir=tmp_path / "library")  # fmt: skip
    with mcsim.inspect_run(config) as report:
        # tests/data/corpus/README.md, "Reference figures": 355 calls, $14.0820
        assert report.call_count == 355 and round(report.cost_usd, 4) == 14.0820
        assert len(list(report.sessions)) == 8
    result = CliRunner().invoke(cli, ["inspect", str(corpus), "--no-cache", "--out",
                                      str(tmp_path / "cli")])  # fmt: skip
    assert result.exit_code == 0, result.output
    for table in ("sessions.parquet", "calls.parquet", "breaks.parquet"):
        assert_frame_equal(
            pl.read_parquet(tmp_path / "library" / table), pl.read_parquet(tmp_path / "cli" / table)
        )
    empty = tmp_path / "empty"
    empty.mkdir()
    nothing = mcsim.InspectConfig(paths=(str(empty),), use_cache=False)
    with pytest.raises(NoCallsError, match="nothing to account"), mcsim.inspect_run(nothing) as r:
        assert not r.sessions  # handed over first: a caller may show what was skipped
