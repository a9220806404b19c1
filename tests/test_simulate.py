"""The replay core: mechanisms with numbers worked out by hand, and properties on generated
threads (hypothesis)."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from simthreads import INPUT, result, text, thinking, thread, use

from mcsim.prices import default_table, price_usage
from mcsim.scenario import Layer, Scenario, baseline
from mcsim.simulate import PreparedThread, SimThread, simulate_thread

PRICES = default_table()


def scenario(kind: str, ttl: str = "recorded", **values: object) -> Scenario:
    from mcsim.policies import REGISTRY

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
    # masked each call, the prefix breaks and the read falls back to the 10,000-token head:
    # reads 0 + 11,000 + 16,000 + 7 x 10,000; writes 20,991 + 11,005..11,053 (step 8).
    masked = simulate_thread(t, scenario("keep_last_n", n=2), PRICES)
    assert totals(masked) == (97_000, 98_194, pytest.approx(0.4124175))
    # cached_microcompact trigger 3 keep 1: at calls 4 and 7, three results (15,000 tokens)
    # are deleted server-side; from the next call the prompt is 15,000 smaller and the read
    # is the whole (edited) previous prompt: no break, writes as without pruning.
    edits = simulate_thread(
        t, scenario("cached_microcompact", trigger_threshold=3, keep_recent=1), PRICES
    )
    assert totals(edits) == (174_000, 55_970, pytest.approx(0.2771775))
    assert [c.prompt_tokens for c in edits.calls][4:] == [
        31_000,
        21_000,
        26_000,
        31_000,
        21_000,
        26_000,
    ]
    assert [b.cause.value for b in edits.breaks] == ["policy_clearing", "policy_clearing"]


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


def test_clear_thinking_clears_earlier_turns_only_where_thinking_is_in_the_prompt() -> None:
    steps = [
        (0.0, [text(100, turn=1)]),
        (10.0, [thinking(2_000, turn=1), text(50, turn=1)]),
        (10.0, [text(100, turn=2)]),
    ]
    policy = scenario("clear_thinking", keep_turns=1)
    opus = thread(steps, model="claude-opus-4-5")  # prompts 10,100 / 12,150 / 12,250
    base = simulate_thread(opus, baseline(), PRICES).calls
    sim = simulate_thread(opus, policy, PRICES).calls
    assert sim[:2] == base[:2]
    # Turn 1's thinking goes before the first call of turn 2: 2,000 tokens fewer, and the
    # rewrite makes the read fall back to the 10,000-token head.
    assert sim[2].newly_cleared_tokens == 2_000 and sim[2].rewrote
    assert sim[2].prompt_tokens == 10_250 == base[2].prompt_tokens - 2_000
    assert sim[2].usage.cache_read_tokens == 10_000
    assert sim[2].usage.cache_write_tokens == 10_250 - INPUT - 10_000
    # Sonnet 4.5 strips earlier thinking itself: nothing to clear.
    sonnet = thread(steps)
    assert simulate_thread(sonnet, policy, PRICES) == simulate_thread(sonnet, baseline(), PRICES)


def test_thinking_recorded_as_a_signature_only_is_left_alone() -> None:
    steps = [
        (0.0, [text(100, turn=1)]),
        (10.0, [thinking(0, turn=1), text(50, turn=1)]),
        (10.0, [text(100, turn=2)]),
    ]
    opus = thread(steps, model="claude-opus-4-5")
    sim = simulate_thread(opus, scenario("clear_thinking", keep_turns=1), PRICES)
    assert sim == simulate_thread(opus, baseline(), PRICES)  # no clearing, so no cache break


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
