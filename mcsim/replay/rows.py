"""Per-call rows of a replay: built as typed arrays in the workers, joined with numpy.

A replay of a large corpus makes hundreds of thousands of rows (every call under every
policy). Python objects per value are what made them slow to build, to send between processes
and to turn into a table, so a session's rows travel as `array.array` columns, and the string
columns (policy, thread, model, TTL, break cause) as runs or sparse entries: they repeat, and
a break is rare. Numbers are packed with `struct` (a few ns a value, where `array.extend`
takes tens). `RowsTable` joins every session's rows in the parent into numpy columns,
ordered by policy (the recording first), then session, thread and call, so each policy's rows
are one slice in the same call order. Workers never import numpy or polars (fork safety);
only the parent does.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import groupby
from typing import Any, NamedTuple

from mcsim.replay.keep_warm import PingGap


class RowColumns(NamedTuple):
    """One thread's calls under one run, a column each (a value per call, in call order):
    what `SessionRows.add` takes, by name."""

    call_index: Sequence[int]
    prompt_tokens: Sequence[int]
    input_tokens: Sequence[int]
    cache_write_5m_tokens: Sequence[int]
    cache_write_1h_tokens: Sequence[int]
    cache_read_tokens: Sequence[int]
    output_tokens: Sequence[int]
    cleared_tokens: Sequence[int]
    newly_cleared_tokens: Sequence[int]
    pings: Sequence[int]  # keep-warm pings sent in the idle gap before the call (keep_warm.py)
    timestamp: Sequence[float]
    cost_usd: Sequence[float | None]  # None: unpriced (NaN packed, a null in the table)
    ping_cost_usd: Sequence[float | None]  # those pings' cost, apart
    rewrote: Sequence[bool]
    cache_edit: Sequence[bool]
    is_break: Sequence[bool]
    model: Sequence[str]
    ttl: Sequence[str]


# The numeric columns by storage type (packed int64, float64, one byte per bool); model and
# ttl are kept as runs.
INT_COLUMNS = (
    "call_index",
    "prompt_tokens",
    "input_tokens",
    "cache_write_5m_tokens",
    "cache_write_1h_tokens",
    "cache_read_tokens",
    "output_tokens",
    "cleared_tokens",
    "newly_cleared_tokens",
    "pings",
)
FLOAT_COLUMNS = ("timestamp", "cost_usd", "ping_cost_usd")
BOOL_COLUMNS = ("rewrote", "cache_edit", "is_break")


def runs(values: Sequence[str]) -> list[tuple[str, int]]:
    """Run-length encoding: (value, count) pairs."""
    if not values:
        return []
    if values.count(values[0]) == len(values):  # one value: the usual case, in C
        return [(values[0], len(values))]
    return [(value, sum(1 for _ in group)) for value, group in groupby(values)]


class ThreadRows(NamedTuple):
    """One thread's part of each run's rows: its id, its kind, and its calls (rows)."""

    thread_id: str
    kind: str
    calls: int


@dataclass
class SessionRows:
    """One session's rows: for each run (the recording, then each scenario), every thread's
    calls in the same order, so every run has `calls` rows."""

    session_id: str
    project: str
    threads: list[ThreadRows]  # in row order
    policies: list[str] = field(default_factory=list)  # the runs, in row order
    rows: int = 0
    # Per column, packed chunks (native int64, float64, one byte per bool); `seal` joins them.
    ints: list[list[bytes]] = field(default_factory=lambda: [[] for _ in INT_COLUMNS])
    floats: list[list[bytes]] = field(default_factory=lambda: [[] for _ in FLOAT_COLUMNS])
    bools: list[list[bytes]] = field(default_factory=lambda: [[] for _ in BOOL_COLUMNS])
    model: list[tuple[str, int]] = field(default_factory=list)
    ttl: list[tuple[str, int]] = field(default_factory=list)
    causes: list[tuple[int, str]] = field(default_factory=list)  # (row, break cause)
    # The keep-warm pings, by gap (`at`: the row of the call after it): rows of their own in
    # the calls table (`RowsTable.ping_at`), not here, where every run has the same rows
    pinged: list[PingGap] = field(default_factory=list)

    @property
    def calls(self) -> int:
        return sum(t.calls for t in self.threads)

    def start_run(self, policy: str) -> None:
        self.policies.append(policy)

    def add(
        self,
        columns: RowColumns,
        causes: Iterable[tuple[int, str]],
        ping_gaps: Iterable[PingGap] = (),
    ) -> None:
        """One thread's calls of the current run; `causes` holds (call index in the thread,
        cause) for the calls whose reads dropped (breaks and announced drops alike:
        `is_break` tells them apart); `ping_gaps` the thread's gaps with keep-warm pings.
        A column object added again is packed once (`_PACKED`): none may change before
        `seal`."""
        n = len(columns.model)
        offset = self.rows
        self.rows += n
        for chunks, name in zip(self.ints, INT_COLUMNS, strict=True):
            chunks.append(_packed(getattr(columns, name), _ints))
        for chunks, name in zip(self.floats, FLOAT_COLUMNS, strict=True):
            chunks.append(_packed(getattr(columns, name), _floats))
        for chunks, name in zip(self.bools, BOOL_COLUMNS, strict=True):
            chunks.append(_packed(getattr(columns, name), bytes))
        self.model.extend(runs(columns.model))
        self.ttl.extend(runs(columns.ttl))
        self.causes.extend((offset + i, cause) for i, cause in causes)
        self.pinged.extend(gap._replace(at=offset + gap.at) for gap in ping_gaps)

    def seal(self) -> None:
        """Join each column's chunks (fewer objects to send to the parent)."""
        _PACKED.clear()  # (what they were packed from can go)
        for chunks in (*self.ints, *self.floats, *self.bools):
            chunks[:] = [b"".join(chunks)]


def _ints(values: Sequence[int]) -> bytes:
    return struct.pack(f"{len(values)}q", *values)


def _floats(values: Sequence[float | None]) -> bytes:
    if None in values:
        values = [float("nan") if v is None else v for v in values]
    return struct.pack(f"{len(values)}d", *values)


# The columns packed since the last `seal`, by identity, with their bytes: the runs of a
# session share most of a thread's columns (its times and outputs; a run that cleared
# nothing shares all of the unpruned replay's: simulate.simulate_thread), so each is packed
# once. The column itself is held, so no other takes its id meanwhile.
_PACKED: dict[int, tuple[object, bytes]] = {}


def _packed(values: Any, pack: Any) -> bytes:
    known = _PACKED.get(id(values))
    if known is not None and known[0] is values:
        return known[1]
    data: bytes = pack(values)
    _PACKED[id(values)] = (values, data)
    return data


class RowsTable:
    """Every session's rows joined into numpy columns, ordered policy-major.

    `policies` names the runs in order; every session must hold the same runs. String
    columns are kept as codes into `values[name]` (-1 = null) until `string` decodes them.
    """

    def __init__(self, sessions: Sequence[SessionRows], policies: Sequence[str]) -> None:
        import numpy as np

        for s in sessions:
            if s.policies != list(policies):
                raise ValueError(f"session {s.session_id} holds runs {s.policies}")
        self.policies = list(policies)
        runs_n = len(policies)
        counts = np.array([s.calls for s in sessions], dtype=np.int64)
        self.calls = int(counts.sum())  # rows per policy
        # order[j]: the row of the session-major concatenation that comes j-th policy-major.
        session_start = np.cumsum(counts * runs_n) - counts * runs_n
        starts = (session_start[None, :] + np.arange(runs_n)[:, None] * counts[None, :]).ravel()
        lengths = np.tile(counts, runs_n)
        order = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths)
        order += np.arange(len(order))
        self.rows = len(order)

        def joined(parts: list[list[bytes]], dtype: Any) -> Any:
            packed = b"".join(chunk for chunks in parts for chunk in chunks)
            return np.frombuffer(packed, dtype=dtype)[order]

        self.numbers: dict[str, Any] = {}
        for i, name in enumerate(INT_COLUMNS):
            self.numbers[name] = joined([s.ints[i] for s in sessions], np.int64)
        for i, name in enumerate(FLOAT_COLUMNS):
            self.numbers[name] = joined([s.floats[i] for s in sessions], np.float64)
        for i, name in enumerate(BOOL_COLUMNS):
            self.numbers[name] = joined([s.bools[i] for s in sessions], np.int8).astype(bool)

        self.values: dict[str, list[str]] = {}
        self.codes: dict[str, Any] = {}
        per_session = np.repeat(np.arange(len(sessions)), counts)
        self._set("session_id", [s.session_id for s in sessions], np.tile(per_session, runs_n))
        self._set("project", [s.project for s in sessions], np.tile(per_session, runs_n))
        self._set("policy", self.policies, np.repeat(np.arange(runs_n), self.calls))
        ids = self._encode([(t.thread_id, t.calls) for s in sessions for t in s.threads])
        kinds = self._encode([(t.kind, t.calls) for s in sessions for t in s.threads])
        for name, (values, codes) in (("thread_id", ids), ("thread_kind", kinds)):
            self._set(name, values, np.tile(codes, runs_n))
        for name in ("model", "ttl"):
            values, codes = self._encode([p for s in sessions for p in getattr(s, name)])
            self._set(name, values, codes[order])
        causes = np.full(self.rows, -1, dtype=np.int32)
        values, cause_codes = _dictionary([c for s in sessions for _, c in s.causes])
        at = [start + row for s, start in zip(sessions, session_start, strict=True)
              for row, _ in s.causes]  # fmt: skip
        causes[np.asarray(at, dtype=np.int64)] = cause_codes
        self._set("break_cause", values, causes[order])
        # Each gap with pings at the row of the call after it, in the table's order: a row of
        # session s's run r, call c, comes at r * calls + (calls of the sessions before s) + c.
        before = np.cumsum(counts) - counts
        gaps = [(s_index, gap) for s_index, s in enumerate(sessions) for gap in s.pinged]
        ping_at = np.array(
            [
                (gap.at // sessions[i].calls) * self.calls + before[i] + gap.at % sessions[i].calls
                for i, gap in gaps
            ],
            dtype=np.int64,
        )
        by_row = np.argsort(ping_at, kind="stable")
        self.ping_at = ping_at[by_row]
        self.ping_gaps = [gaps[i][1] for i in by_row]

    def _set(self, name: str, values: list[str], codes: Any) -> None:
        self.values[name] = values
        self.codes[name] = codes

    @staticmethod
    def _encode(pairs: list[tuple[str, int]]) -> tuple[list[str], Any]:
        """Runs of (value, count) as a dictionary and one code per row."""
        import numpy as np

        values, codes = _dictionary([v for v, _ in pairs])
        return values, np.repeat(codes, np.array([n for _, n in pairs], dtype=np.int64))

    def string(self, name: str) -> Any:
        """A string column as a polars Series (code -1 = null)."""
        import numpy as np
        import polars as pl

        values = pl.Series(name, [*self.values[name], None], dtype=pl.String)
        codes = self.codes[name]
        return values.gather(np.where(codes < 0, len(values) - 1, codes))

    def time_order(self) -> Any:
        """Indices of one policy's rows in time order (ties: session, thread, call): the same
        for every policy, since each run holds the same calls in the same order."""
        import numpy as np

        n = self.calls
        keys = [self.numbers["call_index"][:n]]
        for name in ("thread_id", "session_id"):
            rank = np.argsort(np.argsort(np.array(self.values[name], dtype=object)))
            keys.append(rank[self.codes[name][:n]])
        keys.append(self.numbers["timestamp"][:n])
        return np.lexsort(keys)

    def policy_slice(self, index: int) -> slice:
        return slice(index * self.calls, (index + 1) * self.calls)


def _dictionary(items: list[str]) -> tuple[list[str], Any]:
    """Distinct values (first-seen order) and each item's code."""
    import numpy as np

    index: dict[str, int] = {}
    codes = np.array([index.setdefault(v, len(index)) for v in items], dtype=np.int32)
    return list(index), codes
