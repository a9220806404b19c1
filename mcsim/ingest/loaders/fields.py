"""What every JSON-lines loader needs: reading a file's objects line by line (every line
counted, a bad one reported with its number), and reading fields with one-line reasons
(`BadField`: the key and what is wrong with it, never the content).

A loader may read its lines typed (`read_typed`): msgspec decodes each line straight into a
Struct holding only the fields the loader reads, of the types it expects, skipping the rest
(tool results, file snapshots) without building it, and the loader reads attributes rather
than walking dicts. A line the typed decode refuses (a field of another type, broken JSON)
is read as `read_objects` reads it, so broken and odd lines are counted exactly as they are
there (docs/performance.md#typed-parsing).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import orjson
import simdjson

from mcsim.ingest.loaders.jsonl import (
    MAX_LINE_BYTES,
    NotRegularFileError,
    iter_blocks,
    iter_lines,
    open_regular,
)
from mcsim.model import SkipReport
from mcsim.text import shown

# No real response comes near this: it is 100x the largest context window.
MAX_TOKENS_PER_CALL = 100_000_000
# Times outside these years are damage, and would not survive conversion to UTC dates.
EARLIEST_S = 0.0
LATEST_S = datetime(3000, 1, 1, tzinfo=UTC).timestamp()
_INVALID = object()
_BLANK = frozenset(b" \t\r\f\v")


class BadField(Exception):
    """A field a line needs is missing or of the wrong type; the line is skipped."""

    def __init__(self, key: str, why: str) -> None:
        super().__init__(f"{key}: {why}")


def parse_timestamp(value: Any, key: str = "timestamp") -> float:
    if not isinstance(value, str):
        raise BadField(
            key, "missing" if value is None else f"not a string ({type(value).__name__})"
        )
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise BadField(key, "not an ISO-8601 time") from None
    if moment.tzinfo is None:  # Claude Code writes UTC; never the reading machine's zone
        moment = moment.replace(tzinfo=UTC)
    seconds = moment.timestamp()
    if not EARLIEST_S <= seconds < LATEST_S:
        raise BadField(key, "outside the years 1970 to 2999")
    return seconds


def optional_timestamp(value: Any) -> float | None:
    try:
        return parse_timestamp(value)
    except BadField:
        return None


def token_count(usage: dict[str, Any], key: str, prefix: str = "message.usage") -> int:
    """A token count: missing or null is 0, anything but a non-negative integer is an error."""
    value = usage.get(key)
    if value.__class__ is int and 0 <= value <= MAX_TOKENS_PER_CALL:
        return value  # the usual case first (bool is not int's class: it goes on below)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BadField(f"{prefix}.{key}", f"not a number ({type(value).__name__})")
    if value < 0 or value != int(value):
        raise BadField(f"{prefix}.{key}", f"not a non-negative integer ({value!r:.40})")
    if value > MAX_TOKENS_PER_CALL:
        raise BadField(
            f"{prefix}.{key}",
            f"{shown(value)} tokens is not a real count (limit {MAX_TOKENS_PER_CALL:,})",
        )
    return int(value)


def json_text(value: Any) -> str:
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return ""


def read_objects(path: Path, name: str, skips: SkipReport) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each JSON object line of `path` with its number. Blank lines are passed over; every
    other line is counted in `skips.lines_read`, and one that is too long, not JSON or not an
    object is counted in the skip report, as is a file that cannot be read. Shared by the
    JSONL loaders."""
    for number, raw, unterminated in _lines(path, name, skips):
        obj = _object(raw, name, number, unterminated, skips)
        if obj is not None:
            yield number, obj


_BOM = b"\xef\xbb\xbf"
_REFUSED = (msgspec.MsgspecError, ValueError, RuntimeError)  # what the two parsers raise


def read_typed(
    path: Path,
    name: str,
    skips: SkipReport,
    decode: Callable[[bytes | memoryview], Any],
    max_line_bytes: int = MAX_LINE_BYTES,
) -> Iterator[tuple[int, Any]]:
    """Each object line of `path` with its number, as `read_objects` gives them, but decoded
    by `decode` (a msgspec typed decoder) where it can be: the object is then a Struct, else
    (a line the decoder refuses) the dict orjson gives, or nothing when the line is skipped.

    msgspec checks only what it decodes: it passes over the UTF-8 and the numbers of the
    fields it skips, where orjson refuses bad bytes (a line then repaired) and numbers past a
    double's range. So a line is kept typed only once simdjson, which checks a whole document
    (a parse at over 1 GB/s), takes it too; simdjson takes no line orjson refuses but one that
    starts with a byte-order mark (tested on mutated lines: tests/test_typed_lines.py).

    The lines are those `_lines` gives, counted and skipped alike, but cut here from
    `iter_blocks`' chunks: one generator step per line instead of three.
    """
    validate = simdjson.Parser().parse

    def too_long(number: int, size: int) -> None:
        skips.lines_read += 1
        skips.add(name, number, "line_too_long", f"{size:,} bytes (limit {max_line_bytes:,})")

    number = 0
    try:
        with open_regular(path) as fh:
            for part, chunk, pos, stop in iter_blocks(fh, max_line_bytes):
                # The chunk's whole lines, after the line that ended in it (read as a span of
                # its own, with its newline put back) or the file's unterminated last line.
                spans = [(chunk, pos, stop, False)]
                if part is not None:
                    line, size, unterminated = part
                    if line is None:  # over the limit, passed over
                        number += 1
                        too_long(number, size)
                    else:
                        spans.insert(0, (bytes(line) + b"\n", 0, size + 1, unterminated))
                for text, pos, stop, unterminated in spans:
                    find = text.find
                    while pos < stop:
                        end = find(b"\n", pos)  # (found: stop - 1 is a newline)
                        number += 1
                        if end - pos > max_line_bytes:
                            too_long(number, end - pos)
                            pos = end + 1
                            continue
                        if end == pos:  # a blank line
                            pos += 1
                            continue
                        first = text[pos]
                        if first in _BLANK and text[pos:end].isspace():
                            pos = end + 1
                            continue
                        skips.lines_read += 1
                        # A copy: simdjson takes bytes faster than a view into the chunk
                        # (docs/performance.md#measured-reasons).
                        raw = text[pos:end]
                        pos = end + 1
                        try:
                            typed = decode(raw)
                            validate(raw)  # the document it returns is dropped (reused parser)
                            # (the first byte first: most lines do not start with one)
                            if first == 0xEF and raw[:3] == _BOM:
                                raise ValueError("a byte-order mark")
                        except _REFUSED:
                            obj = _object(raw, name, number, unterminated, skips)
                            if obj is not None:
                                yield number, obj
                        else:
                            yield number, typed
    except NotRegularFileError as exc:
        skips.add(name, 0, "not_regular_file", exc.what)
    except OSError as exc:
        skips.add(name, 0, "unreadable_file", exc.strerror or type(exc).__name__)


def _lines(path: Path, name: str, skips: SkipReport) -> Iterator[tuple[int, memoryview, bool]]:
    """The lines of `path` a reader decodes, with their numbers and whether each is the last
    and unterminated: blank lines passed over, the others counted in `skips.lines_read`, a
    line over the limit and a file that cannot be read counted as skips."""
    try:
        with open_regular(path) as fh:
            for number, raw, size, unterminated in iter_lines(fh):
                if raw is not None and (not size or (raw[0] in _BLANK and bytes(raw).isspace())):
                    continue
                skips.lines_read += 1
                if raw is None:
                    skips.add(
                        name, number, "line_too_long", f"{size:,} bytes (limit {MAX_LINE_BYTES:,})"
                    )
                    continue
                yield number, raw, unterminated
    except NotRegularFileError as exc:
        skips.add(name, 0, "not_regular_file", exc.what)
    except OSError as exc:
        skips.add(name, 0, "unreadable_file", exc.strerror or type(exc).__name__)


def _object(
    raw: bytes | memoryview, name: str, number: int, unterminated: bool, skips: SkipReport
) -> dict[str, Any] | None:
    """The JSON object of a line (repaired where its only fault is invalid UTF-8), or None
    with the line counted as a skip (not JSON, or JSON but not an object)."""
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        obj = _decode_repaired(bytes(raw), name, number, unterminated, exc, skips)
        if obj is _INVALID:
            return None
    if isinstance(obj, dict):
        return obj
    skips.add(name, number, "not_object", f"a JSON {type(obj).__name__}")
    return None


def raw_json_text(raw: msgspec.Raw) -> str:
    """`json_text` of a value a typed decode kept as its raw JSON: the same text, since it is
    parsed and written by the same library."""
    return json_text(orjson.loads(memoryview(raw)))


def _decode_repaired(
    raw: bytes,
    file: str,
    line: int,
    truncated: bool,
    error: orjson.JSONDecodeError,
    skips: SkipReport,
) -> Any:
    """Retry a line with invalid UTF-8 bytes replaced; otherwise count it as invalid."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        try:
            obj = orjson.loads(raw.decode("utf-8", "replace"))
        except orjson.JSONDecodeError:
            pass
        else:
            skips.repair(file, line, "invalid_utf8", "undecodable bytes replaced")
            return obj
    reason = "truncated_line" if truncated else "invalid_json"
    # The parser's message gives the position, never the content (which may be secret).
    skips.add(file, line, reason, f"{len(raw):,} bytes; {error.msg} at char {error.pos}")
    return _INVALID


def file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
