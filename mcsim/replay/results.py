"""What a replay produces: each policy's totals over a session (or a run), a session's
whole result (`SessionReplay`, made once and never changed), and what a run keeps of each
session once counted (`CountedSession`). Data only: `run.py` makes them, `result_cache.py`
keeps them, the outputs read them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from mcsim.accounting.breaks import UNEXPLAINED_CAUSES
from mcsim.accounting.recorded import ExactSums
from mcsim.model import NO_TOKENS, Tokens, add_counts
from mcsim.replay.rows import SessionRows


class BreakRow(NamedTuple):
    """One cache break of a replayed session, as breaks.parquet has it. A session's result
    holds its breaks as columns in this order (`SessionReplay.break_columns`)."""

    policy: str
    session_id: str
    project: str
    thread_id: str
    call_index: int
    timestamp: float
    model: str
    previous_read_tokens: int
    read_tokens: int
    drop_tokens: int
    gap_seconds: float
    cause: str
    expected: bool


BREAK_COLUMNS = BreakRow._fields


@dataclass
class PolicyTotals:
    """One policy's totals over a session (or, summed, over a run)."""

    name: str
    tokens: Tokens = NO_TOKENS
    cost_usd: float = 0.0
    unpriced_calls: int = 0
    cleared_tokens: int = 0  # tokens the policy's clearing decisions removed (each once)
    context_tokens: int = 0  # sum over calls of the prompt size
    max_prompt_tokens: int = 0  # the largest prompt sent
    calls: int = 0
    cache_breaks: int = 0  # drops Claude Code's detector would report (breaks.py)
    breaks_by_cause: Counter[str] = field(default_factory=Counter)
    cache_edit_drops: int = 0  # drops in reads cache edits explain (not breaks)
    # Every drop in reads by cause: the breaks and those the detector was told to expect
    # (a compaction, the policy's own rewrite, a cache edit)
    drops_by_cause: Counter[str] = field(default_factory=Counter)
    compactions: int = 0
    compactions_still_reached: int = 0
    cleared_results: int = 0
    refetch_hazards: int = 0  # cleared results the agent needed again (refetch.py)
    # cleared results whose tool's calls have no resource keys: not assessed (refetch.py)
    refetch_unassessed: int = 0
    refetch_cost_usd: float = 0.0
    acted_threads: int = 0  # threads the policies ran on (not skipped as main-thread-only)
    unavailable_edits: int = 0  # cache edits decided where the provider's cache has none
    # What the cost would be more if what cache edits deleted were still billed as cache
    # reads (SimThread.edit_reread_usd): the other end of the range of their billing.
    edit_reread_usd: float = 0.0
    # What the cost with its re-fetches would be more under the other reading of API context
    # editing's cleared-set rule (every clear_tool_uses layer's `cleared_set` swapped), which
    # Anthropic does not document: the other end of the range (run.other_cleared_set)
    cleared_set_other_usd: float = 0.0
    # Calls a layer did not apply on, its mechanism not supported by their model, by
    # "<kind>@<model>" (SimThread.unsupported)
    unsupported: Counter[str] = field(default_factory=Counter)
    # Keep-warm pings sent (keep_warm.py) and their cost, which `cost_usd` includes
    pings: int = 0
    ping_cost_usd: float = 0.0
    # Per policy of the scenario that can clear: the largest of each of its figures over the
    # threads it ran on (Policy.figures), for `idle_note`.
    figures: list[dict[str, float]] = field(default_factory=list)
    # The dollar figures as `merge` adds them: exactly, so a run's totals do not depend on the
    # order its sessions arrive in (which follows file sizes).
    _sums: ExactSums | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def cache_drops(self) -> int:
        """Every drop in reads, the breaks among them."""
        return sum(self.drops_by_cause.values())

    @property
    def unexpected_breaks(self) -> int:
        """The breaks nothing explains: a changed prefix, or nothing read on a warm cache (a
        gap as long as the TTL, a compaction, a model switch, the policy's clearing do)."""
        return sum(self.breaks_by_cause[c.value] for c in UNEXPLAINED_CAUSES)

    @property
    def refetch_assessed(self) -> int:
        """Cleared results whose re-use the recording can tell (refetch.py)."""
        return self.cleared_results - self.refetch_unassessed

    @property
    def refetch_risk(self) -> float:
        """The share of the assessed cleared results the agent needed again (0 when none is
        assessed: tables show that as unknown, see `refetch_known`)."""
        assessed = self.refetch_assessed
        return self.refetch_hazards / assessed if assessed else 0.0

    @property
    def refetch_known(self) -> bool:
        """Whether the risk is known: nothing cleared (no risk), or some results assessed."""
        return not self.cleared_results or self.refetch_assessed > 0

    @property
    def net_cost_usd(self) -> float:
        """Cost with the estimated re-fetches added: the pessimistic end of the range."""
        return self.cost_usd + self.refetch_cost_usd

    def merge(self, other: PolicyTotals) -> None:
        self.tokens += other.tokens
        sums = self._sums = self._sums or ExactSums()
        self.cost_usd = sums.add("cost_usd", self.cost_usd, other.cost_usd)
        self.unpriced_calls += other.unpriced_calls
        self.cleared_tokens += other.cleared_tokens
        self.context_tokens += other.context_tokens
        self.max_prompt_tokens = max(self.max_prompt_tokens, other.max_prompt_tokens)
        self.calls += other.calls
        self.cache_breaks += other.cache_breaks
        if other.breaks_by_cause:  # (most sessions break nothing: an update costs even so)
            add_counts(self.breaks_by_cause, other.breaks_by_cause)
        self.cache_edit_drops += other.cache_edit_drops
        if other.drops_by_cause:
            add_counts(self.drops_by_cause, other.drops_by_cause)
        self.compactions += other.compactions
        self.compactions_still_reached += other.compactions_still_reached
        self.cleared_results += other.cleared_results
        self.refetch_hazards += other.refetch_hazards
        self.refetch_unassessed += other.refetch_unassessed
        self.refetch_cost_usd = sums.add(
            "refetch_cost_usd", self.refetch_cost_usd, other.refetch_cost_usd
        )
        self.acted_threads += other.acted_threads
        self.unavailable_edits += other.unavailable_edits
        self.edit_reread_usd = sums.add(
            "edit_reread_usd", self.edit_reread_usd, other.edit_reread_usd
        )
        self.cleared_set_other_usd = sums.add(
            "cleared_set_other_usd", self.cleared_set_other_usd, other.cleared_set_other_usd
        )
        if other.unsupported:
            add_counts(self.unsupported, other.unsupported)
        self.pings += other.pings
        self.ping_cost_usd = sums.add("ping_cost_usd", self.ping_cost_usd, other.ping_cost_usd)
        keep_largest(self.figures, other.figures)


def keep_largest(into: list[dict[str, float]], figures: Sequence[dict[str, float]]) -> None:
    """Fold one thread's (or total's) policy figures into `into`, keeping each largest."""
    if not into:
        into.extend(dict(f) for f in figures)
        return
    if not figures:  # from a thread (or a total of threads) the policies did not run on
        return
    for mine, theirs in zip(into, figures, strict=True):
        for key, value in theirs.items():
            mine[key] = max(mine.get(key, value), value)


def fidelity_error(error_tokens: int, weight_tokens: int) -> float:
    """The token-weighted error of the no-pruning replay against the recording."""
    return error_tokens / weight_tokens if weight_tokens else 0.0


class PackedRows(NamedTuple):
    """A result's rows as a sink took them where the result was made
    (mcsim.outputs.rows_sink): pickled in `data`, or written to the file `path` of the sink's
    folder at `offset` (then `data` is None); `calls`: the calls they hold per run."""

    data: bytes | None
    path: str
    offset: int
    calls: int


@dataclass(frozen=True)
class SessionReplay:
    """Everything the replay of one session produced. Made once (`run.replay_session`),
    never changed: a sink that takes its rows where it is made gives a copy without them
    (`packed` says where they went)."""

    session_id: str
    project: str
    start_s: float
    end_s: float
    calls: int
    recorded: PolicyTotals
    policies: list[PolicyTotals]  # in scenario order, the baseline first
    fidelity_error_tokens: int
    fidelity_weight_tokens: int
    calibration_fallbacks: int
    models: tuple[str, ...] = ()
    # Pruning the recording itself shows, by kind (calibrate.CalCall.pruned)
    recorded_prunes: Counter[str] = field(default_factory=Counter)
    providers: Counter[str] = field(default_factory=Counter)  # calls by recorded provider
    ttls: Counter[str] = field(default_factory=Counter)  # calls by recorded cache TTL
    # Per-call rows (rows.py) and per-break rows as columns (BREAK_COLUMNS order): cheaper to
    # build, to send between processes and to turn into tables than row tuples. Empty when
    # rows were not kept, or were packed.
    call_rows: SessionRows | None = None
    break_columns: list[list[object]] = field(default_factory=list)
    packed: PackedRows | None = None

    @property
    def fidelity_error(self) -> float:
        return fidelity_error(self.fidelity_error_tokens, self.fidelity_weight_tokens)

    @property
    def net_costs(self) -> tuple[float, ...]:
        """Each run's cost with its re-fetches paid, in scenario order: what the bootstrap
        intervals resample."""
        return tuple(t.net_cost_usd for t in self.policies)


@dataclass(frozen=True)
class CountedSession:
    """What a report keeps of a session once it has counted the session's figures into its
    own: what orders the sessions, labels their fidelity and resamples their costs, and, when
    a sink took the session's rows, the sink's handle to them (`rows`, read only by the sink).
    A run keeps this, not the whole result, so its memory does not grow with the corpus (a
    result with the claude-code preset's four scenarios holds 6.3 KB, this under 1 KB)."""

    session_id: str
    project: str
    start_s: float
    end_s: float
    calls: int
    models: tuple[str, ...]
    fidelity_error_tokens: int
    fidelity_weight_tokens: int
    calibration_fallbacks: int
    net_costs: tuple[float, ...]
    rows: object = None

    @classmethod
    def of(cls, result: SessionReplay, rows: object = None) -> CountedSession:
        return cls(
            session_id=result.session_id,
            project=result.project,
            start_s=result.start_s,
            end_s=result.end_s,
            calls=result.calls,
            models=result.models,
            fidelity_error_tokens=result.fidelity_error_tokens,
            fidelity_weight_tokens=result.fidelity_weight_tokens,
            calibration_fallbacks=result.calibration_fallbacks,
            net_costs=result.net_costs,
            rows=rows,
        )

    @property
    def fidelity_error(self) -> float:
        return fidelity_error(self.fidelity_error_tokens, self.fidelity_weight_tokens)
