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

An entry holds, per session, what `replay_session` returned (totals, fidelity, per-call rows
and breaks), the session's start, files and call digests (what the pipeline needs without
loading it: the dates, duplicates across units), and the unit's skip report. Data only, in
the cache folder's file format (mcsim.ingest.disk_cache): a JSON part checked field by field
on the way back, then the per-call rows' packed columns as they are (struct-packed in the
worker: rows.py). A file that cannot be used is counted as a `cache_entry_rebuilt` note and
removed, then rewritten when the run keeps the unit's results.

Measured on the 506 MB replica of the bundled corpus under policies/all.yaml (8 policies,
38,000 calls): the workers' replay is 4.9 s of CPU; reading the 749 entries is 0.3 s.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import struct
from array import array
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from mcsim.accounting.prices import PriceTable
from mcsim.ingest.disk_cache import (
    INT,
    STR,
    Damaged,
    Kind,
    checked,
    code_hash,
    counter,
    keepable,
    read_payload,
    remove_file,
    respell,
    skips_from_row,
    skips_row,
    strings,
    unit_keys,
    write_entry,
)
from mcsim.ingest.loaders import LoadUnit
from mcsim.ingest.loaders.fields import EARLIEST_S, LATEST_S
from mcsim.ingest.pipeline import Memoed
from mcsim.ingest.storage import ObjectPath
from mcsim.model import Tokens
from mcsim.replay.calibrate import CalSession
from mcsim.replay.policies import can_clear
from mcsim.replay.results import BREAK_COLUMNS, PolicyTotals, SessionReplay
from mcsim.replay.rows import SessionRows
from mcsim.replay.scenario import RECORDED, Scenario
from mcsim.replay.session_cache import content_key
from mcsim.text import from_fs

# 2: each session's content key (session_cache.content_key); 3: cleared results not assessed;
# 4: the calls a layer did not apply on for their model (PolicyTotals.unsupported); 5: every
# drop by cause (PolicyTotals.drops_by_cause), breaks being only what the detector reports;
# 6: the cost under the other cleared-set reading (PolicyTotals.cleared_set_other_usd);
# 7: keep-warm pings (PolicyTotals.pings, ping_cost_usd; the rows' pings, ping_cost_usd)
RESULTS_VERSION = 7
_RESULTS = Kind(4, RESULTS_VERSION)
_JSON_SIZE = struct.Struct("<Q")
_COUNT_FIELDS = (
    "unpriced_calls",
    "cleared_tokens",
    "context_tokens",
    "max_prompt_tokens",
    "calls",
    "cache_breaks",
    "cache_edit_drops",
    "compactions",
    "compactions_still_reached",
    "cleared_results",
    "refetch_hazards",
    "refetch_unassessed",
    "acted_threads",
    "unavailable_edits",
    "pings",
)
# The types each break column may hold, in BREAK_COLUMNS order
_BREAK_TYPES: tuple[frozenset[type], ...] = tuple(
    frozenset(t) for t in ({str}, {str}, {str}, {str}, {int}, {float}, {str}, {int}, {int},
                           {int}, {float, int}, {str}, {bool})
)  # fmt: skip
# Past this a float no longer holds every integer: no replay's figure comes near (a call is
# 1e8 tokens at most), and sums of such numbers would leave the tables' 64 bits or be infinite
_LARGEST = 2**53
# A session's runs, the recording first: each one's name, and the figure names of each of its
# policies that can clear (PolicyTotals.figures)
Runs = tuple[tuple[str, tuple[tuple[str, ...], ...]], ...]


def setup_key(scenarios: tuple[Scenario, ...], prices: PriceTable, keep_rows: bool) -> str:
    """What a unit's replay results depend on besides its transcripts."""
    described = [
        (
            s.name,
            repr(s.layers),
            s.ttl,
            sorted(s.compactable_tools),
            sorted(s.exclude_tools),
            s.main_thread_only,
            s.provider,
            s.ttl_by_kind,
            repr(s.keep_warm),
        )
        for s in scenarios
    ]
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

    def _entry(self, unit: LoadUnit) -> tuple[Path, str, list[str]]:
        name, stamp = unit_keys(unit, f"mcsim-results/{RESULTS_VERSION}/{self.setup}")
        return self.cache_dir / f"{name}.results", stamp, [from_fs(str(f)) for f in unit.files]

    def key(self, session: CalSession) -> str:
        """The session's content key (UnitMemo.key)."""
        return content_key(session)

    def kept(self, unit: LoadUnit) -> bool:
        """Whether the unit has an entry (UnitMemo.kept): one stat, nothing read (an object
        in a store: taken as kept, a request spared)."""
        path = self._entry(unit)[0]
        return isinstance(path, ObjectPath) or path.exists()

    def get(
        self, unit: LoadUnit
    ) -> tuple[Memoed[SessionReplay] | None, list[tuple[Path, str]], str]:
        """The unit's results (see UnitMemo.get): kept for its files as they are, or for an
        earlier state of them (a transcript that grew: not `current`). A file that cannot be
        used is removed at once: this run may keep no results to write in its place
        (sessions left out by date), and the next would note the same damage again."""
        path, stamp, files = self._entry(unit)
        try:
            payload = read_payload(path, _RESULTS)
            if payload is None:
                return None, [], stamp
            return _decode(payload, path.stem, stamp, files, self.runs), [], stamp
        except Damaged as why:
            unusable = [(path, str(why))]
        except (ValueError, TypeError, KeyError, IndexError, OverflowError, struct.error):
            unusable = [(path, "unexpected content")]
        with contextlib.suppress(OSError):  # (a file that stays is noted again: no more)
            remove_file(path)
        return None, unusable, stamp

    def put(self, unit: LoadUnit, state: str, memoed: Memoed[SessionReplay]) -> None:
        """Write the unit's entry under STATE, the stamp its files had before they were loaded
        (nothing when a file could not be read, as disk_cache.Entry, or when a value does not
        survive JSON: a number past 64 bits, a float that is not finite)."""
        if not keepable(memoed.skips):
            return
        path, _, files = self._entry(unit)
        floats: list[float] = []
        blob: list[bytes] = []
        try:
            sessions = [
                [*_session_row(done, floats, blob), key]
                for done, key in zip(memoed.sessions, memoed.keys, strict=True)
            ]
            if not all(map(math.isfinite, floats)):
                return
            data = orjson.dumps([[path.stem, state], files, skips_row(memoed.skips), sessions])
        except orjson.JSONEncodeError:
            return
        write_entry(path, _RESULTS, b"".join([_JSON_SIZE.pack(len(data)), data, *blob]))


# --- writing ---------------------------------------------------------------------------------


def _totals_row(t: PolicyTotals, floats: list[float]) -> list[Any]:
    floats += (t.cost_usd, t.refetch_cost_usd, t.edit_reread_usd, t.cleared_set_other_usd,
               t.ping_cost_usd)  # fmt: skip
    for figures in t.figures:
        floats += figures.values()
    return [
        t.name,
        list(t.tokens),
        t.cost_usd,
        [getattr(t, f) for f in _COUNT_FIELDS],
        t.breaks_by_cause,
        t.refetch_cost_usd,
        t.figures,
        t.edit_reread_usd,
        t.unsupported,
        t.drops_by_cause,
        t.cleared_set_other_usd,
        t.ping_cost_usd,
    ]


def _rows_row(rows: SessionRows | None, blob: list[bytes]) -> list[Any] | None:
    if rows is None:
        return None
    for chunks in (*rows.ints, *rows.floats, *rows.bools):
        blob.append(b"".join(chunks))
    return [
        _as_columns(rows.threads, 3),
        rows.policies,
        rows.rows,
        _as_columns(rows.model, 2),
        _as_columns(rows.ttl, 2),
        _as_columns(rows.causes, 2),
    ]


def _as_columns(records: list[tuple[Any, ...]], width: int) -> list[list[Any]]:
    """Short records as columns: checked a column at a time on the way back (`_records`)."""
    return [list(c) for c in zip(*records, strict=True)] or [[] for _ in range(width)]


def _session_row(done: Any, floats: list[float], blob: list[bytes]) -> list[Any]:
    start, files, digests, counts, r = done
    floats += (start, r.start_s, r.end_s)
    if r.break_columns:  # (the float columns: when, and the gap before)
        floats += r.break_columns[BREAK_COLUMNS.index("timestamp")]
        floats += r.break_columns[BREAK_COLUMNS.index("gap_seconds")]
    return [
        start,
        list(files),
        digests.tolist(),
        counts.tolist(),
        r.session_id,
        r.project,
        r.start_s,
        r.end_s,
        r.calls,
        _totals_row(r.recorded, floats),
        [_totals_row(p, floats) for p in r.policies],
        [r.fidelity_error_tokens, r.fidelity_weight_tokens, r.calibration_fallbacks],
        r.models,
        r.recorded_prunes,
        r.providers,
        r.ttls,
        _rows_row(r.call_rows, blob),
        r.break_columns,
    ]


# --- reading: every value checked, so a verified file of an unexpected shape is damage --------


def _decode(
    payload: bytes, name: str, stamp: str, files: list[str], runs: Runs
) -> Memoed[SessionReplay]:
    (size,) = _JSON_SIZE.unpack_from(payload)
    end = _JSON_SIZE.size + size
    key, spelled, report, sessions = orjson.loads(payload[_JSON_SIZE.size : end])
    if type(key) is not list or len(key) != 2 or key[0] != name:
        raise Damaged("written for another unit")
    names = dict(zip(strings(spelled), files, strict=False))
    blob = memoryview(payload)[end:]
    done = []
    keys = []
    at = 0
    for row in _list(sessions):
        *fields, content = _list(row, 19)
        item, at = _session(fields, names, blob, at, runs)
        done.append(item)
        keys.append(_is(content, str))
    if at != len(blob):
        raise ValueError("rows that do not add up")
    # Kept for other states of the files (the transcripts changed since): their sessions
    # that did not change are taken by their key, the rest replayed; not an error.
    current = key[1] == stamp
    return Memoed(done, respell(skips_from_row(report), names), keys, current)


def _is(value: Any, *types: type) -> Any:
    if type(value) not in types:
        raise TypeError("a value of an unexpected type")
    return value


def _list(value: Any, n: int | None = None) -> list[Any]:
    if type(value) is not list or (n is not None and len(value) != n):
        raise TypeError("not a list of the expected length")
    return value


def _ints(value: Any, n: int | None = None) -> list[int]:
    values = _list(value, n)
    if not set(map(type, values)) <= {int}:
        raise TypeError("not a list of integers")
    _plausible(values)
    return values


def _plausible(numbers: Collection[Any]) -> None:
    """Refuse a number no replay could have made (`_LARGEST`). min and max, in C: a generator
    of abs() took 0.24 of the 0.79 s of CPU reading the replica's entries. (No NaN can be
    among them, which would hide others from min and max: JSON has none.)"""
    if numbers and (max(numbers) > _LARGEST or min(numbers) < -_LARGEST):
        raise ValueError("a number no replay reaches")


def _float(value: Any) -> float:
    _plausible([_is(value, float)])
    return float(value)


def _time(value: Any) -> float:
    """A time in seconds, within the years the loaders take (the tables turn it into a date)."""
    if not EARLIEST_S <= _is(value, float) < LATEST_S:
        raise ValueError("a time outside the years 1970 to 2999")
    return float(value)


def _counter(value: Any) -> Counter[str]:
    counts = counter(value)
    _plausible(counts.values())
    return counts


def _totals(row: Any) -> PolicyTotals:
    (name, tokens, cost, counts, causes, refetch_cost, figures, reread, unsupported, drops,
     other, ping_cost) = _list(row, 12)  # fmt: skip
    for figure in _list(figures):
        if type(figure) is not dict or not set(map(type, figure.values())) <= {int, float}:
            raise TypeError("not figures")
        _plausible(figure.values())
    return PolicyTotals(
        _is(name, str),
        Tokens._make(_ints(tokens, len(Tokens._fields))),
        _float(cost),
        breaks_by_cause=_counter(causes),
        refetch_cost_usd=_float(refetch_cost),
        figures=figures,
        edit_reread_usd=_float(reread),
        unsupported=_counter(unsupported),
        drops_by_cause=_counter(drops),
        cleared_set_other_usd=_float(other),
        ping_cost_usd=_float(ping_cost),
        **dict(zip(_COUNT_FIELDS, _ints(counts, len(_COUNT_FIELDS)), strict=True)),
    )


def _rows(row: Any, blob: memoryview, at: int) -> tuple[SessionRows | None, int]:
    if row is None:
        return None, at
    threads, policies, n, model, ttl, causes = _list(row, 6)
    rows = SessionRows("", "", _records(threads, STR, STR, INT), strings(policies))
    rows.rows = _is(n, int)
    if n != rows.calls * len(rows.policies):
        raise ValueError("rows that do not add up")
    for parts, width in ((rows.ints, 8), (rows.floats, 8), (rows.bools, 1)):
        for chunks in parts:
            chunk = bytes(blob[at : at + n * width])
            if len(chunk) != n * width:
                raise ValueError("truncated rows")
            chunks.append(chunk)
            at += n * width
    rows.model = _records(model, STR, INT)
    rows.ttl = _records(ttl, STR, INT)
    rows.causes = _records(causes, INT, STR)
    for runs in (rows.model, rows.ttl):
        if sum(count for _, count in runs) != n:
            raise ValueError("runs that do not add up")
    counts = [t[2] for t in rows.threads] + [r[1] for r in (*rows.model, *rows.ttl)]
    if any(count < 0 for count in counts):
        raise ValueError("a negative count of calls")
    if not all(0 <= at_row < n for at_row, _ in rows.causes):
        raise ValueError("a break past the session's rows")
    return rows, at


def _records(value: Any, *spec: frozenset[type]) -> list[Any]:
    """Short records from their columns (`_as_columns`), as tuples, every value checked."""
    return list(zip(*checked(value, spec), strict=True))


def _breaks(value: Any) -> list[list[object]]:
    columns = _list(value)
    if not columns:
        return columns
    checked(columns, _BREAK_TYPES)  # (every type, columns of one length)
    for column, kind in zip(columns, _BREAK_TYPES, strict=True):
        if str not in kind:
            _plausible(column)
    for at in columns[BREAK_COLUMNS.index("timestamp")]:
        _time(at)
    return columns


def _session(
    row: Any, names: dict[str, str], blob: memoryview, at: int, runs: Runs
) -> tuple[Any, int]:
    (start, files, digests, counts, session_id, project, start_s, end_s, calls, recorded,
     policies, fidelity, models, prunes, providers, ttls, rows,
     breaks) = _list(row, 18)  # fmt: skip
    error, weight, fallbacks = _ints(fidelity, 3)
    result = SessionReplay(
        session_id=_is(session_id, str),
        project=_is(project, str),
        start_s=_time(start_s),
        end_s=_time(end_s),
        calls=_ints([calls])[0],
        recorded=_totals(recorded),
        policies=[_totals(p) for p in _list(policies)],
        fidelity_error_tokens=error,
        fidelity_weight_tokens=weight,
        calibration_fallbacks=fallbacks,
        models=tuple(strings(models)),
        recorded_prunes=_counter(prunes),
        providers=_counter(providers),
        ttls=_counter(ttls),
        break_columns=_breaks(breaks),
    )
    totals = [result.recorded, *result.policies]
    if [t.name for t in totals] != [run for run, _ in runs]:
        raise ValueError("the runs of another setup")
    for t, (_, figures) in zip(totals, runs, strict=True):
        if t.figures and [tuple(f) for f in t.figures] != list(figures):
            raise ValueError("the figures of other policies")
    result.call_rows, at = _rows(rows, blob, at)
    if result.call_rows is not None:
        if result.call_rows.policies != [run for run, _ in runs]:
            raise ValueError("the rows of another setup")
        result.call_rows.session_id, result.call_rows.project = session_id, project
    if len(_list(digests)) != len(_list(counts)):
        raise ValueError("calls without their counts")
    files = tuple(names.get(f, f) for f in strings(files))
    # (array refuses what is not a 64-bit integer: digests and counts are hashes, any value)
    return (_time(start), files, array("Q", _list(digests)), array("q", _list(counts)),
            result), at  # fmt: skip
