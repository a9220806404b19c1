"""Records as JSON tables, their layout read from the records' own fields: the one codec of
the cache folder's entries (mcsim.ingest.disk_cache).

`Codec(Session)` walks the fields of a record type (a dataclass or a NamedTuple) in their
order, with their type hints, and lays a list of such records out as tables of columns: one
table per record type in the tree, the root first, then each child's table depth first. A
field holding records (`tuple[Thread, ...]`, `Compaction | None`) is a column of how many of
its table's next rows are this row's (0 or 1 for an optional one); a field holding one record
(`usage: Usage`) has no column, its table has one row per row. A field added to a record is a
column of its entries at once: there is no schema to keep in step with the records.

Reading back checks every column (each value's type, each enum value known, the columns of
one length; with `bounded`, every number within what a float holds exactly), a few C-level
passes per table over its columns joined, then makes the records a column at a time; a
table of an unexpected shape raises ValueError, TypeError or KeyError, which the caches count
as damage and rebuild. Columns make reading fast and thorough at once: a value is looked at by
C code, not by a Python loop of ours, but for the few short lists a value may hold (a policy's
figures, a session's runs of rows).
"""

from __future__ import annotations

import dataclasses
import math
import types
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from enum import Enum
from itertools import accumulate, chain, repeat
from operator import attrgetter
from typing import Any, Generic, TypeVar, Union, get_args, get_origin, get_type_hints

from mcsim.model import counter_of

R = TypeVar("R")
Tables = list[list[list[Any]]]

# Past this a float no longer holds every integer: no figure mcsim keeps comes near (a call
# is 1e8 tokens at most), and sums of such numbers would leave the tables' 64 bits
LARGEST = 2**53
_SCALARS: dict[Any, frozenset[type]] = {
    int: frozenset({int}),
    float: frozenset({float}),
    str: frozenset({str}),
    bool: frozenset({bool}),
}
_NONE = frozenset({type(None)})


def is_record(hint: Any) -> bool:
    return isinstance(hint, type) and (
        dataclasses.is_dataclass(hint) or (issubclass(hint, tuple) and hasattr(hint, "_fields"))
    )


def record_fields(cls: type) -> list[str]:
    """The fields a record is made from, in the order its class takes them."""
    if dataclasses.is_dataclass(cls):
        return [f.name for f in dataclasses.fields(cls) if f.init]
    return list(cls._fields)  # type: ignore[attr-defined]


def within(numbers: Sequence[Any] | Any) -> None:
    """Refuse a number no replay could have made (`LARGEST`): min and max, in C. (No NaN can
    be among them, which would hide others from min and max: JSON has none.)"""
    if numbers and (max(numbers) > LARGEST or min(numbers) < -LARGEST):
        raise ValueError("a number no replay reaches")


def _list_of(kind: type, make: type = list) -> Callable[[Any], Any]:
    """A reader of a list of KIND (as a `make`: a list or a tuple), each value's type checked."""
    allowed = _SCALARS[kind]

    def read(values: Any) -> Any:
        if type(values) is not list or not set(map(type, values)) <= allowed:
            raise TypeError(f"not a list of {kind.__name__}")
        return values if make is list else make(values)

    return read


strings: Callable[[Any], list[str]] = _list_of(str)


def counter(values: Any) -> Counter[str]:
    if type(values) is not dict:
        raise TypeError("not a count by reason")
    if values:  # (most are empty: a session's breaks by cause, its unsupported layers)
        if not set(map(type, values.values())) <= _SCALARS[int]:
            raise TypeError("not a count by reason")
        within(values.values())
    return counter_of(values)


_NUMBERS = frozenset({int, float})


def _figures(values: Any) -> list[dict[str, float]]:
    if type(values) is not list:
        raise TypeError("not a list of figures")
    for figure in values:
        if type(figure) is not dict or not set(map(type, figure.values())) <= _NUMBERS:
            raise TypeError("not figures")
        within(figure.values())
    return values


def _records(
    spec: tuple[type, ...], origin: type[Sequence[Any]]
) -> Callable[[Any], Sequence[tuple[Any, ...]]]:
    """A reader of short records (`list[tuple[str, int]]`, `tuple[tuple[str, int], ...]`),
    kept as their columns (`_as_columns`): each column checked in one pass, the records
    given back in the field's own sequence type (ORIGIN)."""
    allowed = [_SCALARS[t] for t in spec]

    def read(columns: Any) -> Sequence[tuple[Any, ...]]:
        if type(columns) is not list or len(columns) != len(spec):
            raise TypeError("not the columns of records")
        for column, types_ in zip(columns, allowed, strict=True):
            if type(column) is not list or not set(map(type, column)) <= types_:
                raise TypeError("a value of an unexpected type")
            if int in types_:
                within(column)
        return origin(zip(*columns, strict=True))  # type: ignore[call-arg]

    return read


def _as_columns(records: list[tuple[Any, ...]], width: int) -> list[list[Any]]:
    return [list(c) for c in zip(*records, strict=True)] or [[] for _ in range(width)]


@dataclasses.dataclass
class _Field:
    """How one field is kept: `allowed` types of its column (or an enum's members by value),
    `read` what makes each value back from its column, or `child`, the codec of the records
    it holds (`many`: a sequence; `optional`: one or None; neither: exactly one)."""

    name: str
    allowed: frozenset[type] | dict[Any, Any] = frozenset()
    number: bool = False  # bounded by LARGEST, finite when written
    read: Callable[[Any], Any] | None = None
    child: Codec[Any] | None = None
    many: type | None = None
    optional: bool = False
    write: Callable[[Any], Any] | None = None  # what a value is kept as, if not as it is


def _field(name: str, hint: Any, owner: str, options: _Options) -> _Field:
    origin, args = get_origin(hint), get_args(hint)
    if f"{owner}.{name}" in options.choices:
        return _Field(name, {v: v for v in options.choices[f"{owner}.{name}"]})
    if hint is float and f"{owner}.{name}" in options.any_number:
        return _Field(name, frozenset({float, int}), number=True)
    if hint in _SCALARS:
        return _Field(name, _SCALARS[hint], number=hint in (int, float))
    if isinstance(hint, type) and issubclass(hint, Enum):
        return _Field(name, {m.value: m for m in hint})
    if is_record(hint):
        return _Field(name, child=Codec(hint, options))
    if origin in (Union, types.UnionType) and len(args) == 2 and type(None) in args:
        (inner,) = (a for a in args if a is not type(None))
        if is_record(inner):
            return _Field(name, _SCALARS[int], child=Codec(inner, options), optional=True)
        one = _field(name, inner, owner, options)
        if isinstance(one.allowed, dict):
            one.allowed = {**one.allowed, None: None}
            return one
        if one.read is None:
            one.allowed = one.allowed | _NONE
            return one
    if origin in (tuple, list) and args and (origin is list or args[-1] is Ellipsis):
        (item,) = args[:1]
        if is_record(item):
            return _Field(name, _SCALARS[int], child=Codec(item, options), many=origin)
        if item in _SCALARS:
            return _Field(name, frozenset({list}), read=_list_of(item, origin))
        if get_origin(item) is tuple and all(a in _SCALARS for a in get_args(item)):
            width = len(get_args(item))
            return _Field(
                name,
                frozenset({list}),
                read=_records(get_args(item), origin),
                write=lambda records: _as_columns(records, width),
            )
        if get_origin(item) is dict and get_args(item) == (str, float):
            return _Field(name, frozenset({list}), read=_figures)
    if origin in (Counter, dict) and args in ((str,), (str, int)):
        return _Field(name, frozenset({dict}), read=counter)
    raise TypeError(f"{owner}.{name}: no column for {hint!r}")


@dataclasses.dataclass(frozen=True)
class _Options:
    leave: frozenset[str]
    at_least_one: frozenset[str]
    choices: dict[str, Collection[Any]]
    any_number: frozenset[str]
    bounded: bool


class Codec(Generic[R]):
    """Records of one type as JSON tables (see the module's docstring). Besides what the
    types say, each option names fields as `Class.field`: `leave`, fields not kept (they
    read back as their defaults); `at_least_one`, fields of records that are never empty (a
    thread has calls: an entry where one is, is damaged); `choices`, the only values a field
    takes (a recorded TTL); `any_number`, float fields that may hold a whole number as it was
    given (a time a loader read), kept as it is. `bounded`: every number is checked to be
    within `LARGEST` (and finite, before it is written), for records whose figures are summed
    into tables (a replay's results); the rest cost a check less."""

    def __init__(
        self,
        cls: type[R],
        options: _Options | None = None,
        *,
        leave: Collection[str] = (),
        at_least_one: Collection[str] = (),
        choices: dict[str, Collection[Any]] | None = None,
        any_number: Collection[str] = (),
        bounded: bool = False,
    ) -> None:
        if options is None:
            options = _Options(
                frozenset(leave),
                frozenset(at_least_one),
                choices or {},
                frozenset(any_number),
                bounded,
            )
        self.cls = cls
        owner = cls.__name__
        hints = get_type_hints(cls)
        names = [n for n in record_fields(cls) if f"{owner}.{n}" not in options.leave]
        self.fields = [_field(n, hints[n], owner, options) for n in names]
        self.names = names
        self.by_position = len(names) == len(record_fields(cls))
        self.is_tuple = issubclass(cls, tuple)
        self._values: Callable[[R], tuple[Any, ...]] = (
            attrgetter(*names) if len(names) > 1 else lambda r: (getattr(r, names[0]),)
        )
        # How each field is read back, worked out once: a table's checks are then a few
        # C-level passes over its columns joined (tables are many and small: a result
        # cache entry holds a few sessions), not a Python step per column.
        stored = [f for f in self.fields if f.child is None or f.many or f.optional]
        self._width = len(stored)
        place = {f.name: i for i, f in enumerate(stored)}
        typed: dict[frozenset[type], list[int]] = {}
        for f in stored:
            if isinstance(f.allowed, frozenset):
                typed.setdefault(f.allowed, []).append(place[f.name])
        self._typed = list(typed.items())
        numbers = [f for f in stored if f.number and options.bounded]
        self._numbers = [place[f.name] for f in numbers if type(None) not in f.allowed]
        self._optional_numbers = [place[f.name] for f in numbers if type(None) in f.allowed]
        self._mapped = [
            (place[f.name], f.allowed.__getitem__ if isinstance(f.allowed, dict) else f.read)
            for f in stored
            if isinstance(f.allowed, dict) or f.read is not None
        ]
        self._place_of = {f"{owner}.{f.name}": place[f.name] for f in stored if f.child is None}
        self._flat = all(f.child is None for f in self.fields)
        self._plan = [
            (f, place.get(f.name), int(f"{owner}.{f.name}" in options.at_least_one))
            for f in self.fields
        ]
        # Where the floats are among the record's values, to check before writing: JSON has
        # no NaN or infinity (orjson writes them as null, which would not read back)
        self._write_numbers = [
            i
            for i, f in enumerate(self.fields)
            if f.number and options.bounded and float in f.allowed
        ]
        self._write_figures = [
            i for i, f in enumerate(self.fields) if f.read is _figures and options.bounded
        ]

    def layout(self, path: str = "") -> list[tuple[str, list[str]]]:
        """Each table's path (the fields leading to it from the root: "", "threads",
        "threads.calls") and its columns' names, in the order `encode` writes them."""
        columns = [f.name for f in self.fields if f.child is None or f.many or f.optional]
        tables = [(path, columns)]
        for f in self.fields:
            if f.child is not None:
                tables += f.child.layout(f"{path}.{f.name}".lstrip("."))
        return tables

    def at(self, table: str, column: str) -> tuple[int, int]:
        """Where a column is among `encode`'s tables: (table, column)."""
        for i, (path, names) in enumerate(self.layout()):
            if path == table:
                return i, names.index(column)
        raise KeyError(table)

    # --- writing ---------------------------------------------------------------------------

    def encode(self, records: Sequence[R]) -> Tables:
        """The records' tables, this codec's first; with `bounded`, ValueError if a float
        would not come back (not finite). (A number past `LARGEST` is written, and refused
        when read back: none is ever made.)"""
        rows = records if self.is_tuple and self.by_position else map(self._values, records)
        columns = [list(c) for c in zip(*rows, strict=True)] or [[] for _ in self.fields]
        if self._write_numbers or self._write_figures:
            numbers = list(chain.from_iterable(columns[i] for i in self._write_numbers))
            numbers += (
                v for i in self._write_figures for fs in columns[i] for f in fs for v in f.values()
            )
            if None in numbers:
                numbers = [v for v in numbers if v is not None]
            if not all(map(math.isfinite, numbers)):
                raise ValueError("a number that is not finite")
        children: Tables = []
        kept = []
        for f, column in zip(self.fields, columns, strict=True):
            if f.child is None:
                kept.append(column if f.write is None else list(map(f.write, column)))
            elif f.many is not None:
                children += f.child.encode(list(chain.from_iterable(column)))
                kept.append(list(map(len, column)))
            elif f.optional:
                children += f.child.encode([r for r in column if r is not None])
                kept.append([int(r is not None) for r in column])
            else:
                children += f.child.encode(column)
        return [kept, *children]

    # --- reading ---------------------------------------------------------------------------

    def decode(
        self, tables: Tables, convert: dict[str, Callable[[Any], Any]] | None = None
    ) -> list[R]:
        """The records back from `encode`'s tables, every value checked; `convert` maps the
        column of each field named `Class.field` once checked (a file's name as this run
        spells it)."""
        records, rest = self._decode(tables, 0, convert or {})
        if rest != len(tables):
            raise ValueError("tables of another layout")
        return records

    def _decode(
        self, tables: Tables, at: int, convert: dict[str, Callable[[Any], Any]]
    ) -> tuple[list[R], int]:
        if type(tables) is not list or at >= len(tables):
            raise ValueError("tables of another layout")
        table = tables[at]
        if type(table) is not list or len(table) != self._width:
            raise ValueError("not a table")
        if table and (set(map(type, table)) != {list} or len(set(map(len, table))) > 1):
            raise ValueError("columns of different lengths")
        pick = table.__getitem__
        for allowed, places in self._typed:
            if not set(map(type, chain.from_iterable(map(pick, places)))) <= allowed:
                raise TypeError("a value of an unexpected type")
        if self._numbers:
            within(list(chain.from_iterable(map(pick, self._numbers))))
        for i in self._optional_numbers:
            within([v for v in table[i] if v is not None])
        columns = table  # (the parsed JSON, made into records: not read again)
        for i, read in self._mapped:
            columns[i] = list(map(read, columns[i]))  # type: ignore[arg-type]
        for key, fn in convert.items():
            where = self._place_of.get(key)
            if where is not None:
                columns[where] = fn(columns[where])
        at += 1
        if self._flat:  # no field holds records: the columns are the fields
            out = columns
        else:
            n = len(table[0]) if table else None
            out = []
            for f, place, least in self._plan:
                if place is None:  # one record each: its table has a row for each row
                    assert f.child is not None
                    records, at = f.child._decode(tables, at, convert)
                    if n is not None and len(records) != n:
                        raise ValueError("a table of another length")
                    n = len(records)
                    out.append(records)
                elif f.child is not None:
                    records, at = f.child._decode(tables, at, convert)
                    out.append(_grouped(records, columns[place], f, least))
                else:
                    out.append(columns[place])
        if self.is_tuple:  # each made in one C call (`_make` runs Python code)
            rows = zip(*out, strict=True)
            return list(map(tuple.__new__, repeat(self.cls), rows)), at  # type: ignore[arg-type]
        if self.by_position:
            return list(map(self.cls, *out)), at
        rows = zip(*out, strict=True)
        return [self.cls(**dict(zip(self.names, row, strict=True))) for row in rows], at


def _grouped(records: list[Any], sizes: list[int], f: _Field, least: int) -> list[Any]:
    """`records` cut into consecutive groups of the given sizes."""
    if (sizes and min(sizes) < least) or sum(sizes) != len(records):
        raise ValueError("groups that do not add up")
    if not records:  # none at all (a call's items at Detail.CALLS, a report's examples)
        if f.many is list:
            return [[] for _ in sizes]
        return [None if f.optional else ()] * len(sizes)
    if f.optional:
        if sizes and max(sizes) > 1:
            raise ValueError("more than one record where one at most is")
        found = iter(records)
        return [next(found) if size else None for size in sizes]
    make = f.many or tuple
    return [make(records[end - n : end]) for n, end in zip(sizes, accumulate(sizes), strict=True)]
