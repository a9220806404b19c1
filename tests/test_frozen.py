"""quick_init: the same objects as the dataclass `__init__` it replaces, still frozen."""

from __future__ import annotations

import dataclasses
import inspect
import pickle
from typing import Any

import pytest

from mcsim.accounting.breaks import CacheBreak, CallObservation
from mcsim.accounting.prices import CallCost
from mcsim.accounting.recorded import CallRecord
from mcsim.frozen import quick_init
from mcsim.model import Call, Compaction, Item, ItemKind, SourceRef, Usage
from mcsim.replay.simulate import Hazard, SimCall


@dataclasses.dataclass(frozen=True, slots=True)
class _Plain:
    a: int
    b: str | None = None
    c: tuple[int, ...] = ()


_Quick: Any = quick_init(
    dataclasses.make_dataclass(
        "_Quick", [("a", int), ("b", str | None, None), ("c", tuple[int, ...], ())],
        frozen=True, slots=True,
    )
)  # fmt: skip


@pytest.mark.parametrize(
    "cls",
    [Item, Usage, Compaction, SourceRef, Call, CallCost, CallObservation, CacheBreak,
     CallRecord, SimCall, Hazard],
)  # fmt: skip
def test_signature_is_the_dataclass_one(cls: type) -> None:
    expected = [
        (f.name, inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default)
        for f in dataclasses.fields(cls)
    ]
    got = [(p.name, p.default) for p in inspect.signature(cls).parameters.values()]
    assert got == expected


def test_same_objects_as_the_dataclass_init() -> None:
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
        ((1,), {}), ((1, "x"), {}), ((2,), {"c": (3, 4)}), ((), {"a": 5})
    ]  # fmt: skip
    for args, kwargs in calls:
        plain, quick = _Plain(*args, **kwargs), _Quick(*args, **kwargs)
        assert dataclasses.astuple(quick) == dataclasses.astuple(plain)
        assert repr(quick) == repr(plain).replace("_Plain", "_Quick")
    item = Item(ItemKind.TOOL_USE, 12, "text", tool_name="Read", is_error=True)
    assert item == Item(
        kind=ItemKind.TOOL_USE, chars=12, text="text", tool_name="Read", is_error=True
    )
    assert (item.tool_use_id, item.tokens, item.tool_class) == (None, None, None)
    assert pickle.loads(pickle.dumps(item)) == item
    assert dataclasses.replace(item, chars=3).chars == 3
    with pytest.raises(TypeError):
        Item(ItemKind.TOOL_USE)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Item(ItemKind.TOOL_USE, 1, nope=2)  # type: ignore[call-arg]


def test_still_frozen() -> None:
    usage = Usage(1, 2, 3, 4, 5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        usage.input_tokens = 9  # type: ignore[misc]


def test_refuses_what_it_cannot_copy() -> None:
    @dataclasses.dataclass(frozen=True)
    class NoSlots:
        a: int

    @dataclasses.dataclass(slots=True)
    class NotFrozen:
        a: int

    @dataclasses.dataclass(frozen=True, slots=True)
    class Factory:
        a: list[int] = dataclasses.field(default_factory=list)

    @dataclasses.dataclass(frozen=True, slots=True)
    class PostInit:
        a: int

        def __post_init__(self) -> None:
            pass

    for cls in (NoSlots, NotFrozen, Factory, PostInit):
        with pytest.raises(TypeError):
            quick_init(cls)
