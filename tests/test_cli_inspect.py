"""`mcsim inspect` end to end: terminal summary, --json, Parquet outputs, dates, errors."""

from __future__ import annotations

import json
import os
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from lines import SESSION, assistant, usage, user, write
from polars.testing import assert_frame_equal

from mcsim.cli import cli


def test_terminal_table_has_totals_and_causes(runner: CliRunner, corpus: Path) -> None:
    result = runner.invoke(cli, ["inspect", str(corpus)])
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0].split()[:4] == ["project", "session", "start", "(UTC)"]
    total = next(line for line in lines if line.startswith("TOTAL"))
    assert "355" in total and "14.0820" in total and "17.9M" in total
    assert "cache breaks by cause: ttl_expired 7" in result.stdout
    assert "aca1c40a-be75-4f50-9b4a-60b92b68d702.jsonl:42: synthetic" in result.stdout


def test_out_writes_parquet_that_reads_back(
    runner: CliRunner, corpus: Path, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    result = runner.invoke(cli, ["inspect", str(corpus), "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["out_dir"] == str(out)
    sessions = pl.read_parquet(out / "sessions.parquet")
    calls = pl.read_parquet(out / "calls.parquet")
    breaks = pl.read_parquet(out / "breaks.parquet")
    # 12 drops, of which the one after the compaction is announced: 11 breaks.
    assert sessions.height == 8 and calls.height == 355 and breaks.height == 11
    assert sessions["cache_drops"].sum() == 12 and sessions["cache_breaks"].sum() == 11
    for frame in (sessions, calls, breaks):
        assert frame["schema_version"].unique().to_list() == [9]
    # A list column of each session's models, sorted (the generated 1.0.90 session has two).
    assert sessions.schema["models"] == pl.List(pl.String)
    legacy = sessions.filter(pl.col("session_id").str.starts_with("aca1c40a"))
    assert legacy["models"].to_list() == [["claude-opus-4-1-20250805", "claude-sonnet-4-20250514"]]
    assert calls["cache_read_tokens"].sum() == 17_891_534
    assert calls["cost_usd"].sum() == pytest.approx(14.0820, abs=1e-4)
    assert calls["is_break"].sum() == 11
    # The session table is the calls table, summed.
    by_session = (
        calls.group_by("session_id")
        .agg(
            pl.len().alias("calls").cast(pl.Int64),
            pl.col("output_tokens").sum(),
            pl.col("cost_usd").sum(),
        )
        .sort("session_id")
    )
    assert_frame_equal(
        sessions.select("session_id", "calls", "output_tokens", "cost_usd").sort("session_id"),
        by_session,
    )
    expected = pl.DataFrame(
        {"cause": ["prefix_changed", "ttl_expired", "unknown"], "n": [3, 7, 1]},
        schema={"cause": pl.String, "n": pl.UInt32},
    )
    assert_frame_equal(breaks.group_by("cause").agg(pl.len().alias("n")).sort("cause"), expected)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp left over
    run = json.loads((out / "run.json").read_text())
    assert run["format"] == "mcsim-run/1"
    assert run["paths"] == [str(corpus)]
    assert run["options"] == {"since": None, "until": None, "prices": None}
    assert run["input_files"] == len(run["files"]) == doc["input"]["files"]
    assert run["input_bytes"] == sum(f["bytes"] for f in run["files"]) > 0
    assert all(Path(f["path"]).stat().st_size == f["bytes"] for f in run["files"])
    assert run["price_table"] == doc["price_table"]


def test_existing_out_dir_is_not_overwritten(runner: CliRunner, tmp_path: Path) -> None:
    samples = Path(__file__).resolve().parents[1] / "sample_transcripts"
    out = tmp_path / "run"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    for force in ([], ["--force"]):  # not a run mcsim wrote: --force does not replace it
        result = runner.invoke(cli, ["inspect", str(samples), "--out", str(out), *force])
        assert result.exit_code == 2
        assert result.stderr == (
            f"Error: {out}: holds keep.txt, not a file mcsim writes; --force replaces only a "
            "run directory mcsim wrote\n"
        )
    assert [p.name for p in out.iterdir()] == ["keep.txt"]
    assert (out / "keep.txt").read_text() == "mine"

    run = tmp_path / "inspected"
    assert runner.invoke(cli, ["inspect", str(samples), "--out", str(run)]).exit_code == 0
    (run / "calls.parquet").write_text("changed since")
    result = runner.invoke(cli, ["inspect", str(samples), "--out", str(run)])
    assert result.exit_code == 2
    assert "already holds a run (use --force" in result.stderr
    assert (run / "calls.parquet").read_text() == "changed since"
    result = runner.invoke(cli, ["inspect", str(samples), "--out", str(run), "--force"])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in run.iterdir()) == [
        "breaks.parquet",
        "calls.parquet",
        "run.json",
        "sessions.parquet",
    ]
    assert pl.read_parquet(run / "calls.parquet").height == 69  # the samples hold 69 calls
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_since_and_until(runner: CliRunner, tmp_path: Path) -> None:
    # Two sessions: one on 2026-01-01, one on 2026-03-01.
    early = write(
        tmp_path / "p" / "early.jsonl",
        [user("u1", None, 0, session="early"), assistant("a1", "u1", 1, "m1", session="early")],
    )
    day = 59 * 86_400
    write(
        tmp_path / "p" / "late.jsonl",
        [
            user("u2", None, day, session="late"),
            assistant("a2", "u2", day + 1, "m2", session="late"),
        ],
    )
    old = 1_700_000_000  # 2023: the early file was last written long ago
    os.utime(early, (old, old))

    def sessions(*args: str) -> tuple[list[str], dict]:
        result = runner.invoke(cli, ["inspect", str(tmp_path), "--json", *args])
        assert result.exit_code == 0, result.output
        doc = json.loads(result.stdout)
        return [s["session_id"] for s in doc["sessions"]], doc["input"]

    assert sessions()[0] == ["early", "late"]
    ids, inp = sessions("--since", "2026-02-01")
    assert ids == ["late"]
    assert inp["files_skipped_by_date"] == 1  # never opened
    ids, inp = sessions("--until", "2026-01-01")
    assert ids == ["early"]
    assert inp["sessions_outside_dates"] == 1
    assert sessions("--since", "20260301", "--until", "20260301")[0] == ["late"]
    text = runner.invoke(cli, ["inspect", str(tmp_path), "--since", "2026-02-01"]).stdout
    assert "note: 1 file last modified before --since was not read" in text
    text = runner.invoke(cli, ["inspect", str(tmp_path), "--until", "2026-01-01"]).stdout
    assert "note: 1 session starting outside --since/--until was left out" in text


def test_unpriced_model_is_reported(runner: CliRunner, tmp_path: Path) -> None:
    write(
        tmp_path / "p" / f"{SESSION}.jsonl",
        [
            user("u1", None, 0),
            assistant("a1", "u1", 1, "m1", model="mystery-model-2"),
            assistant("a2", "a1", 2, "m2", u=usage(10**5)),
        ],
    )
    result = runner.invoke(cli, ["inspect", str(tmp_path)])
    assert result.exit_code == 0
    assert "warning: 1 call is unpriced" in result.stdout
    assert "mystery-model-2 (1)" in result.stdout
    doc = json.loads(runner.invoke(cli, ["inspect", str(tmp_path), "--json"]).stdout)
    assert doc["totals"]["unpriced_calls"] == 1
    assert doc["unpriced_models"] == {"mystery-model-2": 1}
    assert doc["totals"]["cost_usd"] == pytest.approx(0.3 + 10 * 15e-6)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--since", "yesterday"], "Invalid value for '--since'"),
        (["--since", "2026-02-01", "--until", "2026-01-01"], "--since is after --until"),
        (["--workers", "0"], "Invalid value for '--workers'"),
        (["--prices", "/no/such/prices.json"], "cannot read price file"),
        (["--frobnicate"], "No such option"),
    ],
)
def test_bad_flags_exit_2_with_one_line(
    runner: CliRunner, tmp_path: Path, args: list[str], message: str
) -> None:
    samples = Path(__file__).resolve().parents[1] / "sample_transcripts"
    out = tmp_path / "out"
    result = runner.invoke(cli, ["inspect", str(samples), "--out", str(out), *args])
    assert result.exit_code == 2
    assert message in result.stderr
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert result.stdout == ""
    assert not out.exists()


@pytest.mark.parametrize("group", [[], ["cache"]])
def test_a_group_called_alone_shows_its_help_whole(runner: CliRunner, group: list[str]) -> None:
    # Not squeezed into one error line, where it could not be read: what a newcomer typing
    # `mcsim` needs. On stderr with exit 2, as click shows it.
    result = runner.invoke(cli, group, prog_name="mcsim")
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert lines[0] == f"Usage: {' '.join(['mcsim', *group])} [OPTIONS] COMMAND [ARGS]..."
    assert "Commands:" in lines and len(lines) > 10


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["frob"], "Error: No such command 'frob'. See 'mcsim --help'."),
        (["--frob"], "Error: No such option '--frob'. See 'mcsim --help'."),
        (["replay", "x"], "Error: Missing option '--policy'. See 'mcsim replay --help'."),
        (["cache", "frob"], "Error: No such command 'frob'. See 'mcsim cache --help'."),
        (
            ["inspect", "x", "--since", "a\nb"],
            "Error: Invalid value for '--since': 'a\\nb' does not match the formats "
            "'%Y-%m-%d', '%Y%m%d'. See 'mcsim inspect --help'.",
        ),
    ],
)
def test_usage_errors_are_one_line(runner: CliRunner, args: list[str], line: str) -> None:
    result = runner.invoke(cli, args, prog_name="mcsim")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == line + "\n"


@pytest.mark.parametrize(
    ("args", "line"),
    [
        # errors of click's parser come without a context: the pointer to --help was missing
        (["--version=1"], "Error: Option '--version' does not take a value. See 'mcsim --help'."),
        (
            ["replay", "--policy"],
            "Error: Option '--policy' requires an argument. See 'mcsim replay --help'.",
        ),
        (
            ["policies", "--show"],
            "Error: Option '--show' requires an argument. See 'mcsim policies --help'.",
        ),
        (
            ["cache", "info", "--cache-dir"],
            "Error: Option '--cache-dir' requires an argument. See 'mcsim cache info --help'.",
        ),
        # messages without a full stop of their own get one before the pointer to --help
        (
            ["cache", "clear", "extra"],
            "Error: Got unexpected extra argument (extra). See 'mcsim cache clear --help'.",
        ),
        (
            ["inspect", "--timezone", "Mars/Olympus"],
            "Error: Invalid value for '--timezone': unknown time zone 'Mars/Olympus'. "
            "See 'mcsim inspect --help'.",
        ),
        # click lays out the choices on a line of their own, indented
        (
            ["convert", "x"],
            "Error: Missing option '--to'. Choose from: interchange. See 'mcsim convert --help'.",
        ),
    ],
)
def test_every_usage_error_is_one_line_ending_with_where_the_options_are(
    runner: CliRunner, args: list[str], line: str
) -> None:
    result = runner.invoke(cli, args, prog_name="mcsim")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == line + "\n"


def test_a_mistyped_option_is_one_line_with_click_s_suggestion(runner: CliRunner) -> None:
    result = runner.invoke(
        cli, ["replay", "x", "--policy", "p", "--workerz", "2"], prog_name="mcsim"
    )
    assert result.exit_code == 2
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("Error: No such option '--workerz'. ")
    assert "'--workers'" in line  # click's suggestion, worded as its version words it
    assert line.endswith(" See 'mcsim replay --help'.")


def test_help_has_an_example(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["inspect", "--help"])
    assert result.exit_code == 0
    assert "Example:" in result.stdout
    assert "mcsim inspect ~/.claude/projects" in result.stdout


def test_default_locations_from_claude_config_dir(
    runner: CliRunner, corpus: Path, tmp_path: Path
) -> None:
    env = {"CLAUDE_CONFIG_DIR": f"{tmp_path / 'missing'},{corpus.parent}", "HOME": str(tmp_path)}
    result = runner.invoke(cli, ["inspect", "--json"], env=env)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["totals"]["calls"] == 355
    result = runner.invoke(cli, ["inspect"], env={"CLAUDE_CONFIG_DIR": "", "HOME": str(tmp_path)})
    assert result.exit_code == 2
    assert "no Claude Code transcripts found" in result.stderr


def test_python_dash_m(tmp_path: Path) -> None:
    import subprocess
    import sys

    samples = Path(__file__).resolve().parents[1] / "sample_transcripts"
    proc = subprocess.run(
        [sys.executable, "-m", "mcsim", "inspect", str(samples), "--json"],
        capture_output=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["totals"]["calls"] == 69
    assert proc.stderr == b""  # no progress bar when stderr is not a terminal


def test_run_dir_has_ordinary_permissions(runner: CliRunner, tmp_path: Path) -> None:
    samples = Path(__file__).resolve().parents[1] / "sample_transcripts"
    out = tmp_path / "run"
    assert runner.invoke(cli, ["inspect", str(samples), "--out", str(out)]).exit_code == 0
    mask = os.umask(0)
    os.umask(mask)
    assert out.stat().st_mode & 0o777 == 0o777 & ~mask
