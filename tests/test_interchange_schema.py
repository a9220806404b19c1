"""The interchange schema is the loader's single source of truth: documents generated from the
schema, valid and broken, are read by the loader exactly when the reference validator (the
`jsonschema` package) accepts them; and times that cannot be true are clamped and noted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcsim.ingest.loaders import Detail
from mcsim.ingest.loaders.fields import BadField
from mcsim.ingest.loaders.interchange import _CHECK, SCHEMA_FILE
from mcsim.ingest.loaders.schema import SchemaCompileError, compile_schema
from mcsim.ingest.pipeline import load_sessions
from mcsim.model import ToolClass

SCHEMA: dict[str, Any] = json.loads(SCHEMA_FILE.read_text())
DEFS: dict[str, Any] = SCHEMA["$defs"]
REFERENCE = jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.FormatChecker())
HEADER = {"type": "session", "format": "mcsim-interchange", "version": 1,
          "session_id": "s", "project": "-p"}  # fmt: skip
CALL = {"type": "call", "thread": "main", "id": "m1", "model": "claude-sonnet-4-5",
        "timestamp": "2026-11-01T10:00:00Z",
        "usage": {"input_tokens": 3, "cache_read_tokens": 0, "cache_write_5m_tokens": 1200,
                  "output_tokens": 50}}  # fmt: skip


# ------------------------------------------------------------ documents from the schema


_STRATEGIES: dict[str, st.SearchStrategy[Any]] = {}


def _strategy(spec: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Documents the schema node `spec` accepts (best effort: the reference decides). Made
    once per node of SCHEMA: `_object_draw` asks again for every document, and building a
    strategy (a regex's above all) costs more than drawing from it."""
    key = json.dumps(spec, sort_keys=True)
    strategy = _STRATEGIES.get(key)
    if strategy is None:
        strategy = _STRATEGIES[key] = _new_strategy(spec)
    return strategy


def _new_strategy(spec: dict[str, Any]) -> st.SearchStrategy[Any]:
    if "$ref" in spec:
        return _strategy(DEFS[spec["$ref"].removeprefix("#/$defs/")])
    if "anyOf" in spec and "type" not in spec:
        return st.one_of([_strategy(s) for s in spec["anyOf"]])
    if "oneOf" in spec:
        return st.one_of([_strategy(s) for s in spec["oneOf"]])
    if "const" in spec:
        value = spec["const"]
        return st.sampled_from([value, float(value)]) if type(value) is int else st.just(value)
    if "enum" in spec:
        return st.sampled_from(spec["enum"])
    kind = spec.get("type")
    if kind == "string":
        if "pattern" in spec:
            return st.from_regex(spec["pattern"])
        if "not" in spec:  # the `other` line type: any string but the known ones
            return st.text(min_size=1, max_size=8).filter(lambda t: t not in spec["not"]["enum"])
        return st.text(min_size=spec.get("minLength", 0), max_size=12)
    if kind == "integer":
        low, high = spec.get("minimum", -(10**9)), spec.get("maximum", 10**9)
        ints = st.integers(low, high)
        return st.one_of(ints, ints.map(float))
    if kind == "number":
        high = spec.get("exclusiveMaximum", 1e12)
        return st.floats(spec.get("minimum", 0), high, exclude_max=True, allow_nan=False)
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "array":
        return st.lists(_strategy(spec["items"]), max_size=3)
    if kind == "object":
        return _object(spec)
    raise AssertionError(f"no strategy for {spec}")


@st.composite
def _object_draw(draw: st.DrawFn, spec: dict[str, Any]) -> dict[str, Any]:
    properties = spec.get("properties", {})
    keys = list(spec.get("required", ()))
    keys += [k for k in properties if k not in keys and draw(st.booleans())]
    doc = {k: draw(_strategy(properties.get(k, {"type": "string"}))) for k in keys}
    if "anyOf" in spec and not any(set(b["required"]) <= doc.keys() for b in spec["anyOf"]):
        key = draw(st.sampled_from([b["required"][0] for b in spec["anyOf"]]))
        doc[key] = draw(_strategy(properties[key]))
    if draw(st.booleans()):
        doc["x_later_addition"] = draw(st.integers())  # unknown keys are allowed
    return doc


def _object(spec: dict[str, Any]) -> st.SearchStrategy[Any]:
    return _object_draw(spec)


# The values a broken document puts in place of a good one: wrong types, out of range, and
# every shape of time on which the loader and the schema were once found to disagree.
WRONG = [
    None, True, False, 0, -1, 1.5, 2, 1e9, 100_000_001, "", "x", "1", [], {}, [1], {"a": 1},
    "2026-01-01 10:00:00Z", "2026-01-01", "2026-01-01t10:00:00z", "2026-02-29T00:00:00Z",
    "2024-02-29T00:00:00+14:00", "2026-01-01T24:00:00Z", "2026-01-01T10:00Z",
    "2026-01-01T10:00:00.Z", "1969-12-31T23:59:59Z", "1970-01-01T00:00:00+01:00",
    "3000-01-01T00:00:00Z", 32_503_680_000, -0.5, "2026-01-01T10:00:00Z\n", "read", "shell",
    "openai", "main", "tool_result",
]  # fmt: skip


@st.composite
def broken(draw: st.DrawFn, line: st.SearchStrategy[dict[str, Any]]) -> dict[str, Any]:
    """A generated line with one thing changed: a key dropped, or a value (at the top or in
    usage) replaced by one of WRONG."""
    doc = draw(line)
    target = doc
    if "usage" in doc and isinstance(doc["usage"], dict) and draw(st.booleans()):
        target = doc["usage"] = dict(doc["usage"])
    keys = [k for k in target if k != "type"] or ["type"]
    key = draw(st.sampled_from([*keys, "provider", "tool_class", "text", "sent_at"]))
    if draw(st.integers(0, 4)) == 0 and key in target:
        del target[key]
    else:
        target[key] = draw(st.sampled_from(WRONG))
    return doc


LINES = _strategy({"oneOf": [{"$ref": f"#/$defs/{k}"} for k in
                             ("thread", "item", "compaction", "call", "other")]})  # fmt: skip
HEADERS = _strategy({"$ref": "#/$defs/session"})


def _checker_accepts(doc: Any) -> bool:
    try:
        _CHECK(doc, "")
    except BadField:
        return False
    return True


@settings(max_examples=2000, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.one_of(LINES, HEADERS, broken(LINES), broken(LINES), broken(LINES), broken(HEADERS)))
def test_the_loaders_checker_agrees_with_the_reference_validator(doc: dict[str, Any]) -> None:
    assert _checker_accepts(doc) == REFERENCE.is_valid(doc), doc


def _read(tmp_path: Path, lines: list[Any]) -> tuple[list[Any], Any]:
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return load_sessions([str(path)], detail=Detail.SIZES, workers=1)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow,
          HealthCheck.function_scoped_fixture], deadline=None)  # fmt: skip
@given(st.one_of(LINES, broken(LINES), broken(LINES)))
def test_the_loader_reads_a_line_exactly_when_the_schema_accepts_it(
    tmp_path: Path, doc: dict[str, Any]
) -> None:
    thread = doc.get("thread")
    declare = doc.get("type") != "thread" and isinstance(thread, str) and thread
    lines = [HEADER, *([{"type": "thread", "thread": thread, "kind": "main"}] if declare else [])]
    _, stats = _read(tmp_path, [*lines, doc])
    refused = {e.line for e in stats.skips.examples if e.reason == "bad_field"}
    assert (len(lines) + 1 not in refused) == REFERENCE.is_valid(doc), (doc, stats.skips.examples)
    assert refused <= {len(lines) + 1}


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow,
          HealthCheck.function_scoped_fixture], deadline=None)  # fmt: skip
@given(st.one_of(HEADERS, broken(HEADERS)))
def test_the_loader_reads_a_file_exactly_when_the_schema_accepts_its_header(
    tmp_path: Path, header: dict[str, Any]
) -> None:
    sessions, stats = _read(tmp_path, [header, {"type": "thread", "thread": "main",
                                                "kind": "main"}, CALL])  # fmt: skip
    assert (len(sessions) == 1) == REFERENCE.is_valid(header), (header, stats.skips.examples)


# ------------------------------------------------------------ where they once disagreed


@pytest.mark.parametrize(
    ("change", "read"),
    [
        ({"version": 1.0}, True),  # 1.0 is the integer 1
        ({"version": True}, False),  # true is no number
        ({"version": "1"}, False),
    ],
)
def test_versions(tmp_path: Path, change: dict[str, Any], read: bool) -> None:
    header = {**HEADER, **change}
    assert REFERENCE.is_valid(header) == read
    sessions, _ = _read(tmp_path, [header, {"type": "thread", "thread": "main", "kind": "main"},
                                   CALL])  # fmt: skip
    assert len(sessions) == (1 if read else 0)


@pytest.mark.parametrize(
    ("change", "read"),
    [
        ({"timestamp": "2026-11-01t10:00:00z"}, True),  # RFC 3339 allows lower case
        ({"timestamp": "2026-11-01T10:00:00.123456789+05:30"}, True),
        ({"timestamp": "2026-11-01T10:00:00"}, True),  # no zone: UTC, as documented
        ({"timestamp": "1970-01-01T00:00:00+01:00"}, True),  # 1970 in its zone: 1969 in UTC
        ({"timestamp": "2026-11-01 10:00:00Z"}, False),  # a space for the T
        ({"timestamp": "2026-11-01"}, False),  # a date, no time
        ({"timestamp": "2026-02-29T10:00:00Z"}, False),  # no such day
        ({"timestamp": "2026-11-01T10:00Z"}, False),  # no seconds
        ({"provider": None}, False),  # the schema allows no null here: leave it out
        ({"provider": "openai"}, True),
        ({"timestamp": 1793527230.5}, True),
        ({"timestamp": -1}, False),
    ],
)
def test_call_edges(tmp_path: Path, change: dict[str, Any], read: bool) -> None:
    call = {**CALL, **change}
    assert REFERENCE.is_valid(call) == read
    sessions, stats = _read(tmp_path, [HEADER, {"type": "thread", "thread": "main",
                                                "kind": "main"}, call])  # fmt: skip
    assert len(sessions) == (1 if read else 0), stats.skips.examples
    if read:
        (got,) = sessions[0].calls
        assert got.provider == change.get("provider", "anthropic")
    else:
        (bad,) = stats.skips.examples
        assert (bad.line, bad.reason) == (3, "bad_field")


def test_an_item_with_null_text_is_refused_and_classes_are_kept(tmp_path: Path) -> None:
    item = {"type": "item", "thread": "main", "kind": "tool_use", "tool_name": "shell",
            "tool_use_id": "c1", "tokens": 10}  # fmt: skip
    null_text = {**item, "text": None}
    assert not REFERENCE.is_valid(null_text)
    result = {"type": "item", "thread": "main", "kind": "tool_result", "tool_use_id": "c1",
              "tokens": 90}  # fmt: skip
    mine = {**item, "tool_use_id": "c2", "tool_name": "fetch_docs", "tool_class": "web"}
    sessions, stats = _read(
        tmp_path,
        [HEADER, {"type": "thread", "thread": "main", "kind": "main"}, null_text, item, result,
         mine, CALL],
    )  # fmt: skip
    assert [(e.line, e.reason) for e in stats.skips.examples] == [(3, "bad_field")]
    assert stats.skips.examples[0].detail.startswith("text: not a string (null)")
    items = sessions[0].calls[0].items
    # shell is Codex's shell tool; the result names no tool and takes its use's class; a
    # harness's own tool keeps the class it was written with
    assert [i.tool_class for i in items] == [ToolClass.SHELL, ToolClass.SHELL, ToolClass.WEB]


def _call(n: int, stamp: Any, **times: Any) -> dict[str, Any]:
    return {**CALL, "id": f"m{n}", "timestamp": stamp, **times}


def test_times_that_cannot_be_true_are_clamped_and_noted(tmp_path: Path) -> None:
    t0 = 1_793_527_200.0  # 2026-11-01T10:00:00Z
    lines = [
        HEADER,
        {"type": "thread", "thread": "main", "kind": "main"},
        _call(1, t0, sent_at=t0 + 3600),  # sent an hour after its response: at the response
        _call(2, t0 + 60, sent_at=t0 + 50, done_at=t0 + 40),  # done before it was recorded
        _call(3, t0 + 30, sent_at=t0 + 20),  # sent before call 2 was done: backwards
        _call(4, t0 + 600),  # fine
    ]
    sessions, stats = _read(tmp_path, lines)
    calls = sessions[0].calls
    assert [(c.timestamp_s - t0, c.request_s - t0, c.done_s) for c in calls] == [
        (0.0, 0.0, None),
        (60.0, 50.0, t0 + 60),
        (60.0, 60.0, None),  # moved up to when call 2 was done
        (600.0, 600.0, None),
    ]
    assert stats.skips.notes == {"time_clamped": 3}
    assert [(e.line, e.detail) for e in stats.skips.examples] == [
        (3, "sent_at 3,600.000 s after the timestamp: taken as it"),
        (4, "done_at 20.000 s before the timestamp: taken as it"),
        (5, "sent 40.000 s before the thread's previous call was done: taken as sent then"),
    ]
    # no gap between calls is negative any more
    ends = [c.done_s if c.done_s is not None else c.timestamp_s for c in calls]
    assert all(later.request_s >= end for later, end in zip(calls[1:], ends, strict=False))


def test_the_checker_refuses_a_schema_that_says_more_than_it_checks() -> None:
    with pytest.raises(SchemaCompileError):
        compile_schema({"type": "string", "format": "date-time"})
    with pytest.raises(SchemaCompileError):
        compile_schema({"type": "object", "additionalProperties": False})
