"""The cache codec (mcsim.ingest.codec) and the cache keys: both are read from the records'
own fields, so a field added to a record is kept, checked and in the key without a schema to
keep in step."""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any, NamedTuple

import orjson
import pytest

from mcsim.accounting.prices import default_table
from mcsim.ingest.codec import Codec
from mcsim.model import ItemKind
from mcsim.replay import result_cache
from mcsim.replay.scenario import Layer, Scenario


class Part(NamedTuple):
    kind: ItemKind
    tokens: int
    tool: str | None = None


@dataclasses.dataclass(frozen=True)
class Whole:
    name: str
    when: float
    parts: tuple[Part, ...]
    counts: Counter[str]
    tags: tuple[str, ...]
    last: Part | None = None


WHOLES = [
    Whole("a", 1.5, (Part(ItemKind.USER_TEXT, 3), Part(ItemKind.TOOL_RESULT, 4, "Read")),
          Counter(x=2), ("t",), Part(ItemKind.USER_TEXT, 9)),
    Whole("b", 2.5, (), Counter(), (), None),
]  # fmt: skip


def test_records_come_back_as_they_were() -> None:
    codec = Codec(Whole)
    tables = _json(codec.encode(WHOLES))
    assert codec.layout() == [
        ("", ["name", "when", "parts", "counts", "tags", "last"]),
        ("parts", ["kind", "tokens", "tool"]),
        ("last", ["kind", "tokens", "tool"]),
    ]
    assert tables[0][2] == [2, 0]  # how many parts each whole holds
    assert tables[0][5] == [1, 0]  # whether it holds a last part
    assert codec.decode(tables) == WHOLES


def test_a_field_added_to_a_record_is_kept() -> None:
    # A new field is a column of its own at once: nothing else to change.
    Grown = dataclasses.make_dataclass("Grown", [("extra", int, 0)], bases=(Whole,), frozen=True)
    codec = Codec(Grown)
    assert codec.layout()[0][1][-1] == "extra"
    grown = [Grown(**_fields(w), extra=i + 7) for i, w in enumerate(WHOLES)]
    assert [g.extra for g in codec.decode(_json(codec.encode(grown)))] == [7, 8]


def _json(tables: Any) -> Any:
    """As an entry holds them: through JSON."""
    return orjson.loads(orjson.dumps(tables))


def _fields(record: Any) -> dict[str, Any]:
    return {f.name: getattr(record, f.name) for f in dataclasses.fields(record)}


@pytest.mark.parametrize(
    ("table", "column", "value"),
    [
        ("parts", "kind", "no such kind"),
        ("parts", "tokens", "3"),
        ("parts", "tokens", 2**60),  # past what a float holds exactly
        ("", "when", 1),  # a float field as an integer
        ("", "parts", 5),  # more parts than the table holds
        ("", "last", 2),  # two where one at most is
        ("", "counts", {"x": "2"}),
        ("", "tags", [1]),
    ],
)
def test_a_value_of_the_wrong_shape_is_refused(table: str, column: str, value: Any) -> None:
    codec = Codec(Whole, bounded=True)
    tables = _json(codec.encode(WHOLES))
    t, c = codec.at(table, column)
    tables[t][c][0] = value
    with pytest.raises((ValueError, TypeError, KeyError)):
        codec.decode(tables)


def test_a_number_that_would_not_come_back_is_not_written() -> None:
    for when in (float("nan"), float("inf")):
        with pytest.raises(ValueError):
            Codec(Whole, bounded=True).encode([dataclasses.replace(WHOLES[0], when=when)])


def test_every_field_of_a_scenario_is_in_the_keys() -> None:
    # A field added to Scenario changes the results' key and the decisions' key (unless it
    # is one decisions do not depend on: the name and the TTL) without a line of either.
    Grown = dataclasses.make_dataclass("Grown", [("extra", int, 0)], bases=(Scenario,), frozen=True)
    base = Grown("p", (Layer("none", ()),))
    other = dataclasses.replace(base, extra=1)
    assert {f.name for f in dataclasses.fields(Scenario)} <= {k for k, _ in base.fields_key}
    assert base.decision_key != other.decision_key
    prices = default_table()
    assert result_cache.setup_key((base,), prices, True) != result_cache.setup_key(
        (other,), prices, True
    )
    for name in ("name", "ttl"):
        assert name not in dict(base.decision_key)
        changed = dataclasses.replace(base, **{name: "1h" if name == "ttl" else "q"})
        assert changed.decision_key == base.decision_key
        assert result_cache.setup_key((changed,), prices, True) != result_cache.setup_key(
            (base,), prices, True
        )
