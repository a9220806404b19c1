"""Why a policy cleared nothing: each kind names, in its own terms, the figure that decided
it, the largest over the threads it ran on (numbers worked out by hand)."""

from __future__ import annotations

from dataclasses import replace

from simthreads import result, text, thinking, thread, use

from mcsim.accounting.prices import default_table
from mcsim.model import ThreadKind
from mcsim.replay.calibrate import CalSession, CalThread
from mcsim.replay.policies import REGISTRY
from mcsim.replay.run import ReplayReport, replay_session
from mcsim.replay.scenario import Layer, Scenario, baseline

PRICES = default_table()


def layer(kind: str, **values: object) -> Layer:
    return Layer(
        kind, tuple((p.name, values.get(p.name, p.default)) for p in REGISTRY[kind].params)
    )


def why(policy: Scenario, *sessions: tuple[CalThread, ...]) -> dict[str, str]:
    """The run's notes on policies that cleared nothing, each session a tuple of threads."""
    scenarios = [baseline(), policy]
    report = ReplayReport(scenarios)
    for i, threads in enumerate(sessions):
        session = CalSession(f"s{i}", "p", None, (), threads)
        report.add(replay_session(session, scenarios, PRICES, keep_rows=False))
    return report.idle_notes()


def reads(count: int, gap: float = 10.0, tokens: int = 1_000) -> list[tuple[float, list]]:
    """A text, then `count` Read results, one a call, `gap` seconds apart."""
    return [(0.0, [text(1_000)])] + [(gap, [result(tokens)]) for _ in range(count)]


def compacted(t: CalThread, at: int) -> CalThread:
    """`t` with a compaction recorded before call `at`."""
    return replace(t, calls=tuple(c._replace(compaction=i == at) for i, c in enumerate(t.calls)))


def sub_agent(steps: list[tuple[float, list]]) -> CalThread:
    return thread(steps, kind=ThreadKind.SUBAGENT)


def test_time_based_microcompact_names_the_longest_gap_on_a_main_thread() -> None:
    # Main threads: gaps of 10 s and 42 min (2,520 s) in one session, 30 min in the other; a
    # sub-agent's 90-minute gap does not count (it is never pruned).
    first = thread([*reads(3), (2_520.0, [result(1_000)])])
    second = thread([*reads(2), (1_800.0, [result(1_000)])])
    agent = sub_agent([*reads(1), (5_400.0, [result(1_000)])])
    policy = Scenario("tb", (layer("time_based_microcompact"),))
    assert why(policy, (first,), (second, agent)) == {
        "tb": "never fired: no idle gap reached 60 min (longest 42 min on a main thread)"
    }
    # A 59 min 59 s gap is shown rounded down: it did not reach the hour.
    almost = thread([*reads(1), (3_599.0, [result(1_000)])])
    assert why(policy, (almost,))["tb"].endswith("(longest 59.9 min on a main thread)")
    # Gaps of 2 hours, but at most 5 compactable results then (keep_recent 5): the third
    # call after the text is the one after the gap, with 3 results in the prompt.
    few = thread([*reads(2), (7_200.0, [result(1_000)]), (10.0, [result(1_000)])])
    assert why(policy, (few,)) == {
        "tb": "after every idle gap of 60 min or more, no more than 5 compactable results were "
        "in the prompt (most: 3)"
    }


def test_cached_microcompact_names_the_most_results_registered() -> None:
    # 9 Reads (and 3 MCP results, never compactable) in one session; in the other, 7 Reads, a
    # compaction, then 8: 15 in all, but the compaction resets the registered list.
    nine = thread(reads(9) + [(10.0, [result(1_000, "mcp__s__t")])] * 3)
    split = compacted(thread([*reads(7), (10.0, [text(500)]), *reads(8)[1:]]), 8)
    policy = Scenario("cm", (layer("cached_microcompact"),))
    assert why(policy, (nine,), (split,)) == {
        "cm": "never more than 12 compactable results registered (most: 9)"
    }


def test_a_stack_names_each_of_its_policies() -> None:
    t = thread([*reads(8), (2_520.0, [result(1_000)])])  # 9 Reads, the last after 42 min
    claude_code = Scenario(
        "claude-code", (layer("time_based_microcompact"), layer("cached_microcompact"))
    )
    assert why(claude_code, (t,)) == {
        "claude-code": "time_based_microcompact: never fired: no idle gap reached 60 min "
        "(longest 42 min on a main thread); cached_microcompact: never more than 12 "
        "compactable results registered (most: 9)"
    }


def test_clear_tool_uses_names_the_largest_prompt_or_the_most_tool_uses() -> None:
    # Prompts: 10,000 head + 310 text = 10,310, then 25,000 more a call: 85,310 at the last.
    # The sub-agent's 160,310-token prompt does not count: it is never pruned.
    main = thread([(0.0, [text(310)])] + [(10.0, [result(25_000)])] * 3)
    agent = sub_agent([(0.0, [text(310)])] + [(10.0, [result(50_000)])] * 3)
    policy = Scenario("api", (layer("clear_tool_uses"),))
    assert why(policy, (main, agent)) == {
        "api": "the prompt never exceeded 100,000 tokens (largest 85,310)"
    }
    by_uses = Scenario("uses", (layer("clear_tool_uses", trigger_tool_uses=4),))
    assert why(by_uses, (main,)) == {"uses": "never more than 4 tool uses (most: 3)"}
    # Past 20,000 tokens from call 1, keeping 1: at most results 1 and 2 (50,000 tokens) are
    # clearable at once, at call 3; clear_at_least asks for 60,000.
    least = Scenario(
        "least",
        (layer("clear_tool_uses", trigger_input_tokens=20_000, keep=1, clear_at_least=60_000),),
    )
    assert why(least, (main,)) == {"least": "never 60,000 tokens to clear at once (most: 50,000)"}


def test_keep_last_n_names_the_messages_or_the_results() -> None:
    # A text, then 9 calls of a tool call and its result: 1 + 2 x 9 = 19 messages at most.
    steps = [(0.0, [text(1_000)])] + [(10.0, [use("f"), result(1_000)])] * 9
    naive = Scenario("naive", (layer("keep_last_n", n=6, min_messages=20),))
    assert why(naive, (thread(steps),)) == {
        "naive": "the conversation never had more than 20 messages (most: 19)"
    }
    # 4 results, one of them an MCP tool's (keep_last_n counts it: it masks every tool).
    four = thread([*reads(3), (10.0, [result(1_000, "mcp__s__t")])])
    default = Scenario("n5", (layer("keep_last_n"),))
    assert why(default, (four,)) == {"n5": "never more than 5 tool results (most: 4)"}
    # SWE-agent's polling 5 looks at the 5th call (index 4): 4 results, 3 after the first.
    # The 6 results by call 6 are never looked at: the 10th call does not come.
    swe = Scenario("swe", (layer("keep_last_n", polling=5, keep_first=True),))
    assert why(swe, (thread(reads(6)),)) == {
        "swe": "never more than 5 tool results after the first (most: 3, counted every 5 calls)"
    }


def test_clear_thinking_names_why_no_earlier_thinking_was_in_the_prompt() -> None:
    steps = [
        (0.0, [text(100, turn=1)]),
        (10.0, [thinking(2_000, turn=1), text(50, turn=1)]),
        (10.0, [text(100, turn=2)]),
    ]
    policy = Scenario("think", (layer("clear_thinking"),))
    assert why(policy, (thread(steps),)) == {  # Sonnet 4.5 strips earlier thinking itself
        "think": "no earlier thinking in the prompt: no call was on a model that re-sends it "
        "(Opus 4.5+, Sonnet 4.6+)"
    }
    signature = [(0.0, [text(100, turn=1)])] + [
        (10.0, [thinking(0, turn=k), text(50, turn=k + 1)]) for k in (1, 2)
    ]
    opus = thread(signature, model="claude-opus-4-5")  # two signature-only blocks by call 2
    assert why(policy, (opus,)) == {
        "think": "no earlier thinking of a known size in the prompt: it was all recorded as a "
        "signature only (most: 2 blocks)"
    }


def test_only_sub_agents_means_no_main_thread_to_act_on() -> None:
    agent = sub_agent([*reads(3), (7_200.0, [result(1_000)])])
    masking = Scenario("n1", (layer("keep_last_n", n=1),))
    assert why(masking, (agent,)) == {"n1": "no main thread to act on (main_thread_only)"}
    # Run on sub-agents too, keep_last_n masks them; time-based microcompact never does.
    everywhere = replace(masking, main_thread_only=False)
    assert why(everywhere, (agent,)) == {}
    gap = Scenario("tb", (layer("time_based_microcompact"),), main_thread_only=False)
    assert why(gap, (agent,)) == {"tb": "no main thread to act on (it acts on main threads only)"}


def test_a_long_threshold_is_named_as_written() -> None:
    """`:g` showed a 1,234,567-minute threshold as '1.23457e+06 min': rounded, and in a
    notation no policy file is written in."""
    t = thread([*reads(1), (3_599.0, [result(1_000)])])
    tb = Scenario("tb", (layer("time_based_microcompact", gap_threshold_minutes=1_234_567),))
    half = Scenario("half", (layer("time_based_microcompact", gap_threshold_minutes=1_000.5),))
    assert why(tb, (t,))["tb"].startswith("never fired: no idle gap reached 1,234,567 min (")
    assert why(half, (t,))["half"].startswith("never fired: no idle gap reached 1,000.5 min (")
    ct = layer("clear_thinking", after_gap_minutes=1_234_567)
    note = ct.build().idle_note(
        {"resends_thinking": 1, "longest_gap_s": 60.0, "most_blocks": 1, "most_sized": 1,
         "most_turns": 2}
    )  # fmt: skip
    assert note == "never applied: no idle gap reached 1,234,567 min (longest 1 min)"
