"""Typed line decoding (mcsim.ingest.loaders.fields.read_typed) changes nothing a load gives.

The Claude Code loader reads most lines through msgspec Structs and the rest from orjson's
dicts (docs/performance.md#typed-parsing). Here every load is made twice, typed and with the
typed decoder refusing every line (the dict path alone, as before typed decoding): the
sessions, their items and the skip report must be equal, on the real corpus, on the samples
and on lines damaged the ways tests/test_fuzz.py damages them. And simdjson, which vouches
for a typed line, must take no line orjson refuses (else a broken line would be used).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import msgspec
import orjson
import pytest
import simdjson
from conftest import CORPUS, SAMPLES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_fuzz import SOURCE, mutated_line

import mcsim.ingest.loaders.claude_code as claude_code
from mcsim.ingest.loaders import Detail, LoadResult, LoadUnit, plan_units
from mcsim.ingest.loaders.fields import read_typed
from mcsim.model import SkipReport


def _refuse(raw: Any) -> Any:
    raise msgspec.DecodeError("refused: the dict path alone")


def _loads(units: list[LoadUnit], detail: Detail, typed: bool) -> list[LoadResult]:
    decoders = claude_code._DECODERS
    saved = dict(decoders)
    if not typed:
        decoders.update({k: _refuse for k in decoders})
    try:
        return [claude_code.ClaudeCodeLoader().load(u, detail) for u in units]
    finally:
        decoders.update(saved)


def _same(units: list[LoadUnit]) -> None:
    for detail in Detail:
        typed, plain = _loads(units, detail, True), _loads(units, detail, False)
        for a, b in zip(typed, plain, strict=True):
            assert a.sessions == b.sessions
            assert a.skips == b.skips


@pytest.mark.parametrize("root", [CORPUS, SAMPLES], ids=["corpus", "samples"])
def test_typed_and_dict_loads_are_equal(root: Path) -> None:
    units = [u for u in plan_units(sorted(root.rglob("*.jsonl"))) if u.loader == "claude-code"]
    assert units
    _same(units)


def test_typed_lines_are_read_typed() -> None:
    """Every line of the corpus goes the typed way (no field there is of another type)."""
    typed = plain = lines = 0
    for path in sorted(CORPUS.rglob("*.jsonl")):
        skips = SkipReport()
        for _, obj in read_typed(path, path.name, skips, claude_code._DECODERS[True]):
            if isinstance(obj, dict):
                plain += 1
            else:
                typed += 1
        lines += skips.lines_read
    assert (typed, plain) == (lines, 0)
    assert lines == 1_418


@st.composite
def damaged_lines(draw: st.DrawFn) -> list[bytes]:
    pool: list[dict[str, Any]] = []  # lines whose ids later lines may reuse
    return draw(st.lists(mutated_line(pool), min_size=1, max_size=30))


@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(lines=damaged_lines())
def test_damaged_lines_load_alike(lines: list[bytes], tmp_path_factory: Any) -> None:
    folder = tmp_path_factory.mktemp("proj") / "-proj"
    folder.mkdir()
    path = folder / "s.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    _same([LoadUnit("claude-code", str(folder), (path,), path.stat().st_size)])


def test_simdjson_refuses_what_orjson_refuses() -> None:
    """Lines of the corpus damaged at random (JSON syntax, bytes that are not UTF-8, numbers
    past a double, whitespace and byte-order marks): any simdjson takes, orjson takes, but
    for a byte-order mark at the start (which read_typed refuses itself)."""
    rng = random.Random(31)
    pieces = [b'"', b"\\", b"{", b"}", b"[", b"]", b",", b":", b"\xff", b"\xc3", b"\xed\xa0\x80",
              b"\x00", b"\x01", b"\x7f", b"e", b"+", b"-", b".", b"0", b"1e400", b"\\u",
              b"\\ud800", b"nul", b"9" * 400, b" ", b"\t", b"\n", b"\x0c", b"\x0b", b"\xa0",
              b"\xc2\xa0", b"\xef\xbb\xbf", b"\xc0\x80", b"\xf4\x90\x80\x80"]  # fmt: skip
    lines = [line for line in SOURCE if len(line) < 5_000]
    parse = simdjson.Parser().parse
    for _ in range(20_000):
        line = bytearray(rng.choice(lines))
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(line) + 1)
            if rng.random() < 0.5:
                line[at:at] = rng.choice(pieces)
            else:
                del line[at : at + rng.randint(1, 3)]
        data = bytes(line)
        try:
            parse(data)
        except (ValueError, RuntimeError):
            continue
        if data.startswith(b"\xef\xbb\xbf"):
            continue
        orjson.loads(data)  # raises if orjson refuses what simdjson took
