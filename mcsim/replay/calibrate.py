"""Calibrate item sizes against recorded prompt growth, and classify every recorded read.

The recorded prompt of a call (input + cache writes + cache reads) is exact; the size of each
item added before it is not recorded. Between two consecutive calls the prompt grows by
exactly what was added, so each step's items are estimated with the tokenizer and scaled to
sum to that growth. Where the growth is not usable (the first call, a compaction, a prompt that
shrank) the raw estimates are used and an unclearable adjustment makes the step add up; these
fallbacks are counted. Either way the replayed no-pruning prompt equals the recorded prompt at
every call, by construction.

Each recorded cache read is also classified once here (a hit on the whole previous prompt, a
fall-back to a shorter prefix, a miss explained by the TTL, a miss explained by nothing), so
the simulation can keep the real breaks the recording shows. The output holds sizes and hashes,
never text, so it is small enough to cache on disk and to send between processes.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from itertools import accumulate
from operator import sub
from typing import Any, NamedTuple

from mcsim.accounting.breaks import is_drop
from mcsim.accounting.prices import parse_model
from mcsim.accounting.recorded import TTL_SECONDS, recorded_ttl
from mcsim.model import Call, CompactionKind, ItemKind, Session, Thread, ThreadKind, Tokens
from mcsim.replay.providers import rules_for
from mcsim.replay.refetch import ResourceKeys
from mcsim.replay.tokens import TokenEstimator

# A prompt that shrank by more than the break detector's drop, with no compaction recorded:
# the recording pruned (a microcompact that wrote no boundary line).
PROMPT_SHRANK = "prompt_shrank"

# A read within this many tokens of the previous prompt is a hit on all of it
# (docs/domain.md#what-recorded-usage-shows).
FULL_HIT_TOLERANCE = 20


class ReadClass(IntEnum):
    FULL = 0  # read the whole previous prompt (± a few tokens, kept as `read_delta`)
    PARTIAL = 1  # fell back to a shorter prefix (`read_anchor` tokens): a real prefix change
    TTL_MISS = 2  # read nothing after a gap longer than the recorded TTL
    EXTERNAL_MISS = 3  # read nothing although the cache should have been warm
    FIRST = 4  # first call of the thread


# Segment and CalCall are NamedTuples rather than frozen dataclasses: both are immutable
# records, but a warm replay rebuilds every one of them from the session cache, and a
# NamedTuple is made from a row in one C call (a frozen dataclass sets each field in Python).
class Segment(NamedTuple):
    """One item of the conversation with its calibrated size."""

    kind: ItemKind
    tokens: int
    tool_name: str | None = None
    tool_use_id: str | None = None
    turn: int = 0  # index of the user turn it belongs to
    is_error: bool = False
    # What its tool call touched: hashes of its keys (refetch.ResourceKeys), space-separated
    resource: str | None = None
    tool_class: str | None = None  # what its tool does (model.ToolClass), for tool items


class CalCall(NamedTuple):
    """A recorded call with what the simulation needs, and nothing else."""

    message_id: str
    request_id: str | None
    timestamp_s: float
    model: str
    input_tokens: int
    cache_write_5m_tokens: int
    cache_write_1h_tokens: int
    cache_read_tokens: int
    output_tokens: int
    speed: str | None
    inference_geo: str | None
    ttl: str  # recorded TTL ("5m" or "1h")
    segments: tuple[Segment, ...]
    adjustment_tokens: int  # unclearable remainder that makes the step add up (may be < 0)
    compaction: bool
    compaction_pre_tokens: int | None
    read_class: ReadClass
    read_delta: int  # FULL: recorded read minus the previous prompt
    read_anchor: int  # PARTIAL: the recorded read
    fallback: bool  # sizes are raw estimates, not calibrated to growth
    # When the request was sent and when its response was complete (model.Call); None: use
    # `timestamp_s`.
    sent_s: float | None = None
    done_s: float | None = None
    # Pruning the recording itself shows before this call (not a compaction: the thread goes
    # on): a CompactionKind value (microcompact_boundary, cache_deletion) or "prompt_shrank".
    pruned: str | None = None
    pruned_ids: tuple[str, ...] = ()  # the tool results a recorded microcompact cleared
    pruned_tokens: int = 0  # tokens the recording removed before this call (pruned_ids first)
    provider: str = "anthropic"  # whose cache and prices (model.Call.provider)

    @property
    def key(self) -> tuple[str, str | None]:
        return (self.message_id, self.request_id)

    @property
    def prompt_tokens(self) -> int:
        return (
            self.input_tokens
            + self.cache_write_5m_tokens
            + self.cache_write_1h_tokens
            + self.cache_read_tokens
        )

    @property
    def tokens(self) -> Tokens:
        """Its recorded counts (as model.Usage.tokens): what it is priced on."""
        return Tokens(self.input_tokens, self.cache_write_5m_tokens, self.cache_write_1h_tokens,
                      self.cache_read_tokens, self.output_tokens)  # fmt: skip

    @property
    def request_s(self) -> float:
        """When the request was sent (as model.Call.request_s)."""
        return self.timestamp_s if self.sent_s is None else self.sent_s

    @property
    def response_end_s(self) -> float:
        """When the response was complete: its last line."""
        return self.timestamp_s if self.done_s is None else self.done_s


@dataclass(frozen=True, slots=True)
class CalThread:
    thread_id: str
    kind: ThreadKind
    head_tokens: int  # system prompt + tools: what a prefix change falls back to
    calls: tuple[CalCall, ...]


class CallColumns:
    """The fields of a thread's calls that every replay of it reads, one list each: made once
    per thread (context.PreparedThread) rather than once per scenario, as a thread is replayed
    under every scenario and TTL of a run (docs/performance.md#measured-reasons). Shared by
    those replays and their SimThreads: never changed."""

    __slots__ = ("blocks", "cache_deleted", "compaction", "idle_s", "microcompacted", "model",
                 "output_tokens", "partial_read", "prompt_tokens", "request_s", "response_end_s",
                 "thinking_in_prompt", "timestamp_s", "ttl")  # fmt: skip

    def __init__(self, calls: Sequence[CalCall]) -> None:
        # Every field of the calls as a column at once (a CalCall is a tuple), rather than a
        # loop over the calls per field (docs/performance.md#measured-reasons).
        field = dict(zip(CalCall._fields, zip(*calls, strict=True), strict=True) if calls else
                     dict.fromkeys(CalCall._fields, ()))  # fmt: skip
        timestamps, sent, done = field["timestamp_s"], field["sent_s"], field["done_s"]
        # When each request was sent and when its response was complete (CalCall.request_s,
        # CalCall.response_end_s)
        self.request_s = [t if s is None else s for t, s in zip(timestamps, sent, strict=True)]
        self.response_end_s = [t if d is None else d for t, d in zip(timestamps, done, strict=True)]
        self.timestamp_s = list(timestamps)
        self.model = list(field["model"])
        self.ttl = list(field["ttl"])
        self.compaction = list(field["compaction"])
        self.prompt_tokens = [  # CalCall.prompt_tokens
            fresh + w5 + w1 + read
            for fresh, w5, w1, read in zip(
                field["input_tokens"], field["cache_write_5m_tokens"],
                field["cache_write_1h_tokens"], field["cache_read_tokens"], strict=True,
            )
        ]  # fmt: skip
        self.output_tokens = list(field["output_tokens"])
        # The recorded read a PARTIAL read fell back to (0 for any other read class).
        self.partial_read = [
            max(anchor, 0) if read_class is _PARTIAL else 0
            for anchor, read_class in zip(field["read_anchor"], field["read_class"], strict=True)
        ]
        # Before each call, the idle time since the previous response was complete (what
        # time-based pruning measures; None for the first call), and whether earlier turns'
        # thinking is in its prompt: what the policies see (policies.View).
        idle = map(sub, self.request_s[1:], self.response_end_s)
        self.idle_s: list[float | None] = [None, *idle] if calls else []
        self.thinking_in_prompt = list(map(thinking_in_prompt, self.model))
        # The recording's own pruning before each call (the break detector is told of it).
        self.microcompacted = [p == _MICROCOMPACT for p in field["pruned"]]
        self.cache_deleted = [p == _CACHE_DELETION for p in field["pruned"]]
        # The content blocks of the thread's prompts up to each call's end: how far back an
        # earlier request's cache entry lies (the cache's lookback counts blocks).
        self.blocks = list(accumulate(map(content_blocks, field["segments"])))


_PARTIAL = ReadClass.PARTIAL
_MICROCOMPACT = CompactionKind.MICROCOMPACT.value
_CACHE_DELETION = CompactionKind.CACHE_DELETION.value


def content_blocks(segments: Sequence[Segment]) -> int:
    """The content blocks a call's items add to the prompt: one per item (the previous
    response's text, thinking and tool calls, the tool results, the user's text), and the
    tool call of a result whose call the recording does not hold (every result follows its
    call)."""
    kinds = [seg.kind for seg in segments]
    return len(kinds) + max(kinds.count(_RESULT) - kinds.count(_USE), 0)


_RESULT, _USE = ItemKind.TOOL_RESULT, ItemKind.TOOL_USE
_SIZE = Segment._fields.index("tokens")  # in `_estimated`'s rows, a Segment's fields


@dataclass(frozen=True, slots=True)
class CalSession:
    session_id: str
    project: str
    cwd: str | None
    files: tuple[str, ...]
    threads: tuple[CalThread, ...]

    @property
    def call_keys(self) -> list[tuple[str, str | None]]:
        return [c.key for t in self.threads for c in t.calls]

    @property
    def call_counts(self) -> list[int]:
        """As Session.call_counts."""
        return [
            hash(
                (
                    c.input_tokens,
                    c.cache_write_5m_tokens + c.cache_write_1h_tokens,
                    c.cache_read_tokens,
                )
            )
            for t in self.threads
            for c in t.calls
        ]

    @property
    def start_s(self) -> float:
        return min(c.timestamp_s for t in self.threads for c in t.calls)

    @property
    def calls(self) -> list[CalCall]:
        return [c for t in self.threads for c in t.calls]


@functools.lru_cache(maxsize=256)
def thinking_in_prompt(model: str) -> bool:
    """Earlier turns' thinking is only re-sent on Opus 4.5+ and Sonnet 4.6+
    (docs/domain.md#clearing-thinking)."""
    parsed = parse_model(model)
    if parsed is None:
        return False
    family, version = parsed
    number = float(version)
    return (family == "opus" and number >= 4.5) or (family == "sonnet" and number >= 4.6)


def calibrate_session(session: Session, estimator: TokenEstimator) -> CalSession:
    with estimator.batch(_to_count(session)):  # counted together, before they are asked for
        threads = tuple(calibrate_thread(t, estimator) for t in session.threads)
    return CalSession(session.session_id, session.project, session.cwd, session.files, threads)


def _to_count(session: Session) -> list[str]:
    """The texts `calibrate_thread` estimates with the tokenizer (see there)."""
    texts = []
    for thread in session.threads:
        for call in thread.calls:
            thinking = thinking_in_prompt(call.model)
            for item in call.items:
                if (
                    item.text
                    and item.tokens is None
                    and (thinking or item.kind is not ItemKind.THINKING)
                ):
                    texts.append(item.text)
    return texts


def calibrate_thread(thread: Thread, estimator: TokenEstimator) -> CalThread:
    calls: list[CalCall] = []
    head = 0  # system prompt + tools: the first prompt less what its items are estimated at
    turn = 0
    prev: Call | None = None
    prev_ttl: str | None = None
    resources = ResourceKeys()  # what each tool call touched
    for call in thread.calls:
        raw, turn = _estimated(call, turn, estimator, resources)
        if prev is None:
            head = max(call.usage.prompt_tokens - sum(row[_SIZE] for row in raw), 0)
        ttl = recorded_ttl(call.usage, prev_ttl)
        calls.append(_calibrated(call, prev, prev_ttl, ttl, raw, head))
        prev, prev_ttl = call, ttl
    return CalThread(thread.thread_id, thread.kind, head, tuple(calls))


def _estimated(
    call: Call, turn: int, estimator: TokenEstimator, resources: ResourceKeys
) -> tuple[list[list[Any]], int]:
    """The items added before CALL as the fields of their segments, each of its estimated
    size (a list, so the size can be scaled in place before the Segment is made), and the
    user turn reached (each user text starts one)."""
    thinking = thinking_in_prompt(call.model)
    raw: list[list[Any]] = []
    for item in call.items:
        kind = item.kind
        if kind is ItemKind.USER_TEXT:
            turn += 1
        if kind is ItemKind.THINKING and not thinking:
            estimate = 0  # not sent back: not tokenized (3% of the corpus's text)
        elif item.tokens is not None:  # a count the recording gave: used as it is
            estimate = item.tokens
        elif item.text:
            estimate = estimator.estimate(item.text)
        else:
            estimate = _chars_estimate(item.chars)
        # (only tool calls and results have keys: ResourceKeys.of)
        resource = _hashed(resources.of(item)) if kind is _USE or kind is _RESULT else None
        raw.append([kind, estimate, item.tool_name, item.tool_use_id, turn, item.is_error,
                    resource, item.tool_class])  # fmt: skip
    return raw, turn


def _calibrated(
    call: Call, prev: Call | None, prev_ttl: str | None, ttl: str, raw: list[list[Any]],
    head: int,
) -> CalCall:  # fmt: skip
    """CALL with its items scaled to the recorded growth of the prompt since PREV (raw
    estimates where the growth cannot be used: the first call, a compaction, a shrink), how
    the recording's cache served it, and what the recording pruned itself."""
    prompt = call.usage.prompt_tokens
    estimates = [row[_SIZE] for row in raw]
    estimated = sum(estimates)
    compaction = call.compaction is not None
    removed = 0
    if call.pruned is not None and call.pruned.tokens_saved:
        removed = max(call.pruned.tokens_saved, 0)
    if prev is None or compaction:
        sizes, adjustment = _fit(estimates, prompt - head)
        fallback = True
    else:
        # What the recording says it removed itself (a cache deletion, a microcompact's
        # tokensSaved): the items of the step are that much more than the growth.
        growth = prompt - prev.usage.prompt_tokens + removed
        if growth >= 0 and estimated > 0:
            sizes, adjustment, fallback = _scale(estimates, growth), -removed, False
        else:
            sizes, adjustment = estimates, growth - estimated - removed
            fallback = growth < 0
    for row, size in zip(raw, sizes, strict=True):
        row[_SIZE] = size
    read_class, delta, anchor = _classify(call, prev, prev_ttl)
    pruned = call.pruned.kind.value if call.pruned is not None else None
    if (
        pruned is None
        and prev is not None
        and not compaction
        and is_drop(prev.usage.prompt_tokens, prompt)
    ):
        pruned = PROMPT_SHRANK
    ids = call.pruned.tool_use_ids if call.pruned is not None else ()
    # What the recording removed: the replay takes it from the results it names, then
    # from the oldest (both of Claude Code's mechanisms clear oldest first).
    gone = 0 if pruned is None else (removed or max(-adjustment, 0))
    return CalCall(
        call.message_id,
        call.request_id,
        call.timestamp_s,
        call.model,
        call.usage.input_tokens,
        call.usage.cache_write_5m_tokens,
        call.usage.cache_write_1h_tokens,
        call.usage.cache_read_tokens,
        call.usage.output_tokens,
        call.usage.speed,
        call.usage.inference_geo,
        ttl,
        tuple(map(Segment._make, raw)),
        adjustment,
        compaction,
        call.compaction.pre_tokens if call.compaction else None,
        read_class,
        delta,
        anchor,
        fallback,
        call.sent_s,
        call.done_s,
        pruned,
        ids,
        gone,
        call.provider,
    )


@functools.lru_cache(maxsize=16_384)
def _hashed(keys: tuple[str, ...]) -> str | None:
    """Resource keys as hashes, space-separated: the simulation only compares keys, and
    calibrated sessions are cached on disk, where a Bash command (a token in a curl header)
    must not be kept. None: no keys (not assessed). Kept for the keys met again: a tool
    result has its call's, and a thread reads and edits the same files again and again."""
    if not keys:
        return None
    return " ".join(
        hashlib.blake2b(k.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
        for k in keys
    )


def _chars_estimate(chars: int) -> int:
    """Without the text (a load that kept sizes only), ~4 characters a token."""
    return (chars + 3) // 4


def _fit(raw: list[int], room: int) -> tuple[list[int], int]:
    """Raw estimates, shrunk to fit `room` if they exceed it; the rest is adjustment."""
    total = sum(raw)
    if room >= total or total == 0:
        return raw, room - total
    if room <= 0:
        return _scale(raw, 0), room
    return _scale(raw, room), 0


def _scale(raw: list[int], target: int) -> list[int]:
    """Sizes proportional to the estimates, summing exactly to `target` (largest remainder)."""
    total = sum(raw)
    if total == 0:
        return raw
    exact = [tokens * target / total for tokens in raw]
    sizes = [int(x) for x in exact]
    short = target - sum(sizes)
    if short:
        remainders = [size - x for size, x in zip(sizes, exact, strict=True)]
        for i in sorted(range(len(raw)), key=remainders.__getitem__)[:short]:
            sizes[i] += 1
    return sizes


def _classify(call: Call, prev: Call | None, prev_ttl: str | None) -> tuple[ReadClass, int, int]:
    read = call.usage.cache_read_tokens
    if prev is None or prev_ttl is None:
        return ReadClass.FIRST, 0, read
    previous = prev.usage.prompt_tokens
    if read == 0:
        gap = call.request_s - prev.request_s
        expired = gap >= TTL_SECONDS[prev_ttl]  # at the TTL itself the entry is gone
        return (ReadClass.TTL_MISS if expired else ReadClass.EXTERNAL_MISS), 0, 0
    # A cache of whole blocks (OpenAI: 128 tokens) reads the previous prompt less its tail.
    if read >= previous - max(FULL_HIT_TOLERANCE, rules_for(call.provider).block_tokens - 1):
        return ReadClass.FULL, read - previous, 0
    return ReadClass.PARTIAL, 0, read
