"""Each mechanism as documented (docs/domain.md: the pruning policies, cache mechanics, the
cache-break detector), on small threads whose numbers are worked out by hand in the comments:
when a cache edit takes effect and what it bills, the rolling window of cached microcompact,
how each mechanism measures time, and pruning the recording already did."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from lines import assistant, tool_result, tool_use, usage, user, write
from simthreads import result, text, thread

from mcsim.accounting.prices import default_table
from mcsim.cli import cli
from mcsim.ingest.loaders import Detail
from mcsim.model import CompactionKind
from mcsim.replay.calibrate import CalThread, ReadClass
from mcsim.replay.scenario import Layer, Scenario, baseline
from mcsim.replay.simulate import simulate_thread

PRICES = default_table()
MIN = 60.0


def layer(kind: str, **values: object) -> Layer:
    from mcsim.replay.policies import REGISTRY

    return Layer(
        kind, tuple((p.name, values.get(p.name, p.default)) for p in REGISTRY[kind].params)
    )


def policy(*layers: Layer, ttl: str = "recorded") -> Scenario:
    return Scenario("p", layers, ttl)


def retimed(t: CalThread, index: int, **fields: object) -> CalThread:
    calls = list(t.calls)
    calls[index] = calls[index]._replace(**fields)
    return CalThread(t.thread_id, t.kind, t.head_tokens, tuple(calls))


# Ten calls 10 s apart: a 1,000-token text after a 10,000-token head, then a 5,000-token Read
# result before each later call. Prompt k = 11,000 + 5,000 k; 3 uncached tokens a call.
BURST = [(0.0, [text(1_000)])] + [(10.0, [result(5_000)]) for _ in range(9)]
EDITS = layer("cached_microcompact", trigger_threshold=3, keep_recent=1)


# ---------------------------------------------------------------- 1. cache edits


def test_a_cache_edit_takes_effect_on_the_call_that_carries_it_even_after_a_fallback() -> None:
    # The recording's read at call 4 fell back to 21,000 tokens (head + text + r1 + r2: a real
    # prefix change), so it wrote 31,000 - 3 - 21,000 = 9,997.
    t = retimed(
        thread(BURST), 4, read_class=ReadClass.PARTIAL, read_anchor=21_000,
        cache_read_tokens=21_000, cache_write_5m_tokens=9_997,
    )  # fmt: skip
    base = simulate_thread(t, baseline(), PRICES).calls
    assert (base[4].usage.cache_read_tokens, base[4].usage.cache_write_tokens) == (21_000, 9_997)
    sim = simulate_thread(t, policy(EDITS), PRICES).calls
    # Call 4 carries the deletion of r1..r3 (15,000). Its prompt is 16,000; the read is the
    # recorded fall-back point less what was deleted before it (r1, r2): 11,000, and it writes
    # 16,000 - 3 - 11,000 = 4,997. Nothing deleted is billed as a write (r3 was in the part
    # the fall-back made it write: 9,997 - 5,000).
    assert sim[4].cache_edit and sim[4].newly_cleared_tokens == 15_000
    assert sim[4].prompt_tokens == 16_000
    assert (sim[4].usage.cache_read_tokens, sim[4].usage.cache_write_tokens) == (11_000, 4_997)
    # Call 5 deletes r4: the cached 16,000 less 5,000 is read, the new result written.
    assert (sim[5].usage.cache_read_tokens, sim[5].usage.cache_write_tokens) == (11_000, 4_997)


def test_a_ttl_that_ran_out_on_the_call_of_a_cache_edit_is_still_a_break() -> None:
    steps = list(BURST)
    steps[4] = (400.0, steps[4][1])  # 400 s before call 4: past the 5-minute TTL
    sim = simulate_thread(thread(steps), policy(EDITS), PRICES)
    # Cold cache: nothing read, the whole edited prompt (16,000 - 3) written.
    call = sim.calls[4]
    assert call.cache_edit and (call.usage.cache_read_tokens, call.usage.cache_write_tokens) == (
        0,
        15_997,
    )
    assert [(b.call_index, b.cause.value) for b in sim.breaks] == [(4, "ttl_expired")]
    assert sim.edit_drops == ()


def test_the_other_reading_of_cache_edits_bills_what_they_deleted_as_reads() -> None:
    """Anthropic does not document how deleted tokens are billed: the replay bills them no
    more; the other reading bills them as cache reads on every call from the edit on, and
    `edit_reread_usd` is what that adds (Sonnet 4.5 reads at $0.30 per million)."""
    sim = simulate_thread(thread(BURST), policy(EDITS), PRICES)
    # Call 4 deletes r1..r3 (15,000); each later call one more result: 20,000 at call 5, ...
    # 40,000 at call 9. Sum: 15 + 20 + 25 + 30 + 35 + 40 = 165 thousand tokens.
    assert [c.cleared_tokens for c in sim.calls][4:] == [15_000, 20_000, 25_000, 30_000,
                                                         35_000, 40_000]  # fmt: skip
    assert sim.edit_reread_usd == pytest.approx(165_000 * 0.30e-6)
    # No cache edits, no other reading: a rewrite's clearing is billed as it is.
    rewrite = layer("keep_last_n", n=1)
    assert simulate_thread(thread(BURST), policy(rewrite), PRICES).edit_reread_usd == 0
    assert simulate_thread(thread(BURST), baseline(), PRICES).edit_reread_usd == 0


def test_a_rewrite_ends_what_the_other_reading_bills_for_the_edits_it_drops() -> None:
    # As the test below: the edits delete r1..r3 at call 4 (15,000), r4 at 5 (20,000), r5 at
    # 6 (25,000); the rewrite at call 7 drops them (0); call 8 deletes r5..r7 (15,000).
    steps = [(0.0, [text(1_000)])] + [(10.0, [result(5_000)])] * 6
    steps += [(65 * MIN, [result(5_000)]), (10.0, [result(5_000)])]
    stack = policy(layer("time_based_microcompact", gap_threshold_minutes=60, keep_recent=3), EDITS)
    sim = simulate_thread(thread(steps), stack, PRICES)
    assert sim.edit_reread_usd == pytest.approx((15_000 + 20_000 + 25_000 + 15_000) * 0.30e-6)


# ---------------------------------------------------------------- 2. cached microcompact


def test_a_time_based_rewrite_resets_the_cache_edit_state() -> None:
    # Calls 1-3 add r1..r3 10 s apart; call 4 comes after 61 min with r4; then 10 s apart.
    steps = [(0.0, [text(1_000)])] + [(10.0, [result(5_000)])] * 3
    steps += [(61 * MIN, [result(5_000)])] + [(10.0, [result(5_000)])] * 2
    stack = policy(layer("time_based_microcompact", gap_threshold_minutes=60, keep_recent=2), EDITS)
    sim = simulate_thread(thread(steps), stack, PRICES).calls
    # Call 4: the idle gap fires the time-based path: r1, r2 get the placeholder (9 tokens:
    # 5,000 - 9 = 4,991 each); the cache-edit path is skipped and its state reset. The cache
    # is cold (61 min > 5 min): prompt 31,000 - 9,982 = 21,018, all written but 3.
    assert sim[4].rewrote and not sim[4].cache_edit
    assert sim[4].newly_cleared_tokens == 9_982
    assert (sim[4].usage.cache_read_tokens, sim[4].usage.cache_write_tokens) == (0, 21_015)
    # Call 5 registers every result in the prompt again (r1..r5: 5 > 3) and deletes all but
    # the newest not yet cleared: r3, r4 (10,000). Prompt 36,000 - 19,982 = 16,018; read the
    # cached 21,018 less 10,000.
    assert sim[5].cache_edit and sim[5].newly_cleared_tokens == 10_000
    assert sim[5].prompt_tokens == 16_018
    assert (sim[5].usage.cache_read_tokens, sim[5].usage.cache_write_tokens) == (11_018, 4_997)
    # Call 6: the window rolls on by one: r5 goes.
    assert sim[6].newly_cleared_tokens == 5_000 and sim[6].prompt_tokens == 16_018


def test_a_rewrite_drops_the_cache_edits_and_what_it_keeps_comes_back() -> None:
    # r1..r6 10 s apart, r7 after 65 min, r8 10 s later. The cache edits (trigger 3, keep 1)
    # have deleted r1..r5 by call 6 (prompt 41,000 - 25,000 = 16,000, read 11,000).
    steps = [(0.0, [text(1_000)])] + [(10.0, [result(5_000)])] * 6
    steps += [(65 * MIN, [result(5_000)]), (10.0, [result(5_000)])]
    stack = policy(layer("time_based_microcompact", gap_threshold_minutes=60, keep_recent=3), EDITS)
    sim = simulate_thread(thread(steps), stack, PRICES)
    calls = sim.calls
    assert calls[6].prompt_tokens == 16_000 and calls[6].usage.cache_read_tokens == 11_000
    # Call 7: the time-based path rewrites r1..r4 (deleted from the cache, still in the local
    # messages) to 9-token placeholders, and the cache-edit state is reset: its edits are no
    # longer sent, so r5, kept by keep_recent 3, is sent again. Net 4 x -9 - 5,000 = -5,036;
    # prompt 10,000 + 1,000 + 36 + r5..r7 = 26,036, all written (the cache is cold).
    assert calls[7].rewrote and not calls[7].cache_edit
    assert calls[7].newly_cleared_tokens == -5_036 and calls[7].prompt_tokens == 26_036
    assert (calls[7].usage.cache_read_tokens, calls[7].usage.cache_write_tokens) == (0, 26_033)
    # Call 8 registers r1..r8 again (8 > 3) and deletes what is still whole but r8: r5..r7.
    assert calls[8].cache_edit and calls[8].newly_cleared_tokens == 15_000
    assert calls[8].prompt_tokens == 16_036
    assert (calls[8].usage.cache_read_tokens, calls[8].usage.cache_write_tokens) == (11_036, 4_997)
    assert [(b.call_index, b.cause.value) for b in sim.breaks] == [(7, "ttl_expired")]


# ---------------------------------------------------------------- 5. time


def idle_thread(idle_s: float) -> CalThread:
    """Four calls 10 s apart, then a fifth whose request is sent `idle_s` after the fourth
    call's response was done (its last line is 20 s after its first), and whose first line is
    written 40 s after the request. 1-hour TTL."""
    steps = [(0.0, [text(1_000)])] + [(10.0, [result(5_000)])] * 4
    t = thread(steps, ttl="1h")
    c3 = t.calls[3]
    done = c3.timestamp_s + 20
    sent = done + idle_s
    t = retimed(t, 3, sent_s=c3.timestamp_s - 1, done_s=done)
    return retimed(t, 4, sent_s=sent, timestamp_s=sent + 40)


def test_time_based_microcompact_measures_idle_time_from_the_response_to_the_request() -> None:
    tb = policy(layer("time_based_microcompact", gap_threshold_minutes=60, keep_recent=1))
    # 59 min 30 s idle: no fire, although first line to first line is 20 + 3,570 + 40 s =
    # 60 min 30 s.
    quiet = simulate_thread(idle_thread(59.5 * MIN), tb, PRICES).calls
    assert not quiet[4].rewrote and quiet[4].newly_cleared_tokens == 0
    # Exactly 60 min: fires; r1..r3 cleared (3 x (5,000 - 9)).
    fired = simulate_thread(idle_thread(60 * MIN), tb, PRICES).calls
    assert fired[4].rewrote and fired[4].newly_cleared_tokens == 3 * 4_991


def test_a_gap_equal_to_the_ttl_is_a_miss_and_a_recorded_hit_the_ttl_cannot_explain_is_kept() -> (
    None
):
    # Recorded with the 5-minute TTL: the 60-minute gap before call 2 is a recorded miss.
    steps = [(0.0, [text(1_000)]), (10.0, [result(5_000)]), (60 * MIN, [result(5_000)])]
    t = thread(steps)
    hour = simulate_thread(t, policy(layer("none"), ttl="1h"), PRICES).calls
    # Under a 1-hour TTL the entry written by call 1's request dies exactly then: a miss.
    assert hour[2].usage.cache_read_tokens == 0
    just_before = [(0.0, [text(1_000)]), (10.0, [result(5_000)]), (60 * MIN - 1, [result(5_000)])]
    hour = simulate_thread(thread(just_before), policy(layer("none"), ttl="1h"), PRICES).calls
    assert hour[2].usage.cache_read_tokens == 16_000  # 59 min 59 s: alive, the whole prompt
    # The recording shows a hit on the whole previous prompt 400 s later with a 5-minute TTL
    # (kept warm elsewhere): the no-pruning replay keeps it, under any TTL.
    warm = retimed(
        thread([(0.0, [text(1_000)]), (10.0, [result(5_000)]), (10.0, [result(5_000)])]),
        2,
        timestamp_s=t.calls[1].timestamp_s + 400,
    )
    for ttl in ("recorded", "5m"):
        replay = simulate_thread(warm, policy(layer("none"), ttl=ttl), PRICES).calls
        assert replay[2].usage.cache_read_tokens == 16_000 == warm.calls[2].cache_read_tokens


# ---------------------------------------------------------------- 6. the recording pruned


def test_a_recorded_microcompact_is_not_a_compaction_and_the_policies_go_on() -> None:
    steps = [(0.0, [text(1_000)])] + [(10.0, [result(5_000)])] * 3
    t = retimed(thread(steps), 3, pruned="microcompact_boundary")
    edits = policy(layer("cached_microcompact", trigger_threshold=2, keep_recent=1))
    sim = simulate_thread(t, edits, PRICES).calls
    # Call 3 has r1..r3 registered (> 2): r1, r2 are deleted; a compaction would have reset
    # the registry and left only r3.
    assert sim[3].newly_cleared_tokens == 10_000 and not sim[3].compaction
    # When the recording names what it cleared (compactedToolIds: r1), its prompt is already
    # without r1: only r2 is left to delete.
    named = retimed(t, 3, pruned_ids=("t1-0",))
    assert simulate_thread(named, edits, PRICES).calls[3].newly_cleared_tokens == 5_000


def test_what_the_recording_deleted_itself_is_not_saved_again() -> None:
    # The recording ran cache edits itself (trigger 3, keep 1): from call 4 its prompts are
    # 16,000 (reads 11,000, writes 4,997), after deleting r1..r3 (15,000) at call 4 and one
    # result a call later, as `cache_deleted_input_tokens` shows.
    t = thread(BURST)
    for k in range(4, 10):
        t = retimed(
            t, k, cache_read_tokens=11_000, cache_write_5m_tokens=4_997, adjustment_tokens=0,
            pruned="cache_deletion", pruned_tokens=15_000 if k == 4 else 5_000,
        )  # fmt: skip
    base = simulate_thread(t, baseline(), PRICES).calls
    assert [c.prompt_tokens for c in base][3:] == [26_000] + [16_000] * 6
    # The same cache edits replayed find every result they would delete already gone: the
    # replay is the recording.
    sim = simulate_thread(t, policy(EDITS), PRICES).calls
    assert [c.prompt_tokens for c in sim] == [c.prompt_tokens for c in base]
    assert sum(c.newly_cleared_tokens for c in sim) == 0
    # Masking all but the newest result (8-token placeholder) saves 4,992 at calls 2 and 3
    # (r1, then r2: prompts 21,000 - 4,992 and 26,000 - 2 x 4,992); from call 4 the
    # recording has removed r1..r3 itself, so those savings end there and nothing is left to
    # mask: the prompts are the recording's again.
    masked = simulate_thread(t, policy(layer("keep_last_n", n=1)), PRICES).calls
    assert [c.prompt_tokens for c in masked] == [11_000, 16_000, 16_008, 16_016] + [16_000] * 6
    assert [c.newly_cleared_tokens for c in masked] == [0, 0, 4_992, 4_992] + [0] * 6


def pruning_session(root: Path) -> Path:
    """A session whose recording deleted 8,000 tokens from the cache (call 4) and then
    cleared a tool result itself (a microcompact boundary before call 5)."""
    lines = [user("u0", None, 0, "read the files")]
    reads = [(0, 11_000), (11_000, 5_000), (16_000, 5_000)]  # (cache read, cache write)
    parent = "u0"
    for k, (read, written) in enumerate(reads, start=1):
        at = 10.0 * k
        lines.append(
            assistant(f"a{k}", parent, at, f"m{k}", f"r{k}", u=usage(3, written, read),
                      content=[tool_use(f"t{k}", "Read", file_path=f"/f{k}")])
        )  # fmt: skip
        lines.append(user(f"u{k}", f"a{k}", at + 1, tool_result(f"t{k}", "x" * 400)))
        parent = f"u{k}"
    # Call 4: 8,000 tokens deleted from the cached 21,003: read 13,003, write 5,000.
    lines.append(
        assistant("a4", "u3", 40, "m4", "r4", u=usage(3, 5_000, 13_003,
                  cache_deleted_input_tokens=8_000),
                  content=[tool_use("t4", "Read", file_path="/f4")])
    )  # fmt: skip
    lines.append(user("u4", "a4", 41, tool_result("t4", "y" * 400)))
    lines.append(
        {
            "type": "system", "subtype": "microcompact_boundary", "uuid": "s5",
            "parentUuid": "u4", "sessionId": lines[0]["sessionId"],
            "timestamp": lines[-1]["timestamp"],
            "microcompactMetadata": {"trigger": "auto", "preTokens": 18_006,
                                     "tokensSaved": 4_000, "compactedToolIds": ["t2"]},
        }
    )  # fmt: skip
    # Call 5: the rewrite made the read fall back to the 10,000-token head.
    lines.append(assistant("a5", "s5", 50, "m5", "r5", u=usage(3, 9_009, 10_000)))
    return write(root / "projects" / "-p" / "s.jsonl", lines)


@pytest.mark.slow
def test_pruning_in_the_recording_is_counted_not_taken_for_a_compaction(tmp_path: Path) -> None:
    from mcsim import load_sessions

    path = pruning_session(tmp_path)
    sessions, _ = load_sessions([str(path)], detail=Detail.SIZES)
    calls = sessions[0].threads[0].calls
    assert [c.compaction for c in calls] == [None] * 5
    assert [c.pruned.kind if c.pruned else None for c in calls] == [
        None, None, None, CompactionKind.CACHE_DELETION, CompactionKind.MICROCOMPACT,
    ]  # fmt: skip
    assert calls[3].pruned is not None and calls[3].pruned.tokens_saved == 8_000
    assert calls[4].pruned is not None and calls[4].pruned.tool_use_ids == ("t2",)
    # Reads 0, 11,000, 16,000, 13,003, 10,000. The drop at call 4 (2,997: > 2,000 and > 5%)
    # is the recording's own cache edit: not a break. The drop at call 5 (3,003) follows its
    # own microcompact: an expected break, and no compaction.
    result = CliRunner().invoke(cli, ["inspect", str(path), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    session = doc["sessions"][0]
    assert (session["cache_breaks"], session["cache_edit_drops"]) == (1, 1)
    assert (session["compactions"], session["recorded_prunes"]) == (0, 2)
    assert [(b["call_index"], b["cause"], b["expected"]) for b in doc["breaks"]] == [
        (4, "policy_clearing", True)
    ]
    policy = ["--policy", str(_policies(tmp_path))]
    replay = CliRunner().invoke(
        cli, ["replay", str(path), *policy, "--json", "--out", str(tmp_path / "run")]
    )
    assert replay.exit_code == 0, replay.output
    out = json.loads(replay.stdout)
    assert out["recorded"]["prunes"] == {"cache_deletion": 1, "microcompact_boundary": 1}
    assert (out["recorded"]["cache_breaks"], out["recorded"]["cache_edit_drops"]) == (1, 1)
    base = out["policies"][0]
    assert (base["name"], base["cache_breaks"], base["cache_edit_drops"]) == ("baseline", 1, 1)
    assert out["fidelity"]["overall_error"] == 0
    text_out = CliRunner().invoke(
        cli, ["replay", str(path), *policy, "--out", str(tmp_path / "r2")]
    )
    assert (
        "note: the recording already pruned 2 times (1 cache deletion, 1 microcompact boundary)"
        in text_out.stdout
    )


def _policies(root: Path) -> Path:
    path = root / "p.yaml"
    path.write_text("policies:\n  - {name: cc, kind: time_based_microcompact}\n")
    return path


@pytest.mark.parametrize(("gap_s", "cause"), [(290.0, "unknown"), (300.0, "ttl_expired")])
def test_inspect_times_the_ttl_from_request_to_request(
    tmp_path: Path, gap_s: float, cause: str
) -> None:
    # Call 2's request (the tool result at 35 s) reads call 1's whole prompt. Call 3's request
    # (the user line) is sent `gap_s` after it, and its first line 30 s later; it reads
    # nothing. From request to request the gap is `gap_s`; first line to first line it is
    # gap_s + 25 (315 s for 290: past the TTL, but the entry was alive when the request went).
    lines = [
        user("u0", None, 0.0),
        assistant("a1", "u0", 30.0, "m1", "r1", u=usage(3, 20_000, 0),
                  content=[tool_use("t1", "Bash", command="make")]),
        user("u1", "a1", 35.0, tool_result("t1", "done")),
        assistant("a2", "u1", 40.0, "m2", "r2", u=usage(3, 100, 20_003)),
        user("u2", "a2", 35.0 + gap_s, "next"),
        assistant("a3", "u2", 65.0 + gap_s, "m3", "r3", u=usage(3, 20_106, 0)),
    ]  # fmt: skip
    path = write(tmp_path / "projects" / "-p" / "s.jsonl", lines)
    doc = json.loads(CliRunner().invoke(cli, ["inspect", str(path), "--json"]).stdout)
    assert [(b["call_index"], b["cause"], b["gap_seconds"]) for b in doc["breaks"]] == [
        (2, cause, gap_s)
    ]


def test_a_bad_cache_deleted_count_is_dropped_not_the_call(tmp_path: Path) -> None:
    lines = [
        user("u0", None, 0),
        assistant("a1", "u0", 5, "m1", "r1", u=usage(3, 2_000, 0, cache_deleted_input_tokens="x")),
        user("u1", "a1", 6),
        assistant("a2", "u1", 9, "m2", "r2", u=usage(3, 100, 2_003, cache_deleted_input_tokens=-5)),
    ]
    path = write(tmp_path / "projects" / "-p" / "s.jsonl", lines)
    doc = json.loads(CliRunner().invoke(cli, ["inspect", str(path), "--json"]).stdout)
    # Both calls stand (it bills nothing); each bad value is a counted repair, not a prune.
    assert doc["totals"]["calls"] == 2 and doc["sessions"][0]["recorded_prunes"] == 0
    assert doc["skipped"]["repaired_by_reason"] == {"bad_field": 2}
    assert [e["line"] for e in doc["skipped"]["examples"]] == [2, 4]
