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
import os
import struct
from dataclasses import dataclass
from pathlib import Path

import orjson

from mcsim.accounting.recorded import TTL_SECONDS
from mcsim.ingest.codec import Codec
from mcsim.ingest.disk_cache import (
    Damaged,
    Entry,
    Kind,
    note_rebuilt,
    read_payload,
    unit_keys,
    write_entry,
)
from mcsim.ingest.loaders import Detail, LoadUnit, get_loader
from mcsim.ingest.pipeline import Loaded, without_calls
from mcsim.replay.calibrate import CalSession, calibrate_session
from mcsim.replay.tokens import OFFLINE_ENCODING, TokenEstimator

CACHE_VERSION = 13  # 12: the tables laid out from the records' fields (mcsim.ingest.codec);
# 13: the JSON part's size before it (disk_cache.Entry)
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
                cached = entry.read(_CODEC)
            except Damaged as why:
                rebuilt.append((entry.path, str(why)))
            else:
                if cached is not None:
                    return Loaded(cached.records, cached.skips)
        loaded = get_loader(unit.loader).load(unit, Detail.TEXT)
        kept, dropped = without_calls(loaded.sessions, exclude)
        estimator = _estimator()
        tokens = None
        if self.cache_dir is not None:
            name, _ = unit_keys(unit, TOKENS_FORMAT)  # (named by the paths alone)
            tokens = self.cache_dir / f"{name}.tokens"
            try:
                estimator.learn(_read_tokens(tokens) or {})
            except Damaged as why:
                rebuilt.append((tokens, str(why)))
        with estimator.recording() as used:
            calibrated = [calibrate_session(s, estimator) for s in kept]
        if entry is not None:
            entry.write(loaded.skips, _CODEC, calibrated)
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


# --- calibrated sessions: a table per record type (sessions, threads, calls, segments) -------

# Only threads with calls are loaded, and a session starts at its first call.
_CODEC = Codec(
    CalSession,
    at_least_one={"CalSession.threads", "CalThread.calls"},
    choices={"CalCall.ttl": TTL_SECONDS},
)


def content_key(session: CalSession) -> str:
    """A hash of a calibrated session: of its tables as its entry holds them (everything a
    session is rebuilt from: what a replay of it reads). One that cannot be kept (a number
    that is not finite) gets a key no other has, so its results are never reused."""
    try:
        tables = _CODEC.encode([session])
    except ValueError:
        return os.urandom(32).hex()
    return hashlib.sha256(orjson.dumps(tables)).hexdigest()
