"""The break detector: Claude Code's thresholds and mcsim's causes."""

from __future__ import annotations

from mcsim.accounting.breaks import BreakCause, CallObservation, detect_breaks, is_drop, split_drops


def obs(t: float, read: int, *, model: str = "m", ttl: float = 300, **kw: bool) -> CallObservation:
    return CallObservation(t, model, read, ttl, **kw)


def test_threshold_needs_both_5_percent_and_2000_tokens() -> None:
    assert not is_drop(100_000, 95_000)  # exactly 5%: not more than 5%
    assert is_drop(100_000, 94_999)
    assert not is_drop(30_000, 28_000)  # exactly 2,000 tokens
    assert is_drop(30_000, 27_999)
    assert not is_drop(10_000, 8_100)  # 19% but only 1,900 tokens
    assert not is_drop(1_000_000, 960_000)  # 40,000 tokens but only 4%


def test_causes_in_order_of_precedence() -> None:
    calls = [
        obs(0, 50_000),
        obs(10, 20_000, rewrote=True),  # policy clearing (expected)
        obs(20, 60_000),
        obs(30, 25_000, compaction_before=True),  # compaction (expected)
        obs(40, 60_000),
        obs(50, 0, model="other"),  # model switch
        obs(60, 60_000, model="other"),
        obs(400, 0, model="other"),  # 340 s > 5m TTL
        obs(410, 60_000, model="other"),
        obs(420, 25_000, model="other"),  # warm, fell back to a head
        obs(430, 60_000, model="other"),
        obs(440, 0, model="other"),  # warm, nothing read
    ]
    found = detect_breaks(calls)
    assert [(b.call_index, b.cause) for b in found] == [
        (1, BreakCause.POLICY_CLEARING),
        (3, BreakCause.COMPACTION),
        (5, BreakCause.MODEL_SWITCH),
        (7, BreakCause.TTL_EXPIRED),
        (9, BreakCause.PREFIX_CHANGED),
        (11, BreakCause.UNKNOWN),
    ]
    # Expected: something explains it; only a changed prefix and a warm miss are unexplained.
    assert [b.expected for b in found] == [True, True, True, True, False, False]
    # Reported as Claude Code's detector does: not the drops it was told of (the rewrite and
    # the compaction); the model switch and the TTL expiry are reported.
    assert [b.is_break for b in found] == [False, False, True, True, True, True]
    assert found[3].gap_seconds == 340
    assert found[3].drop_tokens == 60_000


def test_ttl_is_the_previous_calls() -> None:
    one_hour = [obs(0, 50_000, ttl=3600), obs(1200, 0, ttl=3600)]
    assert detect_breaks(one_hour)[0].cause is BreakCause.UNKNOWN  # 20 min < 1h: not expiry
    five_min = [obs(0, 50_000), obs(1200, 0)]
    assert detect_breaks(five_min)[0].cause is BreakCause.TTL_EXPIRED


def test_a_gap_equal_to_the_ttl_is_an_expiry() -> None:
    # The entry lives 300 s from the start of the request: at 300 s it is gone.
    assert detect_breaks([obs(0, 50_000), obs(300, 0)])[0].cause is BreakCause.TTL_EXPIRED
    assert detect_breaks([obs(0, 50_000), obs(299.9, 0)])[0].cause is BreakCause.UNKNOWN
    hour = [obs(0, 50_000, ttl=3600), obs(3600, 0, ttl=3600)]  # 60 min with a 1-hour TTL
    assert detect_breaks(hour)[0].cause is BreakCause.TTL_EXPIRED


def test_a_drop_on_a_call_with_a_cache_edit_is_announced_whatever_its_cause() -> None:
    calls = [
        obs(0, 50_000),
        obs(10, 30_000, cache_edit=True),  # 20,000 deleted server-side: told, not a break
        obs(20, 60_000),
        obs(400, 0, cache_edit=True),  # 380 s > 5m: the TTL ran out, the edit explains nothing
        obs(410, 60_000),
        obs(420, 20_000, cache_edit=True, rewrote=True),  # a rewrite broke the prefix anyway
    ]
    found = detect_breaks(calls)
    # Each drop keeps the cause that explains it ...
    assert [(b.call_index, b.cause) for b in found] == [
        (1, BreakCause.CACHE_EDIT),
        (3, BreakCause.TTL_EXPIRED),
        (5, BreakCause.POLICY_CLEARING),
    ]
    # ... but Claude Code's detector, told of the cache edit on each of these calls
    # (notifyCacheDeletion), reports none of them: all three are announced drops.
    breaks, announced = split_drops(found)
    assert breaks == [] and [b.call_index for b in announced] == [1, 3, 5]
    assert [b.is_break for b in found] == [False, False, False]
    # Without the edit, the TTL's drop is reported.
    assert detect_breaks(calls[2:4])[0].is_break is False
    plain = [obs(20, 60_000), obs(400, 0)]
    assert detect_breaks(plain)[0].is_break is True
