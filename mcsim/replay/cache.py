"""The prompt-cache model of one replayed thread.

Anthropic's cache as documented is in docs/domain.md#cache-mechanics; why the replay anchors
it on the recording, in docs/design.md#recorded-anchored-cache-simulation.

The cache holds the previous call's whole prompt while it is alive. Each call refreshes it
with its own TTL (5m, 1h, or the recorded one); the TTL runs from request to request, and at
a gap equal to the TTL the entry is gone. What one call reads:

* a rewrite of old messages changes the prompt at an old block: with breakpoints (Anthropic)
  the read falls back to the longest entry an earlier request wrote that ends before the
  change, is alive, and lies within the lookback (20 blocks before the breakpoint), else to
  the stable head (system prompt and tools) (docs/domain.md#the-lookback); a prefix cache
  without them (OpenAI) still reads what precedes the first change;
* a cache edit deletes tokens from the cached copy without breaking it, on the call that
  carries it: the read is the cached copy less what was deleted from it;
* recorded anchors, what the recording shows happened for reasons outside any policy: a read
  that fell back to a shorter prefix falls back there too (shifted by what was cleared before
  it); a miss the TTL does not explain stays a miss; a hit on the whole previous prompt keeps
  its recorded few-token offset; a hit the recorded TTL does not explain (the prefix was kept
  warm elsewhere) stays a hit. Misses the recorded TTL explains are left to this clock;
* below the model's minimum cacheable length nothing is cached.

Keep-warm pings (keep_warm.py), when the thread has them: in the gap before a call, each ping
reads the cached prompt and refreshes its lifetime, so the call's gap runs from the last one;
each gap's pings are left in `ping_gaps` (keep_warm.PingGap) for the caller to price.

What differs between providers (the minimum, whole blocks, whether writes are billed apart) is
the thread's `CacheRules` (mcsim.replay.providers): with no breakpoints (OpenAI) everything a
call does not read is uncached input, and what is read is a whole number of blocks.

Everything else (what was cleared, prices) is the caller's; this is the cache alone.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from operator import itemgetter
from typing import NamedTuple

from mcsim.accounting.recorded import TTL_SECONDS
from mcsim.replay.calibrate import CalCall, ReadClass
from mcsim.replay.keep_warm import KeepWarm, PingGap, pings_in_gap
from mcsim.replay.providers import CacheRules, rules_for

_FIRST, _PARTIAL, _EXTERNAL_MISS, _FULL = (
    ReadClass.FIRST,
    ReadClass.PARTIAL,
    ReadClass.EXTERNAL_MISS,
    ReadClass.FULL,
)


class ServedTokens(NamedTuple):
    """Per call served, its prompt's tokens by how the cache served them."""

    input_tokens: list[int]  # uncached
    cache_read_tokens: list[int]
    cache_write_5m_tokens: list[int]
    cache_write_1h_tokens: list[int]


class PromptCache:
    """One thread's cache: how much of the last prompt is cached, and its clock."""

    __slots__ = ("block", "entries", "head", "intact", "keep_warm", "ping_gaps",
                 "recorded_ttl_s", "rules", "sent", "ttl_s", "valid")  # fmt: skip

    def __init__(
        self, head: int, rules: CacheRules | None = None, keep_warm: KeepWarm | None = None
    ) -> None:
        self.rules = rules or rules_for("anthropic")  # the provider's cache (providers/)
        # Pings in idle gaps (keep_warm.py): the gaps of the calls last served that had any,
        # each at the index of the call after it among them, not priced (cost_usd None)
        self.keep_warm = keep_warm
        self.ping_gaps: list[PingGap] = []
        self.head = head  # system prompt + tools: where a changed prefix falls back to
        self.valid = 0  # tokens of the cached prefix that still match the prompt
        self.intact = False  # the cache holds the whole previous prompt
        self.sent: float | None = None  # when the previous request was sent
        self.ttl_s = 300.0  # the lifetime the previous request gave the entry
        self.recorded_ttl_s = 300.0  # ... and the one it had in the recording
        self.block = 0  # where the previous request's entry ends, in content blocks
        # The entries earlier requests wrote at their ends (breakpoints), before the previous
        # request's, that still match the prompt: [tokens, end block, alive until]. Only
        # those within the lookback of the newest end are kept (none for a prefix cache).
        self.entries: list[list[float]] = []

    def resume(
        self, cached: int | None, sent: float, ttl_s: float, recorded_ttl: str, block: int = 0
    ) -> None:
        """The cache as calls replayed elsewhere left it (the unpruned replay's, copied):
        `cached` is the last prompt it cached (None: none) and `block` where it ends, the rest
        the last call's. Earlier entries are not known: resume where the lookback begins."""
        self.valid, self.intact = (cached, True) if cached is not None else (0, False)
        self.sent, self.ttl_s, self.recorded_ttl_s = sent, ttl_s, TTL_SECONDS[recorded_ttl]
        self.block, self.entries = block, []

    def serve(
        self,
        calls: Sequence[CalCall],
        prompts: Sequence[int],
        sent: Sequence[float],
        ttls: Sequence[str],
        rewrote: Sequence[bool],
        deleted: Sequence[int],
        anchors: Sequence[int],
        unchanged: Sequence[int] | None = None,
        blocks: Sequence[int] | None = None,
    ) -> ServedTokens:
        """The tokens of consecutive calls by how the cache served them (`ServedTokens`), each
        call sending its prompt at its time with its TTL ("5m" or "1h"), and the cache they
        leave. Per call, `rewrote`: old messages changed before it; `deleted`: tokens its
        cache edit removed from the cached copy; `anchors`: the recorded fall-back read in
        replayed tokens (read class PARTIAL); `unchanged`: after a rewrite, the tokens of the
        prompt before its first change (a cache without breakpoints reads up to there; one
        with them reads the longest entry that ends there or before, within its lookback,
        else the head); `blocks`: the content blocks of the prompt up to the call's end (none:
        no lookback).
        One loop over the thread, its state in locals, and long on purpose: a method called per
        call would cost a tenth of the replay, and the steps share most of their locals."""
        head, valid, intact = self.head, self.valid, self.intact
        previous, lifetime, recorded_lifetime = self.sent, self.ttl_s, self.recorded_ttl_s
        lookback = self.rules.lookback_blocks if blocks is not None else 0
        at, entries = self.block, self.entries
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
        warm = self.keep_warm
        every, longest, paid, own_in, own_out = (
            (warm.interval_s, warm.max_idle_s, warm.longer_gaps == "paid", warm.input_tokens,
             warm.output_tokens)
            if warm is not None
            else (0.0, 0.0, False, 0, 0)
        )  # fmt: skip
        ping_gaps = self.ping_gaps = []
        per_call = zip(
            calls, prompts, sent, ttls, rewrote, deleted, anchors,
            [0] * len(calls) if unchanged is None else unchanged,
            [0] * len(calls) if blocks is None else blocks, strict=True,
        )  # fmt: skip
        index = -1  # the call's place among `calls`
        for call, prompt, now, ttl, rewrite, gone, anchor, intact_to, blocks_at in per_call:
            index += 1
            gap = None if previous is None else now - previous
            if warm is not None and gap is not None and gap > every and valid:
                sent_pings = pings_in_gap(gap, lifetime, every, longest, paid)
                if sent_pings:
                    # Each ping reads the cached prompt (a prefix cache: its whole blocks, the
                    # rest uncached) and refreshes it; the next request's gap runs from the
                    # last one (the previous request's, as `previous`).
                    assert previous is not None
                    cached = valid - valid % block if not writes else valid
                    ping_gaps.append(PingGap(
                        at=index, pings=sent_pings, from_s=previous, interval_s=every,
                        cache_read_tokens=cached, input_tokens=valid - cached + own_in,
                        output_tokens=own_out, cost_usd=None,
                    ))  # fmt: skip
                    previous += sent_pings * every
                    gap = now - previous
            recorded_before = recorded_lifetime
            previous, lifetime_before, lifetime = now, lifetime, seconds[ttl]
            recorded_lifetime = seconds[call.ttl]
            if lookback and call.compaction:
                entries = []  # a new conversation: no earlier entry matches beyond the head
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
            found: list[float] | None = None  # an earlier request's entry, read
            if rewrite:
                # Breakpoints (Anthropic) fall back to the longest entry that ends before the
                # first change, within the lookback, else the head; a prefix cache (OpenAI)
                # keeps whatever precedes the first change.
                fallback = head if writes else max(intact_to, head)
                if lookback and alive:
                    reach = blocks_at - lookback  # the earliest end a lookup checks, in blocks
                    if intact and valid <= intact_to and at >= reach:
                        fallback = max(fallback, valid)  # the change is after the last prompt
                    for entry in entries:  # alive, ending before the change, reachable
                        end, ends_at, until = entry
                        if fallback < end <= intact_to and until > now and ends_at >= reach:
                            fallback, found = int(end), entry
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
            if lookback:
                entries = _entries_after(
                    entries, valid if intact else 0, at, now - (gap or 0.0) + lifetime_before,
                    now + lifetime, blocks_at, lookback,
                    # the previous entry was read (refreshed), and where the prompt differs
                    # from the earlier entries now (none match past it)
                    alive and found is None and read > head,
                    _changed_at(rewrite, gone, kind, intact_to, anchor, call.compaction)
                    if rewrite or gone or call.compaction or kind is _PARTIAL
                    or kind is _EXTERNAL_MISS else _NOWHERE,  # (it changed nowhere)
                    found,
                )  # fmt: skip
                at = blocks_at
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
        self.block, self.entries = at, entries
        return ServedTokens(out_uncached, out_read, out_5m, out_1h)


_NOWHERE = float("inf")
_END = itemgetter(1)  # where an entry ends, in blocks


def _changed_at(
    rewrite: bool, gone: int, kind: ReadClass, intact_to: int, anchor: int, compaction: bool
) -> float:
    """Where this call's prompt differs from what earlier requests sent, in replayed tokens:
    an entry that ends after it no longer matches. A rewrite changes it at its first change;
    a cache edit changed the cached copy (its position is not tracked: everywhere), and so
    did a compaction; the recording's own fall-back shows a real change at what it read; a
    miss the TTL does not explain, everywhere."""
    where = intact_to if rewrite else _NOWHERE
    if gone or compaction:
        where = 0
    if kind is _PARTIAL:
        where = min(where, anchor)
    elif kind is _EXTERNAL_MISS:
        where = 0
    return where


def _entries_after(
    entries: list[list[float]],
    last: int,
    last_block: int,
    last_until: float,
    refreshed_until: float,
    block: int,
    lookback: int,
    last_read: bool,
    changed_at: float,
    found: list[float] | None,
) -> list[list[float]]:
    """The earlier entries after a call: the previous request's joins them (`last` tokens,
    ending at `last_block`, alive until `last_until`, or `refreshed_until` if it was read);
    the one read (`found`) lives `refreshed_until`; none that ends after `changed_at`
    matches any more, and none further back than the lookback from `block` can be reached."""
    if found is not None:
        found[2] = refreshed_until
    if last:
        entries.append([last, last_block, refreshed_until if last_read else last_until])
    # They are in the order they end (blocks only grow): those out of reach lead.
    reachable = bisect.bisect_left(entries, block - lookback, key=_END)
    if changed_at == _NOWHERE:
        del entries[:reachable]
        return entries
    return [e for e in entries[reachable:] if e[0] <= changed_at]
