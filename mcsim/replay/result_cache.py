"""Replayed sessions cached on disk, so a replay of unchanged transcripts under the same
policies does not replay them again.

One file per load unit and run setup: named by mcsim's cache format, a hash of everything the
results depend on besides the transcripts (the scenarios as the policy file defines them,
the price table, whether per-call rows are kept, and mcsim's own code), and the paths of the
unit's files; inside, the stamp of those files (disk_cache.unit_keys). A transcript that
changed is a miss, and its new entry replaces the old one. Another policy file is another
entry, so a user who goes back and forth between two keeps both (the folder's cap evicts the
least recently used). Any change to mcsim's code is another entry too: a replay never serves
results an older mcsim computed.

An entry holds, per session (`Kept`), what `replay_session` returned (totals, fidelity,
per-call rows and breaks), the session's start, files and call digests (what the pipeline
needs without loading it: the dates, duplicates across units), and the unit's skip report.
Data only, in the cache folder's file format (mcsim.ingest.disk_cache): a JSON part laid out
from the records' own fields and checked on the way back (mcsim.ingest.codec), then the
per-call rows' packed columns as they are (struct-packed in the worker: rows.py). A file that
cannot be used is counted as a `cache_entry_rebuilt` note and removed, then rewritten when
the run keeps the unit's results.

Measured on the 506 MB replica of the bundled corpus under policies/all.yaml (8 policies,
38,000 calls): the workers' replay is 4.9 s of CPU; reading the 749 entries is 0.3 s.
"""

from __future__ import annotations

import contextlib
import hashlib
from array import array
from dataclasses import dataclass, replace
from pathlib import Path

from mcsim.accounting.prices import PriceTable
from mcsim.ingest.codec import Codec
from mcsim.ingest.disk_cache import (
    Damaged,
    Entry,
    Kind,
    Stored,
    code_hash,
    entry_size,
    remove_entry,
)
from mcsim.ingest.loaders import LoadUnit
from mcsim.ingest.loaders.fields import EARLIEST_S, LATEST_S
from mcsim.ingest.pipeline import Lookup, SessionResult, UnitResults
from mcsim.replay.calibrate import CalSession
from mcsim.replay.policies import can_clear
from mcsim.replay.results import BREAK_COLUMNS, BreakRow, SessionReplay
from mcsim.replay.scenario import RECORDED, Scenario
from mcsim.replay.session_cache import content_key

# 2: each session's content key (session_cache.content_key); 3: cleared results not assessed;
# 4: the calls a layer did not apply on for their model (PolicyTotals.unsupported); 5: every
# drop by cause (PolicyTotals.drops_by_cause), breaks being only what the detector reports;
# 6: the cost under the other cleared-set reading (PolicyTotals.cleared_set_other_usd);
# 7: keep-warm pings (PolicyTotals.pings, ping_cost_usd; the rows' pings, ping_cost_usd);
# 8: laid out from the records' own fields (mcsim.ingest.codec); 9: each gap's pings
# (SessionRows.pinged), the rows of the pings in the calls table; 10: breaks as a table of
# `BreakRow`s; 11: a session's threads as records (rows.ThreadRows)
RESULTS_VERSION = 11
_RESULTS = Kind(4, RESULTS_VERSION)
# A session's runs, the recording first: each one's name, and the figure names of each of its
# policies that can clear (PolicyTotals.figures)
Runs = tuple[tuple[str, tuple[tuple[str, ...], ...]], ...]


@dataclass(frozen=True)
class Kept:
    """One session's entry: where it starts, its files, each call's digest and counts (the
    pipeline's `SessionResult`), its content key (session_cache.content_key), what its replay
    returned, and its breaks (the result's `break_columns` as rows)."""

    start: float
    files: tuple[str, ...]
    digests: list[int]
    counts: list[int]
    key: str
    result: SessionReplay
    breaks: list[BreakRow]


# The per-call rows' packed columns follow the JSON part (rows.SessionRows: ints, floats,
# bools); what the report adds to a result once made is not kept.
_CODEC = Codec(
    Kept,
    leave={
        "SessionReplay.break_columns",
        "SessionReplay.packed",
        "SessionRows.ints",
        "SessionRows.floats",
        "SessionRows.bools",
    },
    any_number={"BreakRow.gap_seconds"},  # (whole seconds between whole times: kept as made)
    bounded=True,
)


def setup_key(scenarios: tuple[Scenario, ...], prices: PriceTable, keep_rows: bool) -> str:
    """What a unit's replay results depend on besides its transcripts: every field of every
    scenario (`Scenario.fields_key`: a field added to Scenario is in the key at once), the
    price table, whether rows are kept, and mcsim's own code."""
    described = [s.fields_key for s in scenarios]
    text = repr((code_hash(), described, prices.version, prices.as_of, prices.models, keep_rows))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class ResultCache:
    """A pipeline memo (mcsim.ingest.pipeline.UnitMemo) of replayed sessions, in a cache
    folder, for one run setup (`setup_key`)."""

    cache_dir: Path
    setup: str
    # What every session must hold, checked on the way back: the report and the rows' table
    # pair runs and figures up strictly, so a forged entry of another shape would crash them
    runs: Runs

    @classmethod
    def of(
        cls, cache_dir: Path, scenarios: tuple[Scenario, ...], prices: PriceTable, keep_rows: bool
    ) -> ResultCache:
        runs = tuple(
            (s.name, tuple(p.figure_names for p in s.build() if can_clear(type(p))))
            for s in scenarios
        )
        return cls(cache_dir, setup_key(scenarios, prices, keep_rows), ((RECORDED, ()), *runs))

    def _entry(self, unit: LoadUnit) -> Entry:
        fmt = f"mcsim-results/{RESULTS_VERSION}/{self.setup}"
        return Entry.of(self.cache_dir, unit, fmt, _RESULTS, "results")

    def key(self, session: CalSession) -> str:
        """The session's content key (UnitMemo.key)."""
        return content_key(session)

    def kept_bytes(self, unit: LoadUnit) -> int | None:
        """The size of the unit's entry (UnitMemo.kept_bytes; disk_cache.entry_size)."""
        return entry_size(self._entry(unit).path, unit)

    def get(self, unit: LoadUnit) -> Lookup[SessionReplay]:
        """The unit's results (see UnitMemo.get): kept for its files as they are, or for an
        earlier state of them (a transcript that grew: not `current`). A file that cannot be
        used is removed at once: this run may keep no results to write in its place
        (sessions left out by date), and the next would note the same damage again."""
        entry = self._entry(unit)
        try:
            stored = entry.read(_CODEC, ("Kept.files",), any_state=True)
            if stored is None:
                return Lookup(None, [], entry.stamp)
            return Lookup(_unit_results(stored, self.runs), [], entry.stamp)
        except Damaged as why:
            unusable = [(entry.path, str(why))]
        except (ValueError, TypeError, KeyError, IndexError, OverflowError):
            unusable = [(entry.path, "unexpected content")]
        with contextlib.suppress(OSError):  # (a file that stays is noted again: no more)
            remove_entry(entry.path)
        return Lookup(None, unusable, entry.stamp)

    def put(self, unit: LoadUnit, state: str, results: UnitResults[SessionReplay]) -> None:
        """Write the unit's entry under STATE, the stamp its files had before they were loaded
        (nothing when a file could not be read, or a value does not survive JSON, as
        disk_cache.Entry.write), the per-call rows' packed columns after the records."""
        kept = []
        for d, key in zip(results.sessions, results.keys, strict=True):
            breaks = list(map(BreakRow._make, zip(*d.result.break_columns, strict=True)))
            kept.append(Kept(d.start_s, d.files, d.digests.tolist(), d.counts.tolist(), key,
                             d.result, breaks))  # fmt: skip
        rows = b"".join(
            chunk
            for k in kept
            if k.result.call_rows is not None
            for chunks in (*k.result.call_rows.ints, *k.result.call_rows.floats,
                           *k.result.call_rows.bools)
            for chunk in chunks
        )  # fmt: skip
        self._entry(unit).write(results.skips, _CODEC, kept, state, rows)


# --- reading: every value checked, so a verified file of an unexpected shape is damage --------


def _unit_results(stored: Stored[Kept], runs: Runs) -> UnitResults[SessionReplay]:
    """The sessions of an entry, each checked (`_check`), their rows from its packed part.
    Kept for other states of the files (the transcripts changed since: not `current`): their
    sessions that did not change are taken by their key, the rest replayed; not an error."""
    done = []
    at = 0
    for k in stored.records:
        at = _check(k, runs, stored.extra, at)
        # (array refuses what is not a 64-bit integer: digests and counts are hashes, any value)
        result = replace(k.result, break_columns=_break_columns(k))
        done.append(
            SessionResult(
                start_s=_time(k.start), files=k.files, digests=array("Q", k.digests),
                counts=array("q", k.counts), result=result,
            )
        )  # fmt: skip
    if at != len(stored.extra):
        raise ValueError("rows that do not add up")
    return UnitResults(done, stored.skips, [k.key for k in stored.records], stored.current)


def _time(value: float) -> float:
    """A time in seconds, within the years the loaders take (the tables turn it into a date)."""
    if not EARLIEST_S <= value < LATEST_S:
        raise ValueError("a time outside the years 1970 to 2999")
    return value


def _check(k: Kept, runs: Runs, blob: memoryview, at: int) -> int:
    """What a session's entry must hold beyond its types (the report and the rows' table
    pair runs and figures up strictly, so a forged entry of another shape would crash them),
    its packed rows taken from BLOB at AT; where the next session's rows start."""
    r = k.result
    _time(r.start_s)
    _time(r.end_s)
    totals = [r.recorded, *r.policies]
    if [t.name for t in totals] != [run for run, _ in runs]:
        raise ValueError("the runs of another setup")
    for t, (_, figures) in zip(totals, runs, strict=True):
        if t.figures and [tuple(f) for f in t.figures] != list(figures):
            raise ValueError("the figures of other policies")
    if len(k.digests) != len(k.counts):
        raise ValueError("calls without their counts")
    for b in k.breaks:
        _time(b.timestamp)
    rows = r.call_rows
    if rows is None:  # (no rows kept: no break columns either)
        if k.breaks:
            raise ValueError("breaks without rows")
        return at
    if rows.policies != [run for run, _ in runs] or (rows.session_id, rows.project) != (
        r.session_id,
        r.project,
    ):
        raise ValueError("the rows of another setup")
    n = rows.rows
    if n != rows.calls * len(rows.policies):
        raise ValueError("rows that do not add up")
    for parts, width in ((rows.ints, 8), (rows.floats, 8), (rows.bools, 1)):
        for chunks in parts:
            chunk = bytes(blob[at : at + n * width])
            if len(chunk) != n * width:
                raise ValueError("truncated rows")
            chunks.append(chunk)
            at += n * width
    for runs_ in (rows.model, rows.ttl):
        if sum(count for _, count in runs_) != n:
            raise ValueError("runs that do not add up")
    counts = [t.calls for t in rows.threads] + [r_[1] for r_ in (*rows.model, *rows.ttl)]
    if any(count < 0 for count in counts):
        raise ValueError("a negative count of calls")
    if not all(0 <= at_row < n for at_row, _ in rows.causes):
        raise ValueError("a break past the session's rows")
    if not all(0 < gap.at < n and gap.pings > 0 for gap in rows.pinged):
        raise ValueError("pings past the session's rows")
    return at


def _break_columns(k: Kept) -> list[list[object]]:
    """The result's break columns (BREAK_COLUMNS order) back from its rows: none without
    per-call rows (`_check` refuses breaks there)."""
    if k.result.call_rows is None:
        return []
    return [list(c) for c in zip(*k.breaks, strict=True)] or [[] for _ in BREAK_COLUMNS]
