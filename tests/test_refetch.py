"""Re-fetch risk: a cleared result whose file or command the agent used again is a hazard."""

from __future__ import annotations

import pytest
from simthreads import result, text, thread, use

from mcsim.accounting.prices import default_table
from mcsim.replay.refetch import resource_of
from mcsim.replay.scenario import Layer, Scenario
from mcsim.replay.simulate import simulate_thread

KEEP_1 = Scenario(
    "k",
    (Layer("keep_last_n", (("n", 1), ("min_messages", 0), ("polling", 1), ("keep_first", False))),),
)


def steps(edit_again: bool) -> list:
    s = [
        (0.0, [text(1_000)]),
        (10.0, [use("file:a"), result(5_000, "Read", resource="file:a")]),
        (10.0, [use("file:b"), result(5_000, "Read", resource="file:b")]),
        (10.0, [use("file:c"), result(5_000, "Read", resource="file:c")]),
    ]
    if edit_again:
        s.append((10.0, [use("file:a", "Edit"), result(100, "Edit", resource="file:a")]))
    return s


def test_a_file_read_cleared_then_edited_is_one_hazard() -> None:
    sim = simulate_thread(thread(steps(edit_again=True)), KEEP_1, default_table())
    # keep_last_n n=1 clears a (before call 2), b (call 3), c (call 4); a is edited at call 4.
    assert sim.cleared_results == 3
    (hazard,) = sim.hazards
    assert (hazard.resource, hazard.cleared_before_call, hazard.reused_at_call) == ("file:a", 2, 4)
    assert hazard.tokens == 5_000
    # Re-writing the 5,000 tokens at $3.75/M plus reading the 11,324-token prompt at $0.30/M
    # (26,300 recorded - 3 x 4,992 cleared).
    assert sim.prompt_tokens[4] == 11_324
    assert hazard.refetch_cost_usd == pytest.approx((5_000 * 3.75 + 11_324 * 0.30) / 1e6)


def test_never_touched_again_is_no_hazard() -> None:
    sim = simulate_thread(thread(steps(edit_again=False)), KEEP_1, default_table())
    assert sim.cleared_results == 2
    assert sim.hazards == ()


@pytest.mark.parametrize(
    ("tool", "args", "key"),
    [
        ("Read", '{"file_path": "/src/a.py", "limit": 40}', "file:/src/a.py"),
        ("Edit", '{"file_path": "/src/a.py", "old_string": "x"}', "file:/src/a.py"),
        ("Bash", '{"command": " pytest -q "}', "cmd:pytest -q"),
        ("Grep", '{"pattern": "cache", "path": "src"}', "grep:cache|src"),
        ("WebFetch", '{"url": "https://x.org"}', "url:https://x.org"),
        ("mcp__gh__issue", '{"n": 1}', None),
        ("Read", "not json", None),
    ],
)
def test_resource_keys(tool: str, args: str, key: str | None) -> None:
    assert resource_of(tool, args) == key
