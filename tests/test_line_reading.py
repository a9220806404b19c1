"""Cutting files into lines (mcsim.ingest.loaders.jsonl.iter_lines, iter_blocks) and reading
them typed (fields.read_typed, which cuts `iter_blocks`' chunks itself): every line numbered
as an editor numbers it, blank ones passed over, over-long ones measured and skipped, the
byte-order mark dropped, the last line's missing newline told, whatever the chunk size.

`read_typed` is checked against the reader it replaced (`fields._lines` over `iter_lines`,
then the same decode and check), on random files of JSON, blank, broken and over-long lines.
"""

from __future__ import annotations

import io
import random
from pathlib import Path
from typing import Any

import msgspec
import pytest
import simdjson

from mcsim.ingest.loaders import claude_code, fields, jsonl
from mcsim.ingest.loaders.fields import _BOM, _REFUSED, _object, read_typed
from mcsim.model import SkipReport

Lines = list[tuple[int, bytes | None, int, bool]]


def _split(data: bytes, limit: int) -> Lines:
    """What iter_lines must give, the plain way: the whole file split at its newlines."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    pieces = data.split(b"\n")
    out: Lines = []
    for i, piece in enumerate(pieces):
        last = i == len(pieces) - 1
        if last and not piece:
            break
        out.append((i + 1, piece if len(piece) <= limit else None, len(piece), last))
    return out


def _iter_lines(data: bytes, limit: int) -> Lines:
    return [
        (n, bytes(raw) if raw is not None else None, size, last)
        for n, raw, size, last in jsonl.iter_lines(io.BytesIO(data), limit)
    ]


_PIECES = [
    b'{"type": "user", "uuid": "u1", "sessionId": "s", "message": {"content": "hi"}}',
    b'{"type": "assistant", "uuid": "a1", "parentUuid": "u1", "timestamp": '
    b'"2026-01-02T03:04:05.678Z", "message": {"model": "m", "id": "x", "usage": '
    b'{"input_tokens": 3, "output_tokens": 9}}}',
    b'{"type": "user", "message": {"content": "\xff\xfe bad utf-8"}}',
    b'{"type": "system", "timestamp": 12}',
    b'\xef\xbb\xbf{"type": "user"}',
    b"[1, 2]",
    b"not json",
    b'{"type": "user", "x": 1e999}',
    b"",
    b" ",
    b" \t\r",
    b"\r",
    b"\x0c",
    b'  {"type": "user"}',
    b'{"type": "user", "pad": "' + b"p" * 60 + b'"}',
    b"y" * 90,
    b"  " + b" " * 90,
]


def _random_file(rng: random.Random) -> bytes:
    lines = [rng.choice(_PIECES) for _ in range(rng.randrange(0, 12))]
    data = b"\n".join(lines)
    if rng.random() < 0.5:
        data += b"\n"
    if rng.random() < 0.2:
        data = _BOM + data
    return data


def test_iter_lines_splits_as_the_plain_split_does(monkeypatch: pytest.MonkeyPatch) -> None:
    # (chunks of 4 bytes or more: a byte-order mark is looked for in the first chunk only,
    # which must hold more than the mark; a real chunk is 1 MiB)
    rng = random.Random(7)
    for case in range(3000):
        monkeypatch.setattr(jsonl, "CHUNK_BYTES", rng.choice([4, 5, 7, 16, 64, 1 << 20]))
        data = _random_file(rng)
        limit = rng.choice([0, 1, 20, 70, 100, 1 << 20])
        assert _iter_lines(data, limit) == _split(data, limit), (case, data, limit)


def _reference(path: Path, name: str, skips: SkipReport, decode: Any, limit: int) -> Any:
    """read_typed as it was: `fields._lines` (with LIMIT) and the decode, line by line."""
    validate = simdjson.Parser().parse
    with path.open("rb") as fh:
        for number, raw, size, unterminated in jsonl.iter_lines(fh, limit):
            if raw is not None and (not size or (raw[0] in b" \t\r\f\v" and bytes(raw).isspace())):
                continue
            skips.lines_read += 1
            if raw is None:
                skips.add(name, number, "line_too_long", f"{size:,} bytes (limit {limit:,})")
                continue
            try:
                typed = decode(raw)
                validate(raw)
                if raw[0] == 0xEF and raw[:3] == _BOM:
                    raise ValueError("a byte-order mark")
            except _REFUSED:
                obj = _object(raw, name, number, unterminated, skips)
                if obj is not None:
                    yield number, obj
            else:
                yield number, typed


def _read(reader: Any, path: Path, limit: int, detail: bool) -> tuple[list[Any], SkipReport]:
    skips = SkipReport()
    decode = claude_code._DECODERS[detail]
    got = [
        (n, type(o).__name__, msgspec.to_builtins(o, enc_hook=bytes))  # (Raw: its bytes)
        for n, o in reader(path, "f", skips, decode, limit)
    ]
    return got, skips


def test_read_typed_reads_as_the_line_by_line_reader(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    rng = random.Random(11)
    path = tmp_path / "s.jsonl"
    kinds = set()
    for case in range(1500):
        monkeypatch.setattr(jsonl, "CHUNK_BYTES", rng.choice([4, 7, 64, 1 << 20]))
        data = _random_file(rng)
        path.write_bytes(data)
        limit = rng.choice([1, 70, 100, 1 << 20])
        detail = rng.random() < 0.5
        new, old = _read(read_typed, path, limit, detail), _read(_reference, path, limit, detail)
        assert new == old, (case, data, limit)
        kinds.update(kind for _, kind, _ in new[0])
        kinds.update(new[1].counts)
        kinds.update(new[1].repaired)
    # every way a line can go was taken
    ways = {"dict", "_TLine", "_TLineCalls", "line_too_long", "invalid_json", "not_object"}
    assert kinds >= ways | {"truncated_line", "invalid_utf8"}


def test_read_typed_reports_files_it_cannot_read(tmp_path: Path) -> None:
    skips = SkipReport()
    assert list(read_typed(tmp_path / "none.jsonl", "f", skips, claude_code._DECODERS[False])) == []
    assert skips.counts == {"unreadable_file": 1} and skips.lines_read == 0
    assert fields.MAX_LINE_BYTES == jsonl.MAX_LINE_BYTES
