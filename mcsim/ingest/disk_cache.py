"""The cache folder's files: their format, how they are checked, written, listed and capped.

Several caches share the folder, each one file per load unit: a replay's calibrated sessions
(`mcsim.replay.session_cache`: `.sessions` and `.tokens` files) and replayed results
(`mcsim.replay.result_cache`: `.results`), and inspect's loaded calls
(`mcsim.ingest.calls_cache`: `.calls` files) and analysed sessions
(`mcsim.accounting.recorded.AnalysisCache`: `.analysed`). Each file is named by 64 hex
digits (a hash of its format and the unit's file paths) and its kind. A replay's drawn
charts are kept there too, named by a hash of what they draw (`mcsim.outputs.chart_cache`:
`.chart`). Entries a process writes many at a time share pack files instead, each entry in
them byte for byte as its file would be (`mcsim.ingest.cache_packs`); reading an entry looks
for its file, then for it in the folder's packs.

Files are data only, never code (no pickle): a fixed header (magic, signature, kind, format
version, payload size) then the payload. The signature is an HMAC-SHA256 of the file's name
and what follows the signature, keyed with a key kept outside the cache (`cache_key`): whoever
can write the folder but has not the key cannot make an entry mcsim believes, nor pass one
entry off under another's name. A file is trusted only once its header and signature match;
one that does not (damaged, truncated, foreign, older, unsigned or signed with another key)
raises `Damaged`, which the caller counts as a `cache_entry_rebuilt` note and rewrites, so a
run on a garbled or forged cache gives the figures a run without it gives. Records in a
payload are JSON tables laid out from their own fields, checked column by column on the way
back (mcsim.ingest.codec): a verified payload of an unexpected shape is damage, never a crash
later on. Writes go to a temporary
file in the folder, then replace the file at once: concurrent runs never see half an entry. A
cache that cannot be read or written is ignored (the run recomputes), never fatal; a key that
cannot be had is a one-line error before any work (`check_cache_dir`).

The folder keeps itself small: a file read is touched (its modification time is the time it
was last used), and after each run the least recently used of mcsim's files are removed
until they fit the cap (`$MCSIM_CACHE_MAX_SIZE`, default 2 GB). mcsim's files are told by
their names and magic bytes: the cap and `mcsim cache clear` never touch anything else there.
The folder is `--cache-dir`, else `$MCSIM_CACHE_DIR`, else the platform's user cache folder
(platformdirs: `~/.cache/mcsim` on Linux, `~/Library/Caches/mcsim` on macOS,
`%LOCALAPPDATA%\\mcsim\\Cache` on Windows), or a prefix in object storage.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import re
import stat
import struct
import tempfile
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cache
from pathlib import Path
from typing import Any, Generic, NamedTuple, TypeVar

import orjson
from platformdirs import user_cache_dir

from mcsim.errors import UsageError
from mcsim.ingest import cache_key, cache_packs
from mcsim.ingest.cache_packs import PACK_MAGIC, TMP_PREFIX, sweep_once
from mcsim.ingest.codec import Codec, strings
from mcsim.ingest.loaders import LoadUnit
from mcsim.ingest.loaders.jsonl import NotRegularFileError, open_regular
from mcsim.ingest.storage import ObjectPath, content_tag, filesystem, first_line, is_url
from mcsim.model import SkipReport
from mcsim.text import from_fs
from mcsim.version import __version__

# The high byte and the line ending catch a file mangled as text, as PNG's signature does.
_MAGIC = b"\x89mcsim\r\n"
_CHECKSUM_BYTES = hashlib.sha256().digest_size  # HMAC-SHA256: faster here than blake2b
# Why an entry's signature fails: damaged, or signed with another key (another machine's: a
# cluster shares one, docs/cache.md), or not signed at all (a plain sha256 in its place: an
# mcsim before signing wrote it, or someone forged it)
BAD_SIGNATURE = "signature mismatch: damaged, or signed with another cache key"
UNSIGNED = "not signed with a cache key: forged, or written by an older mcsim"
_BODY_HEADER = struct.Struct("<BHQ")  # kind, format version, payload bytes
# mcsim's own prefix: a --cache-dir may be a folder holding other files (.tmp-* of a user's)
_TMP_PREFIX = TMP_PREFIX
_ENTRY_NAME = re.compile(r"[0-9a-f]{64}\.(?:sessions|tokens|calls|analysed|results|chart|pack)")
DEFAULT_MAX_BYTES = 2_000_000_000
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([kmgt]?)(i?)b?", re.IGNORECASE)
T = TypeVar("T")


class Kind(NamedTuple):
    """A kind of cache file: its code in the header (1 calibrated sessions, 2 token
    estimates, 3 loaded calls, 4 replayed results, 5 charts, 6 analysed sessions) and the
    format version this mcsim writes."""

    code: int
    version: int


class Damaged(Exception):
    """A cache file that cannot be used, and why (it is counted and rewritten)."""


def default_cache_dir() -> Path:
    env = os.environ.get("MCSIM_CACHE_DIR")
    if env and is_url(env):
        return ObjectPath.from_url(env)
    return Path(env) if env else Path(user_cache_dir("mcsim", appauthor=False))


def check_cache_dir(folder: Path) -> None:
    """A one-line UsageError now, before any work, when a cache prefix in object storage
    cannot be used (its filesystem not installed) or the key entries are signed with cannot
    be had (`cache_key.load`, which makes the key file on first use)."""
    if isinstance(folder, ObjectPath):
        filesystem(folder.scheme)
    cache_key.load()


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
    # Fraction, not float: exact, and a number past a float's range is still a size
    return int(Fraction(number) * base ** " kmgt".index(unit.lower() or " "))


def unit_keys(unit: LoadUnit, fmt: str) -> tuple[str, str]:
    """(name, stamp) of the unit's entry in format FMT: the name hashes the paths of the unit's
    files as spelled, made absolute (the loaders read project and session names from them: a
    folder linked under another name is another entry), whatever they hold; the stamp adds
    the file each leads to (links followed: its device and inode) and its size, modification
    and change times as they are now, so an entry made from other file states is told apart
    (the change time too: the system sets it on every write and no call sets it back, so an
    edit in place that keeps the size and puts the modification time back still tells).
    One stat a file: resolving every path took 0.2 to 0.3 s of a run on the replica's
    1,177 files (a stat of each folder on the way). Paths are hashed as the system spells
    them (bytes: a name need not be UTF-8). An object in a store adds what identifies its
    content (`storage.content_tag`: its ETag, version or generation): rewritten with the
    same size within the same second, it is another object; one its store gives nothing of
    the kind for gets a stamp no entry has, so it is read again every time."""
    name = hashlib.sha256(f"{fmt}\0{unit.loader}".encode())
    stamp = name.copy()
    for path in unit.files:
        spelled = b"\0" + os.fsencode(path.absolute())
        name.update(spelled)
        try:
            st = path.stat()
        except OSError:  # gone, or a loop of links
            stamp.update(spelled + b"\0missing")
            continue
        file = f"\0{st.st_dev}\0{st.st_ino}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}"
        if isinstance(path, ObjectPath):
            file += f"\0{content_tag(path) or os.urandom(16).hex()}"
        stamp.update(spelled + file.encode())
    return name.hexdigest(), stamp.hexdigest()


@cache
def code_hash() -> str:
    """A hash of mcsim's own files (its source, presets and price tables; compiled files
    only in an install without source): what another mcsim computed is another entry.
    About 7 ms."""
    package = Path(__file__).resolve().parent.parent
    files = sorted(p for p in package.rglob("*") if p.is_file())
    source = [p for p in files if "__pycache__" not in p.parts]
    digest = hashlib.sha256(__version__.encode())
    for path in source if any(p.suffix == ".py" for p in source) else files:
        digest.update(b"\0" + path.relative_to(package).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()


# --- the file: header, checksum, payload -----------------------------------------------------


def write_entry(path: Path, kind: Kind, payload: bytes | None) -> None:
    """Write an entry atomically: a temporary file in the same folder, then a rename; or into
    a pack when the process writes many at a time (mcsim.ingest.cache_packs)."""
    if payload is None:
        return
    body = _BODY_HEADER.pack(*kind, len(payload)) + payload
    data = _MAGIC + signature(path.name, body) + body
    if isinstance(path, ObjectPath):  # an object is put whole or not at all
        with contextlib.suppress(Exception):  # the store's errors: only speed is lost
            filesystem(path.scheme).pipe_file(path.key, data)
        return
    if not cache_packs.held(path, data, _write_file):
        _write_file(path, data)


def _write_file(path: Path, data: bytes) -> None:
    """Write DATA to PATH atomically (a cache that cannot be written only costs speed)."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        sweep_once(path.parent)
        fd, tmp = tempfile.mkstemp(prefix=_TMP_PREFIX, dir=path.parent)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
        tmp = None
    except OSError:
        pass
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def signature(name: str, body: bytes | memoryview) -> bytes:
    """The signature of an entry named NAME (its file's name) whose header's kind, version
    and size and payload are BODY: an HMAC-SHA256 with the cache's key."""
    mac = hmac.new(cache_key.load(), os.fsencode(name) + b"\0", hashlib.sha256)
    mac.update(body)
    return mac.digest()


def read_payload(path: Path, kind: Kind) -> bytes | None:
    """The verified payload of a cache file; None if there is no such file. The file is
    touched: its modification time says when it was last used (the cap evicts by it). An
    object in a store is not touched (its time is when it was written). A file larger than
    the cap is not read: no entry that large outlives the run that wrote it (the cap evicts
    it), so it was planted, and reading it whole could take all the memory there is."""
    if isinstance(path, ObjectPath):
        try:
            data: bytes = filesystem(path.scheme).cat_file(path.key)
        except FileNotFoundError:
            return None
        except Exception as exc:  # the store's own errors
            raise Damaged("cannot be read") from exc
        return _verified(data, kind, path.name)
    try:
        # Only a regular file: a FIFO or a device planted there would block or never end.
        with open_regular(path) as fh:
            if os.fstat(fh.fileno()).st_size > max_cache_bytes():
                raise Damaged("larger than the cache's cap")
            data = fh.read()
            with contextlib.suppress(OSError):
                os.utime(path)
    except (FileNotFoundError, NotADirectoryError):  # no such file, or no such folder
        return _packed_payload(path, kind)
    except NotRegularFileError as exc:
        raise Damaged("not an mcsim cache file") from exc
    except OSError as exc:
        raise Damaged("cannot be read") from exc
    return _verified(data, kind, path.name)


def _packed_payload(path: Path, kind: Kind) -> bytes | None:
    """read_payload of an entry that has no file of its own: its copy in a pack, if any."""
    member = cache_packs.find(path)
    if member is None:
        return None
    where = f" (in {member.pack.name})"
    if member.size > max_cache_bytes():
        raise Damaged("larger than the cache's cap" + where)
    try:
        data = cache_packs.read_member(member)
    except FileNotFoundError:  # the pack went (the cap, another run) since it was listed
        return None
    except OSError as exc:
        raise Damaged("cannot be read" + where) from exc
    try:
        return _verified(data, kind, path.name)
    except Damaged as why:
        raise Damaged(str(why) + where) from None


def _verified(data: bytes, kind: Kind, name: str) -> bytes:
    start = len(_MAGIC) + _CHECKSUM_BYTES
    payload_start = start + _BODY_HEADER.size
    if not data.startswith(_MAGIC):
        raise Damaged("truncated" if _MAGIC.startswith(data) else "not an mcsim cache file")
    if len(data) < payload_start:
        raise Damaged("truncated")
    code, version, size = _BODY_HEADER.unpack_from(data, start)
    if len(data) < payload_start + size:
        raise Damaged("truncated")
    body, signed = memoryview(data)[start:], data[len(_MAGIC) : start]
    if not hmac.compare_digest(signature(name, body), signed):
        # Looked at only once refused: a plain checksum that matches tells an unsigned entry
        # (an older mcsim's, or one forged by someone without the key) from a damaged one.
        raise Damaged(UNSIGNED if hashlib.sha256(body).digest() == signed else BAD_SIGNATURE)
    if code != kind.code:
        raise Damaged("another kind of mcsim cache file")
    if version != kind.version:
        raise Damaged("older format" if version < kind.version else "newer format")
    return data[payload_start : payload_start + size]


# --- an entry: the unit's records, its skip report, and what it was made from ---------------

_SKIPS = Codec(SkipReport)
_JSON_SIZE = struct.Struct("<Q")  # the JSON part's size, before it


@dataclass(frozen=True)
class Stored(Generic[T]):
    """What a unit's entry holds: its records, its skip report, whether it was made from the
    unit's files as they are now, and the bytes written after the records (`Entry.write`)."""

    records: list[T]
    skips: SkipReport
    current: bool
    extra: memoryview


@dataclass(frozen=True)
class Entry:
    """A unit's entry of one kind: its file, the stamp of the file states it must have been
    made from (unit_keys), and the unit's files as this run spells them.

    Its payload: the size of a JSON part, the JSON part ([name, stamp], the files as the
    entry spelled them, the skip report's tables, the records' tables), then what else the
    cache keeps as it is (a replay's packed rows)."""

    path: Path
    kind: Kind
    stamp: str
    files: list[str]

    @classmethod
    def of(cls, folder: Path, unit: LoadUnit, fmt: str, kind: Kind, suffix: str) -> Entry:
        name, stamp = unit_keys(unit, fmt)
        files = [from_fs(str(f)) for f in unit.files]
        return cls(folder / f"{name}.{suffix}", kind, stamp, files)

    def read(
        self, codec: Codec[T], renamed: Collection[str] = (), any_state: bool = False
    ) -> Stored[T] | None:
        """The entry's records and skip report, the fields `renamed` (as `Class.field`: a
        file's name, or a tuple of them) and the skipped lines naming the unit's files as this
        run spells them; None if there is none, or (unless `any_state`) it was made from other
        file states. Damaged if it cannot be used."""
        payload = read_payload(self.path, self.kind)
        if payload is None:
            return None
        try:
            (size,) = _JSON_SIZE.unpack_from(payload)
            end = _JSON_SIZE.size + size
            key, spelled, report, tables = orjson.loads(payload[_JSON_SIZE.size : end])
            if type(key) is not list or len(key) != 2 or key[0] != self.path.stem:
                raise Damaged("written for another unit")
            current = key[1] == self.stamp
            if not (current or any_state):
                return None  # the transcripts changed since: replaced, not an error
            names = dict(zip(strings(spelled), self.files, strict=False))
            get = names.get

            def rename(column: list[Any]) -> list[Any]:  # (names, or tuples of them)
                return [
                    get(v, v) if type(v) is str else tuple(get(f, f) for f in v) for v in column
                ]

            records = codec.decode(tables, dict.fromkeys(renamed, rename))
            # the skipped lines' files, as this run spells them (the cache may have been
            # filled through another spelling: relative, absolute, via a link)
            (skips,) = _SKIPS.decode(report, {"Skip.file": rename})
            return Stored(records, skips, current, memoryview(payload)[end:])
        except (ValueError, TypeError, KeyError, struct.error) as exc:
            raise Damaged("unexpected content") from exc

    def write(
        self,
        skips: SkipReport,
        codec: Codec[T],
        records: Sequence[T],
        state: str | None = None,
        extra: bytes = b"",
    ) -> None:
        """Write the entry, made from the files in STATE (default: as they are now), with
        EXTRA after its records. Its key (its file name, then the stamp) is inside, so an
        entry copied under another unit's name is not taken for that unit's, and one made from
        an older state of the files is not taken for the new one. Nothing is written when a
        file could not be read (what failed may pass, a permission given back or a disk
        remounted, with the file's stamp unchanged, and the entry would stand for good), or a
        value would not come back as it is (a number past 64 bits or not finite, a path that
        is not UTF-8)."""
        if skips.counts["unreadable_file"]:
            return
        key = [self.path.stem, self.stamp if state is None else state]
        try:
            tables = [key, self.files, _SKIPS.encode([skips]), codec.encode(records)]
            data = orjson.dumps(tables)
        except (ValueError, orjson.JSONEncodeError):
            return
        write_entry(self.path, self.kind, b"".join([_JSON_SIZE.pack(len(data)), data, extra]))


def entry_size(path: Path, unit: LoadUnit) -> int | None:
    """The size of the entry at PATH (a stat of it and of each of the unit's files, nothing
    read), None if there is none or if a transcript changed after it was written (the unit
    will be loaded again: its transcripts are what the run reads, and a run whose entries
    are all stale must not be taken for a small one). An object in a store is taken as kept,
    as large as its unit's transcripts (a request spared). Only a guess at what serving the
    unit reads: whether an entry serves is decided when it is read, by its stamp."""
    if isinstance(path, ObjectPath):
        return unit.size_bytes
    try:
        st = path.stat()
    except FileNotFoundError:
        member = cache_packs.find(path)
        if member is None:
            return None
        try:
            st = member.pack.stat()  # (its time: when the pack was last used)
        except OSError:
            return None
        st_size = member.size
    except OSError:
        return None
    else:
        st_size = st.st_size
    if not stat.S_ISREG(st.st_mode):
        return None
    for file in unit.files:
        try:
            changed = file.stat()
        except OSError:
            continue  # gone: the loader reports it
        times = (changed.st_mtime_ns, changed.st_ctime_ns)  # (an object in a store: None)
        if any(t is not None and t > st.st_mtime_ns for t in times):
            return None
    return st_size


def note_rebuilt(skips: SkipReport, path: Path, why: str) -> None:
    """Count a cache file that could not be used (and was written again) in the unit's report."""
    skips.note(from_fs(str(path)), 0, "cache_entry_rebuilt", why)


# --- the folder: what is mcsim's, how big it is, the cap ---------------------------------------


@dataclass(frozen=True)
class CacheFile:
    path: Path
    size: int
    mtime: float


def cache_files(folder: Path, verify: bool = True) -> list[CacheFile]:
    """mcsim's own files in the cache folder, least recently used first: entries (named as
    mcsim names them and starting with its magic bytes) and temporary files (its prefix).
    Anything else there, a link or a folder of the same name included, is not mcsim's.
    `verify=False` leaves out the magic bytes (a file named like an entry counts): a bound
    on what `verify` finds, without opening every file."""
    if isinstance(folder, ObjectPath):
        return _object_files(folder, verify)
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
            if verify and not name.startswith(_TMP_PREFIX):
                with open_regular(path) as fh:
                    magic = PACK_MAGIC if name.endswith(cache_packs.PACK_SUFFIX) else _MAGIC
                    if fh.read(len(magic)) != magic:
                        continue
        except (OSError, NotRegularFileError):
            continue
        found.append(CacheFile(path, st.st_size, st.st_mtime))
    return sorted(found, key=lambda f: (f.mtime, f.path.name))


def cache_entries(files: Sequence[CacheFile]) -> list[tuple[str, int]]:
    """The name and size of every entry FILES hold (as `cache_files` lists them): a file's
    own, and each one a pack holds (a pack that cannot be read holds none). A file still being
    written, or left by a stopped run, is no entry."""
    entries: list[tuple[str, int]] = []
    for f in files:
        if f.path.name.startswith(_TMP_PREFIX):
            continue
        if f.path.name.endswith(cache_packs.PACK_SUFFIX):
            table = None if isinstance(f.path, ObjectPath) else cache_packs.read_table(f.path)
            members = table[1] if table is not None else {}
            entries.extend((name, m.size) for name, m in members.items())
        else:
            entries.append((f.path.name, f.size))
    return entries


def _object_files(folder: ObjectPath, verify: bool = True) -> list[CacheFile]:
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
        size = int(entry.get("size") or 0)
        if not verify:  # a request per object less (its time: only the cap's order needs it)
            found.append(CacheFile(path, size, 0.0))
            continue
        try:
            if fs.cat_file(path.key, start=0, end=len(_MAGIC)) != _MAGIC:
                continue
            mtime = fs.modified(path.key).timestamp()
        except Exception:
            continue
        found.append(CacheFile(path, size, mtime))
    return sorted(found, key=lambda f: (f.mtime, f.path.name))


def _named_bytes(folder: Path) -> int:
    """The size of the files named like mcsim's in the folder: what `cache_files(folder,
    verify=False)` sums, from the folder's entries as listed (os.scandir), without a path
    made for each file (most of the check's time, which every run with a cache pays)."""
    if isinstance(folder, ObjectPath):
        return sum(f.size for f in _object_files(folder, verify=False))
    total = 0
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                name = entry.name
                if not (name.startswith(_TMP_PREFIX) or _ENTRY_NAME.fullmatch(name)):
                    continue
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISREG(st.st_mode):
                    total += st.st_size
    except OSError:
        return 0
    return total


def remove_file(path: Path) -> None:
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


def remove_entry(path: Path) -> None:
    """Remove an entry that cannot be used: its file, or the pack it is in when it has no file
    of its own (OSError if it cannot be removed or there is none)."""
    try:
        remove_file(path)
    except FileNotFoundError:
        member = None if isinstance(path, ObjectPath) else cache_packs.find(path)
        if member is None:
            raise
        cache_packs.drop(member)


def clear_cache(folder: Path) -> list[CacheFile]:
    """Remove mcsim's own files from the cache folder; the ones removed."""
    removed = []
    for f in cache_files(folder):
        with contextlib.suppress(FileNotFoundError):
            try:
                remove_file(f.path)
            except OSError as exc:
                raise UsageError(f"{f.path}: cannot be removed ({exc.strerror or exc})") from None
            removed.append(f)
    return removed


def enforce_cap(folder: Path, max_bytes: int) -> list[CacheFile]:
    """Remove the least recently used of mcsim's files until they fit `max_bytes`; the ones
    removed (a file that cannot be removed is left, never fatal)."""
    if not isinstance(folder, ObjectPath):  # a stopped run's leftovers, also after a warm run
        sweep_once(folder)
    # Most runs end under the cap: the files named like mcsim's tell so without opening each
    # (0.28 s of a warm replay with the 506 MB replica's 2,247 cache files).
    if _named_bytes(folder) <= max_bytes:
        return []
    files = cache_files(folder)
    total = sum(f.size for f in files)
    removed = []
    for f in files:
        if total <= max_bytes:
            break
        try:
            remove_file(f.path)
        except FileNotFoundError:
            pass
        except OSError:
            continue
        total -= f.size
        removed.append(f)
    return removed
