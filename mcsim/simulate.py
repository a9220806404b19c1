"""Replay one thread under a scenario: apply its policies, run the prompt cache, price each call.

Pure and deterministic: a calibrated thread, a scenario and a price table in; simulated calls
and cache breaks out. The model (DESIGN.md "The replay model"):

* The replayed prompt of a call is the recorded prompt minus what the policy has cleared so
  far (net of placeholders), so with no pruning it is the recorded prompt exactly.
* The cache holds the previous call's whole prompt while it is alive: each call refreshes it
  with its own TTL (5m, 1h, or the recorded one), measured on the recorded timestamps.
* A rewrite (client-side clearing, API context editing) changes the prompt at an old block:
  the read falls back to the stable head, as the real cache does. A cache edit deletes
  tokens from the cached copy without breaking it; they stop being billed as reads from the
  next call (the undocumented billing is modelled that way, and said so in outputs).
* Recorded anchors: what the recording shows happened for reasons outside any policy is kept.
  A read that fell back to a shorter prefix falls back there in the replay too (shifted by
  what was cleared before it); a miss the TTL does not explain stays a miss; a hit on the
  whole previous prompt keeps its recorded few-token offset. Misses the recorded TTL explains
  are left to the replay's own TTL clock.
* Below the model's minimum cacheable length nothing is cached.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from mcsim.breaks import CacheBreak, CallObservation, detect_breaks
from mcsim.calibrate import CalCall, CalThread, ReadClass, thinking_in_prompt
from mcsim.model import ItemKind, ThreadKind, Usage
from mcsim.policies import Clearing, LiveSegment, Mode, Policy, View, is_compactable
from mcsim.prices import CallCost, ModelPrice, PriceTable, parse_model, price_usage
from mcsim.recorded import TTL_SECONDS
from mcsim.scenario import Scenario

# Minimum cacheable prompt by (family, version); DOMAIN.md §3.1.
_MIN_CACHEABLE = {
    ("opus", "4.5"): 4096,
    ("opus", "4.6"): 4096,
    ("opus", "4.7"): 2048,
    ("haiku", "4.5"): 4096,
    ("haiku", "3.5"): 2048,
    ("haiku", "3"): 2048,
}


@functools.lru_cache(maxsize=256)
def min_cacheable_tokens(model: str) -> int:
    parsed = parse_model(model)
    return _MIN_CACHEABLE.get(parsed, 1024) if parsed else 1024


def placeholder_tokens(text: str) -> int:
    """Tokens a placeholder costs (about 4 characters a token; they are a few tokens each)."""
    return (len(text) + 3) // 4 if text else 0


@dataclass(frozen=True, slots=True)
class SimCall:
    """One replayed call."""

    call_index: int
    timestamp_s: float
    model: str
    ttl: str
    usage: Usage
    cost: CallCost | None
    cleared_tokens: int  # removed from this call's prompt by the policy, in total
    newly_cleared_tokens: int  # cleared by a decision taken before this call
    rewrote: bool
    cache_edit: bool
    deletion_announced: bool
    compaction: bool

    @property
    def prompt_tokens(self) -> int:
        return self.usage.prompt_tokens


@dataclass(frozen=True, slots=True)
class SimThread:
    thread_id: str
    kind: ThreadKind
    calls: tuple[SimCall, ...]
    breaks: tuple[CacheBreak, ...]


def simulate_thread(thread: CalThread, scenario: Scenario, prices: PriceTable) -> SimThread:
    applies = thread.kind is ThreadKind.MAIN or not scenario.main_thread_only
    policies = scenario.build() if applies else []
    sim = _Replay(thread, scenario, policies, prices)
    calls = tuple(sim.step(i) for i in range(len(thread.calls)))
    observations = [
        CallObservation(
            c.timestamp_s,
            c.model,
            c.usage.cache_read_tokens,
            TTL_SECONDS[c.ttl],
            compaction_before=c.compaction,
            deletion_announced=c.deletion_announced,
        )
        for c in calls
    ]
    return SimThread(thread.thread_id, thread.kind, calls, tuple(detect_breaks(observations)))


class _Replay:
    """The mutable state of one thread's replay."""

    def __init__(
        self, thread: CalThread, scenario: Scenario, policies: list[Policy], prices: PriceTable
    ) -> None:
        self.thread = thread
        self.scenario = scenario
        self.policies = policies
        self.prices = prices
        self.segments: list[LiveSegment] = []
        self.results: list[LiveSegment] = []
        self.compactable: list[LiveSegment] = []
        self.added = 0  # segments ever added (positions)
        self.rec_pos = thread.head_tokens  # recorded position where the next segment starts
        self.saved = 0  # tokens currently removed from the prompt
        self.pending_edit = 0  # cache-edit savings that take effect at the next call
        self.cache_valid = 0  # tokens of the cached prefix that still match the prompt
        self.cache_intact = False  # the cache holds the whole previous prompt
        self.prev_ts: float | None = None
        self.prev_ttl = "5m"
        self.main = thread.kind is ThreadKind.MAIN
        self.fixed_ttl = None if scenario.ttl == "recorded" else scenario.ttl
        self.price_of: dict[str, ModelPrice | None] = {}

    def step(self, i: int) -> SimCall:
        call = self.thread.calls[i]
        if call.compaction:
            self._reset()
        if self.policies:  # without policies nothing is ever cleared: no need to track items
            self._add_segments(i, call)

        announced = self.pending_edit > 0
        if announced:  # the server deleted these from its cached copy before this call
            self.saved += self.pending_edit
            self.cache_valid = max(self.cache_valid - self.pending_edit, 0)
            self.pending_edit = 0

        gap = call.timestamp_s - self.prev_ts if self.prev_ts is not None else None
        recorded_prompt = call.prompt_tokens
        rewrote = edited = False
        newly = 0
        view = None
        for policy in self.policies:
            if view is None or view.rewritten != rewrote:
                view = View(
                    i,
                    call.timestamp_s,
                    gap,
                    recorded_prompt - self.saved,
                    call.model,
                    self.main,
                    thinking_in_prompt(call.model),
                    self.segments,
                    self.results,
                    self.compactable,
                    rewrote,
                )
            clearing = policy.before_call(view)
            if clearing is None:
                continue
            net = self._clear(clearing)
            newly += net
            if clearing.mode is Mode.REWRITE:
                self.saved += net
                rewrote = True
                for other in self.policies:
                    if other is not policy:
                        other.after_rewrite()
            else:
                self.pending_edit += net
                edited = True

        prompt = recorded_prompt - self.saved
        ttl = self.fixed_ttl or call.ttl
        read, write, uncached = self._cache(call, prompt, gap, rewrote)
        write_1h = write if ttl == "1h" else 0
        usage = Usage(
            uncached,
            write - write_1h,
            write_1h,
            read,
            call.output_tokens,
            speed=call.speed,
            inference_geo=call.inference_geo,
        )
        self.prev_ts, self.prev_ttl = call.timestamp_s, ttl
        if call.model not in self.price_of:
            self.price_of[call.model] = self.prices.lookup(call.model)
        price = self.price_of[call.model]
        return SimCall(
            i,
            call.timestamp_s,
            call.model,
            ttl,
            usage,
            price_usage(price, usage, call.timestamp_s) if price else None,
            self.saved,
            newly,
            rewrote,
            edited,
            announced or rewrote,
            call.compaction,
        )

    def _add_segments(self, i: int, call: CalCall) -> None:
        allowed, excluded = self.scenario.compactable_tools, self.scenario.exclude_tools
        segments, results, compactable = self.segments, self.results, self.compactable
        position, start = self.added, self.rec_pos
        for seg in call.segments:
            live = LiveSegment(
                position, i, seg.kind, seg.tokens, seg.tool_name, seg.tool_use_id, seg.turn, start
            )
            segments.append(live)
            if seg.kind is ItemKind.TOOL_RESULT:
                results.append(live)
                if is_compactable(seg.tool_name, allowed, excluded):
                    compactable.append(live)
            position += 1
            start += seg.tokens
        self.added = position
        self.rec_pos = start + call.adjustment_tokens

    def _reset(self) -> None:
        """A compaction: the old conversation is gone, and so is the policies' state."""
        self.segments = []
        self.results = []
        self.compactable = []
        self.rec_pos = self.thread.head_tokens
        self.saved = 0
        self.pending_edit = 0
        for policy in self.policies:
            policy.reset()

    def _clear(self, clearing: Clearing) -> int:
        """Mark segments cleared; the net tokens they stop costing (a placeholder stays)."""
        cost = placeholder_tokens(clearing.placeholder)
        net = 0
        for seg in (*clearing.segments, *clearing.inputs):
            if seg.cleared:
                continue
            seg.cleared = True
            seg.saved = max(seg.tokens - cost, 0)
            net += seg.saved
        return net

    def _cache(
        self, call: CalCall, prompt: int, gap: float | None, rewrote: bool
    ) -> tuple[int, int, int]:
        """(read, write, uncached input) of a call whose replayed prompt is `prompt`."""
        uncached = min(call.input_tokens, prompt)
        if prompt < min_cacheable_tokens(call.model):
            return 0, 0, prompt
        alive = gap is not None and gap <= TTL_SECONDS[self.prev_ttl]
        valid = self.cache_valid if alive else 0
        intact = alive and self.cache_intact
        if rewrote and valid > self.thread.head_tokens:
            valid, intact = self.thread.head_tokens, False
        kind = call.read_class
        if kind is ReadClass.FIRST:
            valid, intact = call.read_anchor, False  # warm from elsewhere (shared system prompt)
        elif kind is ReadClass.PARTIAL:
            anchor = self._to_replay(call.read_anchor)
            # Read after the TTL ran out: that prefix (the shared head) was kept warm elsewhere.
            valid, intact = (min(valid, anchor) if alive else anchor), False
        elif kind is ReadClass.EXTERNAL_MISS:
            valid, intact = 0, False
        read = valid + call.read_delta if intact and kind is ReadClass.FULL else valid
        read = max(0, min(read, prompt - uncached))
        self.cache_valid, self.cache_intact = prompt, True
        return read, prompt - uncached - read, uncached

    def _to_replay(self, recorded_position: int) -> int:
        """A position in the recorded prompt, in the replayed prompt (less what was cleared)."""
        removed = sum(s.saved for s in self.segments if s.cleared and s.start < recorded_position)
        return max(recorded_position - removed, 0)
