"""A faster `__init__` for the frozen, slotted dataclasses made once per call or item.

A frozen dataclass's generated `__init__` sets each field through `object.__setattr__`
(its own `__setattr__` refuses), a lookup and a generic call per field: several times what a
plain slotted class pays, and records made by the hundred thousand on a first run (items,
usage, calls, their costs and rows) made it a visible share of a cold `inspect`
(docs/performance.md#frozen-records has the figures). `quick_init` gives such a class an
`__init__` of the same signature that sets each field through its slot's descriptor
(`member.__set__`), which `object.__setattr__` ends up calling anyway: the same object,
made faster. The instance stays frozen: only `__init__` changes.
"""

from __future__ import annotations

import dataclasses
from types import MemberDescriptorType
from typing import Any, TypeVar

T = TypeVar("T")


def quick_init(cls: type[T]) -> type[T]:
    """Replace the dataclass `__init__` of CLS (frozen, slotted, every field a plain
    parameter) with one that sets the slots directly. Anything else it would have to copy
    (a default factory, `__post_init__`, keyword-only or non-init fields) is refused."""
    params = dataclasses.fields(cls)  # type: ignore[arg-type]
    if (
        not cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
        or "__slots__" not in cls.__dict__
        or hasattr(cls, "__post_init__")
        or any(
            not f.init or f.kw_only or f.default_factory is not dataclasses.MISSING for f in params
        )
    ):
        raise TypeError(f"{cls.__name__}: quick_init takes plain frozen slotted dataclasses")
    names = [f.name for f in params]
    slots = [next(k.__dict__[n] for k in cls.__mro__ if n in k.__dict__) for n in names]
    if not all(isinstance(s, MemberDescriptorType) for s in slots):
        raise TypeError(f"{cls.__name__}: a field that is not a slot")
    setters = {f"_set_{n}": s.__set__ for n, s in zip(names, slots, strict=True)}
    defaults = {f"_default_{f.name}": f.default for f in params}
    signature = ", ".join(
        n if f.default is dataclasses.MISSING else f"{n}=_default_{n}"
        for n, f in zip(names, params, strict=True)
    )
    body = "".join(f"        _set_{n}(self, {n})\n" for n in names) or "        pass\n"
    source = (
        f"def make({', '.join([*setters, *defaults])}):\n"
        f"    def __init__(self, {signature}) -> None:\n{body}"
        "    return __init__\n"
    )
    namespace: dict[str, Any] = {}
    exec(source, {}, namespace)  # the dataclass module makes its __init__ the same way
    init = namespace["make"](*setters.values(), *defaults.values())
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__doc__ = cls.__init__.__doc__
    cls.__init__ = init  # type: ignore[method-assign]
    return cls
