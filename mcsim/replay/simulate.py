"""Replay one thread under a scenario, call by call, in three plain steps:

1. **decide** (`_Decider`): before each call the policies look at the replayed context and
   may clear some of it; the context applies what they ask (`context.py`). The result is a
   `Plans` entry per call: the prompt left, what was cleared, whether old messages were
   rewritten or a cache edit was sent. Nothing here depends on the cache TTL.
2. **serve** (`_serve`): the prompt cache reads and writes each planned prompt at its time
   with its TTL (`cache.py`), and each call is priced (`pricing.py`).
3. **detect**: the break detector (`mcsim.accounting.breaks`) names the cause of every drop
   in reads, and the re-fetch hazards of what was cleared are found (`refetch.py`).

Pure and deterministic: a calibrated thread, a scenario and a price table in; simulated
calls and cache breaks out. Two speed-ups wrap those steps in `simulate_thread`, and change
nothing in the result: a thread's decisions are kept per `Scenario.decision_key`, so a
scenario that differs from one replayed before only in its TTL is only served again; and
until the first clearing a replay is the unpruned one, so given that (`unpruned`) those calls
are copied rather than served again. Time as each mechanism sees it: the cache TTL runs from
request to request (a request is sent with the last line written before its call);
time-based pruning measures the idle time from the end of the previous response to the
request.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from operator import or_
from typing import Any, NamedTuple, cast

from mcsim.accounting.breaks import BreakCause, CacheBreak, detect_breaks_columns
from mcsim.accounting.prices import PriceTable
from mcsim.accounting.recorded import TTL_SECONDS
from mcsim.frozen import quick_init
from mcsim.model import ThreadKind, Usage
from mcsim.replay.cache import PromptCache
from mcsim.replay.calibrate import CalCall, CallColumns, CalThread, ReadClass
from mcsim.replay.context import Context, PreparedThread
from mcsim.replay.keep_warm import PingGap
from mcsim.replay.model_support import supports
from mcsim.replay.policies import Mode, can_clear
from mcsim.replay.pricing import Pricer
from mcsim.replay.providers import CacheRules, rules_for
from mcsim.replay.scenario import Scenario

__all__ = ["Plans", "PreparedThread", "SimCall", "SimThread", "prunes", "simulate_thread"]

_PARTIAL = ReadClass.PARTIAL


class Plans(NamedTuple):
    """What the policies leave of each call of a thread, whatever the TTL: one list per
    quantity, one entry per call (the serving loop and the tables take columns)."""

    prompt_tokens: list[int]  # the prompt sent: the recorded one less what is cleared
    cleared_tokens: list[int]  # removed from the prompt so far
    newly_cleared_tokens: list[int]  # removed by the decisions taken before the call
    rewrote: list[bool]  # old messages were rewritten before the call (the prefix changes)
    cache_edit: list[bool]  # the call carries a cache edit
    deleted_tokens: list[int]  # what its cache edit deleted from the cached copy
    fallback_read_tokens: list[int]  # the recording's fall-back read (ReadClass.PARTIAL)
    unchanged_tokens: list[int]  # after a rewrite: the prompt before its first change
    edit_deleted_tokens: list[int]  # what cache edits keep deleted (`edit_reread_usd`)

    def since(self, call: int) -> Plans:
        return Plans._make(column[call:] for column in self) if call else self

    def first_change(self) -> int:
        """The first call whose prompt differs from the unpruned replay's (or the count)."""
        changed = map(or_, self.rewrote, self.cache_edit)
        return next((i for i, change in enumerate(changed) if change), len(self.rewrote))


def _no_plans() -> Plans:
    return Plans._make([] for _ in Plans._fields)


def unchanged_plans(columns: CallColumns) -> Plans:
    """The plans of a thread nothing is cleared on: the recorded prompts."""
    n = len(columns.prompt_tokens)
    zeros, no = [0] * n, [False] * n
    return Plans(
        prompt_tokens=columns.prompt_tokens,
        cleared_tokens=zeros,
        newly_cleared_tokens=zeros,
        rewrote=no,
        cache_edit=no,
        deleted_tokens=zeros,
        fallback_read_tokens=columns.partial_read,
        unchanged_tokens=zeros,
        edit_deleted_tokens=zeros,
    )


def thread_rules(thread: CalThread, scenario: Scenario) -> CacheRules:
    """The cache a thread replays under: the policy's provider, else its calls' (as recorded;
    a thread's calls share one)."""
    if scenario.provider != "recorded":
        return rules_for(scenario.provider)
    return rules_for(thread.calls[0].provider if thread.calls else "anthropic")


@quick_init
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


@quick_init
@dataclass(frozen=True, slots=True)
class Hazard:
    """A cleared tool result whose resource the recorded agent used again (refetch.py)."""

    cleared_before_call: int
    tool_name: str | None
    resource: str
    reused_at_call: int
    tokens: int
    refetch_cost_usd: float


@quick_init
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
    # Drops in reads the detector was told to expect (a compaction, a rewrite or a cache edit
    # on their call): not breaks, as Claude Code's detector does not report them
    announced_drops: tuple[CacheBreak, ...] = ()
    # Per policy that ran on the thread (none when none did): Policy.figures, what it compared
    # with its thresholds. Not part of the replay's result: two equal replays may differ here.
    figures: tuple[dict[str, float], ...] = field(default=(), compare=False)
    unavailable_edits: int = 0  # cache edits decided on a cache that has none (not made)
    # (kind, model, calls): the calls a layer did not apply on, its mechanism not supported
    # by their model (mcsim.replay.model_support)
    unsupported: tuple[tuple[str, str, int], ...] = ()
    # What the thread would cost more if the tokens cache edits deleted were still billed as
    # cache reads on every call from the edit on: the other reading of their billing, which
    # Anthropic does not document (the replay's own: they are billed no more).
    edit_reread_usd: float = 0.0
    # Keep-warm pings (keep_warm.py): the idle gaps that had any, each ping priced. Not part
    # of `cost_usd`, which is the agent's own calls.
    ping_gaps: tuple[PingGap, ...] = ()

    @property
    def pings(self) -> list[int]:
        """Per call, the pings sent in the idle gap before it."""
        out = [0] * len(self.prompt_tokens)
        for gap in self.ping_gaps:
            out[gap.at] = gap.pings
        return out

    @property
    def ping_cost_usd(self) -> list[float | None]:
        """Per call, what the pings before it cost together (None: the model of the call
        before the gap is not in the price table)."""
        out: list[float | None] = [0.0] * len(self.prompt_tokens)
        for gap in self.ping_gaps:
            out[gap.at] = None if gap.cost_usd is None else gap.pings * gap.cost_usd
        return out

    @property
    def edit_drops(self) -> tuple[CacheBreak, ...]:
        """The announced drops cache edits explain (nothing else does)."""
        return tuple(d for d in self.announced_drops if d.cause is BreakCause.CACHE_EDIT)

    @property
    def calls(self) -> list[SimCall]:
        return [
            SimCall(
                call_index=i,
                timestamp_s=self.timestamp_s[i],
                model=self.model[i],
                ttl=self.ttl[i],
                usage=Usage(
                    input_tokens=self.input_tokens[i],
                    cache_write_5m_tokens=self.cache_write_5m_tokens[i],
                    cache_write_1h_tokens=self.cache_write_1h_tokens[i],
                    cache_read_tokens=self.cache_read_tokens[i],
                    output_tokens=self.output_tokens[i],
                ),
                cost_usd=self.cost_usd[i],
                cleared_tokens=self.cleared_tokens[i],
                newly_cleared_tokens=self.newly_cleared_tokens[i],
                rewrote=self.rewrote[i],
                cache_edit=self.cache_edit[i],
                compaction=self.compaction[i],
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
    thread to build its items once (it is made here when not given), and to share decisions
    between scenarios that differ only in their TTL.

    `unpruned`, when given, must be this thread's replay with no pruning under the same TTL
    and provider: the calls before the first clearing are copied from it, and a thread no
    policy acts on is it.
    """
    if not prunes(thread, scenario):
        if unpruned is not None:
            return unpruned
        columns = prepared.columns if prepared is not None else CallColumns(thread.calls)
        return _serve(thread, scenario, prices, None, columns)
    prepared = prepared or PreparedThread(thread)
    decisions = prepared.decisions.get(scenario.decision_key)
    if decisions is None:
        decisions = _Decider(thread, scenario, prepared).decide()
        prepared.decisions[scenario.decision_key] = decisions
    if unpruned is not None and decisions.first_change == len(thread.calls):
        # Nothing was cleared: every call is the unpruned replay's, as served and broken
        # (the plans' columns hold what its own do), with what the policies saw.
        return replace(unpruned, figures=decisions.figures,
                       unavailable_edits=decisions.unavailable_edits,
                       unsupported=decisions.unsupported)  # fmt: skip
    return _serve(thread, scenario, prices, decisions, prepared.columns, prepared, unpruned)


@quick_init
@dataclass(frozen=True, slots=True)
class Decisions:
    """What the policies decided on a thread, whatever the TTL: the plans, the tool results
    cleared (with the call before which), the policies' figures and the cache edits decided
    where the provider's cache has none."""

    plans: Plans
    cleared_log: list[tuple[Any, int]]
    figures: tuple[dict[str, float], ...]
    unavailable_edits: int
    first_change: int  # the first call whose prompt changes (plans.first_change())
    unassessed_results: int  # cleared results whose tool has no resource keys (refetch.py)
    unsupported: tuple[tuple[str, str, int], ...] = ()


class _Decider:
    """The policies of one scenario deciding, call by call, what one thread's context loses."""

    def __init__(self, thread: CalThread, scenario: Scenario, prepared: PreparedThread) -> None:
        self.thread = thread
        self.policies = [p for p in scenario.build() if can_clear(type(p))]
        prepared.reset()
        self.context = Context(thread, scenario, prepared, len(self.policies))
        # The layers the harness applies itself: what the client sends is net of theirs
        self.client_layers = [j for j, p in enumerate(self.policies) if type(p).client_side]
        self.columns = prepared.columns
        self.edits_possible = thread_rules(thread, scenario).cache_edits
        self.unavailable_edits = 0  # cache edits decided where the cache has none
        # Per layer: its index, the policy and the thread's models that cannot use the
        # mechanism it needs (model_support.py); and the calls each policy did not apply on
        # by model
        models = set(self.columns.model)
        self.layers = [(j, p, _cannot(type(p).needs, models)) for j, p in enumerate(self.policies)]
        self.unsupported: Counter[tuple[str, str]] = Counter()

    def decide(self) -> Decisions:
        rows = [self._plan(i, call) for i, call in enumerate(self.thread.calls)]
        plans = Plans._make(map(list, zip(*rows, strict=True))) if rows else _no_plans()
        figures = tuple(p.figures() for p in self.policies)
        unsupported = tuple((k, m, n) for (k, m), n in sorted(self.unsupported.items()))
        return Decisions(
            plans=plans,
            cleared_log=self.context.cleared_log,
            figures=figures,
            unavailable_edits=self.unavailable_edits,
            unsupported=unsupported,
            first_change=plans.first_change(),
            unassessed_results=[seg.resource for seg, _ in self.context.cleared_log].count(None),
        )

    def _plan(self, i: int, call: CalCall) -> tuple[Any, ...]:
        """Before call `i`: a compaction restarts the context, the call's items arrive, and
        the policy stack decides; a rewrite or a cache edit takes effect on this call. The
        call's entry of each `Plans` column, in their order (a plain tuple: a NamedTuple made
        per call cost 5% of a replay)."""
        context = self.context
        columns = self.columns
        if call.compaction:
            context.restart()
            for policy in self.policies:
                policy.reset()
        context.add(i)
        recorded_prompt = columns.prompt_tokens[i]
        rewrote = edited = False
        newly = deleted = 0
        context.first_change = None
        view = context.view
        view.call_index = i
        view.timestamp_s = call.timestamp_s
        view.gap_seconds = columns.idle_s[i]
        view.prompt_tokens = recorded_prompt - context.saved
        view.model = model = call.model
        view.thinking_in_prompt = columns.thinking_in_prompt[i]
        view.rewritten = False
        layer_saved, client_layers = context.layer_saved, self.client_layers
        # What the client sends: changes only when a layer clears
        sent = recorded_prompt - sum([layer_saved[k] for k in client_layers])
        for j, policy, cannot in self.layers:
            if model in cannot:
                self.unsupported[policy.kind, model] += 1  # its model cannot
                continue
            view.layer, view.own_saved, view.sent_prompt_tokens = j, layer_saved[j], sent
            clearing = policy.before_call(view)
            if clearing is None:
                continue
            if clearing.mode is Mode.CACHE_EDIT and not self.edits_possible:
                self.unavailable_edits += 1  # this provider's cache cannot (providers/)
                continue
            net, cached = context.apply(clearing, i, j)
            newly += net
            view.prompt_tokens = recorded_prompt - context.saved
            sent = recorded_prompt - sum([layer_saved[k] for k in client_layers])
            if clearing.mode is Mode.REWRITE:
                rewrote = view.rewritten = True
                for other in self.policies:
                    if other is not policy:
                        other.after_rewrite()
            else:
                deleted += cached
                edited = True
        saved = context.saved
        if not saved and not rewrote and not edited:  # nothing is cleared: the recorded call
            return (recorded_prompt, 0, 0, False, False, 0, columns.partial_read[i], 0,
                    context.edit_saved)  # fmt: skip
        prompt = recorded_prompt - saved
        head = self.thread.head_tokens
        if prompt < head and prompt < recorded_prompt:  # estimates never clear the head
            prompt = min(head, recorded_prompt)
        first = context.first_change
        # What is left of the last prompt before the first change, in replayed tokens.
        unchanged = context.to_replay(first) if rewrote and first is not None else 0
        fallback = context.to_replay(call.read_anchor) if call.read_class is _PARTIAL else 0
        return (prompt, saved, newly, rewrote, edited, deleted, fallback, unchanged,
                context.edit_saved)  # fmt: skip


def _cannot(needs: str | None, models: set[str]) -> frozenset[str]:
    """The models among `models` that cannot use the mechanism `needs` (None: any can)."""
    return frozenset(m for m in models if needs is not None and not supports(needs, m))


def _serve(
    thread: CalThread,
    scenario: Scenario,
    prices: PriceTable,
    decisions: Decisions | None,
    columns: CallColumns,
    prepared: PreparedThread | None = None,
    unpruned: SimThread | None = None,
) -> SimThread:
    """The planned calls (None: the recorded prompts, nothing cleared) served by the prompt
    cache under the scenario's TTL, priced, and their breaks and hazards found; the calls
    before the first change copied from `unpruned` when given."""
    calls = thread.calls
    plans = unchanged_plans(columns) if decisions is None else decisions.plans
    ttl = scenario.ttl_for(thread.kind.value)
    fixed_ttl = None if ttl == "recorded" else ttl
    ttls = [fixed_ttl] * len(calls) if fixed_ttl else columns.ttl
    warm = scenario.keep_warm_for(thread.kind.value)
    cache = PromptCache(thread.head_tokens, thread_rules(thread, scenario), warm)
    first_served = 0  # the calls before it are copied from `unpruned`
    if unpruned is not None and decisions is not None:
        # The calls before the first change are the unpruned replay's; serving starts far
        # enough before it that the entries the cache's lookback can still reach are there.
        first_served = _lookback_start(
            columns.blocks, decisions.first_change, cache.rules.lookback_blocks
        )
        if first_served:
            _resume(cache, calls, columns, first_served, fixed_ttl)
    rest = plans.since(first_served)
    prompt = rest.prompt_tokens
    uncached, read, w5, w1 = cache.serve(
        calls[first_served:], prompt, columns.request_s[first_served:], ttls[first_served:],
        rest.rewrote, rest.deleted_tokens, rest.fallback_read_tokens, rest.unchanged_tokens,
        columns.blocks[first_served:],
    )  # fmt: skip
    pricer = Pricer(prices)
    cost = pricer.costs(calls[first_served:], prompt, uncached, w5, w1, read)
    edit_deleted = rest.edit_deleted_tokens
    reread = (
        pricer.reads_usd(calls[first_served:], prompt, edit_deleted) if any(edit_deleted) else 0.0
    )
    ping_gaps = pricer.pings_priced(calls, first_served, cache.ping_gaps)
    served = _Served(
        ttl=ttls[first_served:],
        input_tokens=uncached,
        cache_write_5m_tokens=w5,
        cache_write_1h_tokens=w1,
        cache_read_tokens=read,
        prompt_tokens=prompt,
        cost_usd=cost,
    )
    if first_served:
        assert unpruned is not None
        served = _Served.copied(unpruned, first_served).then(served)
        ping_gaps[:0] = [g for g in unpruned.ping_gaps if g.at < first_served]
    return _thread(thread, columns, plans, served, decisions, prepared, prices, reread,
                   unpruned if first_served else None, first_served, tuple(ping_gaps))  # fmt: skip


def _lookback_start(blocks: list[int], first_change: int, lookback: int) -> int:
    """Where to start serving when the calls before `first_change` can be copied: the first
    call whose entry a call from `first_change` on can still reach, `lookback` blocks back
    (`first_change` itself without a lookback, or when nothing changes)."""
    if not lookback or first_change >= len(blocks) or not first_change:
        return first_change
    return bisect.bisect_left(blocks, blocks[first_change] - lookback, 0, first_change)


def _resume(
    cache: PromptCache, calls: Sequence[CalCall], columns: CallColumns, first_served: int,
    fixed_ttl: str | None,
) -> None:  # fmt: skip
    """The cache as the copied calls [0, first_served) left it: their last cacheable
    prompt."""
    cached = next(
        (i for i in range(first_served - 1, -1, -1)
         if calls[i].prompt_tokens >= cache.rules.min_tokens(calls[i].model)),
        None,
    )  # fmt: skip
    last = calls[first_served - 1]
    cache.resume(
        None if cached is None else calls[cached].prompt_tokens,
        columns.request_s[first_served - 1],
        TTL_SECONDS[fixed_ttl or last.ttl], last.ttl,
        0 if cached is None else columns.blocks[cached],
    )  # fmt: skip


class _Served(NamedTuple):
    """Per call, as served and priced: TTL, uncached input, writes, reads, prompt, cost."""

    ttl: list[str]
    input_tokens: list[int]
    cache_write_5m_tokens: list[int]
    cache_write_1h_tokens: list[int]
    cache_read_tokens: list[int]
    prompt_tokens: list[int]
    cost_usd: list[float | None]

    @classmethod
    def copied(cls, unpruned: SimThread, calls: int) -> _Served:
        """The unpruned replay's first `calls` calls."""
        return cls._make(getattr(unpruned, name)[:calls] for name in cls._fields)

    def then(self, later: _Served) -> _Served:
        pairs = cast(Iterable[tuple[list[Any], list[Any]]], zip(self, later, strict=True))
        return _Served._make(a + b for a, b in pairs)


def _thread(
    thread: CalThread,
    columns: CallColumns,
    plans: Plans,
    served: _Served,
    decisions: Decisions | None,
    prepared: PreparedThread | None,
    prices: PriceTable,
    reread: float,
    unpruned: SimThread | None,
    first_served: int,
    ping_gaps: tuple[PingGap, ...],
) -> SimThread:
    """The replayed thread, with its breaks (the copied calls', before `first_served`, from
    `unpruned`) and the re-fetch hazards of what the policies cleared."""
    rewrote, edited = plans.rewrote, plans.cache_edit
    # The recording's own pruning is announced to the detector like a policy's.
    found = detect_breaks_columns(
        columns.request_s, columns.model, served.cache_read_tokens,
        list(map(TTL_SECONDS.__getitem__, served.ttl)), columns.compaction,
        list(map(or_, rewrote, columns.microcompacted)),
        list(map(or_, edited, columns.cache_deleted)), start=first_served,
    )  # fmt: skip
    copied: list[CacheBreak] = []  # drops among the copied calls: the unpruned replay's
    if unpruned is not None:
        copied = [
            b for b in (*unpruned.breaks, *unpruned.announced_drops) if b.call_index < first_served
        ]
        copied.sort(key=_index)
    drops = (*copied, *found)
    hazards: tuple[Hazard, ...] = ()
    if decisions is not None and prepared is not None:
        hazards = tuple(_hazards(thread, prepared, prices, decisions.cleared_log,
                                 served.prompt_tokens, served.ttl))  # fmt: skip
    return SimThread(
        thread_id=thread.thread_id,
        kind=thread.kind,
        timestamp_s=columns.timestamp_s,
        model=columns.model,
        ttl=served.ttl,
        input_tokens=served.input_tokens,
        cache_write_5m_tokens=served.cache_write_5m_tokens,
        cache_write_1h_tokens=served.cache_write_1h_tokens,
        cache_read_tokens=served.cache_read_tokens,
        output_tokens=columns.output_tokens,
        prompt_tokens=served.prompt_tokens,
        cost_usd=served.cost_usd,
        cleared_tokens=plans.cleared_tokens,
        newly_cleared_tokens=plans.newly_cleared_tokens,
        rewrote=rewrote,
        cache_edit=edited,
        compaction=columns.compaction,
        breaks=tuple(b for b in drops if b.is_break),
        hazards=hazards,
        cleared_results=len(decisions.cleared_log) if decisions else 0,
        unassessed_results=decisions.unassessed_results if decisions else 0,
        announced_drops=tuple(b for b in drops if not b.is_break),
        figures=decisions.figures if decisions else (),
        unavailable_edits=decisions.unavailable_edits if decisions else 0,
        unsupported=decisions.unsupported if decisions else (),
        edit_reread_usd=reread,
        ping_gaps=ping_gaps,
    )


def _index(drop: CacheBreak) -> int:
    return drop.call_index


def _hazards(
    thread: CalThread,
    prepared: PreparedThread,
    prices: PriceTable,
    cleared_log: list[tuple[Any, int]],
    prompts: list[int],
    ttls: list[str],
) -> list[Hazard]:
    """Cleared results whose resource was used again before the next compaction."""
    out = []
    for seg, i in cleared_log:
        resource = seg.resource
        if resource is None:
            continue
        # The first use after the clearing of any key the result has
        calls, keys = prepared.reuses(resource)
        k = bisect.bisect_right(calls, i)
        if k == len(calls) or calls[k] >= prepared.next_compaction[i]:
            continue
        j = calls[k]
        price = prices.lookup(thread.calls[j].model)
        cost = 0.0
        if price is not None:  # one call more: the result written again, the prompt read
            one_hour = ttls[j] == "1h"
            cost = price.rates.usd_of(
                0,
                cache_write_5m_tokens=0 if one_hour else seg.tokens,
                cache_write_1h_tokens=seg.tokens if one_hour else 0,
                cache_read_tokens=prompts[j],
            )
        out.append(Hazard(cleared_before_call=i, tool_name=seg.tool_name, resource=keys[k],
                          reused_at_call=j, tokens=seg.tokens, refetch_cost_usd=cost))  # fmt: skip
    return out
