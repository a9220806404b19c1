"""The replay core: mechanisms with numbers worked out by hand, and properties on generated
threads (hypothesis)."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest
from conftest import REPO
from hypothesis import given, settings
from hypothesis import strategies as st
from simthreads import INPUT, result, text, thinking, thread, tool_call, use

from mcsim.accounting.prices import default_table, price_usage
from mcsim.ingest.loaders.tool_classes import EVERY_HARNESS, tool_class
from mcsim.model import ItemKind
from mcsim.replay.policies import LiveSegment, class_key, is_compactable
from mcsim.replay.scenario import (
    CLAUDE_CODE_LEFT_OUT,
    DEFAULT_COMPACTABLE,
    Layer,
    Scenario,
    baseline,
    load_policy_file,
)
from mcsim.replay.simulate import PreparedThread, SimThread, simulate_thread

PRICES = default_table()
ANTHROPIC_API = REPO / "policies" / "anthropic-api.yaml"


def scenario(kind: str, ttl: str = "recorded", **values: object) -> Scenario:
    from mcsim.replay.policies import REGISTRY

    params = tuple((p.name, values.get(p.name, p.default)) for p in REGISTRY[kind].params)
    return Scenario(kind, (Layer(kind, params),), ttl)


def totals(sim: SimThread) -> tuple[int, int, float]:
    reads = sum(c.usage.cache_read_tokens for c in sim.calls)
    writes = sum(c.usage.cache_write_tokens for c in sim.calls)
    cost = sum(c.cost_usd for c in sim.calls if c.cost_usd is not None)
    return reads, writes, cost


# Ten calls 10 s apart: a 1,000-token prompt after a 10,000-token head, then a 5,000-token
# Read result before each later call. Prompt k = 11,000 + 5,000 k. Sonnet 4.5, 5-minute TTL:
# $3 input, $3.75 write, $0.30 read, $15 output per million; 100 output tokens a call.
BURST = [(0.0, [text(1_000)])] + [(10.0, [result(5_000)]) for _ in range(9)]


def test_every_call_masking_costs_more_and_cache_edits_cost_less() -> None:
    t = thread(BURST)
    # No pruning: reads sum 11,000 + ... + 51,000 = 279,000; writes 10,997 + 9 x 4,997.
    assert totals(simulate_thread(t, baseline(), PRICES)) == (
        279_000,
        55_970,
        pytest.approx(0.3086775),
    )
    # keep_last_n n=2 on every call: from call 3 one more result (5,000 - 8 placeholder) is
    # masked each call and the prefix breaks at r1. The only entry that ends before it is the
    # first call's (head + text, 11,000); every later entry holds r1 unmasked. It is alive
    # (read 10 s later, at call 1) and within the cache's 20-block lookback of every call
    # (a result and its tool call are 2 blocks: call k ends at block 1 + 2k, 19 at call 9), so
    # each masked call reads 11,000 rather than the 10,000-token head (before the lookback
    # was modelled: 10,000, 1,000 more written a call): reads 0 + 11,000 + 16,000 + 7 x
    # 11,000 = 104,000; writes 10,997 + 2 x 4,997 + (21,008..21,056 step 8) - 7 x 11,003 =
    # 91,194; cost (90 + 91,194 x 3.75 + 104,000 x 0.30 + 15,000) / 1e6 = 0.3882675.
    masked = simulate_thread(t, scenario("keep_last_n", n=2), PRICES)
    assert totals(masked) == (104_000, 91_194, pytest.approx(0.3882675))
    # cached_microcompact trigger 3 keep 1 (a rolling window, docs/domain.md#cached-microcompact):
    # at call 4 four results are registered (> 3), so r1..r3 (15,000 tokens) are deleted; from
    # then on each call's new result pushes the previous one out (r4 at call 5, ..., r8 at
    # call 9). Each edit takes effect on the call that carries it: its prompt is 16,000 (head +
    # text + the newest result), its read is the cached 26,000 (call 4) or 16,000 (later) less
    # the deleted, i.e. 11,000, and it writes the new result as without pruning:
    # reads 0 + 11,000 + 16,000 + 21,000 + 6 x 11,000 = 114,000; writes 10,997 + 9 x 4,997;
    # cost (30 x 3 + 55,970 x 3.75 + 114,000 x 0.30 + 1,000 x 15) / 1e6 = 0.2591775.
    edits = simulate_thread(
        t, scenario("cached_microcompact", trigger_threshold=3, keep_recent=1), PRICES
    )
    assert totals(edits) == (114_000, 55_970, pytest.approx(0.2591775))
    assert [c.prompt_tokens for c in edits.calls][3:] == [26_000] + [16_000] * 6
    assert [c.newly_cleared_tokens for c in edits.calls] == [0] * 4 + [15_000] + [5_000] * 5
    assert [c.cache_edit for c in edits.calls] == [False] * 4 + [True] * 6
    # Read 21,000 -> 11,000 at call 4 is what the edit deleted: not a break (Claude Code's
    # detector is told of its cache deletions), counted apart.
    assert edits.breaks == ()
    assert [(d.call_index, d.drop_tokens, d.cause.value) for d in edits.edit_drops] == [
        (4, 10_000, "cache_edit")
    ]


def test_time_based_microcompact_saves_after_two_hour_gaps() -> None:
    steps = [(0.0, [text(1_000)])]
    for k in range(1, 10):
        steps.append((7_200.0 if k % 3 == 0 else 10.0, [result(5_000)]))
    t = thread(steps)
    # No pruning: calls 3, 6, 9 come after the 5-minute cache expired and read nothing.
    base = simulate_thread(t, baseline(), PRICES)
    assert totals(base) == (171_000, 163_970, pytest.approx(0.6812775))
    assert [(b.call_index, b.cause.value) for b in base.breaks] == [
        (3, "ttl_expired"),
        (6, "ttl_expired"),
        (9, "ttl_expired"),
    ]
    # keep_recent 1: each 2-hour gap clears all results but the newest (5,000 - 9 placeholder
    # each), so the cold re-write after the gap is ~16,000 tokens instead of 26,000-56,000.
    pruned = simulate_thread(t, scenario("time_based_microcompact", keep_recent=1), PRICES)
    assert [c.prompt_tokens for c in pruned.calls][3:] == [
        16_018,
        21_018,
        26_018,
        16_045,
        21_045,
        26_045,
        16_072,
    ]
    assert totals(pruned) == (101_126, 89_105, pytest.approx(0.37957155))


def test_one_hour_ttl_has_fewer_breaks_than_five_minutes_with_ten_minute_gaps() -> None:
    steps = [(0.0, [text(1_000)])]
    for burst in range(3):
        for k in range(4):
            gap = 600.0 if (k == 0 and burst > 0) else 10.0
            steps.append((gap, [result(3_000)]))
    t = thread(steps)
    five = simulate_thread(t, baseline(ttl="5m"), PRICES)
    hour = simulate_thread(t, baseline(ttl="1h"), PRICES)
    assert [b.cause.value for b in five.breaks] == ["ttl_expired", "ttl_expired"]
    assert hour.breaks == ()
    # 1-hour writes cost 2x input instead of 1.25x, but the reads it keeps are worth more.
    assert totals(hour)[2] < totals(five)[2]


def test_no_pruning_reproduces_the_recording_exactly() -> None:
    t = thread(BURST, ttl="1h")
    sim = simulate_thread(t, baseline(), PRICES)
    for rec, got in zip(t.calls, sim.calls, strict=True):
        assert got.usage.cache_read_tokens == rec.cache_read_tokens
        assert got.usage.cache_write_1h_tokens == rec.cache_write_1h_tokens
        assert got.usage.input_tokens == rec.input_tokens


def test_sub_agents_are_not_pruned_unless_asked() -> None:
    from mcsim.model import ThreadKind

    t = thread(BURST, kind=ThreadKind.SUBAGENT)
    masked = simulate_thread(t, scenario("keep_last_n", n=2), PRICES)
    assert masked.calls[-1].cleared_tokens == 0
    everywhere = Scenario("x", scenario("keep_last_n", n=2).layers, main_thread_only=False)
    assert simulate_thread(t, everywhere, PRICES).calls[-1].cleared_tokens > 0


# A text, then twelve 4,000-token results 10 s apart: an MCP tool's, a sub-agent's, a Read's,
# four times over (the Reads are results 2, 5, 8 and 11, counting from 0).
MIXED = [(0.0, [text(1_000)])] + [
    (10.0, [result(4_000, tool)]) for tool in ["mcp__github__get_issue", "Task", "Read"] * 4
]


def test_mcp_and_excluded_tools_are_never_cleared() -> None:
    # This used keep_last_n, which cleared only compactable results; it masks every tool's
    # results now (the harnesses it models do), so the compactable list is tested on
    # time_based_microcompact: a 2-hour gap before the last call.
    t = thread([*MIXED[:-1], (7_200.0, MIXED[-1][1])])
    sim = simulate_thread(t, scenario("time_based_microcompact", keep_recent=1), PRICES)
    # Only the four Read results are compactable; the newest is kept: 3 x (4,000 - 9), the
    # placeholder "[Old tool result content cleared]" being 33 characters, 9 tokens.
    assert sim.calls[-1].cleared_tokens == 3 * 3_991
    layers = scenario("time_based_microcompact", keep_recent=1).layers
    excluded = Scenario("x", layers, exclude_tools=frozenset({"Read"}))
    assert simulate_thread(t, excluded, PRICES).calls[-1].cleared_tokens == 0


def test_keep_last_n_masks_every_tool_unless_excluded() -> None:
    t = thread(MIXED)
    # n=1: the eleven results before the newest are masked, MCP and Task ones included, each
    # 4,000 - 8 (the placeholder "Old environment output omitted" is 30 characters).
    sim = simulate_thread(t, scenario("keep_last_n", n=1), PRICES)
    assert sim.calls[-1].cleared_tokens == 11 * 3_992
    # The scenario's exclude_tools are never masked, but n still counts them (as SWE-agent's
    # window counts the observations it always keeps): with n=2 the newest two results are
    # a Task's and the last Read, so the Reads 2, 5 and 8 are masked, and nothing else.
    layers = scenario("keep_last_n", n=2).layers
    excluded = Scenario("x", layers, exclude_tools=frozenset({"mcp__github__get_issue", "Task"}))
    assert simulate_thread(t, excluded, PRICES).calls[-1].cleared_tokens == 3 * 3_992


def test_keep_last_n_counts_the_messages_of_the_conversation() -> None:
    # A text (1 message), then per call two parallel tool calls: the previous response and
    # two results are 3 messages more. Messages at call k: 1 + 3k = 1, 4, 7, 10, 13.
    parallel = [use("f"), result(2_000), use("g"), result(2_000)]
    t = thread([(0.0, [text(1_000)])] + [(10.0, parallel)] * 4)
    assert PreparedThread(t).messages == [1, 4, 7, 10, 13]
    sim = simulate_thread(t, scenario("keep_last_n", n=2, min_messages=9), PRICES)
    # Call 3 is the first with more than 9 messages: of its 6 results the 4 oldest are masked
    # (2,000 - 8 each); call 4 masks the 2 that left the window. (The old guess, 2 messages
    # per call, had 8 at call 3 and started a call late.)
    assert [c.newly_cleared_tokens for c in sim.calls] == [0, 0, 0, 4 * 1_992, 2 * 1_992]


def test_a_compaction_restarts_the_message_count() -> None:
    # Messages: 1; 3 (response, result); 5. The compaction at call 3 leaves its summary and
    # two results: 3 (no response from before it). Call 4: 3 + response + result = 5.
    one = [use("f"), result(2_000)]
    steps = [(0.0, [text(1_000)]), (10.0, one), (10.0, one), (10.0, [text(500), *one, *one])]
    t = thread([*steps, (10.0, one)])
    t = replace(t, calls=tuple(c._replace(compaction=i == 3) for i, c in enumerate(t.calls)))
    assert PreparedThread(t).messages == [1, 3, 5, 3, 5]
    # min_messages 4, n 1: call 2 (5 messages) masks call 1's result; call 3 (3 messages)
    # masks nothing, though without the restart it would have 9; call 4 (5) masks the two
    # results of call 3, the newest (call 4's) being kept.
    sim = simulate_thread(t, scenario("keep_last_n", n=1, min_messages=4), PRICES)
    assert [c.newly_cleared_tokens for c in sim.calls] == [0, 0, 1_992, 0, 2 * 1_992]


def test_clear_at_least_clears_nothing_below_it() -> None:
    t = thread(BURST)
    lots = simulate_thread(
        t,
        scenario("clear_tool_uses", trigger_input_tokens=20_000, keep=1, clear_at_least=12_000),
        PRICES,
    )
    # Call 4 (prompt 31,000) is the first with >= 12,000 clearable tokens (3 results).
    cleared = [c.newly_cleared_tokens for c in lots.calls]
    assert cleared[:4] == [0, 0, 0, 0] and cleared[4] == 3 * (5_000 - 9)


def test_clear_tool_uses_clears_every_tool_but_its_exclusions() -> None:
    # Results of 5,000 tokens after a 1,000-token prompt (10,000 head): prompt k = 11,000 +
    # 5,000 k. MCP, Task and BashOutput are not on the scenario's compactable list; for the API
    # strategy that list does not count, only exclude_tools (the layer's Edit, the scenario's
    # Task) does.
    tools = ["mcp__github__get_issue", "Task", "Read", "Edit", "BashOutput", "Bash"]
    t = thread([(0.0, [text(1_000)])] + [(10.0, [result(5_000, tool)]) for tool in tools])
    policy = replace(
        scenario("clear_tool_uses", trigger_input_tokens=30_000, keep=1, exclude_tools=["Edit"]),
        exclude_tools=frozenset({"Task"}),
    )
    sim = simulate_thread(t, policy, PRICES)
    # Call 4 (31,000 > 30,000): keep 1 keeps the newest tool use, the excluded Edit (keep
    # counts every tool's uses), so Read goes with the MCP result: 2 x (5,000 - 9 placeholder)
    # = 9,982. Call 5 (36,000 - 9,982 = 26,018) is under the trigger. Call 6 (31,018): Bash
    # is kept, BashOutput goes: 4,991.
    assert [c.newly_cleared_tokens for c in sim.calls] == [0, 0, 0, 0, 9_982, 0, 4_991]
    assert [c.prompt_tokens for c in sim.calls] == [
        11_000,
        16_000,
        21_000,
        26_000,
        21_018,
        26_018,
        26_027,
    ]
    assert sim.cleared_results == 3


def test_clear_tool_inputs_takes_a_list_and_the_tool_use_trigger_counts_what_is_left() -> None:
    # Each call after the first adds a tool call: a 500-token input and a 4,000-token result.
    tools = ["Read", "Bash", "Grep", "Bash", "Read", "Bash", "Grep"]
    t = thread([(0.0, [text(1_000)])] + [(10.0, tool_call(tool, 500, 4_000)) for tool in tools])
    bash_inputs = simulate_thread(
        t,
        scenario("clear_tool_uses", trigger_tool_uses=3, keep=1, clear_tool_inputs=["Bash"]),
        PRICES,
    )
    # Call 4 has 4 results in the prompt (> 3): all but the newest go, 3 x (4,000 - 9), with
    # the input of the one Bash call among them, 500 - 9: 11,973 + 491 = 12,464. Then 2 and
    # 3 results are left (the API's trigger sees the cleared prompt: no clearing on every
    # call); call 7 has 4 again: Bash, Read, Bash go, 11,973 + 2 x 491 = 12,955.
    cleared = [c.newly_cleared_tokens for c in bash_inputs.calls]
    assert cleared == [0, 0, 0, 0, 12_464, 0, 0, 12_955]
    # Recorded prompt 11,000 + 4,500 k, less what is cleared.
    assert bash_inputs.calls[-1].prompt_tokens == 42_500 - 12_464 - 12_955
    every_input = simulate_thread(
        t, scenario("clear_tool_uses", trigger_tool_uses=3, keep=1, clear_tool_inputs=True), PRICES
    )
    # The same calls, with the three inputs each time: 11,973 + 3 x 491 = 13,446.
    assert [c.newly_cleared_tokens for c in every_input.calls] == [0, 0, 0, 0, 13_446, 0, 0, 13_446]


def test_claude_codes_api_configuration_clears_at_least_140k_mcp_results_included() -> None:
    (policy,) = [s for s in load_policy_file(ANTHROPIC_API) if s.name == "claude-code-api"]
    # 100-token inputs; results of 30,000 tokens but for calls 6 and 7 (10,000). Prompts
    # from 11,000: 41,100 71,200 101,300 131,400 161,500 171,600 181,700 211,800.
    calls = [
        ("mcp__github__get_issue", 30_000),
        ("Read", 30_000),
        ("Edit", 30_000),
        ("Bash", 30_000),
        ("Grep", 30_000),
        ("Read", 10_000),
        ("Bash", 10_000),
        ("Read", 30_000),
    ]
    t = thread([(0.0, [text(1_000)])] + [(10.0, tool_call(n, 100, k)) for n, k in calls])
    sim = simulate_thread(t, policy, PRICES)
    # Call 7 (181,700 > 180,000) keeps the 3 newest tool uses. Strategy 1 could clear the
    # results of the 4 older (120,000) and the Read and Bash inputs (200): 120,200 < 140,000.
    # Strategy 2 could clear those results but Edit's: 90,000. Neither clears.
    # Call 8 (211,800): strategy 1 can clear 5 results (150,000) and the Read, Bash and Grep
    # inputs (300): 150,300 >= 140,000, so it does: 5 x (30,000 - 9) + 3 x (100 - 9) =
    # 150,228 net of placeholders. Without the MCP result it would be 120,300 and nothing
    # would be cleared. The prompt is then 61,572: strategy 2 is not triggered.
    cleared = [c.newly_cleared_tokens for c in sim.calls]
    assert cleared == [0] * 8 + [150_228]
    assert cleared[8] >= 140_000 and sim.cleared_results == 5
    last = sim.calls[8]
    assert last.prompt_tokens == 211_800 - 150_228 == 61_572
    # The prefix changes at the MCP result (11,100: its call's 100-token input is kept). The
    # first call's entry (head + text: 11,000) ends before it, is alive and 16 blocks back
    # (8 tool calls and results): the read falls back to it, not to the 10,000-token head.
    assert last.rewrote and last.usage.cache_read_tokens == 11_000


def test_clear_thinking_keeps_the_newest_assistant_turns_with_thinking() -> None:
    # Opus 4.5 re-sends earlier thinking. Turn 1 thinks 2,000 tokens, turn 2 3,000, turn 3
    # answers without thinking. Recorded prompts: 10,100 12,150 12,250 15,300 15,450 15,550.
    steps = [
        (0.0, [text(100, turn=1)]),
        (10.0, [thinking(2_000, turn=1), text(50, turn=1)]),
        (10.0, [text(100, turn=2)]),
        (10.0, [thinking(3_000, turn=2), text(50, turn=2)]),
        (10.0, [text(100, turn=3), text(50, turn=3)]),
        (10.0, [text(100, turn=4)]),
    ]
    opus = thread(steps, model="claude-opus-4-5")
    sim = simulate_thread(opus, scenario("clear_thinking", keep=1), PRICES).calls
    # Keep 1 keeps the thinking of the last assistant turn that has any. At call 2 that is
    # turn 1 (the old rule counted user turns and cleared it there: wrong per the API docs).
    # Call 3 brings turn 2's thinking, so turn 1's 2,000 tokens go; the rewrite makes the
    # read fall back to the first call's entry, which ends just before that thinking (head
    # + turn 1's text: 10,100; alive, and 5 blocks back), rather than the 10,000-token head.
    # Turn 3 has no thinking: at calls 4 and 5 turn 2 is still the newest turn with
    # thinking, and is kept.
    assert [c.newly_cleared_tokens for c in sim] == [0, 0, 0, 2_000, 0, 0]
    assert [c.prompt_tokens for c in sim] == [10_100, 12_150, 12_250, 13_300, 13_450, 13_550]
    assert sim[3].rewrote and sim[3].usage.cache_read_tokens == 10_100
    assert sim[3].usage.cache_write_tokens == 13_300 - INPUT - 10_100
    assert sim[4].usage.cache_read_tokens == 13_300  # the edited prompt is cached again
    base = simulate_thread(opus, baseline(), PRICES)
    for keep in (2, "all"):
        assert simulate_thread(opus, scenario("clear_thinking", keep=keep), PRICES) == base
    # Sonnet 4.5 strips earlier thinking itself: nothing to clear.
    sonnet = thread(steps)
    policy = scenario("clear_thinking", keep=1)
    assert simulate_thread(sonnet, policy, PRICES) == simulate_thread(sonnet, baseline(), PRICES)


def test_thinking_recorded_as_a_signature_only_is_left_alone_but_its_turn_counts() -> None:
    steps = [
        (0.0, [text(100, turn=1)]),
        (10.0, [thinking(0, turn=1), text(50, turn=1)]),
        (10.0, [text(100, turn=2)]),
        (10.0, [thinking(0, turn=2), text(50, turn=2)]),
        (10.0, [text(100, turn=3)]),
    ]
    opus = thread(steps, model="claude-opus-4-5")
    sim = simulate_thread(opus, scenario("clear_thinking", keep=1), PRICES)
    assert sim == simulate_thread(opus, baseline(), PRICES)  # no clearing, so no cache break
    # Turn 1 thinks 2,000 tokens, turn 2 is signature-only: turn 2 is the newest turn with
    # thinking, so turn 1's thinking goes when turn 2's arrives (call 3).
    steps[1] = (10.0, [thinking(2_000, turn=1), text(50, turn=1)])
    mixed = thread(steps, model="claude-opus-4-5")
    sim = simulate_thread(mixed, scenario("clear_thinking", keep=1), PRICES)
    assert [c.newly_cleared_tokens for c in sim.calls] == [0, 0, 0, 2_000, 0]


def _seg(tool: str) -> LiveSegment:
    kind = class_key(tool_class(tool, EVERY_HARNESS))
    return LiveSegment(0, 0, ItemKind.TOOL_RESULT, 10, tool, "t", 0, class_key=kind)


def test_only_claude_codes_shell_tools_count_as_bash() -> None:
    """Claude Code's list by class, less the tools of those classes it leaves out (the
    claude-code preset's settings), is its list: Bash and PowerShell, not BashOutput."""
    allowed, left_out = frozenset(DEFAULT_COMPACTABLE), frozenset(CLAUDE_CODE_LEFT_OUT)
    assert is_compactable(_seg("Bash"), allowed, left_out)
    assert is_compactable(_seg("PowerShell"), allowed, left_out)
    for tool in ("BashOutput", "KillShell", "KillBash", "Bashful"):
        assert not is_compactable(_seg(tool), allowed, left_out), tool
    # by class alone, a background command's output is shell output; an unknown tool is other
    assert is_compactable(_seg("BashOutput"), allowed, frozenset())
    assert not is_compactable(_seg("Bashful"), allowed, frozenset())
    # the name rule of Claude Code's list: PowerShell counts as Bash
    assert is_compactable(_seg("PowerShell"), frozenset({"Bash"}), frozenset())
    assert not is_compactable(_seg("PowerShell"), frozenset({"Read"}), frozenset())
    assert not is_compactable(_seg("PowerShell"), allowed, frozenset({"PowerShell"}))
    assert not is_compactable(_seg("PowerShell"), allowed, frozenset({"class:shell"}))
    # Time-based microcompact after a 2-hour gap, keep 1: of these results only Bash (1,000),
    # PowerShell (4,000) and the newest Bash are compactable; the first two go, net of 9
    # placeholder tokens each: 991 + 3,991. (Taking every "Bash*" tool, as before, would
    # clear Bash and BashOutput: 991 + 1,991.)
    tools = ["Bash", "BashOutput", "KillShell", "PowerShell", "KillBash", "Bash"]
    steps = [(0.0, [text(1_000)])]
    steps += [(10.0, [result(1_000 * (k + 1), tool)]) for k, tool in enumerate(tools)]
    steps.append((7_200.0, [text(100)]))
    claude_code = replace(
        scenario("time_based_microcompact", keep_recent=1), exclude_tools=left_out
    )
    sim = simulate_thread(thread(steps), claude_code, PRICES)
    assert sim.calls[-1].newly_cleared_tokens == 991 + 3_991


# ---------------------------------------------------------------- properties

TOOLS = ["Read", "Bash", "Grep", "mcp__srv__tool", "Task", "Edit"]
GAPS = [5.0, 30.0, 200.0, 400.0, 4_000.0]


@st.composite
def threads(draw: st.DrawFn, max_gap: float | None = None) -> object:
    n = draw(st.integers(2, 24))
    ttl = draw(st.sampled_from(["5m", "1h"]))
    gaps = [g for g in GAPS if max_gap is None or g <= max_gap]
    steps = [(0.0, [text(draw(st.integers(0, 3_000)))])]
    for _ in range(n - 1):
        segs = [
            result(draw(st.integers(0, 20_000)), draw(st.sampled_from(TOOLS)))
            for _ in range(draw(st.integers(0, 3)))
        ]
        steps.append((draw(st.sampled_from(gaps)), segs))
    return thread(steps, ttl=ttl, head=draw(st.integers(0, 30_000)))


POLICIES = [
    scenario("keep_last_n", n=3),
    scenario("keep_last_n", n=2, polling=3, keep_first=True),
    scenario("time_based_microcompact", gap_threshold_minutes=5, keep_recent=2),
    scenario("cached_microcompact", trigger_threshold=4, keep_recent=2),
    scenario("clear_tool_uses", trigger_input_tokens=30_000, keep=2),
    scenario("clear_tool_uses", trigger_tool_uses=3, keep=1, clear_tool_inputs=True),
]


@settings(max_examples=60, deadline=None)
@given(threads(), st.sampled_from(POLICIES))
def test_pruning_never_makes_a_prompt_larger(t: object, policy: Scenario) -> None:
    base = simulate_thread(t, baseline(), PRICES)  # type: ignore[arg-type]
    pruned = simulate_thread(t, policy, PRICES)  # type: ignore[arg-type]
    for b, p in zip(base.calls, pruned.calls, strict=True):
        assert p.prompt_tokens <= b.prompt_tokens
        assert p.usage.cache_read_tokens >= 0 and p.usage.cache_write_tokens >= 0


@settings(max_examples=40, deadline=None)
@given(threads(), st.integers(1, 6), st.sampled_from(["keep_last_n", "time_based_microcompact"]))
def test_a_larger_keep_never_clears_more(t: object, keep: int, kind: str) -> None:
    key = "n" if kind == "keep_last_n" else "keep_recent"
    extra = {"gap_threshold_minutes": 5} if kind == "time_based_microcompact" else {}
    small = simulate_thread(t, scenario(kind, **{key: keep}, **extra), PRICES)  # type: ignore[arg-type]
    large = simulate_thread(t, scenario(kind, **{key: keep + 1}, **extra), PRICES)  # type: ignore[arg-type]
    for s, big in zip(small.calls, large.calls, strict=True):
        assert big.cleared_tokens <= s.cleared_tokens


@settings(max_examples=40, deadline=None)
@given(threads(), st.sampled_from(POLICIES), st.sampled_from(["recorded", "5m", "1h"]))
def test_cost_is_the_sum_of_its_priced_parts(t: object, policy: Scenario, ttl: str) -> None:
    policy = Scenario(policy.name, policy.layers, ttl)
    sim = simulate_thread(t, policy, PRICES)  # type: ignore[arg-type]
    rates = PRICES.lookup("claude-sonnet-4-5")
    assert rates is not None
    for c in sim.calls:
        u = c.usage
        assert c.cost_usd is not None
        assert c.cost_usd == pytest.approx(price_usage(rates, u, c.timestamp_s).total_usd)
        r = rates.rates if u.prompt_tokens <= 200_000 else rates.long_context[0].rates
        expected = (
            u.input_tokens * r.input
            + u.cache_write_5m_tokens * r.cache_write_5m
            + u.cache_write_1h_tokens * r.cache_write_1h
            + u.cache_read_tokens * r.cache_read
            + u.output_tokens * r.output
        ) / 1e6
        assert c.cost_usd == pytest.approx(expected)
        assert u.prompt_tokens == c.prompt_tokens


@settings(max_examples=40, deadline=None)
@given(threads(max_gap=200.0))
def test_without_pruning_and_a_live_cache_each_call_reads_its_predecessor(t: object) -> None:
    sim = simulate_thread(t, baseline(ttl="1h"), PRICES)  # type: ignore[arg-type]
    calls = sim.calls
    for prev, cur in itertools.pairwise(calls):
        if prev.prompt_tokens >= 1024:  # below Sonnet's minimum nothing was cached
            assert cur.usage.cache_read_tokens == min(prev.prompt_tokens, cur.prompt_tokens - INPUT)


STACK = Scenario(
    "stack",
    (
        Layer("time_based_microcompact", (("gap_threshold_minutes", 5), ("keep_recent", 2))),
        Layer("cached_microcompact", (("trigger_threshold", 3), ("keep_recent", 1))),
    ),
)


@settings(max_examples=60, deadline=None)
@given(threads(), st.sampled_from([*POLICIES, STACK]), st.sampled_from(["recorded", "5m", "1h"]))
def test_copying_the_unpruned_replay_until_the_first_clearing_changes_nothing(
    t: object, policy: Scenario, ttl: str
) -> None:
    policy = Scenario(policy.name, policy.layers, ttl)
    unpruned = simulate_thread(t, baseline(ttl=ttl), PRICES)  # type: ignore[arg-type]
    copied = simulate_thread(t, policy, PRICES, unpruned=unpruned)  # type: ignore[arg-type]
    assert copied == simulate_thread(t, policy, PRICES)  # type: ignore[arg-type]


@settings(max_examples=60, deadline=None)
@given(
    threads(),
    st.sampled_from([*POLICIES, STACK]),
    st.sampled_from(["recorded", "5m", "1h"]),
    st.sampled_from(["recorded", "5m", "1h"]),
    st.booleans(),
    st.booleans(),
)
def test_a_scenario_differing_only_in_ttl_takes_the_decisions_and_changes_nothing(
    t: object, policy: Scenario, first_ttl: str, ttl: str, first_copies: bool, copies: bool
) -> None:
    # The decisions of the first scenario's replay, kept on the shared PreparedThread (with or
    # without the unpruned copy), make the second's replay exactly what it is on its own.
    first = Scenario("first", policy.layers, first_ttl)
    second = Scenario("second", policy.layers, ttl)
    prepared = PreparedThread(t)  # type: ignore[arg-type]
    before = simulate_thread(t, baseline(ttl=first_ttl), PRICES) if first_copies else None  # type: ignore[arg-type]
    simulate_thread(t, first, PRICES, prepared, before)  # type: ignore[arg-type]
    assert prepared.decisions  # kept
    unpruned = simulate_thread(t, baseline(ttl=ttl), PRICES) if copies else None  # type: ignore[arg-type]
    shared = simulate_thread(t, second, PRICES, prepared, unpruned)  # type: ignore[arg-type]
    alone = simulate_thread(t, second, PRICES)  # type: ignore[arg-type]
    assert shared == alone
    assert shared.figures == alone.figures
