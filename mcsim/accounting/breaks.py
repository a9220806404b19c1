"""The cache-break detector: Claude Code's rule, plus a named cause for every drop.

Per thread, each call's cache read is compared with the previous call's: a drop of more than
5% and more than 2,000 tokens is a *drop* (docs/domain.md#the-cache-break-detector). Claude
Code's detector (src/services/api/promptCacheBreakDetection.ts) is told of what the harness
did itself and does not report the drop that follows: its cache edits and its time-based
microcompact (notifyCacheDeletion), a compaction (notifyCompaction resets the baseline).
mcsim counts alike: a drop on a call that carries a compaction, a rewrite of old messages by
the policy (or by the recording's own microcompact) or a cache edit is *announced*
(`announced`), kept with its cause but not a break; every other drop is a *break*, as Claude
Code would report it, TTL expiry included. Every drop gets a cause (a TTL that ran out, a
compaction, a model switch, the policy's clearing, a cache edit, a changed prefix, or
nothing known), and a break is *unexpected* when nothing explains it: a changed prefix or
nothing known (a gap as long as the TTL explains a miss). The same function serves recorded
and simulated runs, so their counts are comparable.

Time is measured from request to request (`timestamp_s` of an observation is when the request
was sent): the cache TTL runs from the start of a request, and at a gap equal to the TTL the
entry is gone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from mcsim.frozen import quick_init

DROP_FRACTION = 0.05
DROP_MIN_TOKENS = 2_000


class BreakCause(StrEnum):
    TTL_EXPIRED = "ttl_expired"  # the gap since the previous call exceeded the cache TTL
    COMPACTION = "compaction"  # the conversation was compacted in between (expected)
    MODEL_SWITCH = "model_switch"  # each model has its own cache
    POLICY_CLEARING = "policy_clearing"  # a pruning policy rewrote the prefix (expected)
    CACHE_EDIT = "cache_edit"  # deleted from the cached copy on purpose: not a break
    PREFIX_CHANGED = "prefix_changed"  # read fell back to a stable head while the cache was warm
    UNKNOWN = "unknown"  # nothing was read while the cache should have been warm


# What nothing explains: the prefix changed while the cache was warm, or nothing was read
UNEXPLAINED_CAUSES = frozenset({BreakCause.PREFIX_CHANGED, BreakCause.UNKNOWN})
EXPECTED_CAUSES = frozenset(BreakCause) - UNEXPLAINED_CAUSES


@quick_init
@dataclass(frozen=True, slots=True)
class CallObservation:
    """What the detector needs to know about one call of a thread."""

    timestamp_s: float  # when the request was sent
    model: str
    cache_read_tokens: int
    ttl_seconds: float  # lifetime of the cache entries this call wrote or refreshed
    compaction_before: bool = False
    rewrote: bool = False  # a client-side rewrite of old messages was announced for this call
    cache_edit: bool = False  # the call carried a cache edit (deleted from the cached copy)


@quick_init
@dataclass(frozen=True, slots=True)
class CacheBreak:
    call_index: int  # position of the call in its thread
    previous_read_tokens: int
    read_tokens: int
    gap_seconds: float
    cause: BreakCause
    # The detector was told to expect it (a compaction, a rewrite or a cache edit on this
    # call): a drop, not a break
    announced: bool = False

    @property
    def drop_tokens(self) -> int:
        return self.previous_read_tokens - self.read_tokens

    @property
    def expected(self) -> bool:
        """Whether something explains it (everything but a changed prefix or nothing known)."""
        return self.cause in EXPECTED_CAUSES

    @property
    def is_break(self) -> bool:
        """Whether Claude Code's detector would report it: not if it was announced."""
        return not self.announced


def split_drops(drops: Sequence[CacheBreak]) -> tuple[list[CacheBreak], list[CacheBreak]]:
    """A thread's drops as the breaks Claude Code's detector reports, and the announced."""
    breaks = [d for d in drops if not d.announced]
    return breaks, [d for d in drops if d.announced]


def is_drop(previous_read_tokens: int, read_tokens: int) -> bool:
    """Claude Code's threshold: more than 5% and more than 2,000 tokens lower."""
    drop = previous_read_tokens - read_tokens
    return drop > DROP_MIN_TOKENS and drop > DROP_FRACTION * previous_read_tokens


def detect_breaks(calls: Sequence[CallObservation]) -> list[CacheBreak]:
    """Drops of one thread's calls, in order: the breaks, and those the detector was told of
    (`split_drops` separates them)."""
    return detect_breaks_columns(
        [c.timestamp_s for c in calls],
        [c.model for c in calls],
        [c.cache_read_tokens for c in calls],
        [c.ttl_seconds for c in calls],
        [c.compaction_before for c in calls],
        [c.rewrote for c in calls],
        [c.cache_edit for c in calls],
    )


def detect_breaks_columns(
    timestamps: Sequence[float],
    models: Sequence[str],
    reads: Sequence[int],
    ttl_seconds: Sequence[float],
    compaction: Sequence[bool],
    rewrote: Sequence[bool],
    cache_edit: Sequence[bool],
    start: int = 1,
) -> list[CacheBreak]:
    """`detect_breaks` over columns, building objects only for the calls that broke (a long
    replay has hundreds of thousands of calls and few breaks); calls before `start` are only
    looked at as the predecessor of the next."""
    out = []
    for i in range(max(start, 1), len(reads)):
        if not is_drop(reads[i - 1], reads[i]):
            continue
        prev = CallObservation(timestamps[i - 1], models[i - 1], reads[i - 1], ttl_seconds[i - 1])
        cur = CallObservation(
            timestamps[i],
            models[i],
            reads[i],
            ttl_seconds[i],
            compaction[i],
            rewrote[i],
            cache_edit[i],
        )
        gap = cur.timestamp_s - prev.timestamp_s
        cause = _cause(prev, cur, gap)
        out.append(CacheBreak(i, prev.cache_read_tokens, reads[i], gap, cause, _announced(cur)))
    return out


def _announced(cur: CallObservation) -> bool:
    """Whether the harness told the detector to expect a drop on this call: a compaction
    before it (the baseline is reset), its own rewrite of old messages or a cache edit."""
    return cur.compaction_before or cur.rewrote or cur.cache_edit


def _cause(prev: CallObservation, cur: CallObservation, gap: float) -> BreakCause:
    if cur.compaction_before:
        return BreakCause.COMPACTION
    if cur.model != prev.model:
        return BreakCause.MODEL_SWITCH
    if gap >= prev.ttl_seconds:
        return BreakCause.TTL_EXPIRED
    if cur.rewrote:  # the prefix changed: a cache edit on the same call cannot save it
        return BreakCause.POLICY_CLEARING
    if cur.cache_edit:
        return BreakCause.CACHE_EDIT
    if cur.cache_read_tokens > 0:
        return BreakCause.PREFIX_CHANGED
    return BreakCause.UNKNOWN
