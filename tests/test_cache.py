"""The prompt-cache model alone (mcsim.replay.cache), call by call, numbers by hand."""

from __future__ import annotations

from simthreads import result, text, thread

from mcsim.replay.cache import PromptCache
from mcsim.replay.calibrate import CalCall, ReadClass
from mcsim.replay.providers.anthropic import min_tokens as min_cacheable_tokens

HEAD = 10_000
# Three calls of a recording: prompts 11,000, 16,000, 21,000 (3 uncached tokens each).
CALLS = list(thread([(0.0, [text(1_000)]), (10.0, [result(5_000)]), (10.0, [result(5_000)])]).calls)


def serve(
    cache: PromptCache,
    calls: list[CalCall],
    prompts: list[int],
    sent: list[float],
    ttls: list[str] | None = None,
    rewrote: list[bool] | None = None,
    deleted: list[int] | None = None,
    anchors: list[int] | None = None,
) -> list[tuple[int, int, int, int]]:
    n = len(calls)
    out = cache.serve(
        calls, prompts, sent, ttls or ["5m"] * n, rewrote or [False] * n, deleted or [0] * n,
        anchors or [0] * n,
    )  # fmt: skip
    return list(zip(*out, strict=True))


def test_each_call_reads_the_previous_prompt_while_the_entry_lives() -> None:
    cache = PromptCache(HEAD)
    # Call 0 is warm from elsewhere only by its recorded read (0 here): all written but 3.
    # Calls 1 and 2 read the whole previous prompt and write what was added.
    got = serve(cache, CALLS, [11_000, 16_000, 21_000], [0.0, 10.0, 20.0])
    assert got == [(3, 0, 10_997, 0), (3, 11_000, 4_997, 0), (3, 16_000, 4_997, 0)]
    assert (cache.valid, cache.intact, cache.sent) == (21_000, True, 20.0)


def test_a_gap_equal_to_the_ttl_is_a_miss_and_1h_writes_go_to_their_own_bucket() -> None:
    # The recording missed after 300 s (TTL_MISS); the replay's 5-minute clock agrees: at the
    # TTL itself the entry is gone, and the miss writes all but 3.
    expired = [CALLS[0], CALLS[1]._replace(read_class=ReadClass.TTL_MISS)]
    cache = PromptCache(HEAD)
    assert serve(cache, expired, [11_000, 16_000], [0.0, 300.0])[1] == (3, 0, 15_997, 0)
    cache = PromptCache(HEAD)
    assert serve(cache, expired, [11_000, 16_000], [0.0, 299.0])[1] == (3, 11_000, 4_997, 0)
    # 3,599 s after a 1-hour request: alive, and the new tail is a 1-hour write.
    cache = PromptCache(HEAD)
    got = serve(cache, CALLS[:2], [11_000, 16_000], [0.0, 3_599.0], ttls=["1h", "1h"])
    assert got == [(3, 0, 0, 10_997), (3, 11_000, 0, 4_997)]


def test_a_rewrite_falls_back_to_the_head_and_a_cache_edit_does_not() -> None:
    cache = PromptCache(HEAD)
    serve(cache, CALLS[:2], [11_000, 16_000], [0.0, 10.0])
    # Call 2 after a rewrite that left a 13,000-token prompt: read the 10,000-token head.
    assert serve(cache, CALLS[2:], [13_000], [20.0], rewrote=[True]) == [(3, 10_000, 2_997, 0)]
    cache = PromptCache(HEAD)
    serve(cache, CALLS[:2], [11_000, 16_000], [0.0, 10.0])
    # Call 2 carrying a cache edit that deleted 4,000 cached tokens: read 16,000 - 4,000,
    # write only the new result (17,000 - 3 - 12,000).
    assert serve(cache, CALLS[2:], [17_000], [20.0], deleted=[4_000]) == [(3, 12_000, 4_997, 0)]


def test_recorded_anchors_are_kept() -> None:
    # A recorded fall-back to 12,000 at call 2 (PARTIAL): read min(cached 16,000, 12,000).
    partial = CALLS[2]._replace(read_class=ReadClass.PARTIAL, read_anchor=12_000)
    cache = PromptCache(HEAD)
    got = serve(cache, [*CALLS[:2], partial], [11_000, 16_000, 21_000], [0.0, 10.0, 20.0],
                anchors=[0, 0, 12_000])  # fmt: skip
    assert got[2] == (3, 12_000, 8_997, 0)
    # A miss the TTL does not explain (EXTERNAL_MISS) stays a miss, 10 s later.
    missed = CALLS[2]._replace(read_class=ReadClass.EXTERNAL_MISS)
    cache = PromptCache(HEAD)
    got = serve(cache, [*CALLS[:2], missed], [11_000, 16_000, 21_000], [0.0, 10.0, 20.0])
    assert got[2] == (3, 0, 20_997, 0)
    # A whole-prompt hit 400 s after a 5-minute request (FULL: kept warm elsewhere) stays a
    # hit, with its recorded offset of +2 tokens.
    warm = CALLS[2]._replace(read_delta=2)
    cache = PromptCache(HEAD)
    got = serve(cache, [*CALLS[:2], warm], [11_000, 16_000, 21_000], [0.0, 10.0, 410.0])
    assert got[2] == (3, 16_002, 4_995, 0)


def test_below_the_minimum_nothing_is_cached_and_the_entry_is_left_as_it_was() -> None:
    opus = [c._replace(model="claude-opus-4-5") for c in CALLS]  # minimum 4,096
    assert min_cacheable_tokens("claude-opus-4-5") == 4_096
    cache = PromptCache(HEAD)
    got = serve(cache, opus, [11_000, 4_000, 21_000], [0.0, 10.0, 20.0])
    # Call 1 (4,000 < 4,096) is all uncached input; call 2 still reads call 0's 11,000.
    assert got == [(3, 0, 10_997, 0), (4_000, 0, 0, 0), (3, 11_000, 9_997, 0)]


def test_resume_continues_from_calls_served_elsewhere() -> None:
    cache = PromptCache(HEAD)
    cache.resume(16_000, 10.0, 300.0, "5m")  # as if calls 0 and 1 were served already
    assert serve(cache, CALLS[2:], [21_000], [20.0]) == [(3, 16_000, 4_997, 0)]
    cache.resume(None, 10.0, 300.0, "5m")  # nothing cacheable so far
    assert serve(cache, CALLS[2:], [21_000], [20.0]) == [(3, 0, 20_997, 0)]
