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


def _call(
    n: int,
    usage: str = '{"input_tokens":3,"output_tokens":5}',
    content: str = "[]",
    extra: str = "",
) -> bytes:
    return (
        f'{{"type":"assistant","uuid":"u{n}","parentUuid":"u{n - 1}","sessionId":"s",'
        f'"timestamp":"2026-01-01T00:00:{n:02d}Z","requestId":"r{n}",{extra}"message":{{'
        f'"model":"claude-opus-4-6","id":"m{n}","usage":{usage},"content":{content}}}}}'
    ).encode()


NASTY_LINES = [
    # counts of other types: the typed decode refuses them, the dict path decides
    _call(1, '{"input_tokens":1.0,"output_tokens":1e3}'),
    _call(2, '{"input_tokens":-1}'),
    _call(3, '{"input_tokens":100000001}'),
    _call(4, '{"input_tokens":true}'),
    _call(5, '{"input_tokens":"5"}'),
    _call(6, '{"input_tokens":18446744073709551616}'),
    _call(7, '{"input_tokens":-0,"cache_creation":{"ephemeral_1h_input_tokens":null}}'),
    _call(8, '{"cache_deleted_input_tokens":-3,"cache_creation":[]}'),
    _call(9, "null"),
    # duplicate keys: the last one wins in both decoders
    _call(10, '{"input_tokens":-1,"input_tokens":2}'),
    _call(11, '{"input_tokens":2,"input_tokens":-1}'),
    _call(12, extra='"type":"user","isSidechain":true,"isSidechain":false,'),
    _call(13, content='[{"type":"text","text":"a","text":"bb"}]'),
    _call(14, content='[{"type":"tool_use","id":"t","name":"Bash","input":{"a":1},"input":[2]}]'),
    # content: mixed and unknown blocks, tool results with images, nulls inside
    _call(
        15,
        content='[{"type":"thinking","thinking":"x"},{"type":"weird"},{"text":"t"},'
        '{"type":"redacted_thinking","data":null},"s",null]',
    ),
    _call(
        16,
        content='[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text",'
        '"text":"a"},{"type":"image","source":{"data":"AAAA"}},{"text":"b"},'
        '{"type":"tool_reference","tool_name":"X"}]}]',
    ),
    _call(17, content='[{"type":"tool_result","content":[null,1,"s",[]],"is_error":1}]'),
    _call(18, content='{"type":"text"}'),
    # strings: escapes, lone surrogates, NUL, line separators, invalid UTF-8, escaped keys
    _call(19, content='[{"type":"text","text":"\\u0000\\u2028\\ud83d\\ude00"}]'),
    _call(20, content='[{"type":"text","text":"\\ud800"}]'),
    _call(21, extra='"toolUseResult":"\\udc00x",'),
    _call(22, extra='"toolUseResult":"\xff\xfe",'),
    _call(23, extra='"typ\\u0065":"user","cwd":"\\/tmp",'),
    # numbers past a double, NaN, and nesting at orjson's and simdjson's depth limit
    _call(24, extra='"x":1.797693134862315808e308,'),
    _call(25, extra='"x":NaN,'),
    _call(26, extra='"x":' + "[" * 1022 + "1" + "]" * 1022 + ","),
    _call(27, extra='"x":' + "[" * 1023 + "1" + "]" * 1023 + ","),
    _call(
        28,
        content='[{"type":"tool_use","id":"d","name":"Read","input":'
        + "[" * 1020
        + "]" * 1020
        + "}]",
    ),
    # line ends and marks: CR, a byte-order mark mid-file, form feed, trailing garbage
    _call(29) + b"\r",
    b"\xef\xbb\xbf" + _call(30),
    b"\x0c" + _call(31),
    _call(32) + b" x",
    b'{"type":"system","subtype":"compact_boundary","uuid":"u33","compactMetadata":'
    b'{"trigger":1,"preTokens":1.0,"compactedToolIds":["a",2]},"timestamp":"2026-01-01T00:00:33Z"}',
    b'{"type":"attachment","uuid":"u34","attachment":{"a":[1,{"b":null}]}}',
    b'{"type":"summary","uuid":"u35","parentUuid":7}',
    b'{"message":{"model":"claude-opus-4-6","id":"m36","usage":{}},"timestamp":"2026-01-01T00:00:36Z"}',
]


def test_hand_written_nasty_lines_load_alike(tmp_path: Path) -> None:
    """Lines with fields of other types, duplicate keys, odd blocks, strings, numbers, depth
    and line ends: typed or not, the same sessions and the same skip report."""
    folder = tmp_path / "-proj"
    folder.mkdir()
    path = folder / "s.jsonl"
    path.write_bytes(b"\n".join(NASTY_LINES) + b"\n")
    unit = LoadUnit("claude-code", str(folder), (path,), path.stat().st_size)
    _same([unit])
    result = claude_code.ClaudeCodeLoader().load(unit, Detail.TEXT)
    assert result.skips.lines_read == len(NASTY_LINES)
    calls = [c.message_id for s in result.sessions for t in s.threads for c in t.calls]
    assert calls == [f"m{n}" for n in (1, 7, 8, 10, 13, 14, 15, 16, 17, 18, 19, 22, 26, 27, 28,
                                       29, 36)]  # fmt: skip
    assert (result.skips.counts, result.skips.repaired) == (
        {"bad_field": 7, "invalid_json": 7},
        {"bad_block": 4, "bad_field": 1},
    )
