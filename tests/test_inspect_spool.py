"""`inspect`'s records on disk, so memory does not grow with the corpus
(docs/design.md#performance): the spool is used, removed whatever happens, and changes nothing
of what inspect shows or writes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from array import array
from datetime import UTC
from pathlib import Path
from zoneinfo import ZoneInfo

import polars as pl
import pytest
from click.testing import CliRunner
from polars.testing import assert_frame_equal

from mcsim.accounting.prices import default_table
from mcsim.accounting.recorded import GROUP_KEYS, group_usage, inspect_usage, period
from mcsim.cli import cli
from mcsim.ingest.spool import Spool, Spooled
from mcsim.outputs import inspect_tables, terminal

TABLES = ("sessions.parquet", "calls.parquet", "breaks.parquet")


def test_spooled_reads_back_records_and_the_items_of_lists(tmp_path: Path) -> None:
    with Spool("test", tmp_path / "run") as spool:
        assert spool.folder.parent == tmp_path and spool.folder.name.startswith(".mcsim-test-run.")
        at = [spool.put(["a", "b"]), -1, spool.put(["c"]), spool.put(["d", "e", "f"])]
        items: Spooled[str] = Spooled(spool, _q([at[3], at[0], at[1], at[2]]), _q([3, 2, 0, 1]))
        assert list(items) == ["d", "e", "f", "a", "b", "c"] and len(items) == 6
        assert [items[i] for i in range(-6, 6)] == [*items, *items]
        assert items[1:5] == ["e", "f", "a", "b"] and items[::-2] == ["c", "a", "e"]
        with pytest.raises(IndexError):
            items[6]
        whole: Spooled[list[str]] = Spooled(spool, _q([at[2], at[0]]))
        assert list(whole) == [["c"], ["a", "b"]] and whole[-1] == ["a", "b"]
        assert len(Spooled(spool, _q([]), _q([]))) == 0
        folder = spool.folder
    assert not folder.exists()


def _q(values: list[int]) -> array[int]:
    return array("q", values)


def test_a_spooled_report_equals_a_held_one(corpus: Path, tmp_path: Path) -> None:
    """The library's report (lists) and the command line's (read back from the spool): the
    same records in the same order, the same groups by every key and time zone."""
    held = inspect_usage([str(corpus)], default_table(), workers=1)
    with Spool("inspect", tmp_path / "run") as spool:
        spooled = inspect_usage([str(corpus)], default_table(), workers=1, spool=spool)
        assert spool.path.stat().st_size > 0  # the records are on disk, not in the report
        assert not isinstance(spooled.sessions, list) and not isinstance(spooled.calls, list)
        assert list(spooled.sessions) == held.sessions and len(spooled.sessions) == 8
        assert list(spooled.calls) == held.calls and len(spooled.calls) == 355
        # 11 breaks: the drop after the compaction is announced (not a break)
        assert list(spooled.breaks) == held.breaks and len(spooled.breaks) == 11
        assert spooled.sessions[-1] == held.sessions[-1] and spooled.calls[200] == held.calls[200]
        assert spooled.call_count == held.call_count == 355
        assert (
            spooled.breaks_by_cause
            == held.breaks_by_cause
            == {"ttl_expired": 7, "prefix_changed": 3, "unknown": 1}
        )
        for tz in (UTC, ZoneInfo("America/New_York"), ZoneInfo("Asia/Kolkata")):
            for by in GROUP_KEYS:
                assert group_usage(spooled, by, tz) == group_usage(held, by, tz), (by, tz)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("spooled", [False, True])
def test_time_views_summed_as_the_calls_arrive_equal_those_of_the_calls(
    corpus: Path, tmp_path: Path, spooled: bool
) -> None:
    """`by_time`: the calls summed by day, week or month as they arrive, kept or not; the same
    groups, to the last bit of every cost, as summing the report's calls at the end."""
    held = inspect_usage([str(corpus)], default_table(), workers=1)
    for tz in (UTC, ZoneInfo("America/New_York"), ZoneInfo("Asia/Kolkata")):
        for by in ("day", "week", "month"):
            with Spool("inspect", tmp_path / "run") as spool:
                summed = inspect_usage(
                    [str(corpus)],
                    default_table(),
                    workers=1,
                    keep_calls=False,
                    spool=spool if spooled else None,
                    by_time=(by, tz),
                )
                assert len(summed.calls) == 0 and summed.time_groups is not None
                assert group_usage(summed, by, tz) == group_usage(held, by, tz), (by, tz)
                with pytest.raises(ValueError, match="needs the calls"):
                    group_usage(summed, "day" if by != "day" else "week", tz)


def test_time_groups_count_each_session_once(corpus: Path) -> None:
    """A group's sessions are counted from the order of the calls (a report's come session by
    session): the same as the distinct sessions of the group's calls."""
    report = inspect_usage([str(corpus)], default_table(), workers=1)
    for by in ("day", "week", "month"):
        for tz in (UTC, ZoneInfo("Pacific/Kiritimati")):
            groups = group_usage(report, by, tz)
            distinct: dict[str, set[tuple[str, str]]] = {}
            for r in report.calls:
                key = period(r.call.timestamp_s, by, tz)
                distinct.setdefault(key, set()).add((r.project, r.session_id))
            assert {g.key: g.sessions for g in groups} == {k: len(v) for k, v in distinct.items()}
    assert max(g.sessions for g in group_usage(report, "month", UTC)) > 1


def test_tables_written_a_few_rows_at_a_time_equal_one_batch(
    runner: CliRunner, corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    args = ["inspect", str(corpus), "--by", "day", "--json"]
    whole = runner.invoke(cli, [*args, "--out", str(tmp_path / "whole")])
    assert whole.exit_code == 0, whole.output
    monkeypatch.setattr(inspect_tables, "BATCH_ROWS", 3)
    parts = runner.invoke(cli, [*args, "--out", str(tmp_path / "parts")])
    assert parts.exit_code == 0, parts.output
    assert json.loads(parts.stdout)["groups"] == json.loads(whole.stdout)["groups"]
    for name in TABLES:
        assert_frame_equal(
            pl.read_parquet(tmp_path / "parts" / name), pl.read_parquet(tmp_path / "whole" / name)
        )
    assert pl.read_parquet(tmp_path / "parts" / "calls.parquet").height == 355
    assert sorted(p.name for p in (tmp_path / "parts").iterdir()) == sorted([*TABLES, "run.json"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["parts", "whole"]


@pytest.fixture()
def own_temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The system's temporary folder, for this test alone (where a run without --out spools)."""
    folder = tmp_path / "system-tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


@pytest.mark.parametrize("by", ["session", "day"])
def test_the_spool_is_used_then_removed(
    runner: CliRunner,
    corpus: Path,
    tmp_path: Path,
    own_temp: Path,
    monkeypatch: pytest.MonkeyPatch,
    by: str,
) -> None:
    """In the nearest existing folder above --out while the tables are written (the same file
    system), in the system's temporary folder without --out; gone when the command ends."""
    seen: list[list[str]] = []
    write_json = inspect_tables.write_json

    def spying(path: Path, doc: dict[str, object]) -> None:
        seen.append(sorted(p.name for p in tmp_path.iterdir()))
        write_json(path, doc)

    monkeypatch.setattr(inspect_tables, "write_json", spying)
    out = tmp_path / "spool-test" / "run"
    result = runner.invoke(cli, ["inspect", str(corpus), "--by", by, "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert len(seen) == 1 and any(n.startswith(".mcsim-inspect-run.") for n in seen[0])
    assert sorted(p.name for p in out.parent.iterdir()) == ["run"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spool-test", "system-tmp"]

    put = Spool.put
    puts: list[str] = []

    def counting(self: Spool, record: object) -> int:
        puts.append(type(record).__name__)
        return put(self, record)

    monkeypatch.setattr(Spool, "put", counting)
    result = runner.invoke(cli, ["inspect", str(corpus), "--by", by, "--json"])
    assert result.exit_code == 0, result.output
    assert puts.count("SessionSummary") == 8  # every session went to disk
    # Its non-empty lists too (breaks: 5 sessions have some; no calls without --out), and
    # for --by day its calls summed by day.
    assert puts.count("list") == 5
    assert puts.count("dict") == (8 if by == "day" else 0)
    assert list(own_temp.iterdir()) == []


@pytest.mark.parametrize("failure", [OSError(28, "No space left on device"), KeyboardInterrupt()])
def test_a_failed_or_stopped_inspect_leaves_no_spool(
    runner: CliRunner,
    corpus: Path,
    tmp_path: Path,
    own_temp: Path,
    monkeypatch: pytest.MonkeyPatch,
    failure: BaseException,
) -> None:
    def failing(path: Path, doc: dict[str, object]) -> None:
        raise failure

    monkeypatch.setattr(inspect_tables, "write_json", failing)
    out = tmp_path / "run"
    result = runner.invoke(cli, ["inspect", str(corpus), "--out", str(out)])
    assert result.exit_code == 1
    assert list(tmp_path.iterdir()) == [own_temp] and list(own_temp.iterdir()) == []


FULL = Path("/dev/full")  # every write to it fails with ENOSPC, as on a full disk


@pytest.mark.skipif(not FULL.exists(), reason="needs /dev/full")
@pytest.mark.parametrize(("size", "fails"), [(1 << 30, "flushed"), (8192, "written")])
@pytest.mark.parametrize("out", [True, False])
def test_a_spool_on_a_full_disk_is_one_line_and_leaves_nothing(
    corpus: Path,
    tmp_path: Path,
    own_temp: Path,
    monkeypatch: pytest.MonkeyPatch,
    size: int,
    fails: str,
    out: bool,
) -> None:
    """The spool's file on a full disk. With the default 8 KiB buffer a record fails as the
    buffer fills, and what is left in it fails again when the spool is closed (that second
    failure used to end in a traceback, with the folder left); with a buffer larger than the
    run, the records fail only when the first read flushes them. Either way one line naming
    the run (or the spool, without --out), and no spool folder left."""
    opened = Spool.__init__

    def on_a_full_disk(self: Spool, *args: object, **kwargs: object) -> None:
        opened(self, *args, **kwargs)  # type: ignore[arg-type]
        assert self._writer is not None
        self._writer.close()
        self._writer = open(FULL, "wb", buffering=size)  # noqa: SIM115

    monkeypatch.setattr(Spool, "__init__", on_a_full_disk)
    run = tmp_path / "run"
    args = ["inspect", str(corpus), *(["--out", str(run)] if out else ["--json"])]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1, (fails, result.output, result.exception)
    (line,) = result.stderr.splitlines()
    where = run if out else own_temp
    assert line.startswith(f"Error: {where}") and line.endswith(
        ": could not write the run (No space left on device)"
    ), line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["system-tmp"]
    assert list(own_temp.iterdir()) == []


KILLED_SPOOLING = """
import os, signal, sys
from pathlib import Path
from mcsim.ingest.spool import Spool

spool = Spool(sys.argv[1], Path(sys.argv[2]))
spool.put("a record")
print(spool.folder, flush=True)
os.kill(os.getpid(), signal.SIGKILL)  # no clean-up runs
"""


def _aged(folder: Path) -> Path:
    old = time.time() - 3600
    os.utime(folder, (old, old))
    return folder


def test_a_killed_runs_spool_is_removed_by_the_next_run_never_a_live_ones(
    corpus: Path, tmp_path: Path
) -> None:
    """SIGKILL leaves a spool folder; the next run that spools in the same place removes it
    (its lock is free), but never the folder of a run still going (its lock is held), nor
    one just made (a run between making its folder and locking it), nor anything else."""
    killed = []
    for kind in ("inspect", "rows"):
        done = subprocess.run(
            [sys.executable, "-c", KILLED_SPOOLING, kind, str(tmp_path / "old-run")],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode == -signal.SIGKILL
        killed.append(_aged(Path(done.stdout.strip())))
        assert killed[-1].parent == tmp_path and (killed[-1] / f"{kind}.spool").is_file()
    with Spool("rows", tmp_path / "live-run") as live:
        _aged(live.folder)
        young = Path(tempfile.mkdtemp(prefix=".mcsim-inspect-young.", dir=tmp_path))
        (tmp_path / ".mcsim-inspect-mine").mkdir()  # named otherwise: a user's
        mine = _aged(tmp_path / ".mcsim-inspect-mine")
        link = tmp_path / ".mcsim-rows-link.abcd1234"
        link.symlink_to(killed[0])
        result = CliRunner().invoke(cli, ["inspect", str(corpus), "--out", str(tmp_path / "new")])
        assert result.exit_code == 0, result.output
        left = sorted(p.name for p in tmp_path.iterdir())
        assert left == sorted(["new", live.folder.name, young.name, mine.name, link.name])
        assert live.get(live.put("still there")) == "still there"


STOPPED_WRITING = """
import signal, sys
from mcsim.outputs import inspect_tables, terminal
from mcsim.cli import main

def stopped(path, doc):
    signal.raise_signal(signal.SIGTERM)  # the tables' parts are written, the spool is full
    for _ in range(10**8):
        pass
    sys.exit(99)

inspect_tables.write_json = stopped
sys.argv = ["mcsim", "inspect", sys.argv[1], "--out", sys.argv[2]]
main()
"""


def test_a_signal_while_writing_leaves_no_spool(corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    command = [sys.executable, "-c", STOPPED_WRITING, str(corpus), str(out)]
    done = subprocess.run(command, capture_output=True, timeout=120)
    assert (done.returncode, done.stderr) == (128 + signal.SIGTERM, b"Aborted.\n")
    assert list(tmp_path.iterdir()) == []


def test_a_table_made_a_line_at_a_time_equals_the_whole_table(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Piped, `inspect`'s table by session is made twice from its rows, never held whole."""
    monkeypatch.setattr(terminal, "terminal_width", lambda: None)
    headers = ["project", "session", "calls", "cost $"]
    rows = [
        ["wide 项目 name", "abc", "12", "1.5000"],
        ["p\x1b[31m", "", "7", "0.1*"],
        ["", "", "", ""],
    ]
    made: list[int] = []

    def again() -> list[list[str]]:
        made.append(1)
        return rows

    lines = list(terminal.table_lines(headers, again, right={2, 3}, key=2))
    assert lines == terminal.table(headers, rows, right={2, 3}, key=2) and len(made) == 2
    assert lines[0].startswith("project") and lines[1].startswith("-----")
