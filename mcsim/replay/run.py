"""Replay sessions under every scenario of a policy file; summarise, check fidelity.

`replay_session` is pure and runs in the load workers (one calibrated session in, small
totals and optional rows out); `run_replay` streams every session under PATHS through it and
folds the results into a `ReplayReport`. The no-pruning scenario with the recorded TTL is the
fidelity run: it goes through exactly the same simulation as every policy, and its error
against the recording says how far the other numbers can be trusted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from mcsim.accounting.breaks import BreakCause, CacheBreak
from mcsim.accounting.prices import PriceTable
from mcsim.accounting.recorded import RecordedThread, account_thread, savings_pct
from mcsim.errors import UsageError
from mcsim.ingest.disk_cache import enforce_cap, max_cache_bytes
from mcsim.ingest.engines import Engine
from mcsim.ingest.pipeline import LoadStats, ProgressFn, map_sessions
from mcsim.model import Tokens, add_counts
from mcsim.replay.calibrate import CalCall, CalSession, CalThread
from mcsim.replay.model_support import features
from mcsim.replay.policies import can_clear
from mcsim.replay.policies.clear_tool_uses import ClearToolUses, other_reading
from mcsim.replay.result_cache import ResultCache
from mcsim.replay.results import (
    BREAK_COLUMNS,
    BreakRow,
    CountedSession,
    PolicyTotals,
    SessionReplay,
    fidelity_error,
    keep_largest,
)
from mcsim.replay.rows import RowColumns, RowsTable, SessionRows, ThreadRows
from mcsim.replay.scenario import BASELINE, Layer, Scenario, baseline
from mcsim.replay.scenario import RECORDED as RECORDED  # the recording's name, also for outputs
from mcsim.replay.session_cache import CalibratedSource
from mcsim.replay.simulate import PreparedThread, SimThread, prunes, simulate_thread

DEFAULT_FIDELITY_THRESHOLD = 0.05  # per-session error above which results are labelled


def idle_note(scenario: Scenario, totals: PolicyTotals) -> str:
    """Why a scenario that can clear cleared nothing, in its policies' own terms."""
    if not totals.acted_threads:
        return "no main thread to act on (main_thread_only)"
    policies = [p for p in scenario.build() if can_clear(type(p))]
    notes = [p.idle_note(f) for p, f in zip(policies, totals.figures, strict=True)]
    if len(policies) == 1:
        return notes[0]
    said = dict.fromkeys(f"{p.kind}: {note}" for p, note in zip(policies, notes, strict=True))
    if len(said) == 1:  # layers of one kind that give one reason (Claude Code's API setup)
        return notes[0]
    return "; ".join(said)


def unsupported_notes(name: str, unsupported: Counter[str]) -> list[str]:
    """Per layer kind that did not apply on some calls for their model: how many, on which
    models, which models it needs, and where that list comes from."""
    by_kind: dict[str, dict[str, int]] = {}
    for key, calls in sorted(unsupported.items()):
        kind, _, model = key.partition("@")
        by_kind.setdefault(kind, {})[model] = calls
    notes = []
    for kind, models in by_kind.items():
        feature = next((f for f in features().values() if kind in f.kinds), None)
        if feature is None:
            continue
        calls = sum(models.values())
        which = ", ".join(f"{m} ({n:,})" for m, n in models.items())
        known = f"assumed: {feature.assumed}" if feature.assumed else "as documented"
        notes.append(
            f"{name}: {kind} did not apply on {calls:,} call{'' if calls == 1 else 's'} of "
            f"models that cannot use {feature.name.replace('_', ' ')}: {which}; it applies on "
            f"{feature.listed()} ({known}, as of {feature.as_of}: {feature.sources[0]})"
        )
    return notes


def other_cleared_set(scenario: Scenario) -> Scenario | None:
    """`scenario` under the other reading of API context editing's cleared-set rule: every
    clear_tool_uses layer's `cleared_set` swapped (None: it has no such layer). Anthropic
    does not document which results a request clears (docs/domain.md#api-context-editing),
    so every such policy's figures are given under both."""
    if not any(layer.kind == ClearToolUses.kind for layer in scenario.layers):
        return None
    layers = tuple(
        Layer(layer.kind, tuple((k, other_reading(v) if k == "cleared_set" else v)
                                for k, v in layer.values))
        if layer.kind == ClearToolUses.kind else layer
        for layer in scenario.layers
    )  # fmt: skip
    return replace(scenario, layers=layers)


def cleared_set_reading(scenario: Scenario) -> str | None:
    """The cleared-set reading a scenario's clear_tool_uses layers take (`mixed` when they
    differ; None: no such layer)."""
    readings = {
        dict(layer.values)["cleared_set"]
        for layer in scenario.layers
        if layer.kind == ClearToolUses.kind
    }
    return None if not readings else readings.pop() if len(readings) == 1 else "mixed"


def _net_cost(sim: SimThread) -> float:
    """A replayed thread's cost with its re-fetches paid."""
    return sum(c for c in sim.cost_usd if c is not None) + sum(
        h.refetch_cost_usd for h in sim.hazards
    )


def replay_session(
    session: CalSession, scenarios: Sequence[Scenario], prices: PriceTable, keep_rows: bool
) -> SessionReplay:
    """Replay one calibrated session under every scenario (the baseline first)."""
    calls = session.calls
    stamps = [c.timestamp_s for c in calls]
    recorded, recorded_threads = _recorded(session, prices)
    rows: SessionRows | None = None
    break_columns: list[list[object]] = []
    if keep_rows:
        rows = SessionRows(
            session.session_id,
            session.project,
            [ThreadRows(t.thread_id, t.kind.value, len(t.calls)) for t in session.threads],
        )
        break_columns = [[] for _ in BREAK_COLUMNS]
        _recorded_rows(rows, session, recorded_threads)
    runs = list(scenarios)
    # Items are tracked only on threads some policy acts on (not sub-agents, usually).
    prepared = [
        PreparedThread(t) if any(prunes(t, s) for s in runs) else None for t in session.threads
    ]
    # Per (thread, TTL, provider): the replay with no pruning, from which every policy's replay
    # copies the calls before its first clearing. Made on purpose only for a TTL and provider
    # several runs share.
    unpruned: dict[tuple[Any, ...], SimThread] = {}
    kinds = {t.kind.value for t in session.threads}
    shared = Counter((kind, s.serving(kind)) for s in runs for kind in kinds)
    policies = []
    fidelity = _Fidelity()
    for scenario in runs:
        totals = PolicyTotals(scenario.name)
        other = other_cleared_set(scenario)
        if rows is not None:
            rows.start_run(scenario.name)
        for index, (thread, items) in enumerate(zip(session.threads, prepared, strict=True)):
            serving = scenario.serving(thread.kind.value)
            key = (index, serving)
            pruning = prunes(thread, scenario)
            if pruning and key not in unpruned and shared[thread.kind.value, serving] > 1:
                plain = baseline(scenario)
                unpruned[key] = simulate_thread(thread, plain, prices, items)
            sim = simulate_thread(thread, scenario, prices, items, unpruned.get(key))
            if not pruning:
                unpruned.setdefault(key, sim)
            _add_thread(totals, sim, thread.calls)
            if other is not None and pruning:
                alt = simulate_thread(thread, other, prices, items, unpruned.get(key))
                totals.cleared_set_other_usd += _net_cost(alt) - _net_cost(sim)
            if rows is not None:
                _rows(rows, break_columns, scenario.name, session, sim)
            if scenario.name == BASELINE:  # no pruning, the cache as recorded
                fidelity.add(thread, sim)
        policies.append(totals)
    if rows is not None:
        rows.seal()
    return SessionReplay(
        session_id=session.session_id,
        project=session.project,
        start_s=min(stamps),
        end_s=max(stamps),
        calls=len(calls),
        recorded=recorded,
        policies=policies,
        fidelity_error_tokens=fidelity.error_tokens,
        fidelity_weight_tokens=fidelity.weight_tokens,
        calibration_fallbacks=sum(c.fallback for c in calls),
        models=tuple(sorted({c.model for c in calls})),
        recorded_prunes=Counter(c.pruned for c in calls if c.pruned is not None),
        providers=Counter(c.provider for c in calls),
        ttls=Counter(c.ttl for c in calls),
        call_rows=rows,
        break_columns=break_columns,
    )


@dataclass
class _Fidelity:
    """The token-weighted error of the no-pruning replay's reads and writes against the
    recording, summed over a session's threads."""

    error_tokens: int = 0
    weight_tokens: int = 0

    def add(self, thread: CalThread, sim: SimThread) -> None:
        for i, rec in enumerate(thread.calls):
            rec_write = rec.cache_write_5m_tokens + rec.cache_write_1h_tokens
            sim_write = sim.cache_write_5m_tokens[i] + sim.cache_write_1h_tokens[i]
            self.error_tokens += abs(sim.cache_read_tokens[i] - rec.cache_read_tokens)
            self.error_tokens += abs(sim_write - rec_write)
            self.weight_tokens += rec.cache_read_tokens + rec_write


def _recorded(session: CalSession, prices: PriceTable) -> tuple[PolicyTotals, list[RecordedThread]]:
    """The recording's totals, and each thread's account (for the rows): inspect's figures,
    from the same `account_thread`."""
    totals = PolicyTotals(RECORDED)
    threads = []
    for thread in session.threads:
        account = account_thread(thread.calls, prices)
        _count_drops(totals, list(account.breaks.values()), account.announced)
        totals.tokens += Tokens.total(thread.calls)
        for call, cost in zip(thread.calls, account.costs, strict=True):
            prompt = call.prompt_tokens
            totals.context_tokens += prompt
            totals.max_prompt_tokens = max(totals.max_prompt_tokens, prompt)
            if cost is None:
                totals.unpriced_calls += 1
            else:
                totals.cost_usd += cost.total_usd
        totals.calls += len(thread.calls)
        threads.append(account)
    return totals, threads


def _add_thread(totals: PolicyTotals, sim: SimThread, recorded: Sequence[CalCall]) -> None:
    totals.tokens += Tokens._make(sum(getattr(sim, kind)) for kind in Tokens._fields)
    totals.calls += len(sim.prompt_tokens)
    totals.context_tokens += sum(sim.prompt_tokens)
    totals.max_prompt_tokens = max(totals.max_prompt_tokens, max(sim.prompt_tokens, default=0))
    totals.cleared_tokens += sum(sim.newly_cleared_tokens)
    priced = [c for c in sim.cost_usd if c is not None]
    totals.cost_usd += sum(priced)
    totals.unpriced_calls += len(sim.cost_usd) - len(priced)
    if sim.ping_gaps:  # keep-warm pings: part of the policy's cost, counted apart too
        ping_usd = sum(c for c in sim.ping_cost_usd if c is not None)
        totals.cost_usd += ping_usd
        totals.ping_cost_usd += ping_usd
        totals.pings += sum(g.pings for g in sim.ping_gaps)
    for i, compacted in enumerate(sim.compaction):
        if compacted and i > 0:
            threshold = _compaction_threshold(recorded[i], recorded[i - 1])
            totals.compactions += 1
            totals.compactions_still_reached += sim.prompt_tokens[i - 1] >= threshold
    _count_drops(totals, sim.breaks, sim.announced_drops)
    totals.cleared_results += sim.cleared_results
    totals.refetch_hazards += len(sim.hazards)
    totals.refetch_unassessed += sim.unassessed_results
    totals.refetch_cost_usd += sum(h.refetch_cost_usd for h in sim.hazards)
    totals.unavailable_edits += sim.unavailable_edits
    totals.edit_reread_usd += sim.edit_reread_usd
    for kind, model, calls in sim.unsupported:
        totals.unsupported[f"{kind}@{model}"] += calls
    if sim.figures:
        totals.acted_threads += 1
        keep_largest(totals.figures, sim.figures)


def _count_drops(
    totals: PolicyTotals, breaks: Sequence[CacheBreak], announced: Sequence[CacheBreak]
) -> None:
    """A thread's breaks (what Claude Code's detector reports) and every drop, by cause."""
    if not breaks and not announced:
        return
    totals.cache_breaks += len(breaks)
    totals.breaks_by_cause.update(b.cause.value for b in breaks)
    totals.drops_by_cause.update(d.cause.value for d in (*breaks, *announced))
    totals.cache_edit_drops += sum(d.cause is BreakCause.CACHE_EDIT for d in announced)


def _compaction_threshold(call: CalCall, before: CalCall) -> int:
    """The prompt size that triggered a recorded compaction: the recorded pre-compaction
    size, but never above the last prompt actually sent before it."""
    if call.compaction_pre_tokens is None:
        return before.prompt_tokens
    return min(call.compaction_pre_tokens, before.prompt_tokens)


def _recorded_rows(rows: SessionRows, session: CalSession, recorded: list[RecordedThread]) -> None:
    rows.start_run(RECORDED)
    for thread, account in zip(session.threads, recorded, strict=True):
        calls = thread.calls
        n = len(calls)
        found = account.breaks
        drops = (*found.values(), *account.announced)
        columns = RowColumns(
            call_index=range(n),
            prompt_tokens=[c.prompt_tokens for c in calls],
            input_tokens=[c.input_tokens for c in calls],
            cache_write_5m_tokens=[c.cache_write_5m_tokens for c in calls],
            cache_write_1h_tokens=[c.cache_write_1h_tokens for c in calls],
            cache_read_tokens=[c.cache_read_tokens for c in calls],
            output_tokens=[c.output_tokens for c in calls],
            cleared_tokens=[0] * n,
            newly_cleared_tokens=[0] * n,
            pings=[0] * n,
            timestamp=[c.timestamp_s for c in calls],
            cost_usd=[None if cost is None else cost.total_usd for cost in account.costs],
            ping_cost_usd=[0.0] * n,
            rewrote=[False] * n,
            cache_edit=[False] * n,
            is_break=[i in found for i in range(n)],
            model=[c.model for c in calls],
            ttl=[c.ttl for c in calls],
        )
        rows.add(columns, sorted((d.call_index, d.cause.value) for d in drops))


def _rows(
    rows: SessionRows,
    break_columns: list[list[object]],
    policy: str,
    session: CalSession,
    sim: SimThread,
) -> None:
    n = len(sim.prompt_tokens)
    broke = [False] * n
    for b in sim.breaks:
        broke[b.call_index] = True
    columns = RowColumns(
        call_index=range(n),
        prompt_tokens=sim.prompt_tokens,
        input_tokens=sim.input_tokens,
        cache_write_5m_tokens=sim.cache_write_5m_tokens,
        cache_write_1h_tokens=sim.cache_write_1h_tokens,
        cache_read_tokens=sim.cache_read_tokens,
        output_tokens=sim.output_tokens,
        cleared_tokens=sim.cleared_tokens,
        newly_cleared_tokens=sim.newly_cleared_tokens,
        pings=sim.pings,
        timestamp=sim.timestamp_s,
        cost_usd=sim.cost_usd,
        ping_cost_usd=sim.ping_cost_usd,
        rewrote=sim.rewrote,
        cache_edit=sim.cache_edit,
        is_break=broke,
        model=sim.model,
        ttl=sim.ttl,
    )
    drops = sorted((d.call_index, d.cause.value) for d in (*sim.breaks, *sim.announced_drops))
    rows.add(columns, drops, sim.ping_gaps)
    for b in sim.breaks:
        row = BreakRow(
            policy=policy,
            session_id=session.session_id,
            project=session.project,
            thread_id=sim.thread_id,
            call_index=b.call_index,
            timestamp=sim.timestamp_s[b.call_index],
            model=sim.model[b.call_index],
            previous_read_tokens=b.previous_read_tokens,
            read_tokens=b.read_tokens,
            drop_tokens=b.drop_tokens,
            gap_seconds=b.gap_seconds,
            cause=b.cause.value,
            expected=b.expected,
        )
        for column, value in zip(break_columns, row, strict=True):
            column.append(value)


# ---------------------------------------------------------------- a whole run


@dataclass
class PolicySummary:
    name: str
    description: str
    totals: PolicyTotals

    def savings_pct(self, reference_usd: float) -> float:
        return savings_pct(self.totals.cost_usd, reference_usd)


def _in_start_order(session: SessionReplay | CountedSession) -> tuple[float, str]:
    return session.start_s, session.session_id


@dataclass(eq=False)  # one run's report: compared (and memoised, verdict.py) by identity
class ReplayReport:
    scenarios: list[Scenario]
    recorded: PolicyTotals = field(default_factory=lambda: PolicyTotals(RECORDED))
    policies: dict[str, PolicyTotals] = field(default_factory=dict)
    # Every session, counted (in start order once finished) ...
    sessions: list[CountedSession] = field(default_factory=list)
    # ... and its whole result, unless a sink took its rows (mcsim.outputs.rows_sink), in the
    # same order: what the per-session tables and the in-memory rows are made from
    results: list[SessionReplay] = field(default_factory=list)
    fidelity_threshold: float = DEFAULT_FIDELITY_THRESHOLD
    price_table: str = ""
    stats: LoadStats = field(default_factory=LoadStats)
    _rows: RowsTable | None = None
    _providers: Counter[str] = field(default_factory=Counter)
    _ttls: Counter[str] = field(default_factory=Counter)
    _prunes: Counter[str] = field(default_factory=Counter)

    def call_rows(self) -> RowsTable:
        """Every session's per-call rows, joined once (empty unless replayed with keep_rows)."""
        if self._rows is None:
            names = [RECORDED, *(s.name for s in self.scenarios)]
            parts = [s.call_rows for s in self.results if s.call_rows is not None]
            self._rows = RowsTable(parts, names)
        return self._rows

    def add(self, result: SessionReplay, rows: object = None) -> None:
        """Count `result`'s figures; keep it whole unless a sink took its rows (`rows`: the
        sink's handle to them)."""
        self.recorded.merge(result.recorded)
        for totals in result.policies:
            mine = self.policies.get(totals.name)
            if mine is None:  # (not setdefault: that makes a PolicyTotals on every call)
                mine = self.policies[totals.name] = PolicyTotals(totals.name)
            mine.merge(totals)
        add_counts(self._providers, result.providers)
        add_counts(self._ttls, result.ttls)
        add_counts(self._prunes, result.recorded_prunes)
        self.sessions.append(CountedSession.of(result, rows))
        if rows is None:
            self.results.append(result)

    def finish(self) -> None:
        self.sessions.sort(key=_in_start_order)
        self.results.sort(key=_in_start_order)

    @property
    def baseline(self) -> PolicyTotals:
        return self.policies.get(BASELINE) or PolicyTotals(BASELINE)

    @property
    def recorded_ttls(self) -> Counter[str]:
        """Calls by the cache TTL the recording used (what "cache as recorded" means)."""
        return self._ttls

    def baseline_text(self) -> str:
        """What the baseline is, with the recording's TTLs: 'no pruning, cache as recorded
        (TTL 1h on 312 calls, 5m on 95)'. Said wherever a "vs baseline" figure is shown."""
        most_first = sorted(self._ttls.items(), key=lambda kv: (-kv[1], kv[0]))
        mix = ", ".join(f"{t} on {n:,} call{'' if n == 1 else 's'}" for t, n in most_first)
        return "no pruning, cache as recorded" + (f" (TTL {mix})" if mix else "")

    def summaries(self) -> list[PolicySummary]:
        return [
            PolicySummary(s.name, s.describe(), self.policies.get(s.name) or PolicyTotals(s.name))
            for s in self.scenarios
        ]

    @property
    def fidelity_overall(self) -> float:
        return fidelity_error(
            sum(s.fidelity_error_tokens for s in self.sessions),
            sum(s.fidelity_weight_tokens for s in self.sessions),
        )

    @property
    def fidelity_worst(self) -> float:
        return max((s.fidelity_error for s in self.sessions), default=0.0)

    def idle_notes(self) -> dict[str, str]:
        """By policy name: why each policy that could clear cleared nothing over the run."""
        notes = {}
        for scenario in self.scenarios:
            totals = self.policies.get(scenario.name)
            if scenario.prunes and totals is not None and not totals.cleared_tokens:
                notes[scenario.name] = idle_note(scenario, totals)
                if totals.unavailable_edits:  # the reason, before what the policies saw
                    notes[scenario.name] = (
                        f"its {totals.unavailable_edits:,} cache edits were not made: only "
                        "Anthropic's cache deletes from a cached prefix (OpenAI's has no cache "
                        "edits)"
                    )
        return notes

    def sessions_over_threshold(self) -> list[CountedSession]:
        return [s for s in self.sessions if s.fidelity_error > self.fidelity_threshold]

    @property
    def calibration_fallbacks(self) -> int:
        return sum(s.calibration_fallbacks for s in self.sessions)

    @property
    def providers(self) -> Counter[str]:
        """Calls by the provider that served them (whose cache the recorded runs model)."""
        return self._providers

    def cache_model_text(self) -> str:
        """Whose prompt cache the replay modelled, e.g. "anthropic (355 calls)", and the
        policies that name another provider's."""
        text = ", ".join(f"{p} ({n:,} calls)" for p, n in sorted(self.providers.items()))
        named: dict[str, list[str]] = {}
        for s in self.scenarios:
            if s.provider != "recorded":
                named.setdefault(s.provider, []).append(s.name)
        for provider, names in sorted(named.items()):
            text += f"; on {provider}'s cache: {', '.join(names)}"
        return text

    def layer_notes(self) -> list[str]:
        """What the replay did with a policy's layers otherwise than written: a value read
        otherwise (`keep_recent: 0` acts as 1)."""
        notes: list[str] = []
        for scenario in self.scenarios:
            for layer in scenario.layers:
                notes += (f"{scenario.name}: {layer.kind}: {note}" for note in
                          layer.build().value_notes())  # fmt: skip
            totals = self.policies.get(scenario.name)
            if totals is not None and totals.unsupported:
                notes += unsupported_notes(scenario.name, totals.unsupported)
        return notes

    def provider_notes(self) -> list[str]:
        """What the providers' caches could not do, or their recordings do not tell."""
        notes = []
        for name, totals in self.policies.items():
            if totals.unavailable_edits and totals.cleared_tokens:  # else: `idle_notes`
                notes.append(
                    f"{name}: {totals.unavailable_edits:,} cache edits not made: only "
                    "Anthropic's cache deletes from a cached prefix (OpenAI's has no cache edits)"
                )
        if self.providers.get("openai"):
            notes.append(
                "OpenAI recordings carry no cache writes or TTL: the replay caches every prompt "
                "of 1,024 tokens or more in 128-token steps, kept 5 minutes after its last use "
                "(OpenAI keeps them 5 to 10 minutes; recorded hits after longer gaps stay hits), "
                "or 24 hours under ttl: 24h"
            )
        return notes

    @property
    def recorded_prunes(self) -> Counter[str]:
        return self._prunes


def run_replay(
    paths: Sequence[str],
    scenarios: list[Scenario],
    prices: PriceTable,
    *,
    cache_dir: Path | None,
    keep_rows: bool = True,
    since_s: float | None = None,
    until_s: float | None = None,
    workers: int | None = None,
    progress: ProgressFn | None = None,
    fidelity_threshold: float = DEFAULT_FIDELITY_THRESHOLD,
    engine: Engine | None = None,
    sink: Callable[[SessionReplay], object] | None = None,
    in_worker: Callable[[SessionReplay], SessionReplay] | None = None,
    on_first_load: Callable[[], None] | None = None,
) -> ReplayReport:
    """Replay every session under PATHS under each scenario (scenarios[0] is the baseline).
    `engine` runs the units (default: local processes; mcsim.ingest.engines.open_engine).
    `sink` is handed each session's result as it arrives and returns its handle to the rows
    it took: the report then keeps only the session's count and that handle
    (`CountedSession`), which keeps the driver's memory flat (mcsim.outputs.rows_sink);
    without a sink the report keeps every result whole (`ReplayReport.results`). `in_worker`
    (picklable) is applied to each result where it is made, before it is sent (the sink's
    `pack`); `on_first_load` is called once, when the run first has a unit to load (one the
    result cache does not serve): mcsim.ingest.pipeline.map_sessions says when."""
    first = scenarios[0] if scenarios else None
    if first is None or (first.name, first.as_recorded, first.prunes) != (BASELINE, True, False):
        raise UsageError(
            "scenarios[0] must be the baseline, mcsim.replay.scenario.baseline() (no pruning, "
            "the cache as recorded): every 'vs baseline' figure is against it"
        )
    cap = max_cache_bytes() if cache_dir is not None else 0  # a bad value fails before work
    if not 0 <= fidelity_threshold <= 1:  # a fraction: 5 (meant as 5%) would label nothing
        raise UsageError(
            f"fidelity_threshold: {fidelity_threshold!r} is not a fraction from 0 to 1 (0.05 = 5%)"
        )
    report = ReplayReport(scenarios, fidelity_threshold=fidelity_threshold)
    report.price_table = prices.version
    fn = partial(replay_session, scenarios=tuple(scenarios), prices=prices, keep_rows=keep_rows)
    memo = None
    if cache_dir is not None:
        memo = ResultCache.of(cache_dir, tuple(scenarios), prices, keep_rows)
    for result in map_sessions(
        paths,
        fn,
        source=CalibratedSource(cache_dir),
        since_s=since_s,
        until_s=until_s,
        workers=workers,
        progress=progress,
        stats=report.stats,
        engine=engine,
        memo=memo,
        in_worker=in_worker,
        on_first_load=on_first_load,
    ):
        report.add(result, sink(result) if sink is not None else None)
    report.finish()
    if cache_dir is not None:
        enforce_cap(cache_dir, cap)
    return report
