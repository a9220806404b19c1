"""Reading JSON-lines files safely: regular files only, bounded memory, bounded lines.

Shared by every JSONL loader. A transcript folder can hold anything a disk can: a FIFO named
`*.jsonl` (opening it blocks until a writer appears), a link to `/dev/zero` (reading it never
ends), a file of many gigabytes, a single line of hundreds of megabytes. So files are opened
without blocking and refused unless they are regular files; they are read in chunks, so
memory follows the longest line rather than the file; and a line longer than
`MAX_LINE_BYTES` is passed over without being held, and reported.
"""

from __future__ import annotations

import errno
import io
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from mcsim.ingest.storage import ObjectPath, open_object
from mcsim.processes import STOP

# The Messages API refuses requests over 32 MB, so no line that describes what a model was
# sent can be larger; anything longer is not a transcript line mcsim could use.
MAX_LINE_BYTES = 32 * 1024 * 1024
# Chunks of 1 MiB: on small files a 16 MiB buffer per read costs more to allocate than the
# read itself (docs/performance.md#measured-reasons).
CHUNK_BYTES = 1024 * 1024
_BOM = b"\xef\xbb\xbf"


class NotRegularFileError(OSError):
    """A path that is a FIFO, a device or a socket, not a file with an end."""

    def __init__(self, path: Path, what: str) -> None:
        super().__init__(errno.EINVAL, f"{what}, not a regular file", str(path))
        self.what = what


class FileTooLargeError(OSError):
    """A file larger than what it is read for may be (`size_bytes` None: it grew while read)."""

    def __init__(self, path: Path, size_bytes: int | None, limit_bytes: int) -> None:
        limit = (
            f"{limit_bytes >> 20} MiB" if limit_bytes % (1 << 20) == 0 else f"{limit_bytes:_} bytes"
        )
        super().__init__(errno.EFBIG, f"larger than {limit}", str(path))
        self.size_bytes = size_bytes


def file_kind(mode: int) -> str:
    """What a non-regular file is, for messages."""
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "not a regular file"


def open_regular(path: Path) -> BinaryIO:
    """Open `path` for reading if it is a regular file (following links); else raise
    NotRegularFileError. Opened without blocking, so a FIFO is refused, not waited on."""
    STOP.check()  # every file a run reads comes through here: a stop that was lost resurfaces
    if isinstance(path, ObjectPath):  # an object: no FIFO or device can be behind a URL
        return open_object(path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFileError(path, file_kind(mode))
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: Path, limit_bytes: int) -> bytes:
    """The bytes of `path`, which must be a regular file of at most `limit_bytes`.

    For the small files mcsim reads whole (a policy file, a price file, a run's run.json and
    charts), from folders anyone may have written: a FIFO would block the read and a link to
    /dev/zero never end it. Refusals are OSErrors whose `strerror` says why
    (NotRegularFileError, FileTooLargeError).
    """
    with open_regular(path) as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > limit_bytes:
            raise FileTooLargeError(path, size, limit_bytes)
        data = fh.read(limit_bytes + 1)
    if len(data) > limit_bytes:
        raise FileTooLargeError(path, None, limit_bytes)
    return data


def read_input_file(
    path: Path, limit_bytes: int, noun: str, error: Callable[[str], Exception]
) -> bytes:
    """`read_regular` for a file the user named (a policy file, a price file): any refusal is
    `error` with one line naming the file and what it should have been (`noun`)."""
    try:
        return read_regular(path, limit_bytes)
    except NotRegularFileError as exc:
        raise error(f"{path}: {exc.what}, not a {noun}") from None
    except FileTooLargeError as exc:
        size = "more" if exc.size_bytes is None else f"{exc.size_bytes:_} bytes"
        raise error(
            f"{path}: too large for a {noun} ({size}; at most {limit_bytes:_} bytes)"
        ) from None
    except OSError as exc:
        raise error(f"{path}: cannot read {noun} ({exc.strerror})") from None


# One line of a file: its 1-based number, its bytes (None when it is over the limit and was
# passed over), its size in bytes, and whether it is the last line and has no newline. A plain
# tuple: a NamedTuple costs a Python-level call per line, measurable on a large corpus.
Line = tuple[int, memoryview | None, int, bool]
# A line read in parts (it spans chunks) or the unterminated last one, as a `Line` without its
# number: its bytes (None: over the limit, passed over), its size, whether it is the last.
Part = tuple[memoryview | None, int, bool]
# What `iter_blocks` yields: a `Part` or None, then a chunk and the span [start, stop) of it
# that holds whole lines, each ended by a newline (stop - 1 is one, unless start == stop).
Block = tuple[Part | None, bytes, int, int]


def iter_lines(fh: BinaryIO, max_line_bytes: int = MAX_LINE_BYTES) -> Iterator[Line]:
    """Every line of `fh`, blank ones included (so numbers match an editor's), without the
    newline. A UTF-8 byte-order mark at the start of the file is dropped. A yielded memoryview
    is valid until the next line is asked for.

    Lines within a chunk are views into it (no copy); a line that spans chunks is joined from
    its parts once, and one over the limit is only measured."""
    number = 0
    for part, chunk, pos, stop in iter_blocks(fh, max_line_bytes):
        if part is not None:
            number += 1
            yield (number, *part)
        view = memoryview(chunk)
        while pos < stop:
            end = chunk.find(b"\n", pos)  # (found: stop - 1 is a newline)
            number += 1
            if end - pos > max_line_bytes:
                yield (number, None, end - pos, False)
            else:
                yield (number, view[pos:end], end - pos, False)
            pos = end + 1


def iter_blocks(fh: BinaryIO, max_line_bytes: int = MAX_LINE_BYTES) -> Iterator[Block]:
    """`fh` as `iter_lines` reads it, chunk by chunk, for a reader that cuts the lines itself
    (`iter_lines`; `fields.read_typed`, which spares a generator step per line that way).

    Each block is a line that ended in this chunk after starting in earlier ones (or the
    unterminated last line, with an empty chunk after it), or None; then the chunk and the
    span of it that holds its whole lines, each ended by a newline, which come after that
    line and which the reader numbers on, and measures against `max_line_bytes` itself (a line
    within a chunk is passed over there: this only measures the ones that span chunks)."""
    parts: list[bytes] = []  # the start of a line that goes on in a later chunk
    parts_size = 0
    passing = -1  # >= 0 while passing over an over-long line: its bytes so far
    left = _size_now(fh)
    read = fh.read

    def next_chunk() -> bytes:
        # No further than the size at the start: a file that grows while it is read (a live
        # session, a writer faster than the reader) is read as it was, and one whose size the
        # kernel makes up (/proc, where reading consumes data) as the size it shows.
        nonlocal left
        if left is None:
            return read(CHUNK_BYTES)
        chunk = read(min(CHUNK_BYTES, left)) if left > 0 else b""
        left -= len(chunk or b"")
        return chunk or b""

    chunk = next_chunk()
    if chunk.startswith(_BOM):
        chunk = chunk[len(_BOM) :]
    while chunk:
        pos = 0
        part: Part | None = None
        if parts or passing >= 0:
            end = chunk.find(b"\n")
            if end < 0:
                if passing >= 0:
                    passing += len(chunk)
                else:
                    parts.append(chunk)
                    parts_size += len(chunk)
                    if parts_size > max_line_bytes:
                        passing, parts, parts_size = parts_size, [], 0
                chunk = next_chunk()
                continue
            if passing >= 0 or parts_size + end > max_line_bytes:
                part = (None, max(passing, parts_size) + end, False)
            else:
                line = b"".join(parts) + chunk[:end]
                part = (memoryview(line), len(line), False)
            passing, parts, parts_size = -1, [], 0
            pos = end + 1
        stop = max(chunk.rfind(b"\n", pos) + 1, pos)
        yield part, chunk, pos, stop
        rest = len(chunk) - stop
        if rest > max_line_bytes:
            passing = rest
        elif rest:
            parts, parts_size = [chunk[stop:]], rest
        chunk = next_chunk()
    if passing >= 0:
        yield (None, passing, True), b"", 0, 0
    elif parts:
        line = b"".join(parts)
        yield (memoryview(line), len(line), True), b"", 0, 0


def _size_now(fh: BinaryIO) -> int | None:
    """The size of the file behind `fh` now, or None when it has none (a stream in memory)."""
    try:
        return os.fstat(fh.fileno()).st_size
    except (OSError, AttributeError, io.UnsupportedOperation):
        return None


def read_head(path: Path, size_bytes: int) -> bytes:
    """The first `size_bytes` bytes of a regular file (fewer if it is shorter), to sniff its
    format; b"" for anything else or an unreadable file."""
    try:
        with open_regular(path) as fh:
            now = _size_now(fh)  # None for an object: it has no descriptor
            return fh.read(size_bytes if now is None else min(size_bytes, now)) or b""
    except OSError:
        return b""
