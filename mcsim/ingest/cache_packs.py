"""Cache entries written many at a time, kept together in pack files.

A first run writes an entry for every unit it loads: 749 files for a 523 MB replica of the
bundled corpus on a first `inspect`, 1,498 on a first replay. Each file costs the system an
inode, and on ext4 an inode allocated soon after many files were deleted nearby (a benchmark's
`rm -rf` of the last cache, a `git clean`) costs 0.4 to 0.7 ms of kernel time, where writing
the entry's bytes costs microseconds: 40% of a first `inspect`'s wall time in the benchmark
(docs/performance.md#fewer-cache-files). So a process that writes many entries in one go
(`batched`: the local engine's workers and its in-process loop) gathers them: the first
`_MIN_ENTRIES` are held in memory (at most `_MIN_BYTES`), and are written as files of their own
if no more come; past that, they and the rest go into one pack file, named `<64 hex>.pack`,
renamed into the folder when the process is done with its jobs (or every `_MAX_BYTES`).

A pack holds each entry exactly as its own file would (magic, signature, kind, version,
payload: `disk_cache`), followed by a table (each entry's name, offset and size) and a footer
(when the pack was made, where the table starts, how many entries, the pack's magic). The
pack itself is not signed: each entry in it is, with its own name, so a pack that lies about
its table can only point a name at bytes that fail the entry's check (`disk_cache.Damaged`,
noted and rewritten like a damaged file), never make an entry mcsim believes.

Which copy of an entry is read: its own file first (written after any pack of the same name
was: a pack being published removes the files its entries replace), then the newest pack that
holds one. A pack is touched when an entry in it is read (the folder's cap evicts whole packs,
least recently used first) and removed whole when one of its entries cannot be used.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import re
import struct
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, NamedTuple

from mcsim.ingest.loaders.jsonl import open_regular

PACK_MAGIC = b"\x89mcpack\r\n"
TMP_PREFIX = ".mcsim-tmp-"  # mcsim's temporary files, packs being written included
PACK_SUFFIX = ".pack"
_PACK_NAME = re.compile(r"[0-9a-f]{64}\.pack")
_MEMBER_NAME = re.compile(rb"[0-9a-f]{64}\.[a-z]{1,16}")
_FOOTER = struct.Struct(f"<QQI{len(PACK_MAGIC)}s")  # made (ns), table offset, entries, magic
_ROW = struct.Struct("<HQQ")  # name length, offset, size (the name follows)
_MIN_ENTRIES = 32  # fewer than this many entries from a process: files of their own
_MIN_BYTES = 8 * 1024 * 1024  # ... unless they take more memory than this
_MAX_BYTES = 64 * 1024 * 1024  # a pack this large is published and another one started
_MAX_ROWS = 32_768  # ... or one with this many entries (real entries: hundreds of bytes up)
# A table is at most _MAX_ROWS rows of `_ROW` and a name of at most 81 bytes: a larger one is
# not one mcsim wrote (a planted 64 MB table took 2 s to read each time a process listed packs).
_MAX_TABLE_BYTES = _MAX_ROWS * (_ROW.size + 81)


class Member(NamedTuple):
    """Where a named entry sits in a pack."""

    pack: Path
    offset: int
    size: int


# --- writing ---------------------------------------------------------------------------------


@dataclass
class _Writer:
    """The entries one process writes into one folder while `batched` is open."""

    folder: Path
    write_file: Callable[[Path, bytes], None]
    held: list[tuple[str, bytes]] = field(default_factory=list)
    held_bytes: int = 0
    packing: bool = False  # past the entries held: every one goes into a pack
    fh: IO[bytes] | None = None
    tmp: str | None = None
    rows: list[tuple[str, int, int]] = field(default_factory=list)
    written: int = 0

    def add(self, name: str, data: bytes) -> None:
        if self.packing:
            self._append(name, data)
            return
        self.held.append((name, data))
        self.held_bytes += len(data)
        if len(self.held) >= _MIN_ENTRIES or self.held_bytes >= _MIN_BYTES:
            self.packing = True
            held, self.held, self.held_bytes = self.held, [], 0
            for n, d in held:
                self._append(n, d)

    def _append(self, name: str, data: bytes) -> None:
        if self.fh is None:
            self.folder.mkdir(parents=True, exist_ok=True)
            sweep_once(self.folder)
            fd, self.tmp = tempfile.mkstemp(prefix=_pack_tmp_prefix(), dir=self.folder)
            self.fh = os.fdopen(fd, "wb")
            self.fh.write(PACK_MAGIC)
            self.written = len(PACK_MAGIC)
        self.fh.write(data)
        self.rows.append((name, self.written, len(data)))
        self.written += len(data)
        if self.written >= _MAX_BYTES or len(self.rows) >= _MAX_ROWS:
            self._publish()

    def _publish(self) -> None:
        """Write the table and footer, rename the pack into the folder, and remove the files
        of the entries it replaces (an older copy read first would hide the new one)."""
        fh, tmp, rows = self.fh, self.tmp, self.rows
        self.fh, self.tmp, self.rows = None, None, []
        assert fh is not None and tmp is not None
        try:
            with fh:
                table = b"".join(_ROW.pack(len(n), o, s) + n.encode() for n, o, s in rows)
                fh.write(table)
                fh.write(_FOOTER.pack(time.time_ns(), self.written, len(rows), PACK_MAGIC))
            os.replace(tmp, self.folder / f"{os.urandom(32).hex()}{PACK_SUFFIX}")
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        for name, _, _ in rows:
            with contextlib.suppress(OSError):
                os.unlink(self.folder / name)

    def close(self) -> None:
        if self.fh is not None:
            self._publish()
        for name, data in self.held:
            self.write_file(self.folder / name, data)
        self.held = []

    def abort(self) -> None:
        self.held = []
        if self.fh is not None:
            with contextlib.suppress(OSError):
                self.fh.close()
        if self.tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.tmp)


_STALE_TMP_SECONDS = 3600  # a temporary file this old was left by a killed run
_SWEPT: set[Path] = set()  # folders this process has cleaned up
# A pack being written is named by its writer (this machine and process id), so that a run
# can tell the pack of a worker killed with the run (tens of MB each) from one being written.
# (Containers of one machine with the same host name but their own process ids could take a
# live writer for gone: its pack is then lost, which costs that run only its cache.)
_PACK_TMP = re.compile(re.escape(TMP_PREFIX) + r"pack-([0-9a-f]{16})-([1-9][0-9]{0,9})-")
_MAX_PID = 2**22  # Linux's largest pid_max: a larger number was never one of its processes


@functools.cache
def _host() -> str:
    """This machine, as a short digest of its name and boot (two machines sharing a cache
    folder tell their processes apart; a reboot ends every process of the last boot)."""
    try:
        with open("/proc/sys/kernel/random/boot_id", "rb") as fh:
            boot = fh.read()
    except OSError:
        boot = b""
    return hashlib.blake2b(os.uname().nodename.encode() + boot, digest_size=8).hexdigest()


def _pack_tmp_prefix() -> str:
    return f"{TMP_PREFIX}pack-{_host()}-{os.getpid()}-"


def _writer_gone(name: str) -> bool:
    """True for a pack being written by a process of this machine that no longer exists."""
    match = _PACK_TMP.match(name)
    if match is None or match[1] != _host():
        return False
    pid = int(match[2])
    if pid == os.getpid() or pid > _MAX_PID:  # (a planted 2**31 would overflow os.kill)
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # another user's process: it exists
        return False
    return False


def sweep_once(folder: Path) -> None:
    """Remove the temporary files a killed run left behind (once per folder and process):
    packs whose writer is gone, and any temporary file an hour old."""
    if folder in _SWEPT:
        return
    _SWEPT.add(folder)
    stale = time.time() - _STALE_TMP_SECONDS
    for tmp in folder.glob(f"{TMP_PREFIX}*"):
        # (a leftover that cannot be told or removed stays: never a reason to fail a run)
        with contextlib.suppress(OSError, ValueError, OverflowError):
            if tmp.lstat().st_mtime < stale or _writer_gone(tmp.name):
                tmp.unlink()


_WRITERS: dict[Path, _Writer] | None = None  # set while `batched` is open


@contextlib.contextmanager
def batched() -> Iterator[None]:
    """Gather the cache entries this process writes until the block ends (see the module's
    docstring); on an error the entries not yet published are dropped (the cache only costs
    speed). Outside such a block each entry is a file of its own, written at once."""
    global _WRITERS
    if _WRITERS is not None:  # (nested: the outer block publishes)
        yield
        return
    _WRITERS = {}
    try:
        yield
    except BaseException:
        writers, _WRITERS = _WRITERS, None
        for writer in writers.values():
            writer.abort()
        raise
    writers, _WRITERS = _WRITERS, None
    for writer in writers.values():
        try:
            writer.close()
        except OSError:  # a cache that cannot be written only costs speed
            writer.abort()


def held(path: Path, data: bytes, write_file: Callable[[Path, bytes], None]) -> bool:
    """Take the entry for a pack if a `batched` block is open (True), else leave it (False)."""
    if _WRITERS is None:
        return False
    folder = path.parent
    writer = _WRITERS.get(folder)
    if writer is None:
        writer = _WRITERS[folder] = _Writer(folder, write_file)
    try:
        writer.add(path.name, data)
    except OSError:
        writer.abort()
        del _WRITERS[folder]
    return True


# --- reading ---------------------------------------------------------------------------------

# Per process: each folder's packs as last listed (the folder's modification time then), their
# entries by name (newest pack first), and the packs touched since.
_INDEX: dict[Path, tuple[int, dict[str, Member]]] = {}
_TOUCHED: dict[Path, float] = {}
_TOUCH_SECONDS = 60.0  # a pack read from again within this is not touched again


def find(path: Path) -> Member | None:
    """The newest packed copy of the entry at PATH (a file name in a cache folder), if any.

    The folder's packs are listed again when the folder changed (its modification time:
    a pack renamed into it or removed changes it; an entry read, touched, does not)."""
    folder = path.parent
    try:
        changed = os.stat(folder).st_mtime_ns
    except OSError:
        return None
    known = _INDEX.get(folder)
    if known is None or known[0] != changed:
        known = _INDEX[folder] = (changed, _index(folder))
    return known[1].get(path.name)


def _index(folder: Path) -> dict[str, Member]:
    packs = []
    try:
        with os.scandir(folder) as listed:
            for item in listed:
                if _PACK_NAME.fullmatch(item.name):
                    table = read_table(Path(item.path))
                    if table is not None:
                        packs.append(table)
    except OSError:
        return {}
    index: dict[str, Member] = {}
    for _, members in sorted(packs, key=lambda p: p[0]):  # newest last: it wins
        index.update(members)
    return index


def read_table(pack: Path) -> tuple[int, dict[str, Member]] | None:
    """When the pack was made and its entries by name; None if it is not a pack mcsim wrote
    whole (a truncated or foreign file: left to the cap, which evicts it in time)."""
    try:
        with open_regular(pack) as fh:  # (a FIFO planted under a pack's name would block)
            size = os.fstat(fh.fileno()).st_size
            if size < len(PACK_MAGIC) + _FOOTER.size or fh.read(len(PACK_MAGIC)) != PACK_MAGIC:
                return None
            fh.seek(size - _FOOTER.size)
            made, start, count, magic = _FOOTER.unpack(fh.read(_FOOTER.size))
            end = size - _FOOTER.size
            if magic != PACK_MAGIC or not len(PACK_MAGIC) <= start <= end:
                return None
            if end - start > _MAX_TABLE_BYTES:
                return None
            fh.seek(start)
            table = fh.read(end - start)
    except OSError:  # (a FIFO or device too: NotRegularFileError)
        return None
    members: dict[str, Member] = {}
    at = 0
    try:
        for _ in range(count):
            length, offset, entry_size = _ROW.unpack_from(table, at)
            at += _ROW.size
            name = table[at : at + length]
            at += length
            if not _MEMBER_NAME.fullmatch(name) or offset + entry_size > start:
                return None
            members[name.decode()] = Member(pack, offset, entry_size)
    except struct.error:
        return None
    return (made, members) if at == len(table) else None


def read_member(member: Member) -> bytes:
    """The bytes of a packed entry (OSError if the pack is gone or cannot be read, or is no
    longer a regular file). The pack is touched, at most once a minute by a process: its
    modification time says when it was last used (the cap evicts by it)."""
    with open_regular(member.pack) as fh:
        fh.seek(member.offset)
        data = fh.read(member.size)
    now = time.monotonic()
    if now - _TOUCHED.get(member.pack, -_TOUCH_SECONDS) >= _TOUCH_SECONDS:
        _TOUCHED[member.pack] = now
        with contextlib.suppress(OSError):
            os.utime(member.pack)
    return data


def drop(member: Member) -> None:
    """Remove the pack holding an entry that cannot be used (OSError if it cannot be)."""
    os.unlink(member.pack)
    _INDEX.pop(member.pack.parent, None)
