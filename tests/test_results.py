"""A policy's totals merge field by field by hand (`PolicyTotals.merge`, kept so for speed: the
driver merges every session's totals): every field must be in it, so that a field added to
the record is summed over a run rather than silently left at the first session's value."""

from __future__ import annotations

from collections import Counter
from dataclasses import fields
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from mcsim.model import Tokens, add_counts, counter_of
from mcsim.replay.results import PolicyTotals

# Merged otherwise than summed: the name is the merged record's own, the largest prompt is the
# largest of the two, and the policies' figures keep each largest (results.keep_largest).
NOT_SUMMED = {"name", "max_prompt_tokens", "figures"}


def every_field_set(step: int) -> PolicyTotals:
    """Totals whose every field holds a value that is not its default, derived from `step`."""
    values: dict[str, Any] = {}
    for f in fields(PolicyTotals):
        if not f.init or f.name == "name":
            continue
        if f.name == "tokens":
            values[f.name] = Tokens(step, 2 * step, 3 * step, 4 * step, 5 * step)
        elif f.name == "figures":
            values[f.name] = [{"x": float(step)}]
        elif f.type in ("int", int):
            values[f.name] = step
        elif f.type in ("float", float):
            values[f.name] = step / 4
        elif "Counter" in str(f.type):
            values[f.name] = Counter({"a": step})
        else:
            raise AssertionError(f"PolicyTotals.{f.name}: a type this test cannot fill ({f.type})")
    return PolicyTotals("p", **values)


def test_merge_takes_every_field() -> None:
    run = PolicyTotals("p")
    run.merge(every_field_set(1))
    run.merge(every_field_set(2))
    one, two = every_field_set(1), every_field_set(2)
    for f in fields(PolicyTotals):
        if not f.init or f.name in NOT_SUMMED:
            continue
        a, b, merged = getattr(one, f.name), getattr(two, f.name), getattr(run, f.name)
        assert merged == a + b, f.name
    assert run.max_prompt_tokens == 2
    assert run.figures == [{"x": 2.0}]


@given(
    st.dictionaries(st.sampled_from("abcd"), st.integers(0, 10**9)),
    st.dictionaries(st.sampled_from("abcd"), st.integers(0, 10**9)),
)
def test_counts_add_as_counter_update_does(mine: dict[str, int], more: dict[str, int]) -> None:
    """`add_counts` and `counter_of` (the merge's and the cache's fast paths) give what
    `Counter.update` and `Counter(...)` give: the same keys (zeros kept), counts and class."""
    expected = Counter(mine)
    expected.update(more)
    made = counter_of(mine)
    assert type(made) is Counter and made == Counter(mine) and made is not mine
    add_counts(made, more)
    assert made == expected and dict(made) == dict(expected) and list(made) == list(expected)
