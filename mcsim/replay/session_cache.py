"""Calibrated sessions cached on disk, so a second replay skips parsing and tokenizing.

One file per load unit, named by mcsim's cache format, the loader and the paths of the unit's
files; inside it, a stamp of every file's size and modification time: an entry whose stamp
no longer matches (a transcript changed) is a miss, and the new entry replaces it under the
same name, so a transcript that grows leaves one entry, not one per size it had. Beside it,
also named by the paths alone, the unit's token estimates by content hash: Claude Code keeps
appending to its transcripts, and a grown unit is parsed and calibrated again but only its
new text is tokenized (the slowest step). The folder is `--cache-dir`, else
`$MCSIM_CACHE_DIR`, else the platform's user cache folder (platformdirs: `~/.cache/mcsim` on
Linux, `~/Library/Caches/mcsim` on macOS, `%LOCALAPPDATA%\\mcsim\\Cache` on Windows).

The folder keeps itself small: an entry read is touched (its modification time is the time
it was last used), and after each run the least recently used of mcsim's files are removed
until they fit the cap (`$MCSIM_CACHE_MAX_SIZE`, default 2 GB). mcsim's files are told by
their names (64 hex digits then `.sessions` or `.tokens`, or the temporary prefix) and, for
entries, their magic bytes: the cap and `mcsim cache clear` never touch anything else there.

Entries hold sizes, ids and hashes, never transcript text (what a tool call touched is kept
as a hash: calibrate.py). They are data only, never code (no pickle): a fixed header (magic,
kind, format version, payload size, sha256 checksum of what follows it) then the payload,
JSON for sessions and packed integers for token estimates. A file is trusted only once its
header and checksum match; one that does not (damaged, truncated, foreign, older), or whose
verified payload has an unexpected shape, is ignored, counted as a `cache_entry_rebuilt`
note on the unit's skip report, and rewritten, so a run on a garbled cache gives the figures
a run without the cache gives. Writes go to a temporary file in the folder, then replace the
entry at once: concurrent runs never see half an entry. A cache that cannot be read or
written is ignored (the run recomputes), never fatal.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import stat
import struct
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import accumulate, repeat, starmap
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import orjson
from platformdirs import user_cache_dir

from mcsim.accounting.recorded import TTL_SECONDS
from mcsim.errors import UsageError
from mcsim.ingest.loaders import Detail, LoadUnit, get_loader
from mcsim.ingest.loaders.jsonl import NotRegularFileError, open_regular
from mcsim.ingest.pipeline import Loaded, without_calls
from mcsim.ingest.storage import ObjectPath, filesystem, first_line, is_url
from mcsim.model import ItemKind, Skip, SkipReport, ThreadKind
from mcsim.replay.calibrate import (
    CalCall,
    CalSession,
    CalThread,
    ReadClass,
    Segment,
    calibrate_session,
)
from mcsim.replay.tokens import OFFLINE_ENCODING, TokenEstimator
from mcsim.text import from_fs

CACHE_VERSION = 10
CACHE_FORMAT = f"mcsim-calibrated/{CACHE_VERSION}"
TOKENS_VERSION = 2
TOKENS_FORMAT = f"mcsim-tokens/{TOKENS_VERSION}/{OFFLINE_ENCODING}"

# The high byte and the line ending catch a file mangled as text, as PNG's signature does.
_MAGIC = b"\x89mcsim\r\n"
_CHECKSUM_BYTES = hashlib.sha256().digest_size  # sha256: faster here than blake2b
_BODY_HEADER = struct.Struct("<BHQ")  # kind, format version, payload bytes
_TOKEN_RECORD = struct.Struct(f"<{len(TokenEstimator.key('x'))}sQ")  # content hash, tokens
_STALE_TMP_SECONDS = 3600  # a temporary file this old was left by a killed run
# mcsim's own prefix: a --cache-dir may be a folder holding other files (.tmp-* of a user's)
_TMP_PREFIX = ".mcsim-tmp-"
_ENTRY_NAME = re.compile(r"[0-9a-f]{64}\.(?:sessions|tokens)")
DEFAULT_MAX_BYTES = 2_000_000_000
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([kmgt]?)(i?)b?", re.IGNORECASE)
T = TypeVar("T")
N = TypeVar("N", bound=tuple[Any, ...])


class _Kind(NamedTuple):
    """A kind of cache file: its code in the header and the format version this mcsim writes."""

    code: int
    version: int


_SESSIONS = _Kind(1, CACHE_VERSION)
_TOKENS = _Kind(2, TOKENS_VERSION)


def default_cache_dir() -> Path:
    env = os.environ.get("MCSIM_CACHE_DIR")
    if env and is_url(env):
        return ObjectPath.from_url(env)
    return Path(env) if env else Path(user_cache_dir("mcsim", appauthor=False))


def check_cache_dir(folder: Path) -> None:
    """A one-line UsageError now, before any work, when a cache prefix in object storage
    cannot be used (its filesystem not installed)."""
    if isinstance(folder, ObjectPath):
        filesystem(folder.scheme)


def max_cache_bytes() -> int:
    """The cap on the cache folder's size: `$MCSIM_CACHE_MAX_SIZE` (bytes, or with a unit:
    500MB, 2GB, 1.5GiB), else 2 GB; a value that is not a size is a UsageError."""
    env = os.environ.get("MCSIM_CACHE_MAX_SIZE", "").strip()
    if not env:
        return DEFAULT_MAX_BYTES
    match = _SIZE.fullmatch(env)
    if match is None:
        raise UsageError(f"MCSIM_CACHE_MAX_SIZE: {env!r} is not a size (e.g. 500MB, 2GB)")
    number, unit, binary = match.groups()
    base = 1024 if binary else 1000
    return int(float(number) * base ** " kmgt".index(unit.lower() or " "))


def unit_key(unit: LoadUnit) -> str:
    """The stamp of the unit's files as they are now (path, size, modification time)."""
    digest = hashlib.sha256(f"{CACHE_FORMAT}\0{unit.loader}".encode())
    for path in unit.files:
        try:
            st = path.stat()
            digest.update(f"\0{path.resolve()}\0{st.st_size}\0{st.st_mtime_ns}".encode())
        except OSError:
            digest.update(f"\0{path}\0missing".encode())
    return digest.hexdigest()


def paths_key(unit: LoadUnit, fmt: str = TOKENS_FORMAT) -> str:
    """The unit's files, whatever their content: the name of its entry and of its token
    estimates (each with its own format)."""
    digest = hashlib.sha256(f"{fmt}\0{unit.loader}".encode())
    for path in unit.files:
        digest.update(f"\0{path.resolve()}".encode())
    return digest.hexdigest()


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
        entry = stamp = None
        if self.cache_dir is not None:
            name, stamp = paths_key(unit, CACHE_FORMAT), unit_key(unit)
            entry = self.cache_dir / f"{name}.sessions"
        files = [from_fs(str(f)) for f in unit.files]
        rebuilt: list[tuple[Path, str]] = []  # (cache file, why it could not be used)
        if entry is not None and stamp is not None and not exclude:
            try:
                cached = _read_sessions(entry, stamp)
            except _Damaged as why:
                rebuilt.append((entry, str(why)))
            else:
                if cached is not None:
                    spelled, sessions, skips = cached
                    names = dict(zip(spelled, files, strict=False))
                    return Loaded(sessions, _respell(skips, names))
        loaded = get_loader(unit.loader).load(unit, Detail.TEXT)
        kept, dropped = without_calls(loaded.sessions, exclude)
        estimator = _estimator()
        tokens = self.cache_dir / f"{paths_key(unit)}.tokens" if self.cache_dir else None
        if tokens is not None:
            try:
                estimator.learn(_read_tokens(tokens) or {})
            except _Damaged as why:
                rebuilt.append((tokens, str(why)))
        with estimator.recording() as used:
            calibrated = [calibrate_session(s, estimator) for s in kept]
        if entry is not None and stamp is not None and not exclude:
            payload = _sessions_payload([entry.stem, stamp], files, calibrated, loaded.skips)
            _write(entry, _SESSIONS, payload)
        if tokens is not None:
            _write(tokens, _TOKENS, _tokens_payload(used))
        for path, reason in rebuilt:
            loaded.skips.note(from_fs(str(path)), 0, "cache_entry_rebuilt", reason)
        return Loaded(calibrated, loaded.skips, dropped)


def _respell(skips: SkipReport, names: dict[str, str]) -> SkipReport:
    """The skipped lines named by this run's paths: the cache may have been filled through
    another spelling of the same files (relative, absolute, via a link)."""
    skips.examples = [replace(e, file=names.get(e.file, e.file)) for e in skips.examples]
    return skips


class _Damaged(Exception):
    """A cache file that cannot be used, and why (it is counted and rewritten)."""


# --- the file: header, checksum, payload -----------------------------------------------------


def _write(path: Path, kind: _Kind, payload: bytes | None) -> None:
    """Write an entry atomically: a temporary file in the same folder, then a rename."""
    if payload is None:
        return
    body = _BODY_HEADER.pack(*kind, len(payload)) + payload
    checksum = hashlib.sha256(body).digest()
    if isinstance(path, ObjectPath):  # an object is put whole or not at all
        with contextlib.suppress(Exception):  # the store's errors: only speed is lost
            filesystem(path.scheme).pipe_file(path.key, _MAGIC + checksum + body)
        return
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _sweep_once(path.parent)
        fd, tmp = tempfile.mkstemp(prefix=_TMP_PREFIX, dir=path.parent)
        with os.fdopen(fd, "wb") as fh:
            fh.write(_MAGIC + checksum)
            fh.write(body)
        os.replace(tmp, path)
        tmp = None
    except OSError:  # a cache that cannot be written only costs speed
        pass
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


_SWEPT: set[Path] = set()  # folders this process has cleaned up


def _sweep_once(folder: Path) -> None:
    """Remove the temporary files a killed run left behind (once per folder and process)."""
    if folder in _SWEPT:
        return
    _SWEPT.add(folder)
    stale = time.time() - _STALE_TMP_SECONDS
    for tmp in folder.glob(f"{_TMP_PREFIX}*"):
        with contextlib.suppress(OSError):
            if tmp.lstat().st_mtime < stale:
                tmp.unlink()


def _payload(path: Path, kind: _Kind) -> bytes | None:
    """The verified payload of a cache file; None if there is no such file. The file is
    touched: its modification time says when it was last used (the cap evicts by it). An
    object in a store is not touched (its time is when it was written)."""
    if isinstance(path, ObjectPath):
        data = _object_bytes(path)
        if data is None:
            return None
        return _verified(data, kind)
    try:
        # Only a regular file: a FIFO or a device planted there would block or never end.
        with open_regular(path) as fh:
            data = fh.read()
            with contextlib.suppress(OSError):
                os.utime(path)
    except FileNotFoundError:
        return None
    except NotRegularFileError as exc:
        raise _Damaged("not an mcsim cache file") from exc
    except OSError as exc:
        raise _Damaged("cannot be read") from exc
    return _verified(data, kind)


def _object_bytes(path: ObjectPath) -> bytes | None:
    try:
        data: bytes = filesystem(path.scheme).cat_file(path.key)
    except FileNotFoundError:
        return None
    except Exception as exc:  # the store's own errors
        raise _Damaged("cannot be read") from exc
    return data


def _verified(data: bytes, kind: _Kind) -> bytes:
    start = len(_MAGIC) + _CHECKSUM_BYTES
    payload_start = start + _BODY_HEADER.size
    if not data.startswith(_MAGIC):
        raise _Damaged("truncated" if _MAGIC.startswith(data) else "not an mcsim cache file")
    if len(data) < payload_start:
        raise _Damaged("truncated")
    code, version, size = _BODY_HEADER.unpack_from(data, start)
    if len(data) < payload_start + size:
        raise _Damaged("truncated")
    checksum = hashlib.sha256(memoryview(data)[start:]).digest()
    if checksum != data[len(_MAGIC) : start]:
        raise _Damaged("checksum mismatch")
    if code != kind.code:
        raise _Damaged("another kind of mcsim cache file")
    if version != kind.version:
        raise _Damaged("older format" if version < kind.version else "newer format")
    return data[payload_start : payload_start + size]


# --- token estimates: packed (content hash, tokens) records -----------------------------------


def _tokens_payload(counts: dict[bytes, int]) -> bytes | None:
    try:
        return b"".join(_TOKEN_RECORD.pack(k, n) for k, n in counts.items())
    except struct.error:  # a count past 64 bits: not worth caching
        return None


def _read_tokens(path: Path) -> dict[bytes, int] | None:
    payload = _payload(path, _TOKENS)
    if payload is None:
        return None
    if len(payload) % _TOKEN_RECORD.size:
        raise _Damaged("unexpected content")
    return dict(_TOKEN_RECORD.iter_unpack(payload))


# --- calibrated sessions: JSON columns, checked column by column on the way back ------------
#
# Four tables (sessions, threads, calls, segments), each a list of columns, one per field of
# its record; a parent's column of children holds how many consecutive rows of the next table
# are its own. Columns make reading fast and thorough at once: each is checked in one C-level
# pass (the type of every value, every enum value known), then rows are zipped into the
# records, so a verified payload of an unexpected shape is damage, never a crash later on.

_Column = frozenset[type] | dict[Any, Any]  # the types a column may hold, or enum by value
_Table = tuple[_Column, ...]
_INT: frozenset[type] = frozenset({int})
_FLOAT: frozenset[type] = frozenset({float})
_BOOL: frozenset[type] = frozenset({bool})
_STR: frozenset[type] = frozenset({str})
_LIST: frozenset[type] = frozenset({list})
_OPT_STR: frozenset[type] = frozenset({str, type(None)})
_OPT_INT: frozenset[type] = frozenset({int, type(None)})
_OPT_FLOAT: frozenset[type] = frozenset({float, type(None)})
_ITEM_KIND: _Column = {k.value: k for k in ItemKind}
_THREAD_KIND: _Column = {k.value: k for k in ThreadKind}
_READ_CLASS: _Column = {c.value: c for c in ReadClass}
_TTL: _Column = {t: t for t in TTL_SECONDS}

# In the field order of Segment, CalCall (with the count of its segments), CalThread (of its
# calls), CalSession (its files, then the count of its threads) and Skip.
_SEGMENT_COLUMNS: _Table = (_ITEM_KIND, _INT, _OPT_STR, _OPT_STR, _INT, _BOOL, _OPT_STR)
_CALL_COLUMNS: _Table = (
    *(_STR, _OPT_STR, _FLOAT, _STR, _INT, _INT, _INT, _INT, _INT, _OPT_STR, _OPT_STR, _TTL),
    *(_INT, _INT, _BOOL, _OPT_INT, _READ_CLASS, _INT, _INT, _BOOL, _OPT_FLOAT, _OPT_FLOAT),
    *(_OPT_STR, _LIST, _INT, _STR),
)
_THREAD_COLUMNS: _Table = (_STR, _THREAD_KIND, _INT, _INT)
_SESSION_COLUMNS: _Table = (_STR, _STR, _OPT_STR, _LIST, _INT)
_SKIP_COLUMNS: _Table = (_STR, _INT, _STR, _STR)
_SEGMENTS_AT = CalCall._fields.index("segments")
_PRUNED_IDS_AT = CalCall._fields.index("pruned_ids")


def _sessions_payload(
    key: list[str], files: list[str], sessions: list[CalSession], skips: SkipReport
) -> bytes | None:
    """The entry's payload; `key` (its file name, then the stamp of the files it was made
    from) is inside, so an entry copied under another unit's name is not taken for that
    unit's, and one made from an older state of the files is not taken for the new one."""
    threads = [t for s in sessions for t in s.threads]
    calls = [c for t in threads for c in t.calls]
    tables = [
        _columns(
            [[s.session_id, s.project, s.cwd, s.files, len(s.threads)] for s in sessions],
            _SESSION_COLUMNS,
        ),
        _columns(
            [[t.thread_id, t.kind, t.head_tokens, len(t.calls)] for t in threads], _THREAD_COLUMNS
        ),
        _columns(
            [[*c[:_SEGMENTS_AT], len(c.segments), *c[_SEGMENTS_AT + 1 :]] for c in calls],
            _CALL_COLUMNS,
        ),
        _columns([g for c in calls for g in c.segments], _SEGMENT_COLUMNS),
    ]
    report = [
        skips.lines_read,
        skips.counts,
        skips.repaired,
        skips.notes,
        _columns([[e.file, e.line, e.reason, e.detail] for e in skips.examples], _SKIP_COLUMNS),
        skips.examples_omitted,
        skips.max_examples,
    ]
    try:
        return orjson.dumps([key, files, report, *tables])
    except orjson.JSONEncodeError:  # an integer past 64 bits, a path that is not UTF-8
        return None


def _columns(rows: Sequence[Sequence[Any]], spec: _Table) -> list[list[Any]]:
    return [list(column) for column in zip(*rows, strict=True)] or [[] for _ in spec]


def _read_sessions(path: Path, stamp: str) -> tuple[list[str], list[CalSession], SkipReport] | None:
    """The entry's content; None if there is none, or it was made from other file states."""
    payload = _payload(path, _SESSIONS)
    if payload is None:
        return None
    try:
        key, files, report, sessions, threads, calls, segments = orjson.loads(payload)
        if type(key) is not list or len(key) != 2 or key[0] != path.stem:
            raise _Damaged("written for another unit")
        if key[1] != stamp:
            return None  # the transcripts changed since: replaced, not an error
        return _strings(files), _sessions(sessions, threads, calls, segments), _report(report)
    except (ValueError, TypeError, KeyError) as exc:
        raise _Damaged("unexpected content") from exc


def _sessions(sessions: Any, threads: Any, calls: Any, segments: Any) -> list[CalSession]:
    segment = _checked(segments, _SEGMENT_COLUMNS)
    call = _checked(calls, _CALL_COLUMNS)
    call[_SEGMENTS_AT] = _groups(_tuples(Segment, segment), call[_SEGMENTS_AT])
    call[_PRUNED_IDS_AT] = [tuple(_strings(ids)) for ids in call[_PRUNED_IDS_AT]]
    thread = _checked(threads, _THREAD_COLUMNS)
    # Only threads with calls are loaded, and a session starts at its first call.
    thread[3] = _groups(_tuples(CalCall, call), thread[3], least=1)
    session = _checked(sessions, _SESSION_COLUMNS)
    session[3] = [tuple(_strings(files)) for files in session[3]]
    session[4] = _groups(list(starmap(CalThread, zip(*thread, strict=True))), session[4], least=1)
    return list(starmap(CalSession, zip(*session, strict=True)))


def _tuples(cls: type[N], columns: list[list[Any]]) -> list[N]:
    """NamedTuples from columns, each made in one C call (`cls._make` runs Python code)."""
    return list(map(tuple.__new__, repeat(cls), zip(*columns, strict=True)))


def _report(row: Any) -> SkipReport:
    lines_read, counts, repaired, notes, examples, omitted, max_examples = row
    if not {type(lines_read), type(omitted), type(max_examples)} <= _INT:
        raise TypeError("not a count")
    return SkipReport(
        lines_read=lines_read,
        counts=_counter(counts),
        repaired=_counter(repaired),
        notes=_counter(notes),
        examples=list(starmap(Skip, zip(*_checked(examples, _SKIP_COLUMNS), strict=True))),
        examples_omitted=omitted,
        max_examples=max_examples,
    )


def _checked(columns: Any, spec: _Table) -> list[list[Any]]:
    """The columns of a table, enums as members; TypeError or KeyError if any value is not
    one its column allows (columns of different lengths fail when zipped, strictly)."""
    if type(columns) is not list or len(columns) != len(spec):
        raise ValueError("not a table")
    for i, (column, allowed) in enumerate(zip(columns, spec, strict=True)):
        if type(column) is not list:
            raise TypeError("not a column")
        if isinstance(allowed, dict):
            columns[i] = list(map(allowed.__getitem__, column))
        elif not set(map(type, column)) <= allowed:
            raise TypeError("a value of an unexpected type")
    return columns


def _groups(items: list[T], sizes: list[int], least: int = 0) -> list[tuple[T, ...]]:
    """`items` cut into consecutive groups of the given sizes."""
    if (sizes and min(sizes) < least) or sum(sizes) != len(items):
        raise ValueError("groups that do not add up")
    return [tuple(items[end - n : end]) for n, end in zip(sizes, accumulate(sizes), strict=True)]


def _strings(values: Any) -> list[str]:
    if type(values) is not list or not set(map(type, values)) <= _STR:
        raise TypeError("not a list of strings")
    return values


def _counter(values: Any) -> Counter[str]:
    if type(values) is not dict or not set(map(type, values.values())) <= _INT:
        raise TypeError("not a count by reason")
    return Counter(values)


# --- the folder: what is mcsim's, how big it is, the cap ---------------------------------------


@dataclass(frozen=True)
class CacheFile:
    path: Path
    size: int
    mtime: float


def cache_files(folder: Path) -> list[CacheFile]:
    """mcsim's own files in the cache folder, least recently used first: entries (named as
    mcsim names them and starting with its magic bytes) and temporary files (its prefix).
    Anything else there, a link or a folder of the same name included, is not mcsim's."""
    if isinstance(folder, ObjectPath):
        return _object_files(folder)
    found = []
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    for name in names:
        if not (name.startswith(_TMP_PREFIX) or _ENTRY_NAME.fullmatch(name)):
            continue
        path = folder / name
        try:
            st = path.lstat()
            if not stat.S_ISREG(st.st_mode):
                continue
            if not name.startswith(_TMP_PREFIX):
                with open_regular(path) as fh:
                    if fh.read(len(_MAGIC)) != _MAGIC:
                        continue
        except (OSError, NotRegularFileError):
            continue
        found.append(CacheFile(path, st.st_size, st.st_mtime))
    return sorted(found, key=lambda f: (f.mtime, f.path.name))


def _object_files(folder: ObjectPath) -> list[CacheFile]:
    """cache_files for a prefix in object storage: its entries, by the time each was written."""
    fs = filesystem(folder.scheme)
    try:
        listed = fs.ls(folder.key, detail=True, refresh=True)
    except Exception:  # no such prefix, or none we may list: nothing of mcsim's
        return []
    found = []
    for entry in listed:
        name = str(entry["name"]).rstrip("/").rsplit("/", 1)[-1]
        if entry.get("type") != "file" or not _ENTRY_NAME.fullmatch(name):
            continue
        path = folder / name
        try:
            if fs.cat_file(path.key, start=0, end=len(_MAGIC)) != _MAGIC:
                continue
            mtime = fs.modified(path.key).timestamp()
        except Exception:
            continue
        found.append(CacheFile(path, int(entry.get("size") or 0), mtime))
    return sorted(found, key=lambda f: (f.mtime, f.path.name))


def _remove(path: Path) -> None:
    """Remove a cache file or object (FileNotFoundError if it is gone, OSError if it cannot
    be removed)."""
    if not isinstance(path, ObjectPath):
        path.unlink()
        return
    fs = filesystem(path.scheme)
    try:
        fs.rm_file(path.key)
    except (FileNotFoundError, OSError):
        raise
    except Exception as exc:  # the store's own errors, as the system's
        raise OSError(first_line(exc)) from exc


def clear_cache(folder: Path) -> list[CacheFile]:
    """Remove mcsim's own files from the cache folder; the ones removed."""
    removed = []
    for f in cache_files(folder):
        with contextlib.suppress(FileNotFoundError):
            try:
                _remove(f.path)
            except OSError as exc:
                raise UsageError(f"{f.path}: cannot be removed ({exc.strerror or exc})") from None
            removed.append(f)
    return removed


def enforce_cap(folder: Path, max_bytes: int) -> list[CacheFile]:
    """Remove the least recently used of mcsim's files until they fit `max_bytes`; the ones
    removed (a file that cannot be removed is left, never fatal)."""
    files = cache_files(folder)
    total = sum(f.size for f in files)
    removed = []
    for f in files:
        if total <= max_bytes:
            break
        try:
            _remove(f.path)
        except FileNotFoundError:
            pass
        except OSError:
            continue
        total -= f.size
        removed.append(f)
    return removed
