"""Records a run would otherwise hold until its end, pickled to a file on disk.

A replay's rows (outputs/rows_sink.py) and inspect's sessions, breaks and calls
(accounting/recorded.py) arrive a session at a time but are written out at the end, in an order
known only then. Held in memory they made the driver grow with the corpus, which memory must
not do (docs/design.md#performance); a `Spool` appends each record to a file in its own
temporary folder and keeps only where it is, and `Spooled` reads them back, in any order, as a
sequence.

A run holds a lock on its spool folder (flock on the folder itself) while it lives; the kernel
releases it when the run ends, however it ends. A run killed with SIGKILL cannot remove its
folder, so the next run that makes a spool in the same place removes the folders whose lock it
can take (their runs are gone), never one another live run holds.
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import os
import pickle
import re
import shutil
import stat
import sys
import tempfile
import time
from array import array
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self, TypeVar, overload

from mcsim.errors import McsimError
from mcsim.ingest.storage import ObjectPath

T = TypeVar("T")

if sys.platform != "win32":
    import fcntl

# A spool folder as `Spool` names it (mkdtemp's suffix: 8 of [a-z0-9_]).
_SPOOL_FOLDER = re.compile(r"\.mcsim-(?:rows|inspect)-.*\.[a-z0-9_]{8}", re.DOTALL)
# A folder younger than this is left alone even unlocked: its run may be between making it and
# locking it (a moment). A killed run's is removed by a later run.
_YOUNG_SECONDS = 60


def _near(out_dir: Path | None) -> Path | None:
    """The folder a spool goes in: the nearest existing folder above the run directory (the
    same file system as the run's temporary folder), or the system's for a remote run."""
    if out_dir is None or isinstance(out_dir, ObjectPath):
        return None
    parent = out_dir.absolute().parent
    while not parent.exists():
        parent = parent.parent
    return parent


def write_error(exc: OSError, out_dir: Path | None, folder: Path) -> McsimError:
    """The run's write failure (a full disk, a quota), in one line naming --out (else
    `folder`): for the spool and for whatever else a run writes beside it."""
    where = out_dir if out_dir is not None else folder
    return McsimError(f"{where}: could not write the run ({exc.strerror})")


class Spool:
    """Pickled records appended to one file in a temporary folder, read back by offset.

    A context manager: its folder (beside the run directory, `.mcsim-KIND-NAME.*`, or in the
    system's temporary folder without one) is removed on leaving, whether the run finished,
    failed or was stopped. The folder also holds whatever else the run writes there first.
    """

    def __init__(self, kind: str, out_dir: Path | None = None) -> None:
        self.out_dir = out_dir
        name = out_dir.name if out_dir is not None else "mcsim"
        near = _near(out_dir)
        self._reader: IO[bytes] | None = None
        self._writer: IO[bytes] | None = None
        self._lock: int | None = None
        remove_stale_spools(near or Path(tempfile.gettempdir()))
        try:
            self.folder = Path(tempfile.mkdtemp(prefix=f".mcsim-{kind}-{name}.", dir=near))
        except OSError as exc:  # out of space or inodes where the run goes: one line
            raise self._write_error(exc, near or Path(tempfile.gettempdir())) from exc
        self.path = self.folder / f"{kind}.spool"
        try:
            self._lock = _locked(self.folder)
            self._writer = open(self.path, "wb")  # noqa: SIM115
        except OSError as exc:  # a folder made, but no file in it (inodes, a quota)
            self._unlock()
            shutil.rmtree(self.folder, ignore_errors=True)
            raise self._write_error(exc, self.folder) from exc

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def put(self, record: object) -> int:
        """Append `record`; where it starts, for `get`."""
        return self.put_pickled(pickle.dumps(record, pickle.HIGHEST_PROTOCOL))

    def put_pickled(self, blob: bytes) -> int:
        """`put` for a record already pickled (`blob`: one whole pickle)."""
        if self._writer is None:
            raise ValueError("the spool is closed for writing")
        offset = self._writer.tell()
        try:
            self._writer.write(blob)
        except OSError as exc:  # a full disk, a quota: the run's write failure, in one line
            raise self._write_error(exc, self.folder) from exc
        return offset

    def _write_error(self, exc: OSError, folder: Path) -> McsimError:
        return write_error(exc, self.out_dir, folder)

    def get(self, offset: int) -> Any:
        """The record `put` wrote at `offset` (the writing ends at the first read)."""
        if self._writer is not None:
            writer, self._writer = self._writer, None
            try:
                writer.close()  # its buffer's last records written: a full disk fails here
            except OSError as exc:
                raise self._write_error(exc, self.folder) from exc
        if self._reader is None:
            self._reader = open(self.path, "rb")  # noqa: SIM115
        self._reader.seek(offset)
        return pickle.load(self._reader)

    def discard(self) -> None:
        """Remove the spool's file (its records are read), keeping the folder."""
        with contextlib.suppress(OSError):  # a last buffer nobody reads
            self._close_files()
        self.path.unlink(missing_ok=True)

    def close(self) -> None:
        """Close the files and remove the folder. A write that fails now (the writer's buffer,
        on a full disk) is of records nobody will read: the run failed already (its error
        stands, in one line) or read what it needed; the folder goes either way."""
        try:
            with contextlib.suppress(OSError):
                self._close_files()
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)
            self._unlock()

    def _unlock(self) -> None:
        if self._lock is not None:
            os.close(self._lock)  # the lock goes with it
            self._lock = None

    def _close_files(self) -> None:
        """Close both files (a buffered file that fails to flush is closed all the same), then
        raise the first failure."""
        handles, self._writer, self._reader = (self._writer, self._reader), None, None
        failure: OSError | None = None
        for handle in handles:
            if handle is not None:
                try:
                    handle.close()
                except OSError as exc:
                    failure = failure or exc
        if failure is not None:
            raise failure


def _locked(folder: Path) -> int | None:
    """A descriptor of FOLDER holding an exclusive lock on it, or None where there are no
    such locks (Windows)."""
    if sys.platform == "win32":
        return None
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a new folder: nobody else has it
    except OSError:
        os.close(fd)
        raise
    return fd


def remove_stale_spools(folder: Path) -> list[Path]:
    """Remove the spool folders in FOLDER that runs killed before their end left there: this
    user's, named as `Spool` names them, older than a minute, whose lock this process can take
    (no live run holds it). Never fatal; the folders removed."""
    if sys.platform == "win32":
        return []
    removed = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return []
    for entry in entries:
        if not _SPOOL_FOLDER.fullmatch(entry.name):
            continue
        path = Path(entry.path)
        with contextlib.suppress(OSError):
            st = entry.stat(follow_symlinks=False)
            if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
                continue
            if time.time() - st.st_mtime > _YOUNG_SECONDS and _unlocked(path):
                shutil.rmtree(path)
                removed.append(path)
    return removed


def _unlocked(folder: Path) -> bool:
    """Whether no process holds FOLDER's lock (its run is gone: the kernel released it)."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


class Spooled(Sequence[T]):
    """A sequence read back from a spool: the record at each offset, in the offsets' order, or
    with `counts` (how many items each record, a list, holds) the items of those lists (an
    empty one is never read: its offset may be anything).

    Holds only the offsets (8 bytes a record; 8 more with counts); an item is unpickled each
    time it is reached. Valid while the spool is open.
    """

    def __init__(self, spool: Spool, offsets: array[int], counts: array[int] | None = None):
        self.spool = spool
        self.offsets = offsets
        self.ends: array[int] | None = None  # the index after each record's last item
        if counts is not None:
            self.ends = array("q", itertools.accumulate(counts))

    def __len__(self) -> int:
        if self.ends is None:
            return len(self.offsets)
        return self.ends[-1] if self.ends else 0

    def __iter__(self) -> Iterator[T]:
        if self.ends is None:
            for offset in self.offsets:
                yield self.spool.get(offset)
            return
        start = 0
        for offset, end in zip(self.offsets, self.ends, strict=True):
            if end > start:  # an empty list need not have been put
                yield from self.spool.get(offset)
            start = end

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> list[T]: ...
    def __getitem__(self, index: int | slice) -> T | list[T]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("spooled index out of range")
        if self.ends is None:
            return self.spool.get(self.offsets[index])  # type: ignore[no-any-return]
        record = bisect.bisect_right(self.ends, index)
        first = self.ends[record - 1] if record else 0
        return self.spool.get(self.offsets[record])[index - first]  # type: ignore[no-any-return]
