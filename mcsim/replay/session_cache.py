"""Calibrated sessions cached on disk, so a second replay skips parsing and tokenizing.

One file per load unit, named by mcsim's cache format, the loader and the paths of the unit's
files; inside it, a stamp of every file's size and modification time: an entry whose stamp
no longer matches (a transcript changed) is a miss, and the new entry replaces it under the
same name, so a transcript that grows leaves one entry, not one per size it had. Beside it,
also named by the paths alone, the unit's token estimates by content hash: Claude Code keeps
appending to its transcripts, and a grown unit is parsed and calibrated again but only its
new text is tokenized (the slowest step).

Entries hold sizes, ids and hashes, never transcript text (what a tool call touched is kept
as a hash: calibrate.py): JSON columns for sessions and packed integers for token estimates,
in the cache folder's file format (mcsim.ingest.disk_cache: header, checksum, atomic writes,
the folder's cap; a damaged file is counted as a `cache_entry_rebuilt` note and rewritten).
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass
from itertools import starmap
from pathlib import Path
from typing import Any

import orjson

from mcsim.accounting.recorded import TTL_SECONDS
from mcsim.ingest.disk_cache import (
    BOOL,
    FLOAT,
    INT,
    LIST,
    OPT_FLOAT,
    OPT_INT,
    OPT_STR,
    STR,
    Column,
    Damaged,
    Entry,
    Kind,
    Table,
    checked,
    columns,
    groups,
    note_rebuilt,
    paths_key,
    read_payload,
    strings,
    tuples,
    write_entry,
)
from mcsim.ingest.loaders import Detail, LoadUnit, get_loader
from mcsim.ingest.pipeline import Loaded, without_calls
from mcsim.model import ItemKind, ThreadKind
from mcsim.replay.calibrate import (
    CalCall,
    CalSession,
    CalThread,
    ReadClass,
    Segment,
    calibrate_session,
)
from mcsim.replay.tokens import OFFLINE_ENCODING, TokenEstimator

CACHE_VERSION = 11
CACHE_FORMAT = f"mcsim-calibrated/{CACHE_VERSION}"
TOKENS_VERSION = 2
TOKENS_FORMAT = f"mcsim-tokens/{TOKENS_VERSION}/{OFFLINE_ENCODING}"
_TOKEN_RECORD = struct.Struct(f"<{len(TokenEstimator.key('x'))}sQ")  # content hash, tokens
_SESSIONS = Kind(1, CACHE_VERSION)
_TOKENS = Kind(2, TOKENS_VERSION)


# One estimator per process: token counts are shared by every unit a worker loads.
_ESTIMATOR: TokenEstimator | None = None


def _estimator() -> TokenEstimator:
    global _ESTIMATOR
    if _ESTIMATOR is None:
        _ESTIMATOR = TokenEstimator()
    return _ESTIMATOR


@dataclass(frozen=True)
class CalibratedSource:
    """A pipeline source of calibrated sessions, read from or written to the disk cache.

    `cache_dir=None` disables the cache. A unit reloaded without calls seen elsewhere (the
    rare cross-unit duplicate) is calibrated afresh and not cached.
    """

    cache_dir: Path | None

    def __call__(self, unit: LoadUnit, exclude: frozenset[int]) -> Loaded[CalSession]:
        entry = None
        if self.cache_dir is not None and not exclude:
            entry = Entry.of(self.cache_dir, unit, CACHE_FORMAT, _SESSIONS, "sessions")
        rebuilt: list[tuple[Path, str]] = []  # (cache file, why it could not be used)
        if entry is not None:
            try:
                cached = entry.read(_sessions)
            except Damaged as why:
                rebuilt.append((entry.path, str(why)))
            else:
                if cached is not None:
                    return Loaded(*cached)
        loaded = get_loader(unit.loader).load(unit, Detail.TEXT)
        kept, dropped = without_calls(loaded.sessions, exclude)
        estimator = _estimator()
        tokens = None
        if self.cache_dir is not None:
            tokens = self.cache_dir / f"{paths_key(unit, TOKENS_FORMAT)}.tokens"
            try:
                estimator.learn(_read_tokens(tokens) or {})
            except Damaged as why:
                rebuilt.append((tokens, str(why)))
        with estimator.recording() as used:
            calibrated = [calibrate_session(s, estimator) for s in kept]
        if entry is not None:
            entry.write(loaded.skips, _tables(calibrated))
        if tokens is not None:
            write_entry(tokens, _TOKENS, _tokens_payload(used))
        for path, reason in rebuilt:
            note_rebuilt(loaded.skips, path, reason)
        return Loaded(calibrated, loaded.skips, dropped)


# --- token estimates: packed (content hash, tokens) records -----------------------------------


def _tokens_payload(counts: dict[bytes, int]) -> bytes | None:
    try:
        return b"".join(_TOKEN_RECORD.pack(k, n) for k, n in counts.items())
    except struct.error:  # a count past 64 bits: not worth caching
        return None


def _read_tokens(path: Path) -> dict[bytes, int] | None:
    payload = read_payload(path, _TOKENS)
    if payload is None:
        return None
    if len(payload) % _TOKEN_RECORD.size:
        raise Damaged("unexpected content")
    return dict(_TOKEN_RECORD.iter_unpack(payload))


# --- calibrated sessions: four tables (sessions, threads, calls, segments) ------------------

_ITEM_KIND: Column = {k.value: k for k in ItemKind}
_THREAD_KIND: Column = {k.value: k for k in ThreadKind}
_READ_CLASS: Column = {c.value: c for c in ReadClass}
_TTL: Column = {t: t for t in TTL_SECONDS}

# In the field order of Segment, CalCall (with the count of its segments), CalThread (of its
# calls), CalSession (its files, then the count of its threads).
_SEGMENT_COLUMNS: Table = (_ITEM_KIND, INT, OPT_STR, OPT_STR, INT, BOOL, OPT_STR, OPT_STR)
_CALL_COLUMNS: Table = (
    *(STR, OPT_STR, FLOAT, STR, INT, INT, INT, INT, INT, OPT_STR, OPT_STR, _TTL),
    *(INT, INT, BOOL, OPT_INT, _READ_CLASS, INT, INT, BOOL, OPT_FLOAT, OPT_FLOAT),
    *(OPT_STR, LIST, INT, STR),
)
_THREAD_COLUMNS: Table = (STR, _THREAD_KIND, INT, INT)
_SESSION_COLUMNS: Table = (STR, STR, OPT_STR, LIST, INT)
_SEGMENTS_AT = CalCall._fields.index("segments")
_PRUNED_IDS_AT = CalCall._fields.index("pruned_ids")


def content_key(session: CalSession) -> str:
    """A hash of a calibrated session: of its tables as its entry holds them (everything a
    session is rebuilt from: what a replay of it reads)."""
    return hashlib.sha256(orjson.dumps(_tables([session]))).hexdigest()


def _tables(sessions: list[CalSession]) -> list[list[list[Any]]]:
    threads = [t for s in sessions for t in s.threads]
    calls = [c for t in threads for c in t.calls]
    return [
        columns(
            [[s.session_id, s.project, s.cwd, s.files, len(s.threads)] for s in sessions],
            _SESSION_COLUMNS,
        ),
        columns(
            [[t.thread_id, t.kind, t.head_tokens, len(t.calls)] for t in threads],
            _THREAD_COLUMNS,
        ),
        columns(
            [[*c[:_SEGMENTS_AT], len(c.segments), *c[_SEGMENTS_AT + 1 :]] for c in calls],
            _CALL_COLUMNS,
        ),
        columns([g for c in calls for g in c.segments], _SEGMENT_COLUMNS),
    ]


def _sessions(
    names: dict[str, str], sessions: Any, threads: Any, calls: Any, segments: Any
) -> list[CalSession]:
    segment = checked(segments, _SEGMENT_COLUMNS)
    call = checked(calls, _CALL_COLUMNS)
    call[_SEGMENTS_AT] = groups(tuples(Segment, segment), call[_SEGMENTS_AT])
    call[_PRUNED_IDS_AT] = [tuple(strings(ids)) for ids in call[_PRUNED_IDS_AT]]
    thread = checked(threads, _THREAD_COLUMNS)
    # Only threads with calls are loaded, and a session starts at its first call.
    thread[3] = groups(tuples(CalCall, call), thread[3], least=1)
    session = checked(sessions, _SESSION_COLUMNS)
    session[3] = [tuple(strings(files)) for files in session[3]]
    session[4] = groups(list(starmap(CalThread, zip(*thread, strict=True))), session[4], least=1)
    return list(starmap(CalSession, zip(*session, strict=True)))
