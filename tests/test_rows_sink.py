"""The replay's rows written as the sessions arrive, so memory does not grow with the corpus
(docs/design.md#performance): the same tables and charts as from rows held in memory, and no
session keeps its rows once they are written."""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from conftest import CORPUS, REPO
from polars.testing import assert_frame_equal

from mcsim.accounting.prices import default_table
from mcsim.errors import McsimError
from mcsim.ingest import spool
from mcsim.ingest.engines import local
from mcsim.outputs import rows_sink, tables
from mcsim.outputs.charts import CallLines, chart_data
from mcsim.outputs.replay_tables import breaks_frame, calls_frame, sessions_frame
from mcsim.outputs.rows_sink import RowsSink
from mcsim.replay.keep_warm import KeepWarm
from mcsim.replay.results import SessionReplay
from mcsim.replay.run import RECORDED, ReplayReport, run_replay
from mcsim.replay.scenario import load_policy_file

# The claude-code file, and its last policy again with keep-warm pings (rows of their own)
SCENARIOS = load_policy_file(REPO / "policies" / "claude-code.yaml")
SCENARIOS = [*SCENARIOS, replace(SCENARIOS[-1], name="warm", keep_warm=KeepWarm(4.5, 15.0))]
NAMES = [RECORDED, *(s.name for s in SCENARIOS)]


def replayed(sink: RowsSink | None = None, how: str = "rows") -> ReplayReport:
    if sink is None:
        return run_replay([str(CORPUS)], SCENARIOS, default_table(), cache_dir=None, workers=1)
    arrived: list[object] = []  # how each result's rows came: packed (and only so), or not

    def take(result: SessionReplay) -> object:
        # packed where made: the rows are in the pickle or the worker's file, not the result
        assert result.packed is None or (result.call_rows is None and not result.break_columns)
        kind = None if result.packed is None else "data" if result.packed.data else "file"
        arrived.append(kind)
        return sink(result)

    written = each_worker_writes(sink.packer(local=True)) if how == "written" else None
    in_worker = {"rows": None, "packed": rows_sink.pack, "written": written}[how]
    workers = 2 if how == "written" else 1  # forked (see the test): a file per worker
    report = run_replay([str(CORPUS)], SCENARIOS, default_table(), cache_dir=None,
                        workers=workers, sink=take, in_worker=in_worker)  # fmt: skip
    kind = {"rows": None, "packed": "data", "written": "file"}[how]
    assert arrived == [kind] * len(report.sessions)
    return report


def each_worker_writes(
    in_worker: Callable[[SessionReplay], SessionReplay],
) -> Callable[[SessionReplay], SessionReplay]:
    """`in_worker`, made to wait at its first result in each of two forked workers until the
    other worker has a result too: each worker then writes rows to a file of its own, so the
    run has two files by design. Left alone, one worker could take every unit while the other
    was still starting (seen on a loaded machine), and the test met one file. A worker that
    never comes breaks the barrier after a minute: the run, and the test, fail."""
    barrier = multiprocessing.get_context("fork").Barrier(2, timeout=60)
    waited: set[int] = set()  # copied into each worker as it forks: empty there

    def in_worker_after_both(result: SessionReplay) -> SessionReplay:
        if os.getpid() not in waited:
            waited.add(os.getpid())
            barrier.wait()
        return in_worker(result)

    return in_worker_after_both


@pytest.fixture(scope="module")
def held() -> ReplayReport:
    """The corpus replayed with its rows held in memory: what every sink must give again
    (only read by the tests)."""
    return replayed()


def test_the_tables_are_the_same_bytes_however_their_parts_were_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A part is held in memory while it fits the budget, else written to the sink's folder:
    # every part written (0), some of them (a budget a few parts fill), none (the default).
    monkeypatch.setattr(rows_sink, "BATCH_ROWS", 500)  # several parts per table and policy
    written: dict[int, dict[str, bytes]] = {}
    counts: dict[int, int] = {}  # by budget: the parts written to files
    default = rows_sink.HELD_BYTES
    for budget in (0, 300_000, default):
        monkeypatch.setattr(rows_sink, "HELD_BYTES", budget)
        files: list[Path] = []

        def write_part(rows: pl.DataFrame, path: Path, files: list[Path] = files) -> None:
            files.append(path)
            tables.write_part(rows, path)

        monkeypatch.setattr(rows_sink, "write_part", write_part)
        with RowsSink(NAMES, tmp_path / "run") as sink:
            sink.finish(replayed(sink).sessions)
            out = tmp_path / str(budget)
            for name in ("calls", "breaks", "sessions"):
                sink.write(name, out / f"{name}.parquet")
            assert not any(sink.folder.iterdir())  # the part files are gone
        parts = sum(len(p) for table in sink._parts.of.values() for p in table)  # type: ignore[union-attr]
        assert parts == 0  # (given back as each table was written)
        written[budget] = {
            str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()
        }
        counts[budget] = len(files)
    assert counts[0] > 3 * len(NAMES)  # every part a file, several per table and policy
    assert 0 < counts[300_000] < counts[0]  # some parts held, the rest written
    assert counts[default] == 0  # every part held
    assert written[0] == written[300_000] == written[default]
    assert len(written[0]) == 3 * len(NAMES)


@pytest.mark.parametrize("how", ["rows", "packed", "written"])
@pytest.mark.parametrize("batch_rows", [1, rows_sink.BATCH_ROWS])
def test_tables_and_chart_lines_equal_the_in_memory_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, held: ReplayReport, batch_rows: int, how: str
) -> None:
    # `packed`: the rows are taken where each result is made (rows_sink.pack, as a Ray run
    # does), and the sink writes them as they come; `written`: each forked worker writes them
    # to a file of its own in the sink's folder (RowsSink.packer, as a local run does) and
    # only where they are comes to the sink.
    calls, breaks, table = calls_frame(held), breaks_frame(held), sessions_frame(held)
    expected = chart_data(held)
    assert calls.height > 1000 and breaks.height > 0
    assert calls["ping"].sum() > 0 and set(calls.filter("ping")["policy"]) == {"warm"}
    monkeypatch.setattr(rows_sink, "BATCH_ROWS", batch_rows)  # 1: a batch per session
    monkeypatch.setattr(local, "_PARALLEL_MIN_BYTES", 0)  # the corpus is forked over too
    with RowsSink(NAMES, tmp_path / "run") as sink:
        report = replayed(sink, how)
        if how == "written":  # two workers, two files
            assert len({s.rows.path for s in report.sessions}) == 2  # type: ignore[attr-defined]
        assert sink.sunk == len(report.sessions) > 1
        # The report keeps no session's result, only its count and the sink's handle to its
        # rows; the run's totals are whole.
        assert report.results == [] and len(report.sessions) == len(held.sessions)
        assert all(s.rows is not None for s in report.sessions)
        assert [replace(s, rows=None) for s in report.sessions] == held.sessions
        assert report.policies == held.policies and report.recorded == held.recorded
        assert report.providers == held.providers == {"anthropic": 355}
        assert report.recorded_prunes == held.recorded_prunes
        lines = CallLines(NAMES, sink.calls)
        sink.finish(report.sessions, lines)
        for name, held_table in (("calls", calls), ("breaks", breaks), ("sessions", table)):
            path = tmp_path / f"{name}.parquet"
            sink.write(name, path)
            # Partitioned by policy, each policy's rows in the in-memory table's order.
            assert sorted(p.name for p in path.iterdir()) == [
                f"policy_index={i}" for i in range(len(NAMES))
            ]
            for i, name in enumerate(NAMES):
                part = pl.read_parquet(path / f"policy_index={i}" / "part-0.parquet")
                assert_frame_equal(part, held_table.filter(pl.col("policy") == name))
            whole = pl.read_parquet(path)  # the dataset: policy by policy, key column added
            assert whole["policy_index"].to_list() == [
                NAMES.index(name) for name in whole["policy"]
            ]
            assert whole.height == held_table.height
        assert table.height == 8 * len(NAMES)  # the 8 sessions of the corpus
        assert not any(sink.folder.iterdir())  # the spool and the part files are gone
        got = chart_data(report, lines)
        folder = sink.folder
    assert not folder.exists()  # removed on leaving
    assert got.sessions == expected.sessions and got.boundaries == expected.boundaries
    assert got.same_cost == expected.same_cost and got.same_prompt == expected.same_prompt
    for name in NAMES:
        for mine, theirs in ((got.cumulative_cost, expected.cumulative_cost),
                             (got.prompt_k, expected.prompt_k),
                             (got.apart_prompt_k, expected.apart_prompt_k)):  # fmt: skip
            assert list(mine[name][0]) == list(theirs[name][0])
            np.testing.assert_array_equal(mine[name][1], theirs[name][1])
    assert len(got.apart_prompt_k[RECORDED][0]) > 0  # the corpus has sub-agents
    assert sorted(got.breaks) == sorted(expected.breaks) and got.breaks
    for cause, (xs, policy_rows) in expected.breaks.items():
        np.testing.assert_array_equal(got.breaks[cause][0], xs)
        np.testing.assert_array_equal(got.breaks[cause][1], policy_rows)


def test_a_failed_run_leaves_no_spool(tmp_path: Path) -> None:
    with pytest.raises(KeyboardInterrupt), RowsSink(NAMES, tmp_path / "run") as sink:
        folder = sink.folder
        assert folder.parent == tmp_path and folder.name.startswith(".mcsim-rows-run.")
        raise KeyboardInterrupt
    assert not any(tmp_path.iterdir())


def test_a_worker_that_cannot_write_its_rows_fails_the_run_in_one_line(
    tmp_path: Path, held: ReplayReport
) -> None:
    packer = rows_sink.PackTo(tmp_path / "gone", tmp_path / "run")
    with pytest.raises(McsimError) as caught:
        packer(held.results[0])
    assert (
        str(caught.value)
        == f"{tmp_path / 'run'}: could not write the run (No such file or directory)"
    )


def test_a_spool_whose_file_cannot_be_made_fails_in_one_line_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Out of inodes (or of quota) beside --out, the spool's folder is made but not its file:
    that was a traceback, and the empty `.mcsim-rows-run.*` folder stayed behind."""

    def full(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(spool, "open", full, raising=False)  # the module's, not builtins'
    with pytest.raises(McsimError) as caught:
        RowsSink(NAMES, tmp_path / "run")
    assert (
        str(caught.value)
        == f"{tmp_path / 'run'}: could not write the run (No space left on device)"
    )
    assert list(tmp_path.iterdir()) == []


def test_a_spool_whose_folder_cannot_be_made_fails_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(spool.tempfile, "mkdtemp", full)
    with pytest.raises(McsimError) as caught:
        RowsSink(NAMES, tmp_path / "run")
    assert (
        str(caught.value)
        == f"{tmp_path / 'run'}: could not write the run (No space left on device)"
    )
