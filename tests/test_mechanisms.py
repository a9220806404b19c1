"""Each mechanism as documented (docs/domain.md: the pruning policies, cache mechanics, the
cache-break detector), on small threads whose numbers are worked out by hand in the comments:
when a cache edit takes effect and what it bills, the rolling window of cached microcompact,
how each mechanism measures time, and pruning the recording already did."""

from __future__ import annotations

import json
import math
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from conftest import replay_doc
from lines import assistant, tool_result, tool_use, usage, user, write
from simthreads import result, text, thinking, thread

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


def test_a_ttl_that_ran_out_on_the_call_of_a_cache_edit_is_a_drop_named_for_the_ttl() -> None:
    steps = list(BURST)
    steps[4] = (400.0, steps[4][1])  # 400 s before call 4: past the 5-minute TTL
    sim = simulate_thread(thread(steps), policy(EDITS), PRICES)
    # Cold cache: nothing read, the whole edited prompt (16,000 - 3) written.
    call = sim.calls[4]
    assert call.cache_edit and (call.usage.cache_read_tokens, call.usage.cache_write_tokens) == (
        0,
        15_997,
    )
    # The drop (26,000 -> 0) keeps its cause, the TTL; Claude Code's detector, told of the
    # cache edit (notifyCacheDeletion), does not report it: a drop, not a break.
    assert sim.breaks == ()
    drops = [(d.call_index, d.cause.value, d.announced) for d in sim.announced_drops]
    assert drops == [(4, "ttl_expired", True)]
    assert sim.edit_drops == ()  # the TTL explains it, not the edit


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
    # Reads 0, 11,000, 16,000, 21,000, 11,000 (the edit at call 4), 11,000, 11,000, 0 (call 7),
    # 11,036. Both drops were announced to the detector (the edit; the time-based rewrite,
    # whose TTL drop Claude Code's detector is told of): drops by cause, no break.
    assert sim.breaks == ()
    assert [(d.call_index, d.cause.value) for d in sim.announced_drops] == [
        (4, "cache_edit"),
        (7, "ttl_expired"),
    ]


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
    # is the recording's own cache edit, the drop at call 5 (3,003) follows its own
    # microcompact: Claude Code's detector is told of both, so neither is a break; both are
    # drops, and there is no compaction.
    result = CliRunner().invoke(cli, ["inspect", str(path), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    session = doc["sessions"][0]
    assert (session["cache_breaks"], session["cache_edit_drops"], session["cache_drops"]) == (
        0,
        1,
        2,
    )
    assert (session["compactions"], session["recorded_prunes"]) == (0, 2)
    assert doc["breaks"] == []
    policy = ["--policy", str(_policies(tmp_path))]
    replay = CliRunner().invoke(
        cli, ["replay", str(path), *policy, "--json", "--out", str(tmp_path / "run")]
    )
    assert replay.exit_code == 0, replay.output
    out = json.loads(replay.stdout)
    assert out["recorded"]["prunes"] == {"cache_deletion": 1, "microcompact_boundary": 1}
    assert (out["recorded"]["cache_breaks"], out["recorded"]["cache_edit_drops"]) == (0, 1)
    assert out["recorded"]["drops_by_cause"] == {"cache_edit": 1, "policy_clearing": 1}
    base = out["policies"][0]
    assert (base["name"], base["cache_breaks"], base["cache_edit_drops"]) == ("baseline", 0, 1)
    assert base["cache_drops"] == 2
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


# ---------------------------------------------------------------- 7. keep_recent 0


def test_keep_recent_0_acts_as_1_with_a_note(tmp_path: Path) -> None:
    """Claude Code floors the results a microcompact keeps at 1 (`Math.max(1, keepRecent)`):
    keep_recent 0 is accepted and acts as 1, and the run says so."""
    # The time-based path after exactly 60 idle minutes: r1..r4 in the prompt, the newest
    # kept, r1..r3 cleared to 9-token placeholders: 3 x (5,000 - 9) = 14,973, as with 1.
    for keep in (0, 1):
        tb = policy(layer("time_based_microcompact", gap_threshold_minutes=60, keep_recent=keep))
        fired = simulate_thread(idle_thread(60 * MIN), tb, PRICES).calls
        assert fired[4].rewrote and fired[4].newly_cleared_tokens == 14_973
    # Cache edits (trigger 3): at call 4 four results are registered, all but the newest are
    # deleted, r1..r3 = 15,000; then one a call (5,000): the rolling window of 1.
    zero = layer("cached_microcompact", trigger_threshold=3, keep_recent=0)
    edits = simulate_thread(thread(BURST), policy(zero), PRICES).calls
    assert [c.newly_cleared_tokens for c in edits] == [0] * 4 + [15_000] + [5_000] * 5
    # A policy file may say 0; the replay's notes say what it did with it.
    path = tmp_path / "p.yaml"
    path.write_text(
        "policies:\n  - name: cc0\n    stack:\n"
        "      - {kind: time_based_microcompact, keep_recent: 0}\n"
        "      - {kind: cached_microcompact, keep_recent: 1}\n"
    )
    doc = replay_doc([str(pruning_session(tmp_path))], str(path))
    note = (
        "cc0: time_based_microcompact: keep_recent 0 acts as 1: Claude Code never keeps fewer "
        "than the newest result (Math.max(1, keepRecent))"
    )
    assert note in doc["notes"]


def test_latched_without_after_gap_minutes_is_noted() -> None:
    """`latched` keeps clear_thinking applying after a cold start; without
    `after_gap_minutes` it applies on every call anyway, so `latched: true` alone changes
    nothing: accepted (a sweep may cross it with after_gap_minutes=none), and the run's notes
    say so rather than let it pass for a setting."""
    notes = [
        layer("clear_thinking", keep=1, after_gap_minutes=gap, latched=latched)
        .build()
        .value_notes()
        for gap, latched in ((None, True), (None, False), (60, True), (60, False))
    ]
    assert notes == [
        ["latched changes nothing without after_gap_minutes: it applies on every call already"],
        [],
        [],
        [],
    ]


# ---------------------------------------------------------------- 8. model support


def test_a_layer_on_a_model_that_cannot_use_it_does_not_apply_and_the_notes_say_so() -> None:
    """Context editing is documented for Claude 4 models and later, cache edits are assumed
    the same (Claude Code's list is not public): on Sonnet 3.7 neither applies."""
    from mcsim.replay.calibrate import CalSession
    from mcsim.replay.run import ReplayReport, replay_session

    api = layer("clear_tool_uses", trigger_input_tokens=20_000, keep=1)
    # On Sonnet 4.5, call 2 (prompt 21,000 > 20,000) clears r1 to a 9-token placeholder.
    sim = simulate_thread(thread(BURST), policy(api), PRICES)
    assert sim.calls[2].newly_cleared_tokens == 4_991 and sim.unsupported == ()
    old = thread(BURST, model="claude-3-7-sonnet-20250219")
    for kind in (api, EDITS):
        sim = simulate_thread(old, policy(kind), PRICES)
        assert sum(c.newly_cleared_tokens for c in sim.calls) == 0
        assert sim.unsupported == ((kind.kind, "claude-3-7-sonnet-20250219", 10),)
        # ... and the replay is the unpruned one, call for call.
        base = simulate_thread(old, baseline(), PRICES)
        assert [c.usage for c in sim.calls] == [c.usage for c in base.calls]
    scenarios = [baseline(), Scenario("api", (api,))]
    report = ReplayReport(scenarios)
    report.add(replay_session(CalSession("s", "p", None, (), (old,)), scenarios, PRICES, False))
    (note,) = report.layer_notes()
    assert note.startswith(
        "api: clear_tool_uses did not apply on 10 calls of models that cannot use context "
        "editing: claude-3-7-sonnet-20250219 (10); it applies on Haiku 4.5, 5.5; Opus 4, 4.1, "
        "4.5, 4.6, 4.7, 4.8, 5, 5.5; Sonnet 4, 4.5, 4.6, 5, 5.5; claude-fable-5"
    )
    assert "as documented, as of 2026-12-03: https://platform.claude.com/" in note


# ---------------------------------------------------------------- 9. thinking on the cold start


def cold_start_session() -> CalThread:
    """Opus 4.5 (earlier thinking is re-sent), 1-hour TTL, four user turns each answered with
    thinking and a 50-token text, after idle gaps of 10, 65 and 20 minutes. Recorded prompts
    from a 10,000-token head: 10,100; + 2,000 + 50 + 100 = 12,250; + 3,000 + 50 + 100 =
    15,400; + 1,000 + 50 + 100 = 16,550. The 65-minute gap is past the TTL: a recorded miss."""
    steps = [
        (0.0, [text(100, turn=1)]),
        (10 * MIN, [thinking(2_000, turn=1), text(50, turn=1), text(100, turn=2)]),
        (65 * MIN, [thinking(3_000, turn=2), text(50, turn=2), text(100, turn=3)]),
        (20 * MIN, [thinking(1_000, turn=3), text(50, turn=3), text(100, turn=4)]),
    ]
    return thread(steps, ttl="1h", model="claude-opus-4-5-20251101")


def test_claude_code_clears_thinking_once_on_the_cold_start() -> None:
    from mcsim.replay.scenario import load_policy_file

    t = cold_start_session()
    preset = Path(__file__).parents[1] / "policies" / "claude-code.yaml"
    (claude_code,) = [s for s in load_policy_file(preset) if s.name == "claude-code"]
    sim = simulate_thread(t, claude_code, PRICES)
    base = simulate_thread(t, baseline(), PRICES)
    # After 10 minutes the cache is warm: keep "all", nothing cleared. After 65 minutes (cold
    # start) turn 1's thinking goes, turn 2's (the newest with thinking) stays: 2,000 tokens,
    # once. After 20 minutes, warm again: turn 2's thinking is kept though turn 3 has some.
    assert [c.newly_cleared_tokens for c in sim.calls] == [0, 0, 2_000, 0]
    assert [c.prompt_tokens for c in sim.calls] == [10_100, 12_250, 13_400, 14_550]
    assert [c.rewrote for c in sim.calls] == [False, False, True, False]
    # The cold call misses as the recording did (the 1-hour entry is gone after 65 minutes)
    # and writes its smaller prompt, 13,400 - 3; the next call reads all of it, 13,400, and
    # writes the new turn, 14,550 - 3 - 13,400 = 1,147. No miss the TTL did not cause.
    assert [c.usage.cache_read_tokens for c in base.calls] == [0, 10_100, 0, 15_400]
    assert [c.usage.cache_read_tokens for c in sim.calls] == [0, 10_100, 0, 13_400]
    assert [c.usage.cache_write_1h_tokens for c in sim.calls] == [10_097, 2_147, 13_397, 1_147]
    # Opus 4.5: 1-hour writes $10, reads $0.50 per million: 2,000 tokens written less at the
    # cold call ($0.02) and read less at the next ($0.001).
    saved = sum(b.cost_usd or 0 for b in base.calls) - sum(c.cost_usd or 0 for c in sim.calls)
    assert saved == pytest.approx(0.021)


def test_latched_thinking_clearing_goes_on_after_the_cold_start() -> None:
    """Claude Code's source latches the cold-start clearing for the rest of the session
    (`thinkingClearLatched`): `latched: true` keeps applying keep 1 after the cold start."""
    t = cold_start_session()
    latched = policy(layer("clear_thinking", keep=1, after_gap_minutes=60, latched=True))
    sim = simulate_thread(t, latched, PRICES).calls
    # As above at the cold call; then at the 20-minute call turn 3 brings thinking, so turn
    # 2's 3,000 tokens go too: a rewrite on a warm cache. Prompt 16,550 - 5,000 = 11,550;
    # the read falls back to the 10,000-token head (the first call's entry, the only one
    # before the change, died an hour after it was last read, at 10 minutes): 11,550 - 3 -
    # 10,000 = 1,547 written.
    assert [c.newly_cleared_tokens for c in sim] == [0, 0, 2_000, 3_000]
    assert [c.prompt_tokens for c in sim] == [10_100, 12_250, 13_400, 11_550]
    assert (sim[3].usage.cache_read_tokens, sim[3].usage.cache_write_1h_tokens) == (10_000, 1_547)
    # Without after_gap_minutes it applies on every call, as before: turn 1's thinking goes
    # at call 2 already (turn 2 brings thinking), turn 2's at call 3.
    every = simulate_thread(t, policy(layer("clear_thinking", keep=1)), PRICES).calls
    assert [c.newly_cleared_tokens for c in every] == [0, 0, 2_000, 3_000]


# ---------------------------------------------------------------- 10. the detector


def test_breaks_are_what_claude_codes_detector_reports_and_every_drop_is_kept() -> None:
    """Claude Code's detector is told of a compaction (the baseline is reset), of its cache
    edits and of its time-based rewrite (notifyCacheDeletion): those drops are not reported.
    Every other drop of more than 5% and 2,000 tokens is, a TTL expiry included; nothing
    explains only a changed prefix and a miss on a warm cache."""
    from mcsim.accounting.breaks import CallObservation, detect_breaks, split_drops

    five = 300.0
    # (seconds since the previous request, model, read, what the call announced)
    steps = [
        (0.0, "s", 20_000, {}),
        (400.0, "s", 0, {}),  # 1: a TTL miss, reported (explained)
        (10.0, "s", 20_000, {}),
        (10.0, "s", 10_000, {"rewrote": True}),  # 3: the policy's own rewrite on a warm cache
        (10.0, "s", 20_000, {}),
        (10.0, "s", 10_000, {"compaction_before": True}),  # 5: after a compaction
        (10.0, "s", 20_000, {}),
        (10.0, "s", 14_000, {"cache_edit": True}),  # 7: a cache edit deleted 6,000
        (10.0, "s", 20_000, {}),
        (4_000.0, "s", 0, {"rewrote": True}),  # 9: time-based MC after an hour: the TTL's drop
        (10.0, "s", 20_000, {}),
        (10.0, "s", 12_000, {}),  # 11: a warm read fell back to 12,000: a prefix change
        (10.0, "s", 20_000, {}),
        (10.0, "s", 0, {}),  # 13: nothing read on a warm cache
        (10.0, "s", 20_000, {}),
        (10.0, "o", 0, {}),  # 15: another model, another cache
        (10.0, "o", 20_000, {}),
        (10.0, "o", 18_500, {}),  # 16: 1,500 less: under 2,000, no drop
    ]
    now, calls = 0.0, []
    for gap, model, read, told in steps:
        now += gap
        calls.append(CallObservation(now, model, read, five, **told))
    drops = detect_breaks(calls)
    breaks, announced = split_drops(drops)
    assert [(d.call_index, d.cause.value) for d in breaks] == [
        (1, "ttl_expired"), (11, "prefix_changed"), (13, "unknown"), (15, "model_switch"),
    ]  # fmt: skip
    assert [(d.call_index, d.cause.value) for d in announced] == [
        (3, "policy_clearing"), (5, "compaction"), (7, "cache_edit"), (9, "ttl_expired"),
    ]  # fmt: skip
    # Unexpected: what nothing explains.
    assert [d.call_index for d in breaks if not d.expected] == [11, 13]


def test_every_call_of_consecutive_rewrites_is_flagged_and_their_drops_are_kept() -> None:
    from mcsim.outputs.replay_tables import calls_frame
    from mcsim.replay.calibrate import CalSession
    from mcsim.replay.run import ReplayReport, replay_session

    # Keep the newest result only: from call 2 every call rewrites (masks the result before
    # the newest) and reads back what the first call's entry holds, head + text (11,000: it
    # ends before r1, every later entry holds a result since masked), as call 1 read. The
    # reads do not drop at all: nothing in them shows the rewrites, each call's `rewrote`
    # flag does.
    scenarios = [baseline(), Scenario("keep1", (layer("keep_last_n", n=1),))]
    report = ReplayReport(scenarios)
    session = CalSession("s", "p", None, (), (thread(BURST),))
    report.add(replay_session(session, scenarios, PRICES, keep_rows=True))
    calls = calls_frame(report).filter(pl.col("policy") == "keep1").sort("call_index")
    assert calls["rewrote"].to_list() == [False, False] + [True] * 8
    assert calls["cache_read_tokens"].to_list() == [0] + [11_000] * 9
    assert calls["break_cause"].null_count() == 10 and not any(calls["is_break"].to_list())
    totals = report.policies["keep1"]
    assert (totals.cache_breaks, totals.unexpected_breaks, totals.cache_drops) == (0, 0, 0)


# ---------------------------------------------------------------- 11. the cache's lookback


def tool_steps(tools: list[str], gap: float = 10.0) -> CalThread:
    """A 1,000-token text, then one tool call a call: a 50-token input and a 5,000-token
    result (2 content blocks). Prompt k = 11,000 + 5,050 k; the first call's entry ends at
    block 1, call k's at block 1 + 2k."""
    from simthreads import tool_call

    return thread([(0.0, [text(1_000)])] + [(gap, tool_call(t, 50, 5_000)) for t in tools])


def test_a_change_3_steps_back_reads_up_to_the_entry_before_it() -> None:
    """Every request writes an entry at its end; a lookup checks the block boundaries up to 20
    blocks before its breakpoint for one. A rewrite that changes a block a few calls back
    still reads everything up to the last entry that ends before the change."""
    tools = ["Read"] * 6 + ["Bash"] + ["Read"] * 4  # the Bash call is call 7's
    api = policy(layer("clear_tool_uses", trigger_input_tokens=60_000, keep=3,
                       exclude_tools=["Read"]))  # fmt: skip
    sim = simulate_thread(tool_steps(tools), api, PRICES).calls
    # Call 10 (61,500 > 60,000) keeps the 3 newest tool uses and clears the only older one
    # not excluded, the Bash result of call 7: 5,000 - 9 = 4,991; prompt 56,509.
    assert [c.newly_cleared_tokens for c in sim] == [0] * 10 + [4_991, 0]
    assert sim[10].prompt_tokens == 56_509
    # The change is at that result, 41,350 tokens in (call 6's prompt, 41,300, and call 7's
    # 50-token input). Call 6's entry ends at 41,300, before it; calls 7 to 9's hold the
    # result. Call 6's entry is alive (call 7 read it 30 s before) and 8 blocks back (it ends
    # at block 13, call 10 at 21): read 41,300, write 56,509 - 3 - 41,300 = 15,206.
    assert (sim[10].usage.cache_read_tokens, sim[10].usage.cache_write_tokens) == (41_300, 15_206)
    # The next call reads the rewritten prompt whole: 56,509.
    assert sim[11].usage.cache_read_tokens == 56_509
    # 100 s apart, call 6's entry is gone at call 10: call 7 read it last, at 700 s, and
    # call 10 comes at 1,000 s, the 5-minute TTL later (each entry lives 5 minutes from its
    # last write or hit; call 9's, written 100 s before, is alive but holds the result).
    # Back to the head: 10,000 read, 56,509 - 3 - 10,000 = 46,506 written.
    slow = simulate_thread(tool_steps(tools, gap=100.0), api, PRICES).calls
    assert (slow[10].usage.cache_read_tokens, slow[10].usage.cache_write_tokens) == (
        10_000,
        46_506,
    )


def test_a_change_15_steps_back_reads_the_head() -> None:
    tools = ["Bash"] + ["Read"] * 15  # the Bash call is call 1's
    api = policy(layer("clear_tool_uses", trigger_input_tokens=90_000, keep=15,
                       exclude_tools=["Read"]))  # fmt: skip
    sim = simulate_thread(tool_steps(tools), api, PRICES).calls
    # Call 16 (91,800 > 90,000) keeps the 15 newest tool uses and clears the Bash result of
    # call 1: 4,991; prompt 86,809. The only entry that ends before it is the first call's
    # (11,000, alive: it was read at 10 s), but it ends at block 1 and call 16 at block 33:
    # 32 blocks back, past the 20 a lookup checks. Every later entry holds the result. Back
    # to the 10,000-token head: write 86,809 - 3 - 10,000 = 76,806.
    assert sim[16].rewrote and sim[16].prompt_tokens == 86_809
    assert (sim[16].usage.cache_read_tokens, sim[16].usage.cache_write_tokens) == (10_000, 76_806)


def test_a_rolling_mask_reads_the_entry_before_it_began_while_the_lookback_reaches_it() -> None:
    """Masking the result 3 steps back on every call: each call's mask changes a block held
    by every entry written since masking began (each holds results masked since), so only
    the entries before the first masked result still match."""
    sim = simulate_thread(tool_steps(["Read"] * 12), policy(layer("keep_last_n", n=3)), PRICES)
    calls = sim.calls
    # From call 4 one more result is masked each call (5,000 - 8 = 4,992 saved). The first
    # call's entry (head + text: 11,000) ends before them all and is refreshed each time it
    # is read; it is within 20 blocks of calls 4 to 10 (blocks 9 to 21 from block 1), not of
    # calls 11 and 12 (23 and 25): those read the 10,000-token head.
    assert [c.newly_cleared_tokens for c in calls][3:] == [0] + [4_992] * 9
    assert [c.usage.cache_read_tokens for c in calls][4:] == [11_000] * 7 + [10_000] * 2
    # Prompt k = 11,000 + 5,050 k - 4,992 (k - 3): call 10, 61,500 - 34,944 = 26,556,
    # written 26,556 - 3 - 11,000 = 15,553; call 11, 66,550 - 39,936 = 26,614, written
    # 26,614 - 3 - 10,000 = 16,611; call 12, 26,672, written 16,669.
    assert [c.usage.cache_write_tokens for c in calls][10:] == [15_553, 16_611, 16_669]


# ---------------------------------------------------------------- 12. API context editing


def cookbook_run() -> CalThread:
    """The second clearing run of Anthropic's cookbook (tool_use/context_engineering/
    context_engineering_tools.ipynb, claude-sonnet-4-6): request k sends the responses to
    requests 1..k-1 and their results. Response 1 views the memory; 2 reads four documents
    (41,260, 41,200, 41,101 and 41,115 tokens); 3 writes a memory note; 4 reads four more
    (41,155, 41,095, 41,017, 41,012); 5 to 8 use the memory; 9 and 10 search twice each; 11
    records a finding; 12 edits the memory. Tool inputs 30 tokens, small results 20, the
    notes 2,500. The server compacted at request 5, but the client still sends the whole
    history, which is what this thread's prompts are."""
    from simthreads import tool_call

    def calls(tool: str, *results: int, given: int = 30) -> list:
        return [seg for r in results for seg in tool_call(tool, given, r)]

    reads_a, reads_b = (41_260, 41_200, 41_101, 41_115), (41_155, 41_095, 41_017, 41_012)
    steps = [
        (0.0, [text(1_106)]),
        (10.0, calls("memory", 20)),
        (10.0, calls("read_file", *reads_a)),
        (10.0, calls("memory", 20, given=2_500)),
        (10.0, calls("read_file", *reads_b)),
        (10.0, calls("memory", 20)),
        (10.0, calls("memory", 2_370)),
        (10.0, calls("memory", 20, given=2_500)),
        (10.0, calls("memory", 20, given=2_500)),
        (10.0, calls("search_files", 20, 20)),
        (10.0, calls("search_files", 20, 20)),
        (10.0, calls("record_finding", 20)),
        (10.0, calls("memory", 20)),
    ]
    return thread(steps, head=1_000, model="claude-sonnet-4-5-20250929")


def test_context_editing_as_anthropics_recorded_run_shows_it() -> None:
    """Trigger 200,000, keep 6, clear_at_least 30,000, the memory tool excluded. The run
    reported, per request, the tool uses cleared: none until request 5 (index 4 here), then
    2 (the first two reads) on requests 5 to 9, then 4 (the batch's four) on 10 to 13, the
    same figure again and again: the edit is worked out on every request from the history
    the client sends, and the cleared set grows in steps and then holds."""
    t = cookbook_run()
    observed = [0, 0, 0, 0, 2, 2, 2, 2, 2, 4, 4, 4, 4]
    read = [41_260, 41_200, 41_101, 41_115]

    def cleared(**values: object) -> list[int]:
        api = layer("clear_tool_uses", trigger_input_tokens=200_000, keep=6,
                    clear_at_least=30_000, exclude_tools=["memory"], **values)  # fmt: skip
        sim = simulate_thread(t, policy(api), PRICES).calls
        # results cleared so far, from the tokens removed (9-token placeholders)
        sizes = {0: 0, sum(read[:2]) - 18: 2, sum(read) - 36: 4}
        return [sizes.get(c.cleared_tokens, -1) for c in sim]

    # In steps, keep counting only the tools it may clear: request 5 (333,871 tokens sent)
    # clears all but the 6 newest reads, the first two (82,442 net); requests 6 to 9 add
    # only memory uses: the history less what it clears (251,479 to 258,919) is over the
    # trigger, but nothing new is older than keep. Request 10 brings two searches: the next
    # two reads fall out of keep (82,198 more, over 30,000). From request 11 the history less
    # the four (176,921 and up) is under the trigger: the set holds, though two newer reads
    # are past keep. Every request matches.
    assert cleared(keep_counts_excluded=False) == observed
    # Clearing all but keep on every request (stateless, trigger on the history sent) would
    # have cleared those two newer reads at request 11 and the next at 12: what Anthropic's
    # run rules out.
    every = cleared(keep_counts_excluded=False, cleared_set="every_request")
    assert every[:10] == observed[:10] and every[10] != 4
    # Counting the excluded memory uses in keep (mcsim's default, the documentation's
    # silence) clears a third read at request 5 already.
    assert cleared()[4] == -1 != observed[4]


def test_both_readings_of_the_cleared_set_are_reported_as_a_range(tmp_path: Path) -> None:
    from mcsim.outputs.replay_tables import replay_json, summary_frame
    from mcsim.replay.calibrate import CalSession
    from mcsim.replay.run import ReplayReport, replay_session
    from mcsim.replay.verdict import verdict

    # BURST, each result from a file of its own (none read again: re-fetch risk 0%, assessed)
    t = thread([BURST[0]] + [(10.0, [result(5_000, resource=f"/f{k}")]) for k in range(1, 10)])
    steps = policy(layer("clear_tool_uses", trigger_input_tokens=30_000, keep=1))
    every = policy(layer("clear_tool_uses", trigger_input_tokens=30_000, keep=1,
                         cleared_set="every_request"))  # fmt: skip
    # Prompt k = 11,000 + 5,000 k. In steps: call 4 (31,000) clears r1..r3, 3 x (5,000 - 9)
    # = 14,973; calls 5 and 6 hold (36,000 and 41,000 less 14,973: under 30,000); call 7
    # (46,000 - 14,973 = 31,027) clears r4..r6. On every request: r1..r3 at call 4, then
    # each call the result that left keep, 4,991.
    in_steps = simulate_thread(t, steps, PRICES).calls
    on_each = simulate_thread(t, every, PRICES).calls
    assert [c.newly_cleared_tokens for c in in_steps] == [0] * 4 + [14_973, 0, 0, 14_973, 0, 0]
    assert [c.newly_cleared_tokens for c in on_each] == [0] * 4 + [14_973] + [4_991] * 5
    # Each rewrite reads the first call's entry back (11,000: it ends before r1 and is within
    # the lookback); in steps the calls between read the whole previous prompt. Reads: in
    # steps 144,162, writes 56,051; on every request 114,000 and 56,267 (its prompts stay at
    # 16,027..16,072). Sonnet 4.5 ($3 input, $3.75 5m write, $0.30 read, $15 output per
    # million; 30 input and 1,000 output tokens in all): 0.26852985 and 0.26029125.
    assert sum(c.usage.cache_read_tokens for c in in_steps) == 144_162
    assert sum(c.usage.cache_read_tokens for c in on_each) == 114_000
    assert sum(c.cost_usd or 0 for c in in_steps) == pytest.approx(0.26852985)
    assert sum(c.cost_usd or 0 for c in on_each) == pytest.approx(0.26029125)
    # The replay models the reading the policy names (in steps by default) and keeps the
    # other's cost beside it: the range of its savings against no pruning (0.3086775).
    scenarios = [baseline(), Scenario("api", steps.layers)]
    report = ReplayReport(scenarios)
    report.add(replay_session(CalSession("s", "p", None, (), (t,)), scenarios, PRICES, False))
    totals = report.policies["api"]
    assert totals.cleared_set_other_usd == pytest.approx(0.26029125 - 0.26852985)
    modelled = 100 * (1 - 0.26852985 / 0.3086775)  # +13.01%
    other = 100 * (1 - 0.26029125 / 0.3086775)  # +15.68%
    found = verdict(report)
    (outcome,) = found.results
    assert outcome.net_savings_pct == pytest.approx(modelled)
    assert outcome.other_cleared_set_net_pct == pytest.approx(other)
    assert (
        "rests on API context editing's cleared-set rule, which Anthropic does not document: "
        "+13.01% net clearing in steps (modelled), +15.68% clearing all but keep on every request"
    ) in found.text
    assert found.as_json()["net_savings_if_other_cleared_set_pct"] == pytest.approx(other)
    summary = summary_frame(report).filter(pl.col("policy") == "api")
    assert summary["net_savings_if_other_cleared_set_pct"].to_list() == [pytest.approx(other)]
    (api,) = [p for p in replay_json(report, None)["policies"] if p["name"] == "api"]
    assert api["net_savings_if_other_cleared_set_pct"] == pytest.approx(other)
    # A policy without API context editing has no such range.
    assert math.isnan(verdict_for(report, "baseline"))


def verdict_for(report: object, name: str) -> float:
    from mcsim.replay.sweep import Variant, outcomes

    assert hasattr(report, "scenarios")
    (scenario,) = [s for s in report.scenarios if s.name == name]
    (outcome,) = outcomes(report, [Variant((), scenario)])  # type: ignore[arg-type]
    return outcome.other_cleared_set_net_pct


def test_the_trigger_is_measured_on_the_history_the_client_sends() -> None:
    """Two API strategies on one request: the second's trigger is not lowered by what the
    first clears (both are worked out on the server from what the client sends); a
    client-side rewrite does lower it (the client sends less)."""
    tools = ["Read", "Bash"] * 3  # results of 5,000 tokens, calls 1..6
    t = thread([(0.0, [text(1_000)])] + [(10.0, [result(5_000, tool)]) for tool in tools])
    reads = layer("clear_tool_uses", trigger_input_tokens=30_000, keep=1, exclude_tools=["Bash"])
    shells = layer("clear_tool_uses", trigger_input_tokens=30_000, keep=1, exclude_tools=["Read"])
    sim = simulate_thread(t, policy(reads, shells), PRICES).calls
    # Call 4 (31,000 > 30,000): the first clears the Reads older than the newest use (r1, r3:
    # 2 x 4,991 = 9,982); the second, its trigger still on the 31,000 sent, clears the Bash
    # r2: 4,991. (Were it measured on what the first left, 21,018, it would not.)
    assert sim[4].newly_cleared_tokens == 3 * 4_991
    assert sim[4].prompt_tokens == 31_000 - 14_973
    # A client-side rewrite first: the time-based path after 61 idle minutes keeps the
    # newest compactable result and clears r2 and r3 (9,982); an MCP result, r1, is not
    # compactable. The client sends 31,000 - 9,982 = 21,018, under the trigger, so the API
    # strategy, which would clear the MCP result too (14,973 in all), clears nothing.
    mcp = ["mcp__s__t", "Bash", "Read", "Bash"]
    steps = [(0.0, [text(1_000)])] + [(10.0, [result(5_000, tool)]) for tool in mcp]
    steps[4] = (61 * MIN, steps[4][1])
    tb = layer("time_based_microcompact", gap_threshold_minutes=60, keep_recent=1)
    both = simulate_thread(thread(steps), policy(tb, reads), PRICES).calls
    assert both[4].newly_cleared_tokens == 9_982 and both[4].prompt_tokens == 21_018
    # Alone, on the 31,000 sent, it clears the MCP result and r3 (Bash is excluded): 9,982.
    alone = simulate_thread(thread(steps), policy(reads), PRICES).calls
    assert alone[4].newly_cleared_tokens == 9_982 and alone[4].rewrote


def test_a_model_listed_by_name_is_not_taken_for_its_later_versions() -> None:
    """Models mcsim cannot parse (claude-fable-5, claude-mythos-preview) are listed by name:
    the name with a date or a variant after it is that model, a longer version is not (a
    prefix match took claude-fable-5-10 and claude-fable-50 for claude-fable-5)."""
    from mcsim.replay.model_support import CONTEXT_EDITING, features

    feature = features()[CONTEXT_EDITING]
    listed = ["claude-fable-5", "claude-fable-5-1", "claude-fable-5-20260301",
              "claude-fable-5-1-20260301", "claude-mythos-preview", "claude-fable-5[1m]",
              "claude-mythos-5@20260301", "CLAUDE-FABLE-5"]  # fmt: skip
    others = ["claude-fable-50", "claude-fable-5-10", "claude-fable-5-2", "claude-mythos-preview-2",
              "claude-mythos-previewer", "claude-fable-5-1-1"]  # fmt: skip
    assert [m for m in listed if not feature.supports(m)] == []
    assert [m for m in others if feature.supports(m)] == []
