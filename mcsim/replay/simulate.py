"""Replay one thread under a scenario: apply its policies, run the prompt cache, price each call.

Pure and deterministic: a calibrated thread, a scenario and a price table in; simulated calls
and cache breaks out. The model (DESIGN.md "The replay model"):

* The replayed prompt of a call is the recorded prompt minus what the policy has cleared so
  far (net of placeholders), so with no pruning it is the recorded prompt exactly.
* The cache holds the previous call's whole prompt while it is alive: each call refreshes it
  with its own TTL (5m, 1h, or the recorded one), measured on the recorded timestamps.
* A rewrite (client-side clearing, API context editing) changes the prompt at an old block:
  the read falls back to the stable head, as the real cache does. A cache edit deletes
  tokens from the cached copy without breaking it. It takes effect on the call that carries
  it: that call's prompt is smaller by the deleted tokens, its read is the cached copy less
  what was deleted from it, and nothing deleted is written again (the undocumented billing
  is modelled that way, and said so in outputs). The drop in reads it causes is not a break.
* Time as each mechanism sees it: the cache TTL runs from request to request (a request is
  sent with the last line written before the call); time-based pruning measures the idle
  time from the end of the previous response to the request. At a gap equal to the TTL the
  entry is gone.
* Recorded anchors: what the recording shows happened for reasons outside any policy is kept.
  A read that fell back to a shorter prefix falls back there in the replay too (shifted by
  what was cleared before it); a miss the TTL does not explain stays a miss; a hit on the
  whole previous prompt keeps its recorded few-token offset; a hit the recorded TTL does not
  explain (the prefix was kept warm elsewhere) stays a hit. Misses the recorded TTL explains
  are left to the replay's own TTL clock.
* Pruning the recording already shows (a microcompact boundary, a cache deletion, a prompt
  that shrank with no compaction) is not a compaction: the thread and the policies' state
  go on, and the recorded reads around it are kept like any other.
* Below the model's minimum cacheable length nothing is cached.
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from mcsim.accounting.breaks import CacheBreak, detect_breaks_columns
from mcsim.accounting.prices import ModelPrice, PriceTable, base_rates_up_to, parse_model, rates_for
from mcsim.accounting.recorded import TTL_SECONDS
from mcsim.model import CompactionKind, ItemKind, ThreadKind, Usage
from mcsim.replay.calibrate import CalCall, CalThread, ReadClass, thinking_in_prompt
from mcsim.replay.policies import (
    Clearing,
    LiveSegment,
    Mode,
    Policy,
    View,
    can_clear,
    is_compactable,
)
from mcsim.replay.scenario import DEFAULT_COMPACTABLE, Scenario

# Minimum cacheable prompt by (family, version); DOMAIN.md §3.1.
_MIN_CACHEABLE = {
    ("opus", "4.5"): 4096,
    ("opus", "4.6"): 4096,
    ("opus", "4.7"): 2048,
    ("haiku", "4.5"): 4096,
    ("haiku", "3.5"): 2048,
    ("haiku", "3"): 2048,
}


# Only these are ever cleared; text and attachments are tracked by their size alone.
_CLEARABLE = frozenset({ItemKind.TOOL_RESULT, ItemKind.TOOL_USE, ItemKind.THINKING})
# Each is a message of its own (View.messages); the response before them is one more.
_MESSAGES = frozenset({ItemKind.USER_TEXT, ItemKind.TOOL_RESULT})


@functools.lru_cache(maxsize=256)
def min_cacheable_tokens(model: str) -> int:
    parsed = parse_model(model)
    return _MIN_CACHEABLE.get(parsed, 1024) if parsed else 1024


_CLAUDE_CODE = frozenset(DEFAULT_COMPACTABLE)  # the tools Claude Code's own pruning clears
_MICROCOMPACT = CompactionKind.MICROCOMPACT.value
_CACHE_DELETION = CompactionKind.CACHE_DELETION.value


def _times(calls: Sequence[CalCall]) -> tuple[list[float], list[float]]:
    """Per call, when its request was sent and when its response was done."""
    sent = [c.timestamp_s if c.sent_s is None else c.sent_s for c in calls]
    done = [c.timestamp_s if c.done_s is None else c.done_s for c in calls]
    return sent, done


def placeholder_tokens(text: str) -> int:
    """Tokens a placeholder costs (about 4 characters a token; they are a few tokens each)."""
    return (len(text) + 3) // 4 if text else 0


@dataclass(frozen=True, slots=True)
class SimCall:
    """One replayed call (a row view of a SimThread, for tests and scripts)."""

    call_index: int
    timestamp_s: float
    model: str
    ttl: str
    usage: Usage
    cost_usd: float | None  # None: the model is not in the price table
    cleared_tokens: int  # removed from this call's prompt by the policy, in total
    newly_cleared_tokens: int  # cleared by a decision taken before this call
    rewrote: bool  # a client-side rewrite of old messages before this call
    cache_edit: bool  # this call carried a cache edit
    compaction: bool

    @property
    def prompt_tokens(self) -> int:
        return self.usage.prompt_tokens


@dataclass(frozen=True, slots=True)
class Hazard:
    """A cleared tool result whose resource the recorded agent used again (refetch.py)."""

    cleared_before_call: int
    tool_name: str | None
    resource: str
    reused_at_call: int
    tokens: int
    refetch_cost_usd: float


@dataclass(frozen=True, slots=True)
class SimThread:
    """A replayed thread, as columns (one list per quantity, one entry per call): the replay
    of a large corpus makes hundreds of thousands of calls, and columns are what the totals,
    the detector and the tables consume."""

    thread_id: str
    kind: ThreadKind
    timestamp_s: list[float]
    model: list[str]
    ttl: list[str]
    input_tokens: list[int]
    cache_write_5m_tokens: list[int]
    cache_write_1h_tokens: list[int]
    cache_read_tokens: list[int]
    output_tokens: list[int]
    prompt_tokens: list[int]
    cost_usd: list[float | None]
    cleared_tokens: list[int]
    newly_cleared_tokens: list[int]
    rewrote: list[bool]
    cache_edit: list[bool]
    compaction: list[bool]
    breaks: tuple[CacheBreak, ...]
    hazards: tuple[Hazard, ...] = ()
    cleared_results: int = 0  # tool results the policy cleared
    # Drops in reads that cache edits explain: not breaks (Claude Code's detector is told)
    edit_drops: tuple[CacheBreak, ...] = ()
    # Per policy that ran on the thread (none when none did): Policy.figures, what it compared
    # with its thresholds. Not part of the replay's result: two equal replays may differ here.
    figures: tuple[dict[str, float], ...] = field(default=(), compare=False)

    @property
    def calls(self) -> list[SimCall]:
        return [
            SimCall(
                i,
                self.timestamp_s[i],
                self.model[i],
                self.ttl[i],
                Usage(
                    self.input_tokens[i],
                    self.cache_write_5m_tokens[i],
                    self.cache_write_1h_tokens[i],
                    self.cache_read_tokens[i],
                    self.output_tokens[i],
                ),
                self.cost_usd[i],
                self.cleared_tokens[i],
                self.newly_cleared_tokens[i],
                self.rewrote[i],
                self.cache_edit[i],
                self.compaction[i],
            )
            for i in range(len(self.timestamp_s))
        ]


class PreparedThread:
    """A thread's clearable items as live segments, made once and shared by every scenario
    replayed on the thread (each replay starts by marking them all uncleared again)."""

    def __init__(self, thread: CalThread) -> None:
        self.segments: list[list[LiveSegment]] = []  # per call: clearable items added before it
        self.results: list[list[LiveSegment]] = []  # per call: the tool results among them
        self.messages: list[int] = []  # per call: messages in the conversation (View.messages)
        # resource -> calls (in order) whose items include a tool call touching it
        self.uses: dict[str, list[int]] = {}
        # per call: index of the next compaction after it (len(calls) if none)
        self.next_compaction: list[int] = []
        self._compactable: dict[tuple[frozenset[str], frozenset[str]], list[list[LiveSegment]]]
        self._compactable = {}
        position = messages = 0
        start = thread.head_tokens  # where the next item starts in the recorded prompt
        for call in thread.calls:
            if call.compaction:
                start = thread.head_tokens
            # A compaction restarts the conversation; otherwise the last call's response is in.
            messages = 0 if call.compaction or not self.segments else messages + 1
            messages += sum(seg.kind in _MESSAGES for seg in call.segments)
            self.messages.append(messages)
            lives: list[LiveSegment] = []
            for seg in call.segments:
                if seg.kind in _CLEARABLE:
                    lives.append(
                        LiveSegment(
                            position,
                            len(self.segments),
                            seg.kind,
                            seg.tokens,
                            seg.tool_name,
                            seg.tool_use_id,
                            seg.turn,
                            start,
                            resource=seg.resource,
                        )
                    )
                position += 1
                start += seg.tokens
            start += call.adjustment_tokens
            for seg in call.segments:
                if seg.kind is ItemKind.TOOL_USE and seg.resource:
                    self.uses.setdefault(seg.resource, []).append(len(self.segments))
            self.segments.append(lives)
            self.results.append([s for s in lives if s.kind is ItemKind.TOOL_RESULT])

        upcoming = len(thread.calls)
        for i in range(len(thread.calls) - 1, -1, -1):
            self.next_compaction.append(upcoming)
            if thread.calls[i].compaction:
                upcoming = i
        self.next_compaction.reverse()

    def compactable(
        self, allowed: frozenset[str], excluded: frozenset[str]
    ) -> list[list[LiveSegment]]:
        key = (allowed, excluded)
        if key not in self._compactable:
            self._compactable[key] = [
                [s for s in results if is_compactable(s.tool_name, allowed, excluded)]
                for results in self.results
            ]
        return self._compactable[key]

    def reset(self) -> None:
        for lives in self.segments:
            for seg in lives:
                seg.cleared = seg.edited = seg.recorded = False
                seg.saved = 0


def prunes(thread: CalThread, scenario: Scenario) -> bool:
    """Whether any of the scenario's policies acts on this thread (none act on a sub-agent
    when the scenario is main-thread-only)."""
    if thread.kind is not ThreadKind.MAIN and scenario.main_thread_only:
        return False
    return scenario.prunes


def simulate_thread(
    thread: CalThread,
    scenario: Scenario,
    prices: PriceTable,
    prepared: PreparedThread | None = None,
    unpruned: SimThread | None = None,
) -> SimThread:
    """Replay one thread under a scenario. Pass the same `prepared` for every scenario of a
    thread to build its items once (it is made here when not given).

    `unpruned`, when given, must be this thread's replay with no pruning under the same TTL.
    Until a policy first clears something the replay is identical to it, so those calls are
    copied from it rather than simulated again (and a thread no policy acts on is it).
    """
    if not prunes(thread, scenario):
        if unpruned is not None:
            return unpruned
        policies = []
    else:
        policies = [p for p in scenario.build() if can_clear(type(p))]
    if policies:
        prepared = prepared or PreparedThread(thread)
        prepared.reset()
    return _Replay(thread, scenario, policies, prices, prepared, unpruned).run()


class _Replay:
    """The mutable state of one thread's replay."""

    def __init__(
        self,
        thread: CalThread,
        scenario: Scenario,
        policies: list[Policy],
        prices: PriceTable,
        prepared: PreparedThread | None,
        unpruned: SimThread | None = None,
    ) -> None:
        self.thread = thread
        self.unpruned = unpruned
        self.scenario = scenario
        self.policies = policies
        self.prices = prices
        self.prepared = prepared
        self.compactable_per_call = (
            prepared.compactable(scenario.compactable_tools, scenario.exclude_tools)
            if prepared is not None
            else []
        )
        self.segments: list[LiveSegment] = []
        self.results: list[LiveSegment] = []
        self.compactable: list[LiveSegment] = []
        self.saved = 0  # tokens currently removed from the prompt
        self.edited: list[LiveSegment] = []  # deleted by cache edits (some may be back)
        self.recorded_upto = 0  # results[:recorded_upto] were looked at for recorded pruning
        self.edit_cached = 0  # what this call's cache edit deleted from the cached copy
        self.cleared_log: list[tuple[LiveSegment, int]] = []  # (tool result, cleared before)
        main = thread.kind is ThreadKind.MAIN
        self.view = View(0, 0.0, None, 0, "", main, False, [], [], [], False)
        self.view.excluded_tools = scenario.exclude_tools  # for kinds that ignore `compactable`
        self._show_lists()

    def run(self) -> SimThread:
        thread = self.thread
        calls = thread.calls
        n = len(calls)
        fixed_ttl = None if self.scenario.ttl == "recorded" else self.scenario.ttl
        head = thread.head_tokens
        policies = self.policies
        price_of: dict[str, tuple[ModelPrice | None, float]] = {}
        out_ttl: list[str] = []
        out_in: list[int] = []
        out_w5: list[int] = []
        out_w1: list[int] = []
        out_read: list[int] = []
        out_prompt: list[int] = []
        out_cost: list[float | None] = []
        out_cleared: list[int] = []
        out_newly: list[int] = []
        out_rewrote: list[bool] = []
        out_edit: list[bool] = []
        sent, done = _times(calls)
        cache_valid = 0  # tokens of the cached prefix that still match the prompt
        cache_intact = False  # the cache holds the whole previous prompt
        prev_sent: float | None = None
        prev_ttl_s = 300.0
        # Locals for the loop: it runs for every call of every policy.
        first, partial, external_miss, full = (
            ReadClass.FIRST,
            ReadClass.PARTIAL,
            ReadClass.EXTERNAL_MISS,
            ReadClass.FULL,
        )
        ttl_seconds = TTL_SECONDS
        # Calls [0, same) are identical to the unpruned replay (nothing cleared yet): only the
        # policies run there, and `decided` is their decision for call `same`.
        same = 0
        decided: tuple[bool, bool, int] | None = None
        if self.unpruned is not None:
            same, decided = self._until_first_clearing(sent, done)
            for before in calls[same - 1 :: -1] if same else ():
                if before.prompt_tokens >= min_cacheable_tokens(before.model):
                    cache_valid, cache_intact = before.prompt_tokens, True
                    break
            if same:
                prev_sent = sent[same - 1]
                prev_ttl_s = TTL_SECONDS[fixed_ttl or calls[same - 1].ttl]
        for i in range(same, n):
            call = calls[i]
            gap = sent[i] - prev_sent if prev_sent is not None else None
            recorded_prompt = (
                call.input_tokens
                + call.cache_write_5m_tokens
                + call.cache_write_1h_tokens
                + call.cache_read_tokens
            )
            if decided is not None:
                (rewrote, edited, newly), decided = decided, None
            else:
                if call.compaction:
                    self._reset()
                rewrote = edited = False
                newly = 0
                if policies:  # without policies nothing is ever cleared: no item tracking
                    self._add_segments(i)
                    idle = sent[i] - done[i - 1] if i else None
                    rewrote, edited, newly = self._decide(i, call, idle, recorded_prompt)
            ttl = fixed_ttl or call.ttl
            minimum = min_cacheable_tokens(call.model)
            prompt = recorded_prompt - self.saved
            if prompt < head and prompt < recorded_prompt:  # estimates never clear the head
                prompt = min(head, recorded_prompt)

            # The cache (see the module docstring).
            uncached = min(call.input_tokens, prompt)
            if prompt < minimum:
                read = write = 0
                uncached = prompt
            else:
                kind = call.read_class
                alive = gap is not None and (
                    gap < prev_ttl_s
                    # a recorded hit the recorded TTL does not explain: kept warm elsewhere
                    or ((kind is full or kind is partial) and gap >= ttl_seconds[calls[i - 1].ttl])
                )
                valid = cache_valid if alive else 0
                intact = alive and cache_intact
                if edited:  # the server deleted these from its cached copy for this call
                    valid = max(valid - self.edit_cached, 0)
                if rewrote and valid > head:
                    valid, intact = head, False
                if kind is first:
                    valid, intact = call.read_anchor, False  # warm from elsewhere (shared head)
                elif kind is partial:
                    anchor = self._to_replay(call.read_anchor)
                    # Read after the TTL ran out: that prefix was kept warm elsewhere.
                    valid, intact = (min(valid, anchor) if alive else anchor), False
                elif kind is external_miss:
                    valid, intact = 0, False
                read = valid + call.read_delta if intact and kind is full else valid
                read = max(0, min(read, prompt - uncached))
                write = prompt - uncached - read
                cache_valid, cache_intact = prompt, True
            write_1h = write if ttl == "1h" else 0

            model = call.model
            if model not in price_of:
                price = self.prices.lookup(model)
                price_of[model] = (price, base_rates_up_to(price) if price else 0)
            price, plain_below = price_of[model]
            if price is None:
                cost = None
            else:
                if prompt <= plain_below and not call.speed and not call.inference_geo:
                    r = price.rates  # no long-context rule can apply, no multiplier
                else:
                    r, _ = rates_for(
                        price, prompt, call.timestamp_s, call.speed, call.inference_geo
                    )
                cost = (
                    uncached * r.input
                    + (write - write_1h) * r.cache_write_5m
                    + write_1h * r.cache_write_1h
                    + read * r.cache_read
                    + call.output_tokens * r.output
                ) * 1e-6
            out_ttl.append(ttl)
            out_in.append(uncached)
            out_w5.append(write - write_1h)
            out_w1.append(write_1h)
            out_read.append(read)
            out_prompt.append(prompt)
            out_cost.append(cost)
            out_cleared.append(self.saved)
            out_newly.append(newly)
            out_rewrote.append(rewrote)
            out_edit.append(edited)
            prev_sent, prev_ttl_s = sent[i], ttl_seconds[ttl]

        copied: list[CacheBreak] = []  # drops among the copied calls: the unpruned replay's
        if same:  # the calls before the first clearing, as the unpruned replay made them
            ref = self.unpruned
            assert ref is not None
            copies: list[tuple[list[Any], list[Any]]] = [
                (out_ttl, ref.ttl),
                (out_in, ref.input_tokens),
                (out_w5, ref.cache_write_5m_tokens),
                (out_w1, ref.cache_write_1h_tokens),
                (out_read, ref.cache_read_tokens),
                (out_prompt, ref.prompt_tokens),
                (out_cost, ref.cost_usd),
                (out_cleared, ref.cleared_tokens),
                (out_newly, ref.newly_cleared_tokens),
                (out_rewrote, ref.rewrote),
                (out_edit, ref.cache_edit),
            ]
            for column, unpruned in copies:
                column[:0] = unpruned[:same]
            copied = [b for b in (*ref.breaks, *ref.edit_drops) if b.call_index < same]
        models = [c.model for c in calls]
        compactions = [c.compaction for c in calls]
        ttl_s = [TTL_SECONDS[t] for t in out_ttl]
        # The recording's own pruning is announced to the detector like a policy's.
        rewrites = [r or c.pruned == _MICROCOMPACT for r, c in zip(out_rewrote, calls, strict=True)]
        edits = [e or c.pruned == _CACHE_DELETION for e, c in zip(out_edit, calls, strict=True)]
        found = detect_breaks_columns(
            sent, models, out_read, ttl_s, compactions, rewrites, edits, start=same
        )
        breaks = [b for b in (*copied, *found) if b.is_break]
        edit_drops = [b for b in (*copied, *found) if not b.is_break]
        hazards = tuple(self._hazards(out_prompt, out_ttl)) if self.policies else ()
        return SimThread(
            thread.thread_id,
            thread.kind,
            [c.timestamp_s for c in calls],
            models,
            out_ttl,
            out_in,
            out_w5,
            out_w1,
            out_read,
            [c.output_tokens for c in calls],
            out_prompt,
            out_cost,
            out_cleared,
            out_newly,
            out_rewrote,
            out_edit,
            compactions,
            tuple(breaks),
            hazards,
            len(self.cleared_log),
            tuple(edit_drops),
            tuple(p.figures() for p in policies),
        )

    def _until_first_clearing(
        self, sent: list[float], done: list[float]
    ) -> tuple[int, tuple[bool, bool, int] | None]:
        """Run only the policies until one clears: (that call's index, its decision), or
        (the number of calls, None) when none ever does."""
        for i, call in enumerate(self.thread.calls):
            if call.compaction:
                self._reset()
            self._add_segments(i)
            idle = sent[i] - done[i - 1] if i else None
            decision = self._decide(i, call, idle, call.prompt_tokens)
            if decision[0] or decision[1]:  # rewrote or cache-edited: from here on it differs
                return i, decision
        return len(self.thread.calls), None

    def _decide(
        self, i: int, call: CalCall, idle: float | None, recorded_prompt: int
    ) -> tuple[bool, bool, int]:
        """Run the policy stack before a call: (rewrote, cache-edited, tokens newly cleared).
        Both take effect on this call; `edit_cached` is what its cache edits deleted from
        the cached copy (items of earlier calls)."""
        rewrote = edited = False
        newly = 0
        self.edit_cached = 0
        view = self.view  # one per thread, updated in place: a View per call costs a lot
        view.call_index = i
        view.timestamp_s = call.timestamp_s
        view.gap_seconds = idle
        view.prompt_tokens = recorded_prompt - self.saved
        view.model = call.model
        view.thinking_in_prompt = thinking_in_prompt(call.model)
        view.rewritten = False
        for policy in self.policies:
            clearing = policy.before_call(view)
            if clearing is None:
                continue
            net, cached = self._clear(clearing, i)
            if clearing.mode is Mode.REWRITE:
                net -= self._drop_cache_edits()
            newly += net
            self.saved += net
            view.prompt_tokens = recorded_prompt - self.saved
            if clearing.mode is Mode.REWRITE:
                rewrote = view.rewritten = True
                for other in self.policies:
                    if other is not policy:
                        other.after_rewrite()
            else:
                self.edit_cached += cached
                edited = True
        return rewrote, edited, newly

    def _add_segments(self, i: int) -> None:
        prepared = self.prepared
        assert prepared is not None
        self.segments.extend(prepared.segments[i])
        self.results.extend(prepared.results[i])
        self.compactable.extend(self.compactable_per_call[i])
        self.view.messages = prepared.messages[i]
        call = self.thread.calls[i]
        if call.pruned_ids or call.pruned_tokens:
            self._recorded_pruning(call, i)

    def _recorded_pruning(self, call: CalCall, i: int) -> None:
        """The recording cleared results itself before this call: its prompt is already
        without them, so they save nothing more, whatever a policy did to them. First the
        results it names, then the oldest results Claude Code may clear (both of its
        mechanisms clear oldest first) while what it removed is not accounted for (a rest
        under half a result is the calibration's rounding, not a result)."""
        left = call.pruned_tokens
        if call.pruned_ids:
            ids = set(call.pruned_ids)
            for seg in self.results:
                if seg.tool_use_id in ids and seg.call_index < i and not seg.recorded:
                    left -= seg.tokens
                    self._gone(seg)
        results = self.results
        while left > 0 and self.recorded_upto < len(results):
            seg = results[self.recorded_upto]
            if seg.call_index >= i:
                break
            if not seg.recorded and is_compactable(seg.tool_name, _CLAUDE_CODE, frozenset()):
                if 2 * left < seg.tokens:
                    break
                left -= seg.tokens
                self._gone(seg)
            self.recorded_upto += 1

    def _gone(self, seg: LiveSegment) -> None:
        """A result the recording cleared: whatever a policy saved on it, it saves no more."""
        self.saved -= seg.saved
        seg.cleared, seg.edited, seg.recorded, seg.saved = True, False, True, 0

    def _reset(self) -> None:
        """A compaction: the old conversation is gone, and so is the policies' state."""
        self.segments = []
        self.results = []
        self.compactable = []
        self.saved = 0
        self.edit_cached = 0
        self.edited = []
        self.recorded_upto = 0
        self._show_lists()
        for policy in self.policies:
            policy.reset()

    def _show_lists(self) -> None:
        self.view.segments = self.segments
        self.view.results = self.results
        self.view.compactable = self.compactable

    def _clear(self, clearing: Clearing, i: int) -> tuple[int, int]:
        """Mark segments cleared (a rewrite) or deleted (a cache edit): the net tokens they
        stop costing (a placeholder stays), in all and among the items of earlier calls
        (those in the cached prefix)."""
        cost = placeholder_tokens(clearing.placeholder)
        rewrite = clearing.mode is Mode.REWRITE
        net = earlier = 0
        for seg in (*clearing.segments, *clearing.inputs):
            if seg.cleared or (seg.edited and not rewrite):
                continue
            saved = max(seg.tokens - cost, 0)
            if seg.edited:  # deleted from the cache, now replaced in the messages too
                seg.edited, seg.cleared = False, True
                net += saved - seg.saved
                seg.saved = saved
                continue
            seg.cleared, seg.edited, seg.saved = rewrite, not rewrite, saved
            net += saved
            if seg.call_index < i:
                earlier += saved
            if not rewrite:
                self.edited.append(seg)
            if seg.kind is ItemKind.TOOL_RESULT:
                self.cleared_log.append((seg, i))
        return net, earlier

    def _drop_cache_edits(self) -> int:
        """A rewrite drops the cache edits sent so far (Claude Code resets their state): what
        they deleted and the rewrite did not clear is sent again. The tokens that come back."""
        back = 0
        for seg in self.edited:
            if seg.edited:
                seg.edited = False
                back += seg.saved
                seg.saved = 0
        self.edited = []
        return back

    def _hazards(self, prompts: list[int], ttls: list[str]) -> list[Hazard]:
        """Cleared results whose resource was used again before the next compaction."""
        prepared = self.prepared
        assert prepared is not None
        out = []
        for seg, i in self.cleared_log:
            resource = seg.resource
            if resource is None:
                continue
            calls = prepared.uses.get(resource, [])
            k = bisect.bisect_right(calls, i)
            if k == len(calls) or calls[k] >= prepared.next_compaction[i]:
                continue
            j = calls[k]
            price = self.prices.lookup(self.thread.calls[j].model)
            cost = 0.0
            if price is not None:
                write = (
                    price.rates.cache_write_1h if ttls[j] == "1h" else price.rates.cache_write_5m
                )
                cost = (seg.tokens * write + prompts[j] * price.rates.cache_read) * 1e-6
            out.append(Hazard(i, seg.tool_name, resource, j, seg.tokens, cost))
        return out

    def _to_replay(self, recorded_position: int) -> int:
        """A position in the recorded prompt, in the replayed prompt (less what was cleared)."""
        removed = sum(s.saved for s in self.segments if s.saved and s.start < recorded_position)
        return max(recorded_position - removed, 0)
