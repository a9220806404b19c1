"""The calls a run has counted (ingest/seen.py): the same answers as a dict, whether the calls
sit in its dict or in sorted runs, and the cross-project de-duplication unchanged by it."""

from __future__ import annotations

import random
from array import array
from pathlib import Path

import pytest
from test_odd_logs import (
    test_a_call_copied_into_another_project_with_other_counts_is_noted as copied_call_is_noted,
)

from mcsim.ingest import seen as seen_module
from mcsim.ingest.seen import SeenCalls


@pytest.mark.parametrize("buffer", [1, 3, 64, seen_module.BUFFER])
def test_answers_as_a_dict_does(monkeypatch: pytest.MonkeyPatch, buffer: int) -> None:
    monkeypatch.setattr(seen_module, "BUFFER", buffer)
    rng = random.Random(7)
    seen = SeenCalls()
    expected: dict[int, int] = {}
    for _ in range(40):  # units of 0 to 30 calls
        digests = [rng.getrandbits(64) for _ in range(rng.randrange(31))]
        counts = [rng.randrange(-(2**63), 2**63) for _ in digests]
        again = rng.sample(sorted(expected), min(5, len(expected)))
        asked = array("Q", digests + again)
        assert seen.find(asked) == {d: expected[d] for d in again}
        seen.add(array("Q", digests), array("q", counts))
        expected.update(zip(digests, counts, strict=True))
    assert seen.find(array("Q", [0, 2**64 - 1, *expected])) == expected
    assert seen.find(array("Q")) == {}
    if buffer < 64:
        assert len(seen._runs) <= 12  # merged: about log2 of the calls, not one per flush


def test_the_runs_find_copies_across_projects(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(seen_module, "BUFFER", 1)  # every call leaves the dict at once
    copied_call_is_noted(tmp_path)
