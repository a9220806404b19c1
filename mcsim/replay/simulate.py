"""Replay one thread under a scenario, call by call: the policies decide, the context applies
their clearings, the prompt cache serves the call, the price table prices it; at the end the
break detector names the cause of every drop in reads.

Pure and deterministic: a calibrated thread, a scenario and a price table in; simulated calls
and cache breaks out. The parts, each on one screen: `context.py` (what is in the prompt and
what is cleared), `cache.py` (the prompt-cache model), `pricing.py`, and the detector in
`mcsim.accounting.breaks`. Time as each mechanism sees it: the cache TTL runs from request to
request (a request is sent with the last line written before its call); time-based pruning
measures the idle time from the end of the previous response to the request.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from itertools import repeat
from operator import or_
from typing import Any

from mcsim.accounting.breaks import CacheBreak, detect_breaks_columns
from mcsim.accounting.prices import PriceTable
from mcsim.accounting.recorded import TTL_SECONDS
from mcsim.model import ThreadKind, Usage
from mcsim.replay.cache import PromptCache
from mcsim.replay.calibrate import CalCall, CallColumns, CalThread, ReadClass
from mcsim.replay.context import Context, PreparedThread
from mcsim.replay.policies import Mode, Policy, can_clear
from mcsim.replay.pricing import Pricer
from mcsim.replay.providers import CacheRules, rules_for
from mcsim.replay.scenario import Scenario

__all__ = ["PreparedThread", "SimCall", "SimThread", "prunes", "simulate_thread"]

_PARTIAL = ReadClass.PARTIAL
Decision = tuple[bool, bool, int]  # (rewrote, cache-edited, tokens newly cleared)
# One call as the policies leave it, whatever the TTL: prompt, tokens cleared so far, newly
# cleared, rewrote, cache-edited, tokens its cache edit deleted from the cached copy, the
# recorded fall-back read in replayed tokens, (a rewrite) the tokens before its first
# change, and the tokens cache edits keep deleted from the cached copy (`edit_reread_usd`).
_Row = tuple[int, int, int, bool, bool, int, int, int, int]


def thread_rules(thread: CalThread, scenario: Scenario) -> CacheRules:
    """The cache a thread replays under: the policy's provider, else its calls' (as recorded;
    a thread's calls share one)."""
    if scenario.provider != "recorded":
        return rules_for(scenario.provider)
    return rules_for(thread.calls[0].provider if thread.calls else "anthropic")


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
    # ... of which the recording cannot tell whether they were needed again: their tool's
    # calls have no resource keys (refetch.py); not assessed, neither hazards nor safe
    unassessed_results: int = 0
    # Drops in reads that cache edits explain: not breaks (Claude Code's detector is told)
    edit_drops: tuple[CacheBreak, ...] = ()
    # Per policy that ran on the thread (none when none did): Policy.figures, what it compared
    # with its thresholds. Not part of the replay's result: two equal replays may differ here.
    figures: tuple[dict[str, float], ...] = field(default=(), compare=False)
    unavailable_edits: int = 0  # cache edits decided on a cache that has none (not made)
    # What the thread would cost more if the tokens cache edits deleted were still billed as
    # cache reads on every call from the edit on: the other reading of their billing, which
    # Anthropic does not document (the replay's own: they are billed no more).
    edit_reread_usd: float = 0.0

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
    if not policies:
        return _Replay(thread, scenario, policies, prices, None, prepared, unpruned).run()
    prepared = prepared or PreparedThread(thread)
    key = scenario.decision_key
    decided = prepared.decisions.get(key)
    if decided is not None:
        replay = _Replay(thread, scenario, policies, prices, None, prepared, unpruned)
        return replay.replayed(decided)
    prepared.reset()
    context = Context(thread, scenario, prepared)
    replay = _Replay(thread, scenario, policies, prices, context, prepared, unpruned)
    sim = replay.run()
    prepared.decisions[key] = replay.decided
    return sim


@dataclass(frozen=True, slots=True)
class _Decided:
    """What the policies decided on a thread, call by call, whatever the TTL: `_Row`s, the
    tool results cleared, the policies' figures and the edits not made.

    Kept per thread while its session replays, so a scenario that differs from one replayed
    before only in its TTL (claude-code and claude-code-1h in policies/all.yaml) serves and
    prices the same prompts under its own TTL without running the policies again (on the
    506 MB replica of the bundled corpus: the policies' share of the replay, measured in
    the commit that added this)."""

    rows: list[_Row]  # every call's
    cleared_log: list[tuple[Any, int]]
    figures: tuple[dict[str, float], ...]
    unavailable_edits: int


class _Replay:
    """One scenario's replay of one thread."""

    def __init__(
        self,
        thread: CalThread,
        scenario: Scenario,
        policies: list[Policy],
        prices: PriceTable,
        context: Context | None,  # None: no policy runs here, nothing is tracked
        prepared: PreparedThread | None,  # the thread's items (needed when policies act)
        unpruned: SimThread | None = None,
    ) -> None:
        self.thread = thread
        self.prepared = prepared
        self.policies = policies
        self.prices = prices
        self.context = context
        self.unpruned = unpruned
        self.cache = PromptCache(thread.head_tokens, thread_rules(thread, scenario))
        self.pricer = Pricer(prices)
        self.columns = prepared.columns if prepared is not None else CallColumns(thread.calls)
        self.sent = self.columns.request_s  # when each request was sent
        self.done = self.columns.response_end_s  # ... and its response complete
        self.edit_cached = 0  # what this call's cache edit deleted from the cached copy
        self.unavailable_edits = 0  # cache edits the provider's cache cannot make, not made
        self.kept = 0  # the prompt before the first change a rewrite made (`_before`)
        self.fixed_ttl = None if scenario.ttl == "recorded" else scenario.ttl
        self.head = thread.head_tokens
        self.decided: _Decided | None = None  # set by `run` when policies acted

    def run(self) -> SimThread:
        calls = self.thread.calls
        # Calls [0, same) are identical to the unpruned replay (nothing cleared yet): only the
        # policies run there, and `decided` is their decision for call `same`.
        same, decided = 0, None
        if self.unpruned is not None:
            same, decided = self._until_first_clearing()
            if same:
                self._resume_cache(same)
        # The calls from `same` on: the policies decide and the context applies it, call by
        # call; the cache then serves the prompts in order, and the calls are priced.
        if self.context is None:  # no policy acts: the recorded prompts, nothing cleared
            columns = self._as_recorded()
        else:
            rows = [self._call(same, decided)] if same < len(calls) else []
            rows += [self._call(i, None) for i in range(same + 1, len(calls))]
            self.decided = _Decided(
                [*self._untouched(same), *rows],
                self.context.cleared_log,
                tuple(p.figures() for p in self.policies),
                self.unavailable_edits,
            )
            columns = [list(c) for c in zip(*rows, strict=True)] or [[] for _ in range(9)]
        return self._served(same, [self._ttls(same), *columns], self.decided)

    def replayed(self, decided: _Decided) -> SimThread:
        """`run`, with the policies' decisions taken from the replay of a scenario that
        differs from this one only in its TTL: the same prompts, served under this TTL."""
        rows = decided.rows
        same = 0
        if self.unpruned is not None:  # as `run`: copied up to the first rewrite or edit
            same = next((i for i, row in enumerate(rows) if row[3] or row[4]), len(rows))
            if same:
                self._resume_cache(same)
        columns = [list(c) for c in zip(*rows[same:], strict=True)] or [[] for _ in range(9)]
        self.unavailable_edits = decided.unavailable_edits
        return self._served(same, [self._ttls(same), *columns], decided)

    def _ttls(self, same: int) -> list[str]:
        """The TTLs calls [same, ...) are sent with."""
        fixed = self.fixed_ttl
        return [fixed] * (len(self.thread.calls) - same) if fixed else self.columns.ttl[same:]

    def _untouched(self, same: int) -> list[_Row]:
        """`_call`'s rows for calls [0, same), where nothing is cleared."""
        c = self.columns
        return list(zip(c.prompt_tokens[:same], repeat(0), repeat(0), repeat(False),
                        repeat(False), repeat(0), c.partial_read[:same], repeat(0),
                        repeat(0)))  # fmt: skip

    def _served(self, same: int, rows: list[list[Any]], decided: _Decided | None) -> SimThread:
        """Calls [same, ...) as their TTLs and `_call`'s columns, served by the cache and
        priced, after the copied calls [0, same)."""
        calls = self.thread.calls
        ttl, prompt, saved, newly, rewrote, edited, deleted, anchor, kept, edit_kept = rows
        uncached, read, w5, w1 = self.cache.serve(
            calls[same:], prompt, self.sent[same:], ttl, rewrote, deleted, anchor, kept
        )
        cost = self.pricer.costs(calls[same:], prompt, uncached, w5, w1, read)
        # (none before `same`: nothing was cleared there)
        reread = self.pricer.reads_usd(calls[same:], prompt, edit_kept) if any(edit_kept) else 0.0
        columns = [ttl, uncached, w5, w1, read, prompt, cost, saved, newly, rewrote, edited]
        if same:
            columns = [[*copied, *c] for copied, c in zip(self._copied(same), columns, strict=True)]
        return self._thread(same, columns, decided, reread)

    def _call(self, i: int, decided: Decision | None) -> _Row:
        """The story of one call as the policies tell it: what they clear before it (or had
        decided, for the first call that differs from the unpruned replay), the prompt that
        is left, and what the cache must know of it (cache.py serves it, pricing.py bills
        it)."""
        call = self.thread.calls[i]
        context = self.context
        recorded_prompt = self.columns.prompt_tokens[i]
        assert context is not None
        rewrote, edited, newly = decided or self._before(i, call, recorded_prompt)
        kept = self.kept if rewrote else 0  # set by `_before` for call i
        saved = context.saved
        prompt = recorded_prompt - saved
        if prompt < self.head and prompt < recorded_prompt:  # estimates never clear the head
            prompt = min(self.head, recorded_prompt)
        anchor = context.to_replay(call.read_anchor) if call.read_class is _PARTIAL else 0
        deleted = self.edit_cached if edited else 0
        return (prompt, saved, newly, rewrote, edited, deleted, anchor, kept, context.edit_saved)

    def _as_recorded(self) -> list[list[Any]]:
        """`_call`'s rows as columns, for a thread no policy acts on."""
        calls = self.thread.calls
        n = len(calls)
        return [
            self.columns.prompt_tokens,
            [0] * n,
            [0] * n,
            [False] * n,
            [False] * n,
            [0] * n,
            [c.read_anchor for c in calls],
            [0] * n,
            [0] * n,
        ]

    def _before(self, i: int, call: CalCall, recorded_prompt: int) -> Decision:
        """Before call `i`: a compaction restarts the context, the call's items arrive, and
        the policy stack decides. A rewrite or a cache edit takes effect on this call;
        `edit_cached` is what its cache edits deleted from the cached copy."""
        context = self.context
        assert context is not None
        if call.compaction:
            self._restart()
        context.add(i)
        rewrote = edited = False
        newly = 0
        self.edit_cached = 0
        context.first_change = None
        view = context.view
        view.call_index = i
        view.timestamp_s = call.timestamp_s
        view.gap_seconds = self.columns.idle_s[i]
        view.prompt_tokens = recorded_prompt - context.saved
        view.model = call.model
        view.thinking_in_prompt = self.columns.thinking_in_prompt[i]
        view.rewritten = False
        for policy in self.policies:
            clearing = policy.before_call(view)
            if clearing is None:
                continue
            if clearing.mode is Mode.CACHE_EDIT and not self.cache.rules.cache_edits:
                self.unavailable_edits += 1  # this provider's cache cannot (providers/)
                continue
            net, cached = context.apply(clearing, i)
            newly += net
            view.prompt_tokens = recorded_prompt - context.saved
            if clearing.mode is Mode.REWRITE:
                rewrote = view.rewritten = True
                for other in self.policies:
                    if other is not policy:
                        other.after_rewrite()
            else:
                self.edit_cached += cached
                edited = True
        first = context.first_change
        # What is left of the last prompt before the first change, in replayed tokens.
        self.kept = context.to_replay(first) if first is not None else 0
        return rewrote, edited, newly

    def _restart(self) -> None:
        """A compaction: the old conversation is gone, and so is the policies' state."""
        if self.context is not None:
            self.context.restart()
        for policy in self.policies:
            policy.reset()

    def _until_first_clearing(self) -> tuple[int, Decision | None]:
        """Run only the policies until one clears: (that call's index, its decision), or
        (the number of calls, None) when none ever does."""
        calls, prompts = self.thread.calls, self.columns.prompt_tokens
        for i, call in enumerate(calls):
            decision = self._before(i, call, prompts[i])
            if decision[0] or decision[1]:  # rewrote or cache-edited: from here on it differs
                return i, decision
        return len(calls), None

    def _resume_cache(self, same: int) -> None:
        """The cache as the copied calls [0, same) left it."""
        calls = self.thread.calls
        cached = next(
            (c.prompt_tokens for c in calls[same - 1 :: -1]
             if c.prompt_tokens >= self.cache.rules.min_tokens(c.model)),
            None,
        )  # fmt: skip
        last = calls[same - 1]
        ttl = TTL_SECONDS[self.fixed_ttl or last.ttl]
        self.cache.resume(cached, self.sent[same - 1], ttl, last.ttl)

    def _copied(self, same: int) -> list[list[Any]]:
        """The unpruned replay's calls [0, same), as columns in `_Row` order."""
        ref = self.unpruned
        assert ref is not None
        columns = (
            ref.ttl, ref.input_tokens, ref.cache_write_5m_tokens, ref.cache_write_1h_tokens,
            ref.cache_read_tokens, ref.prompt_tokens, ref.cost_usd, ref.cleared_tokens,
            ref.newly_cleared_tokens, ref.rewrote, ref.cache_edit,
        )  # fmt: skip
        return [column[:same] for column in columns]

    def _thread(
        self, same: int, columns: list[list[Any]], decided: _Decided | None, reread: float
    ) -> SimThread:
        """The replayed thread, with its breaks and re-fetch hazards (`decided`: what the
        policies decided, None when none acts)."""
        thread = self.thread
        ttl, uncached, w5, w1, read, prompt, cost, saved, newly, rewrote, edit = columns
        models, compactions = self.columns.model, self.columns.compaction
        # The recording's own pruning is announced to the detector like a policy's.
        rewrites = list(map(or_, rewrote, self.columns.microcompacted))
        edits = list(map(or_, edit, self.columns.cache_deleted))
        found = detect_breaks_columns(
            self.sent, models, read, list(map(TTL_SECONDS.__getitem__, ttl)), compactions,
            rewrites, edits, start=same,
        )  # fmt: skip
        copied: list[CacheBreak] = []  # drops among the copied calls: the unpruned replay's
        if same and self.unpruned is not None:
            ref = self.unpruned
            copied = [b for b in (*ref.breaks, *ref.edit_drops) if b.call_index < same]
        drops = (*copied, *found)
        return SimThread(
            thread.thread_id,
            thread.kind,
            self.columns.timestamp_s,
            models,
            ttl,
            uncached,
            w5,
            w1,
            read,
            self.columns.output_tokens,
            prompt,
            cost,
            saved,
            newly,
            rewrote,
            edit,
            compactions,
            tuple(b for b in drops if b.is_break),
            tuple(self._hazards(decided.cleared_log, prompt, ttl)) if decided else (),
            len(decided.cleared_log) if decided else 0,
            sum(seg.resource is None for seg, _ in decided.cleared_log) if decided else 0,
            tuple(b for b in drops if not b.is_break),
            decided.figures if decided else tuple(p.figures() for p in self.policies),
            self.unavailable_edits,
            reread,
        )

    def _hazards(
        self, cleared_log: list[tuple[Any, int]], prompts: list[int], ttls: list[str]
    ) -> list[Hazard]:
        """Cleared results whose resource was used again before the next compaction."""
        prepared = self.prepared
        assert prepared is not None
        out = []
        for seg, i in cleared_log:
            resource = seg.resource
            if resource is None:
                continue
            # The first use after the clearing of any key the result has (a resource is the
            # space-separated hashes of its keys: refetch.ResourceKeys)
            j = prepared.next_compaction[i]
            key = resource
            for one in resource.split():
                calls = prepared.uses.get(one, [])
                k = bisect.bisect_right(calls, i)
                if k < len(calls) and calls[k] < j:
                    j, key = calls[k], one
            if j >= prepared.next_compaction[i]:
                continue
            price = self.prices.lookup(self.thread.calls[j].model)
            cost = 0.0
            if price is not None:
                write = (
                    price.rates.cache_write_1h if ttls[j] == "1h" else price.rates.cache_write_5m
                )
                cost = (seg.tokens * write + prompts[j] * price.rates.cache_read) * 1e-6
            out.append(Hazard(i, seg.tool_name, key, j, seg.tokens, cost))
        return out
