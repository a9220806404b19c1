"""The prompt-cache model of one replayed thread.

Anthropic's cache as documented is in docs/domain.md#cache-mechanics; why the replay anchors
it on the recording, in docs/design.md#recorded-anchored-cache-simulation.

The cache holds the previous call's whole prompt while it is alive. Each call refreshes it
with its own TTL (5m, 1h, or the recorded one); the TTL runs from request to request, and at
a gap equal to the TTL the entry is gone. What one call reads:

* a rewrite of old messages changes the prompt at an old block: with breakpoints (Anthropic)
  the read falls back to the stable head (system prompt and tools), as the real cache does;
  a prefix cache without them (OpenAI) still reads what precedes the first change;
* a cache edit deletes tokens from the cached copy without breaking it, on the call that
  carries it: the read is the cached copy less what was deleted from it;
* recorded anchors, what the recording shows happened for reasons outside any policy: a read
  that fell back to a shorter prefix falls back there too (shifted by what was cleared before
  it); a miss the TTL does not explain stays a miss; a hit on the whole previous prompt keeps
  its recorded few-token offset; a hit the recorded TTL does not explain (the prefix was kept
  warm elsewhere) stays a hit. Misses the recorded TTL explains are left to this clock;
* below the model's minimum cacheable length nothing is cached.

What differs between providers (the minimum, whole blocks, whether writes are billed apart) is
the thread's `CacheRules` (mcsim.replay.providers): with no breakpoints (OpenAI) everything a
call does not read is uncached input, and what is read is a whole number of blocks.

Everything else (what was cleared, prices) is the caller's; this is the cache alone.
"""

from __future__ import annotations

from collections.abc import Sequence

from mcsim.accounting.recorded import TTL_SECONDS
from mcsim.replay.calibrate import CalCall, ReadClass
from mcsim.replay.providers import CacheRules, rules_for

_FIRST, _PARTIAL, _EXTERNAL_MISS, _FULL = (
    ReadClass.FIRST,
    ReadClass.PARTIAL,
    ReadClass.EXTERNAL_MISS,
    ReadClass.FULL,
)


class PromptCache:
    """One thread's cache: how much of the last prompt is cached, and its clock."""

    __slots__ = ("head", "intact", "recorded_ttl_s", "rules", "sent", "ttl_s", "valid")

    def __init__(self, head: int, rules: CacheRules | None = None) -> None:
        self.rules = rules or rules_for("anthropic")  # the provider's cache (providers/)
        self.head = head  # system prompt + tools: where a changed prefix falls back to
        self.valid = 0  # tokens of the cached prefix that still match the prompt
        self.intact = False  # the cache holds the whole previous prompt
        self.sent: float | None = None  # when the previous request was sent
        self.ttl_s = 300.0  # the lifetime the previous request gave the entry
        self.recorded_ttl_s = 300.0  # ... and the one it had in the recording

    def resume(self, cached: int | None, sent: float, ttl_s: float, recorded_ttl: str) -> None:
        """The cache as calls replayed elsewhere left it (the unpruned replay's, copied):
        `cached` is the last prompt it cached (None: none), the rest the last call's."""
        self.valid, self.intact = (cached, True) if cached is not None else (0, False)
        self.sent, self.ttl_s, self.recorded_ttl_s = sent, ttl_s, TTL_SECONDS[recorded_ttl]

    def serve(
        self,
        calls: Sequence[CalCall],
        prompts: Sequence[int],
        sent: Sequence[float],
        ttls: Sequence[str],
        rewrote: Sequence[bool],
        deleted: Sequence[int],
        anchors: Sequence[int],
        kept: Sequence[int] | None = None,
    ) -> tuple[list[int], list[int], list[int], list[int]]:
        """Uncached, read, and written tokens (5-minute and 1-hour entries) of consecutive
        calls, each sending its prompt at its time with its TTL ("5m" or "1h"), and the cache
        they leave. Per call, `rewrote`: old
        messages changed before it; `deleted`: tokens its cache edit removed from the cached
        copy; `anchors`: the recorded fall-back read in replayed tokens (read class PARTIAL);
        `kept`: after a rewrite, the tokens of the prompt before its first change (a cache
        without breakpoints reads up to there; one with them falls back to the head).
        One loop over the thread (a call per call would cost a tenth of the replay)."""
        head, valid, intact = self.head, self.valid, self.intact
        previous, lifetime, recorded_lifetime = self.sent, self.ttl_s, self.recorded_ttl_s
        out_uncached: list[int] = []
        out_read: list[int] = []
        out_5m: list[int] = []
        out_1h: list[int] = []
        seconds = TTL_SECONDS  # a local: the loop runs for every call
        minimum, block, writes = (
            self.rules.min_tokens,
            self.rules.block_tokens,
            self.rules.bills_writes,
        )
        for call, prompt, now, ttl, rewrite, gone, anchor, intact_to in zip(
            calls, prompts, sent, ttls, rewrote, deleted, anchors,
            [0] * len(calls) if kept is None else kept, strict=True,
        ):  # fmt: skip
            gap = None if previous is None else now - previous
            recorded_before = recorded_lifetime
            previous, lifetime_before, lifetime = now, lifetime, seconds[ttl]
            recorded_lifetime = seconds[call.ttl]
            if prompt < minimum(call.model):
                out_uncached.append(prompt)  # nothing is cached; what was stays as it was
                out_read.append(0)
                out_5m.append(0)
                out_1h.append(0)
                continue
            # Uncached input after the last breakpoint, as recorded; with no breakpoints
            # (OpenAI) whatever is not read.
            uncached = min(call.input_tokens, prompt) if writes else 0
            kind = call.read_class
            alive = gap is not None and (
                gap < lifetime_before
                # a recorded hit the recorded TTL does not explain: kept warm elsewhere
                or ((kind is _FULL or kind is _PARTIAL) and gap >= recorded_before)
            )
            reusable = valid if alive else 0
            whole = alive and intact
            if gone:  # the server deleted these from its cached copy for this call
                reusable = max(reusable - gone, 0)
            if rewrite:
                # Breakpoints (Anthropic) fall back to the head; a prefix cache (OpenAI) keeps
                # whatever precedes the first change.
                fallback = head if writes else max(intact_to, head)
                if reusable > fallback:
                    reusable, whole = fallback, False
            if kind is _FIRST:
                reusable, whole = call.read_anchor, False  # warm from elsewhere (a shared head)
            elif kind is _PARTIAL:
                # A read after the TTL ran out: that prefix was kept warm elsewhere.
                reusable, whole = (min(reusable, anchor) if alive else anchor), False
            elif kind is _EXTERNAL_MISS:
                reusable, whole = 0, False
            delta = call.read_delta if whole and kind is _FULL else 0
            if not writes and -block < delta <= 0:
                delta = 0  # the recording's own block rounding: the blocks are counted below
            read = reusable + delta
            read = max(0, min(read, prompt - uncached))
            valid, intact = prompt, True
            if not writes:  # a prefix of whole blocks is read; the rest is uncached input
                read -= read % block
                out_uncached.append(prompt - read)
                out_read.append(read)
                out_5m.append(0)
                out_1h.append(0)
                continue
            out_uncached.append(uncached)
            out_read.append(read)
            if ttl == "1h":
                out_5m.append(0)
                out_1h.append(prompt - uncached - read)
            else:
                out_5m.append(prompt - uncached - read)
                out_1h.append(0)
        self.valid, self.intact = valid, intact
        self.sent, self.ttl_s, self.recorded_ttl_s = previous, lifetime, recorded_lifetime
        return out_uncached, out_read, out_5m, out_1h
