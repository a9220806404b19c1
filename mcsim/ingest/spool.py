"""Records a run would otherwise hold until its end, pickled to a file on disk (issue 13).

A replay's rows (outputs/rows_sink.py) and inspect's sessions, breaks and calls
(accounting/recorded.py) arrive a session at a time but are written out at the end, in an
order known only then. Held in memory they made the driver grow with the corpus; a `Spool`
appends each record to a file in its own temporary folder and keeps only where it is, and
`Spooled` reads them back, in any order, as a sequence.
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import pickle
import shutil
import tempfile
from array import array
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self, TypeVar, overload

from mcsim.errors import McsimError
from mcsim.ingest.storage import ObjectPath

T = TypeVar("T")


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
        try:
            self.folder = Path(tempfile.mkdtemp(prefix=f".mcsim-{kind}-{name}.", dir=near))
        except OSError as exc:  # out of space or inodes where the run goes: one line
            raise self._write_error(exc, near or Path(tempfile.gettempdir())) from exc
        self.path = self.folder / f"{kind}.spool"
        try:
            self._writer = open(self.path, "wb")  # noqa: SIM115
        except OSError as exc:  # a folder made, but no file in it (inodes, a quota)
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
