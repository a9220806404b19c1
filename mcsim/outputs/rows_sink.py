"""A replay's per-call and break rows, written to disk as the sessions arrive (issue 13).

Kept in the report until the end, every session's rows made the driver grow with the corpus
(about 150 MB per GB of transcripts). `RowsSink` is handed each session's result by
`run_replay(sink=...)`: it appends the session's rows to a spool file in its own temporary
folder and drops them from the result. `finish` then writes calls.parquet and breaks.parquet
in the documented order (calls: policy, then session in start order, thread and call; breaks:
session by session), a batch of sessions at a time: each batch's rows of each policy go to a
part file, and polars streams the parts, in order, into one table. The charts read back from
the written calls table only the columns they draw (`chart_rows`).
"""

from __future__ import annotations

import itertools
import os
import pickle
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from mcsim.errors import McsimError
from mcsim.ingest.storage import ObjectPath
from mcsim.outputs.tables import SCHEMA_VERSION, TS, frame, write_parquet
from mcsim.replay.rows import RowsTable, SessionRows
from mcsim.replay.run import BREAK_COLUMNS, SessionReplay

REPLAY_CALLS_SCHEMA: dict[str, str] = {
    "policy": "str", "session_id": "str", "project": "str", "thread_id": "str",
    "thread_kind": "str", "call_index": "int", "timestamp": TS, "model": "str", "ttl": "str",
    "prompt_tokens": "int", "input_tokens": "int", "cache_write_5m_tokens": "int",
    "cache_write_1h_tokens": "int", "cache_read_tokens": "int", "output_tokens": "int",
    "cost_usd": "float", "cleared_tokens": "int", "newly_cleared_tokens": "int",
    "rewrote": "bool", "cache_edit": "bool", "is_break": "bool", "break_cause": "str",
}  # fmt: skip
REPLAY_BREAKS_SCHEMA: dict[str, str] = {
    "policy": "str", "session_id": "str", "project": "str", "thread_id": "str",
    "call_index": "int", "timestamp": TS, "model": "str", "previous_read_tokens": "int",
    "read_tokens": "int", "drop_tokens": "int", "gap_seconds": "float", "cause": "str",
    "expected": "bool",
}  # fmt: skip

BATCH_ROWS = 250_000  # rows (every policy's) turned into a table at a time: about 50 MB


def rows_frame(rows: RowsTable) -> Any:
    """The calls table of `rows` (in its order: policy, session, thread, call)."""
    import polars as pl

    empty = frame([], REPLAY_CALLS_SCHEMA)
    columns = {}
    for name, dtype in empty.schema.items():
        if name in rows.codes:
            columns[name] = rows.string(name)
        elif name in rows.numbers:
            values = rows.numbers[name]
            if name == "timestamp":  # epoch seconds to milliseconds
                values = (values * 1000).round().astype("int64")
            columns[name] = pl.Series(name, values).cast(dtype)
    table = pl.DataFrame(columns).with_columns(
        pl.col("cost_usd").fill_nan(None),
        pl.lit(SCHEMA_VERSION, dtype=pl.Int32).alias("schema_version"),
    )
    return table.select(empty.columns)


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


def _near(out_dir: Path | None) -> Path | None:
    """The folder a spool goes in: the nearest existing folder above the run directory (the
    same file system as the run's temporary folder), or the system's for a remote run."""
    if out_dir is None or isinstance(out_dir, ObjectPath):
        return None
    parent = out_dir.absolute().parent
    while not parent.exists():
        parent = parent.parent
    return parent


class RowsSink:
    """Takes each session's rows as it arrives; writes the calls and breaks tables at the end.

    A context manager: its temporary folder (beside the run directory, `.mcsim-rows-NAME.*`)
    is removed on leaving, whether the run finished, failed or was stopped.
    """

    def __init__(self, policies: Sequence[str], out_dir: Path | None = None) -> None:
        self.policies = list(policies)
        self.out_dir = out_dir
        name = out_dir.name if out_dir is not None else "mcsim"
        self.folder = Path(tempfile.mkdtemp(prefix=f".mcsim-rows-{name}.", dir=_near(out_dir)))
        self.calls_path = self.folder / "calls.parquet"
        self.breaks_path = self.folder / "breaks.parquet"
        self._spool: IO[bytes] | None = open(self.folder / "rows.spool", "wb")  # noqa: SIM115
        # By id of each result (the report holds them all): where its rows are in the spool.
        self._at: dict[int, tuple[int, int]] = {}
        self.sunk = 0  # sessions whose rows were taken

    def __enter__(self) -> RowsSink:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        if self._spool is not None:
            self._spool.close()
            self._spool = None
        shutil.rmtree(self.folder, ignore_errors=True)

    def __call__(self, result: SessionReplay) -> None:
        """Append `result`'s rows to the spool and drop them from it."""
        if self._spool is None:
            raise ValueError("the rows sink is finished")
        if result.call_rows is None and not result.break_columns:
            return
        blob = pickle.dumps((result.call_rows, result.break_columns), pickle.HIGHEST_PROTOCOL)
        self._at[id(result)] = (self._spool.tell(), len(blob))
        try:
            self._spool.write(blob)
        except OSError as exc:  # a full disk, a quota: the run's write failure, in one line
            raise McsimError(f"{self.out_dir}: could not write the run ({exc.strerror})") from exc
        result.call_rows = None
        result.break_columns = []
        self.sunk += 1

    def finish(self, sessions: Sequence[SessionReplay]) -> None:
        """Write calls.parquet and breaks.parquet into the sink's folder, `sessions` (the
        report's, in start order) a batch at a time."""
        if self._spool is None:
            raise ValueError("the rows sink is finished")
        self._spool.close()
        self._spool = None
        parts: list[list[Path]] = [[] for _ in self.policies]
        break_parts: list[Path] = []
        batch: list[SessionRows] = []
        breaks: list[list[list[object]]] = []
        size = 0
        with open(self.folder / "rows.spool", "rb") as spool:
            for session in sessions:
                where = self._at.get(id(session))
                if where is None:
                    continue
                spool.seek(where[0])
                rows, columns = pickle.loads(spool.read(where[1]))
                if rows is not None:
                    batch.append(rows)
                    size += rows.rows
                if columns:
                    breaks.append(columns)
                if size >= BATCH_ROWS:
                    self._write_batch(batch, breaks, parts, break_parts)
                    batch, breaks, size = [], [], 0
        self._write_batch(batch, breaks, parts, break_parts)
        os.remove(self.folder / "rows.spool")
        _concat([p for policy in parts for p in policy], self.calls_path, REPLAY_CALLS_SCHEMA)
        _concat(break_parts, self.breaks_path, REPLAY_BREAKS_SCHEMA)

    def _write_batch(
        self,
        batch: list[SessionRows],
        breaks: list[list[list[object]]],
        parts: list[list[Path]],
        break_parts: list[Path],
    ) -> None:
        if batch:
            rows = RowsTable(batch, self.policies)
            table = rows_frame(rows)
            for index, policy_parts in enumerate(parts):
                path = self.folder / f"calls-{index}-{len(policy_parts)}.parquet"
                write_parquet(table.slice(index * rows.calls, rows.calls), path)
                policy_parts.append(path)
        if breaks:
            path = self.folder / f"breaks-{len(break_parts)}.parquet"
            write_parquet(breaks_columns_frame(breaks), path)
            break_parts.append(path)

    def chart_rows(self) -> RowsTable:
        """The columns of the written calls table the charts draw (see `chart_rows`)."""
        return chart_rows(self.calls_path, self.policies)


def _concat(parts: list[Path], path: Path, schema: dict[str, str]) -> None:
    """The part files, in order, streamed into one table (parts removed); an empty table
    when there are none."""
    import polars as pl

    if not parts:
        write_parquet(frame([], schema), path)
        return
    pl.scan_parquet(parts, glob=False).sink_parquet(path)
    for part in parts:
        os.remove(part)


def chart_rows(path: Path, policies: Sequence[str]) -> RowsTable:
    """What `charts.add_calls` reads of a calls table (policy-major, every policy with the
    same calls): the order columns of the first policy's rows, and every row's cost, prompt
    size and break."""
    import polars as pl

    table = pl.scan_parquet(path, glob=False)
    calls = table.select(pl.len()).collect().item() // max(len(policies), 1)
    first = table.head(calls).select("session_id", "thread_id", "call_index", "timestamp")
    order = first.collect()
    every = table.select("cost_usd", "prompt_tokens", "is_break", "break_cause").collect()
    numbers = {
        "call_index": order["call_index"].to_numpy(),
        "timestamp": order["timestamp"].dt.epoch("ms").to_numpy() / 1000,
        "cost_usd": every["cost_usd"].cast(pl.Float64).to_numpy(),  # null: NaN
        "prompt_tokens": every["prompt_tokens"].to_numpy(),
        "is_break": every["is_break"].to_numpy(),
    }
    strings = {
        "session_id": _codes(order["session_id"]),
        "thread_id": _codes(order["thread_id"]),
        "break_cause": _codes(every["break_cause"]),
    }
    return RowsTable.from_columns(policies, calls, numbers, strings)


def _codes(column: Any) -> tuple[list[str], Any]:
    """A string column as its distinct values (first-seen order) and a code per row (-1 =
    null)."""
    import polars as pl

    values = column.drop_nulls().unique(maintain_order=True).to_list()
    codes = column.replace_strict(
        values, list(range(len(values))), default=-1, return_dtype=pl.Int32
    )
    return values, codes.fill_null(-1).to_numpy()
