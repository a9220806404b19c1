"""A replay's per-call and break rows, written to disk as the sessions arrive.

Kept in the report until the end, every session's rows made the driver grow with the corpus
(about 150 MB per GB of transcripts), which memory must not do (docs/design.md#performance).
`RowsSink` is handed each session's result by
`run_replay(sink=...)`: it appends the session's rows to a spool file in its own temporary
folder (or notes where a worker wrote them: `pack`, `PackTo`) and returns its handle to them
(`RowsAt` or a spool offset), which the report keeps with the session's count
(`CountedSession`) instead of the result. `finish` then reads them back a batch of sessions
at a time, in the documented order (calls: session in start order, thread and call; breaks and
sessions: session by session): each batch's rows of each policy are a part (held in memory up
to a budget, else written to a file), and each
batch is handed to the charts' `CallLines`, which keeps only what the charts draw. `write`
then makes each of the calls, breaks and sessions tables a dataset partitioned by policy
(`tables.partition`): polars streams each policy's parts, in order, into its partition. Apart
from `finish`, so that the charts are drawn while the tables are written.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import pickle
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, NamedTuple

from mcsim.accounting.recorded import savings_pct
from mcsim.ingest.spool import Spool, write_error
from mcsim.outputs.charts import CallLines
from mcsim.outputs.tables import (
    SCHEMA_VERSION,
    TS,
    by_policy,
    concat_parts,
    frame,
    partition,
    write_part,
)
from mcsim.processes import give_back_memory
from mcsim.replay.results import BREAK_COLUMNS, CountedSession, PackedRows, SessionReplay
from mcsim.replay.rows import RowsTable, SessionRows

REPLAY_CALLS_SCHEMA: dict[str, str] = {
    "policy": "str", "session_id": "str", "project": "str", "thread_id": "str",
    "thread_kind": "str", "call_index": "int", "timestamp": TS, "model": "str", "ttl": "str",
    "prompt_tokens": "int", "input_tokens": "int", "cache_write_5m_tokens": "int",
    "cache_write_1h_tokens": "int", "cache_read_tokens": "int", "output_tokens": "int",
    "cost_usd": "float", "cleared_tokens": "int", "newly_cleared_tokens": "int",
    "rewrote": "bool", "cache_edit": "bool", "is_break": "bool", "break_cause": "str",
    "pings": "int", "ping_cost_usd": "float", "ping": "bool",
}  # fmt: skip
REPLAY_BREAKS_SCHEMA: dict[str, str] = {
    "policy": "str", "session_id": "str", "project": "str", "thread_id": "str",
    "call_index": "int", "timestamp": TS, "model": "str", "previous_read_tokens": "int",
    "read_tokens": "int", "drop_tokens": "int", "gap_seconds": "float", "cause": "str",
    "expected": "bool",
}  # fmt: skip

REPLAY_SESSIONS_SCHEMA: dict[str, str] = {
    "policy": "str", "session_id": "str", "project": "str", "start": TS, "calls": "int",
    "cost_usd": "float", "savings_vs_recorded_pct": "float", "savings_vs_baseline_pct": "float",
    "cleared_tokens": "int", "cache_read_tokens": "int", "cache_write_tokens": "int",
    "cache_hit_ratio": "float", "cache_breaks": "int", "fidelity_error": "float",
}  # fmt: skip

_SCHEMAS = {
    "calls": REPLAY_CALLS_SCHEMA,
    "breaks": REPLAY_BREAKS_SCHEMA,
    "sessions": REPLAY_SESSIONS_SCHEMA,
}

BATCH_ROWS = 100_000  # rows (every policy's) turned into a table at a time
# Rows per row group of a partition: polars' default buffered a policy's whole calls table
# while writing it (measured: the local driver's peak on a 2 GB replay 163-165 MB, 156-157
# with this).
GROUP_ROWS = 20_000
# The tables' parts held in memory until they are written, at most (`_Parts`)
HELD_BYTES = 64 * 1024 * 1024


def rows_frame(rows: RowsTable) -> Any:
    """The calls table of `rows` (in its order: policy, session, thread, call), each
    keep-warm ping a row of its own (`ping`) before the call after its gap."""
    import polars as pl

    empty = frame([], REPLAY_CALLS_SCHEMA)
    columns = {}
    for name, dtype in empty.schema.items():
        if name in rows.codes:
            columns[name] = rows.string(name)
        elif name in rows.numbers:
            values = rows.numbers[name]
            if name == "timestamp":  # epoch seconds to milliseconds
                values = _milliseconds(values)
            columns[name] = pl.Series(name, values).cast(dtype)
    table = pl.DataFrame(columns).with_columns(
        pl.col("cost_usd").fill_nan(None),
        pl.col("ping_cost_usd").fill_nan(None),
        pl.lit(False).alias("ping"),
        pl.lit(SCHEMA_VERSION, dtype=pl.Int32).alias("schema_version"),
    )
    table = table.select(empty.columns)
    if rows.ping_gaps:
        table = _with_pings(table, rows)
    return table


def policy_slices(rows: RowsTable) -> list[slice]:
    """Each policy's rows in `rows_frame(rows)`: its calls and the pings among them."""
    import numpy as np

    starts = np.arange(len(rows.policies) + 1, dtype=np.int64) * rows.calls
    if rows.ping_gaps:
        counts = np.array([g.pings for g in rows.ping_gaps], dtype=np.int64)
        before = np.concatenate(([0], np.cumsum(counts)))
        starts += before[np.searchsorted(rows.ping_at, starts, side="left")]
    return [slice(int(a), int(b)) for a, b in itertools.pairwise(starts)]


def _with_pings(table: Any, rows: RowsTable) -> Any:
    """`table` with a row for each ping of `rows.ping_gaps`, before the call after its gap:
    the thread's, at its time, with its tokens and its own cost (`cost_usd`), the model, TTL
    and cleared tokens of the call before the gap (whose cached prompt it reads)."""
    import numpy as np
    import polars as pl

    gaps = rows.ping_gaps
    counts = np.array([g.pings for g in gaps], dtype=np.int64)
    at = np.repeat(rows.ping_at, counts)  # each ping's call, in the table's order
    nth = np.arange(len(at)) - np.repeat(np.cumsum(counts) - counts, counts) + 1

    def each(values: list[Any], dtype: Any = None) -> Any:
        return np.repeat(np.array(values, dtype=dtype), counts)

    sent = each([g.from_s for g in gaps], np.float64) + nth * each(
        [g.interval_s for g in gaps], np.float64
    )
    cost = each([np.nan if g.cost_usd is None else g.cost_usd for g in gaps], np.float64)
    read = each([g.cache_read_tokens for g in gaps], np.int64)
    fresh = each([g.input_tokens for g in gaps], np.int64)
    before = table[at - 1].select("model", "ttl", "cleared_tokens")
    pings = (
        table[at]
        .with_columns(
            pl.Series("timestamp", _milliseconds(sent)).cast(table.schema["timestamp"]),
            before.get_column("model"),
            before.get_column("ttl"),
            pl.Series("prompt_tokens", read + fresh),
            pl.Series("input_tokens", fresh),
            pl.lit(0, dtype=pl.Int64).alias("cache_write_5m_tokens"),
            pl.lit(0, dtype=pl.Int64).alias("cache_write_1h_tokens"),
            pl.Series("cache_read_tokens", read),
            pl.Series("output_tokens", each([g.output_tokens for g in gaps], np.int64)),
            pl.Series("cost_usd", cost).fill_nan(None),
            before.get_column("cleared_tokens"),
            pl.lit(0, dtype=pl.Int64).alias("newly_cleared_tokens"),
            pl.lit(False).alias("rewrote"),
            pl.lit(False).alias("cache_edit"),
            pl.lit(False).alias("is_break"),
            pl.lit(None, dtype=pl.String).alias("break_cause"),
            pl.lit(0, dtype=pl.Int64).alias("pings"),
            pl.lit(0.0).alias("ping_cost_usd"),
            pl.lit(True).alias("ping"),
        )
        .select(table.columns)
    )
    # A call's row moves down by the pings at or before it; the j-th ping (in order) comes j
    # rows after its call's old place, so before its call.
    calls = np.arange(table.height, dtype=np.int64)
    places = np.concatenate(
        (calls + np.searchsorted(at, calls, side="right"), at + np.arange(len(at)))
    )
    order = np.empty_like(places)
    order[places] = np.arange(len(places))
    return pl.concat([table, pings]).select(pl.all().gather(order))


def _milliseconds(seconds: Any) -> Any:
    """Epoch seconds (numpy) as whole milliseconds."""
    return (seconds * 1000).round().astype("int64")


def breaks_columns_frame(parts: list[list[list[object]]]) -> Any:
    """One breaks table from sessions' break columns (timestamps arrive as epoch seconds)."""
    import polars as pl

    empty = frame([], REPLAY_BREAKS_SCHEMA)
    if not parts:
        return empty
    data = {
        name: list(itertools.chain.from_iterable(p[i] for p in parts))
        for i, name in enumerate(BREAK_COLUMNS)
    }
    stamps = pl.Series("timestamp", data.pop("timestamp"), dtype=pl.Float64)
    df = pl.DataFrame(data, schema={k: v for k, v in empty.schema.items() if k in data})
    df = df.with_columns(
        (stamps * 1000).round().cast(pl.Int64).cast(pl.Datetime("ms", "UTC")).alias("timestamp"),
        pl.lit(SCHEMA_VERSION, dtype=pl.Int32).alias("schema_version"),
    )
    return df.select(empty.columns)


def session_rows(s: SessionReplay) -> list[dict[str, Any]]:
    """A session's rows of sessions.parquet: the recording's, then each policy's."""
    base = next((p for p in s.policies if p.name == "baseline"), None)
    start = datetime.fromtimestamp(s.start_s, UTC)
    return [
        {
            "policy": t.name,
            "session_id": s.session_id,
            "project": s.project,
            "start": start,
            "calls": s.calls,
            "cost_usd": t.cost_usd,
            "savings_vs_recorded_pct": savings_pct(t.cost_usd, s.recorded.cost_usd),
            "savings_vs_baseline_pct": savings_pct(t.cost_usd, base.cost_usd if base else 0),
            "cleared_tokens": t.cleared_tokens,
            "cache_read_tokens": t.tokens.cache_read_tokens,
            "cache_write_tokens": t.tokens.cache_write_5m_tokens + t.tokens.cache_write_1h_tokens,
            "cache_hit_ratio": t.tokens.cache_hit_ratio,
            "cache_breaks": t.cache_breaks,
            "fidelity_error": s.fidelity_error,
        }
        for t in [s.recorded, *s.policies]
    ]


def pack(result: SessionReplay) -> SessionReplay:
    """What `RowsSink` takes of a result (its rows, breaks and sessions-table rows), taken and
    pickled where the result is made (`run_replay(in_worker=pack)`): the driver then writes the
    pickle as it is, where it unpickled the rows from the worker and pickled them again (0.36
    and 0.19 s of the driver's CPU in a warm replay of the 506 MB replica, and the driver is
    what that run waits for)."""
    blob = pickle.dumps(_taken(result), pickle.HIGHEST_PROTOCOL)
    return _without_rows(result, PackedRows(blob, "", 0, _calls(result)))


class RowsAt(NamedTuple):
    """Where a session's rows are: a file of the sink's folder (its spool, or a worker's
    file), and the offset of their pickle in it. The sink's handle to them."""

    path: str
    offset: int


class PackTo:
    """`pack`, with the pickle written by the process that made the result, to a file of its
    own in the sink's folder (`RowsSink.packer`): only where it is goes to the driver. Sent
    through the workers' pipes, the rows of a warm replay of the 524 MB distinct replica were
    108 MB that the driver read, wrote to its spool and read back, while it imported polars.
    For local workers only (a forked worker opens its own file, by process id); a Ray task
    may run on another machine, and sends the pickle (`pack`)."""

    def __init__(self, folder: Path, out_dir: Path | None) -> None:
        self.folder = folder
        self.out_dir = out_dir
        self._file: IO[bytes] | None = None
        self._pid = 0

    def __call__(self, result: SessionReplay) -> SessionReplay:
        blob = pickle.dumps(_taken(result), pickle.HIGHEST_PROTOCOL)
        try:
            if self._file is None or self._pid != os.getpid():  # a fork copies self
                self._pid = os.getpid()
                self._file = open(self.folder / f"rows-{self._pid}.spool", "ab")  # noqa: SIM115
            offset = self._file.tell()
            self._file.write(blob)
            self._file.flush()  # in the file before the driver hears of it
        except OSError as exc:
            raise write_error(exc, self.out_dir, self.folder) from exc
        return _without_rows(result, PackedRows(None, self._file.name, offset, _calls(result)))

    def close(self) -> None:
        """Close this process's file (a run in one process: the workers' close as they end)."""
        if self._file is not None and self._pid == os.getpid():
            self._file.close()
        self._file = None


class _Taken(NamedTuple):
    """What the sink takes of a result, pickled as one: the calls table's rows, the breaks
    table's columns, and the sessions table's rows."""

    calls: SessionRows | None
    breaks: list[list[object]]
    sessions: list[dict[str, Any]]


def _taken(result: SessionReplay) -> _Taken:
    return _Taken(result.call_rows, result.break_columns, session_rows(result))


def _calls(result: SessionReplay) -> int:
    return result.call_rows.calls if result.call_rows is not None else 0


def _without_rows(result: SessionReplay, packed: PackedRows) -> SessionReplay:
    return replace(result, call_rows=None, break_columns=[], packed=packed)


class RowsSink(Spool):
    """Takes each session's rows as it arrives; writes the calls and breaks tables at the end.

    A `Spool` (`.mcsim-rows-NAME.*` beside the run directory): a context manager whose
    folder is removed on leaving, whether the run finished, failed or was stopped.
    """

    def __init__(self, policies: Sequence[str], out_dir: Path | None = None) -> None:
        super().__init__("rows", out_dir)
        self.policies = list(policies)
        self._readers: dict[str, IO[bytes]] = {}  # the workers' files, open for `finish`
        self._packer: PackTo | None = None  # what `packer` made: its file, in this process
        self._parts: _Parts | None = None  # set by `finish`
        self.sunk = 0  # sessions whose rows were taken
        self.calls = 0  # calls per run (policy) of those sessions

    def __call__(self, result: SessionReplay) -> RowsAt | int:
        """Take `result`'s rows (calls, breaks, and its sessions-table rows): append them to the
        spool, or, `pack`ed in the worker into a file of this sink's folder, note where they
        are. Returns the handle `finish` reads them by."""
        if self._parts is not None:
            raise ValueError("the rows sink is finished")
        packed = result.packed if result.packed is not None else pack(result).packed
        assert packed is not None
        self.calls += packed.calls
        self.sunk += 1
        if packed.data is not None:
            return self.put_pickled(packed.data)
        return RowsAt(packed.path, packed.offset)

    def finish(self, sessions: Sequence[CountedSession], lines: CallLines | None = None) -> None:
        """Write the rows of `sessions` (the report's, in start order, each with this sink's
        handle) to part files a batch at a time, handing each batch to `lines`; `write` makes
        the tables of them."""
        if self._parts is not None:
            raise ValueError("the rows sink is finished")
        parts = self._parts = _Parts(self.folder, len(self.policies), HELD_BYTES)
        batch: list[SessionRows] = []
        breaks: list[list[list[object]]] = []
        table: list[dict[str, Any]] = []
        size = 0
        for session in sessions:
            where = session.rows
            if not isinstance(where, int | RowsAt):
                raise ValueError(f"session {session.session_id}: rows this sink did not take")
            taken: _Taken = self.get(where) if isinstance(where, int) else self._worker_rows(where)
            if taken.calls is not None:
                batch.append(taken.calls)
                size += taken.calls.rows
            if taken.breaks:
                breaks.append(taken.breaks)
            table.extend(taken.sessions)
            if size >= BATCH_ROWS:
                self._write_batch(batch, breaks, table, parts, lines)
                batch, breaks, table, size = [], [], [], 0
        self._write_batch(batch, breaks, table, parts, lines)
        self.discard()
        paths = list(self._readers)
        self._close_workers_files()
        for path in paths:
            Path(path).unlink(missing_ok=True)

    def packer(self, local: bool) -> Callable[[SessionReplay], SessionReplay]:
        """The `in_worker` hook for this sink: `PackTo` its folder for local workers, `pack`
        for workers that may not share its disk."""
        if not local:
            return pack
        self._packer = PackTo(self.folder, self.out_dir)
        return self._packer

    def close(self) -> None:
        try:
            with contextlib.suppress(OSError):  # as Spool.close: nobody reads them now
                self._close_workers_files()
        finally:
            super().close()

    def _close_workers_files(self) -> None:
        if self._packer is not None:
            self._packer.close()
        for reader in self._readers.values():
            reader.close()
        self._readers.clear()

    def _worker_rows(self, where: RowsAt) -> Any:
        reader = self._readers.get(where.path)
        if reader is None:
            if Path(where.path).parent != self.folder:  # only ever the sink's own files
                raise ValueError(f"rows outside the sink's folder: {where.path}")
            reader = self._readers[where.path] = open(where.path, "rb")  # noqa: SIM115
        reader.seek(where.offset)
        return pickle.load(reader)

    def write(self, table: str, path: Path) -> None:
        """The table `table` ("calls", "breaks" or "sessions") as a dataset partitioned by
        policy at `path`, from the part files `finish` wrote (removed)."""
        if self._parts is None:
            raise ValueError("the rows sink is not finished")
        for index, policy_parts in enumerate(self._parts.of[table]):
            target = partition(path, index, len(self.policies))
            concat_parts(policy_parts, target, _SCHEMAS[table], GROUP_ROWS)
            policy_parts.clear()  # (frames held: their memory given back as they are written)

    def _write_batch(
        self,
        batch: list[SessionRows],
        breaks: list[list[list[object]]],
        table: list[dict[str, Any]],
        parts: _Parts,
        lines: CallLines | None,
    ) -> None:

        if batch:
            rows = RowsTable(batch, self.policies)
            if lines is not None:
                lines.add(rows)
            calls = rows_frame(rows)  # one slice per policy, in order
            for index, rows_of in enumerate(policy_slices(rows)):
                parts.add("calls", index, calls[rows_of])
        for name, frame_ in (
            ("breaks", breaks_columns_frame(breaks) if breaks else None),
            ("sessions", frame(table, REPLAY_SESSIONS_SCHEMA) if table else None),
        ):
            if frame_ is None:
                continue
            for index, rows_of in by_policy(frame_, self.policies):
                if rows_of.height:
                    parts.add(name, index, rows_of)
        give_back_memory()


class _Parts:
    """Each table's parts, by policy: frames held in memory while they fit in `held_bytes`
    (all tables together), part files in the sink's folder past that. Writing every part,
    reading it back and removing it cost a warm replay more than making the tables
    (docs/performance.md#warm-runs); past the budget the driver's memory stays flat."""

    def __init__(self, folder: Path, policies: int, held_bytes: int) -> None:
        self.folder = folder
        self.of: dict[str, list[list[Path | Any]]] = {
            name: [[] for _ in range(policies)] for name in ("calls", "breaks", "sessions")
        }
        self._room = held_bytes

    def add(self, table: str, index: int, rows: Any) -> None:
        parts = self.of[table][index]
        size = rows.estimated_size()
        if size <= self._room and not any(isinstance(p, Path) for p in parts):
            self._room -= size  # (held in order: once a part is written, the rest are too)
            parts.append(rows)
            return
        path = self.folder / f"{table}-{index}-{len(parts)}.arrow"
        write_part(rows, path)
        parts.append(path)
