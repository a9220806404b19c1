"""The cache advisor: of no change, the 5-minute TTL, the 1-hour TTL and keep-warm pings,
which would have cost least on these sessions, for main threads and sub-agents apart, over
the whole input and per project.

Every variant is one more scenario of one replay (no pruning: only the cache changes), so
its cost is exactly what `mcsim replay` of that variant as a policy gives. Threads replay
independently (each has its own cache), so a thread group's cost under a variant is the sum
of its threads' replayed costs, and the best of each group together, written as one policy
(`ttl: {main: 1h, subagent: 5m}`, `keep_warm: {..., threads: [main]}`), costs the sum of
the two groups' best: the advisor names that policy too, and picks the cheapest of all it
names.

Savings are against what was recorded (the recording's own cost of the same threads), with a
95% interval drawn as the sweep draws it (`mcsim.replay.sweep`: a bootstrap over sessions,
seed 0, 1000 resamples, ratio of sums).

The break-even points the idle-gap chart marks, in minutes of gap, for a prompt of P tokens
at base input price p (docs/domain.md#prices): the 5-minute and 1-hour TTLs (a gap past them
writes the prompt again, 1.25 P p or 2 P p); and how long pings every `interval` beat one
5-minute re-write: n pings cost n x 0.1 P p, so they pay while n < 1.25 / 0.1 = 12.5, a gap of
12.5 x interval (56 minutes at 4.5), if `max_idle_minutes` reaches that far.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from mcsim.accounting.recorded import TTL_SECONDS
from mcsim.replay.keep_warm import THREAD_KINDS, KeepWarm
from mcsim.replay.run import RECORDED, ReplayReport
from mcsim.replay.scenario import BASELINE, Layer, Scenario, baseline
from mcsim.replay.sweep import (
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    LEVEL,
    Spread,
    _counts_in_chunks,
    interval,
    net_savings_draws,
)

# Thread groups: the main conversation, and the short-lived threads beside it (sub-agents and
# a harness's own compaction calls), which rarely outlive a 5-minute TTL.
GROUPS: dict[str, tuple[str, ...]] = {"main": ("main",), "sub-agents": ("subagent", "compact")}
ALL = "all threads"
NO_CHANGE = "no change"
# Break-even of pings against one 5-minute re-write: 1.25x input against 0.1x per ping
PINGS_PER_REWRITE = 1.25 / 0.1


@dataclass(frozen=True)
class CacheVariant:
    """One way of running the cache: a TTL (None: as recorded) and pings (None: none)."""

    name: str
    ttl: str | None
    keep_warm: KeepWarm | None = None

    def scenario(self) -> Scenario:
        plain = baseline()
        if self.ttl is None and self.keep_warm is None:
            return plain
        return replace(plain, name=self.name, ttl=self.ttl or "recorded",
                       keep_warm=self.keep_warm)  # fmt: skip


def cache_variants(openai_only: bool = False) -> list[CacheVariant]:
    """The variants the advisor weighs, no change first. On OpenAI's cache the choice is its
    default in-memory retention (modelled as 5m) or the extended one (24h)."""
    out = [CacheVariant(NO_CHANGE, None), CacheVariant("5m", "5m")]
    if openai_only:
        out.append(CacheVariant("24h", "24h"))
    else:
        out.append(CacheVariant("1h", "1h"))
    # Pings on every thread kind, so each group's figures are what its threads cost under
    # the variant whichever kinds a combined policy gives them to (`combined`).
    for longest in (15.0, 30.0, 60.0):
        warm = KeepWarm(4.5, longest, threads=THREAD_KINDS)
        out.append(CacheVariant(f"5m+warm4.5/{longest:g}", "5m", warm))
    if not openai_only:
        out.append(CacheVariant("1h+warm55/180", "1h", KeepWarm(55.0, 180.0, threads=THREAD_KINDS)))
    return out


# How the variants' names read: `5m+warm4.5/30` is the 5-minute TTL with a ping every 4.5
# minutes of an idle gap, for up to 30 minutes of it.
NAMING = (
    "5m+warm4.5/30: TTL 5m and a keep-warm ping every 4.5 minutes of an idle gap, for up "
    "to 30 minutes of it"
)


# The other reading of a keep-warm variant (keep_warm.py, `longer_gaps`): its pings also go
# out, and are paid, in the gaps of max_idle_minutes or more. Replayed beside each keep-warm
# variant so that its figures are given both ways; never a candidate of its own.
PAID = " (longer gaps paid)"


def paid_twins(variants: Sequence[CacheVariant]) -> list[CacheVariant]:
    """Each keep-warm variant under the `paid` reading of its longer gaps."""
    return [
        CacheVariant(v.name + PAID, v.ttl, replace(v.keep_warm, longer_gaps="paid"))
        for v in variants
        if v.keep_warm is not None
    ]


def variant_scenarios(variants: Sequence[CacheVariant], openai_only: bool) -> list[Scenario]:
    """The replay's scenarios: the baseline (no change) first, then one per other variant,
    then the keep-warm variants' twins under the other reading (`paid_twins`)."""
    runs = [v.scenario() for v in [*variants, *paid_twins(variants)]]
    if openai_only:
        runs = [s if s.name == BASELINE else replace(s, provider="openai") for s in runs]
    return runs


def named(variant: CacheVariant, openai_only: bool) -> Scenario:
    """A variant's scenario under its own name (no change: the baseline's settings), as the
    policy file the advisor prints holds it."""
    scenario = replace(variant.scenario(), name=variant.name)
    if openai_only and not scenario.as_recorded:
        scenario = replace(scenario, provider="openai")
    return scenario


def combined(main: CacheVariant, sub: CacheVariant, openai_only: bool = False) -> Scenario | None:
    """One policy with `main`'s cache on main threads and `sub`'s on sub-agents (and
    compaction threads); None when it cannot be written as one (two different pings)."""
    if main.keep_warm is not None and sub.keep_warm is not None:
        if main.keep_warm != sub.keep_warm:
            return None
        warm: KeepWarm | None = replace(main.keep_warm, threads=THREAD_KINDS)
    elif main.keep_warm is not None:
        warm = replace(main.keep_warm, threads=("main",))
    elif sub.keep_warm is not None:
        warm = replace(sub.keep_warm, threads=("subagent", "compact"))
    else:
        warm = None
    ttl_main, ttl_sub = main.ttl or "recorded", sub.ttl or "recorded"
    by_kind = () if ttl_sub == ttl_main else (("compact", ttl_sub), ("subagent", ttl_sub))
    name = f"main {main.name}; sub {sub.name}"
    scenario = Scenario(name, (Layer("none", ()),), ttl_main, ttl_by_kind=by_kind, keep_warm=warm)
    return replace(scenario, provider="openai") if openai_only else scenario


def policy_yaml(scenario: Scenario) -> str:
    """The pick as a policy file's one policy (`mcsim replay --policy` of it gives its cost)."""
    lines = ["policies:", f"  - name: {_quoted(scenario.name)}", "    kind: none"]
    if scenario.ttl_by_kind:
        kinds = ", ".join(f"{k}: {scenario.ttl_for(k)}" for k in ("main", "subagent", "compact"))
        lines.append(f"    ttl: {{{kinds}}}")
    elif scenario.ttl != "recorded":
        lines.append(f"    ttl: {scenario.ttl}")
    if scenario.provider != "recorded":
        lines.append(f"    provider: {scenario.provider}")
    warm = scenario.keep_warm
    if warm is not None:
        lines += [
            "    keep_warm:",
            f"      interval_minutes: {warm.interval_minutes:g}",
            f"      max_idle_minutes: {warm.max_idle_minutes:g}",
            f"      threads: [{', '.join(warm.threads)}]",
        ]
        if warm.longer_gaps != "none":
            lines.append(f"      longer_gaps: {warm.longer_gaps}")
    return "\n".join(lines) + "\n"


def _quoted(name: str) -> str:
    return "'" + name.replace("'", "''") + "'"


# ---------------------------------------------------------------- the advice


@dataclass(frozen=True)
class Option:
    """One named variant's figures over a group of threads."""

    name: str
    cost_usd: float
    ping_usd: float
    pings: int
    write_tokens: int
    read_tokens: int
    write_usd: float  # what its cache writes cost
    read_usd: float  # what its cache reads cost (the pings' reads not included)
    policy: str = ""  # the variant as a policy file (policy_yaml)
    # Its cost if its pings also went out, paid, in the gaps of max_idle_minutes or more
    # (keep_warm.py, `longer_gaps: paid`); cost_usd for a variant without pings
    paid_cost_usd: float = math.nan
    paid_pings: int = 0

    @property
    def paid_differs(self) -> bool:
        return not math.isnan(self.paid_cost_usd) and self.paid_cost_usd != self.cost_usd


@dataclass(frozen=True)
class GroupAdvice:
    """The advice for one group of threads (main, sub-agents, all) of one scope (the whole
    input, or a project)."""

    group: str
    sessions: int
    threads: int
    recorded_usd: float
    options: tuple[Option, ...]  # every variant named, no change first
    pick: Option
    saved_usd: float  # recorded cost minus the pick's
    saved_pct: float  # ... in percent of the recorded cost
    low_pct: float = math.nan  # the 95% interval of saved_pct over sessions (NaN: none)
    high_pct: float = math.nan
    spread: Spread | None = None
    reason: str = ""

    def interval_text(self) -> str:
        if self.spread is None or not self.spread.has_interval:
            return self.spread.describe() if self.spread is not None else "no interval"
        return (
            f"{LEVEL}% interval {self.low_pct:+.1f}..{self.high_pct:+.1f}% over "
            f"{self.spread.describe()}"
        )


@dataclass(frozen=True)
class Gaps:
    """The idle gaps between consecutive calls of a thread, in minutes, by group."""

    minutes: dict[str, list[float]] = field(default_factory=dict)


@dataclass(frozen=True)
class CacheAdvice:
    overall: tuple[GroupAdvice, ...]
    projects: dict[str, tuple[GroupAdvice, ...]]
    gaps: Gaps
    breakevens: tuple[tuple[float, str], ...]  # (minutes, what) marked on the gap chart
    variants: tuple[str, ...]  # the names of the variants replayed, no change first
    openai_only: bool = False

    @property
    def pick(self) -> GroupAdvice:
        """The whole input's advice over all threads."""
        return next(a for a in self.overall if a.group == ALL)


class _Columns:
    """The calls table of a replay as numpy columns, one slice per run."""

    def __init__(self, report: ReplayReport, openai_only: bool = False) -> None:
        self.openai_only = openai_only  # OpenAI's cache: writes are uncached input
        rows = report.call_rows()
        self.rows = rows
        self.names = [RECORDED, *(s.name for s in report.scenarios)]
        n = rows.calls
        self.n = n
        self.session = rows.codes["session_id"][:n]
        self.sessions = rows.values["session_id"]
        self.project = rows.codes["project"][:n]
        self.projects = rows.values["project"]
        kinds = np.array(rows.values["thread_kind"], dtype=object)
        self.kind = kinds[rows.codes["thread_kind"][:n]] if n else np.array([], dtype=object)
        self.thread = rows.codes["thread_id"][:n]
        self.timestamp = rows.numbers["timestamp"][:n]
        self.model = rows.codes["model"][:n]
        # Per call, the TTL it was recorded with, in minutes
        ttls = np.array([TTL_SECONDS.get(t, 300.0) / 60 for t in rows.values["ttl"]])
        self.ttl_minutes = ttls[rows.codes["ttl"][:n]] if n else np.zeros(0)

    def column(self, run: str, name: str) -> npt.NDArray[Any]:
        index = self.names.index(run)
        values = self.rows.numbers[name][index * self.n : (index + 1) * self.n]
        out: npt.NDArray[Any] = (
            np.nan_to_num(values, nan=0.0) if values.dtype.kind == "f" else values
        )
        return out


def advise(
    report: ReplayReport,
    variants: Sequence[CacheVariant],
    prices: Any,
    openai_only: bool = False,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> CacheAdvice:
    """The advice from a replay (with per-call rows) of `variant_scenarios(variants)`."""
    cols = _Columns(report, openai_only)
    names = [BASELINE if v.name == NO_CHANGE else v.name for v in variants]
    per_call = {
        v.name: _per_call(cols, run, prices) for v, run in zip(variants, names, strict=True)
    }
    for twin in paid_twins(variants):
        per_call[twin.name] = _per_call(cols, twin.name, prices)
    recorded = cols.column(RECORDED, "cost_usd")
    gaps = _gaps(cols)
    scopes: list[tuple[str | None, Any]] = [(None, np.ones(cols.n, dtype=bool))]
    for code, name in enumerate(cols.projects):
        scopes.append((name, cols.project == code))
    overall: tuple[GroupAdvice, ...] = ()
    projects: dict[str, tuple[GroupAdvice, ...]] = {}
    for project, scope in scopes:
        groups: list[GroupAdvice] = []
        for group, kinds in GROUPS.items():
            mask = scope & np.isin(cols.kind, kinds)
            if not mask.any():
                continue
            groups.append(_group(group, mask, cols, variants, per_call, recorded, gaps,
                                 resamples, seed, openai_only))  # fmt: skip
        if groups:
            groups.append(_all(groups, scope, cols, variants, per_call, recorded, gaps,
                               resamples, seed, openai_only))  # fmt: skip
        if project is None:
            overall = tuple(groups)
        else:
            projects[project] = tuple(groups)
    return CacheAdvice(overall, projects, _gap_minutes(cols, gaps), _breakevens(variants),
                       tuple(v.name for v in variants), openai_only)  # fmt: skip


class _PerCall(NamedTuple):
    """A run's per-call figures (numpy columns over the calls)."""

    cost: Any
    ping_usd: Any
    pings: Any
    writes: Any
    reads: Any
    write_usd: Any
    read_usd: Any


def _written(cols: _Columns, run: str) -> npt.NDArray[Any]:
    """Per call, what it wrote to the cache; on OpenAI's cache, which bills no writes, what it
    sent uncached (what a warm cache would have read instead)."""
    if cols.openai_only:
        return cols.column(run, "input_tokens")
    both: npt.NDArray[Any] = cols.column(run, "cache_write_5m_tokens") + cols.column(
        run, "cache_write_1h_tokens"
    )
    return both


def _per_call(cols: _Columns, run: str, prices: Any) -> _PerCall:
    ping_usd = cols.column(run, "ping_cost_usd")
    w5 = cols.column(run, "cache_write_5m_tokens")
    w1 = cols.column(run, "cache_write_1h_tokens")
    uncached = cols.column(run, "input_tokens")
    reads = cols.column(run, "cache_read_tokens")
    # The base rates of each call's model: what its writes and reads cost (the reason's words;
    # a long-context call's are higher)
    rate_in, rate_w5, rate_w1, rate_r = (np.zeros(cols.n) for _ in range(4))
    for code, model in enumerate(cols.rows.values["model"]):
        price = prices.lookup(model)
        if price is None:
            continue
        at = cols.model == code
        r = price.rates
        rate_in[at], rate_w5[at], rate_w1[at], rate_r[at] = (
            r.input,
            r.cache_write_5m,
            r.cache_write_1h,
            r.cache_read,
        )
    write_usd = uncached * rate_in if cols.openai_only else w5 * rate_w5 + w1 * rate_w1
    return _PerCall(
        cols.column(run, "cost_usd") + ping_usd, ping_usd, cols.column(run, "pings"),
        _written(cols, run), reads, write_usd / 1e6, reads * rate_r / 1e6,
    )  # fmt: skip


def _option(
    name: str, figures: _PerCall, mask: Any, policy: str = "", paid: _PerCall | None = None
) -> Option:
    paid = figures if paid is None else paid
    return Option(
        name,
        float(figures.cost[mask].sum()),
        float(figures.ping_usd[mask].sum()),
        int(figures.pings[mask].sum()),
        int(figures.writes[mask].sum()),
        int(figures.reads[mask].sum()),
        float(figures.write_usd[mask].sum()),
        float(figures.read_usd[mask].sum()),
        policy,
        float(paid.cost[mask].sum()),
        int(paid.pings[mask].sum()),
    )


def _by_session(values: Any, cols: _Columns, mask: Any) -> Any:
    return np.bincount(cols.session[mask], weights=values[mask], minlength=len(cols.sessions))


def _group(
    group: str, mask: Any, cols: _Columns, variants: Sequence[CacheVariant],
    per_call: dict[str, _PerCall], recorded: Any, gaps: Any, resamples: int, seed: int,
    openai_only: bool,
) -> GroupAdvice:  # fmt: skip
    options = [_option(v.name, per_call[v.name], mask, policy_yaml(named(v, openai_only)),
                       per_call.get(v.name + PAID)) for v in variants]  # fmt: skip
    session_costs = np.column_stack(
        [_by_session(per_call[v.name].cost, cols, mask) for v in variants]
    )
    return _advice(group, mask, cols, options, session_costs, recorded, gaps, resamples, seed)


def _all(
    groups: list[GroupAdvice], scope: Any, cols: _Columns, variants: Sequence[CacheVariant],
    per_call: dict[str, _PerCall], recorded: Any, gaps: Any, resamples: int, seed: int,
    openai_only: bool,
) -> GroupAdvice:  # fmt: skip
    """Every thread of a scope: each variant as it is, and the best of main threads with the
    best of sub-agents as one policy (when both groups are there and their picks differ)."""
    mask = scope & np.isin(cols.kind, [k for kinds in GROUPS.values() for k in kinds])
    options = [_option(v.name, per_call[v.name], mask, policy_yaml(named(v, openai_only)),
                       per_call.get(v.name + PAID)) for v in variants]  # fmt: skip
    columns = [_by_session(per_call[v.name].cost, cols, mask) for v in variants]
    picks = {g.group: g.pick.name for g in groups}
    if len(picks) == len(GROUPS) and picks["main"] != picks["sub-agents"]:
        by_name = {v.name: v for v in variants}
        main, sub = by_name[picks["main"]], by_name[picks["sub-agents"]]
        policy = combined(main, sub, openai_only)
        if policy is not None:
            main_mask = mask & np.isin(cols.kind, GROUPS["main"])
            joined = _joined(main_mask, per_call[main.name], per_call[sub.name])
            paid = _joined(main_mask, per_call.get(main.name + PAID, per_call[main.name]),
                           per_call.get(sub.name + PAID, per_call[sub.name]))  # fmt: skip
            options.append(_option(policy.name, joined, mask, policy_yaml(policy), paid))
            columns.append(_by_session(joined.cost, cols, mask))
    return _advice(ALL, mask, cols, options, np.column_stack(columns), recorded, gaps,
                   resamples, seed)  # fmt: skip


def _joined(main_mask: Any, main: _PerCall, sub: _PerCall) -> _PerCall:
    """Per call, `main`'s figures on main threads and `sub`'s on the others."""
    return _PerCall._make(np.where(main_mask, m, s) for m, s in zip(main, sub, strict=True))


def _advice(
    group: str, mask: Any, cols: _Columns, options: list[Option], session_costs: Any,
    recorded: Any, gaps: Any, resamples: int, seed: int,
) -> GroupAdvice:  # fmt: skip
    """The cheapest option (ties: the one named first, so no change wins a tie), its savings
    against what was recorded, their interval over sessions and the reason."""
    pick = min(options, key=lambda o: o.cost_usd)  # min keeps the first of equals
    recorded_usd = float(recorded[mask].sum())
    saved = recorded_usd - pick.cost_usd
    pct = 100 * saved / recorded_usd if recorded_usd > 0 else 0.0
    present = np.unique(cols.session[mask])
    spread = Spread(len(present), resamples, seed)
    low = high = math.nan
    if spread.has_interval:
        base = _by_session(recorded, cols, mask)[present]
        mine = session_costs[present, options.index(pick)][:, None]
        draws = np.concatenate([net_savings_draws(counts, base, mine) for counts in
                                _counts_in_chunks(len(present), resamples, seed)])  # fmt: skip
        low, high = interval(draws[:, 0])
    threads = len({(s, t) for s, t in zip(cols.session[mask], cols.thread[mask], strict=True)})
    reason = _reason(pick, options[0], gaps[mask], cols, mask, recorded_usd)
    return GroupAdvice(group, len(present), threads, recorded_usd, tuple(options), pick, saved,
                       pct, low, high, spread, reason)  # fmt: skip


def _gaps(cols: _Columns) -> Any:
    """Per call, the minutes since its thread's previous call (NaN for a thread's first)."""
    gaps = np.full(cols.n, np.nan)
    if cols.n > 1:
        same = (cols.session[1:] == cols.session[:-1]) & (cols.thread[1:] == cols.thread[:-1])
        gaps[1:] = np.where(same, (cols.timestamp[1:] - cols.timestamp[:-1]) / 60.0, np.nan)
    return gaps


def _gap_minutes(cols: _Columns, gaps: Any) -> Gaps:
    out = {}
    for group, kinds in GROUPS.items():
        values = gaps[np.isin(cols.kind, kinds) & ~np.isnan(gaps)]
        out[group] = [float(v) for v in values]
    return Gaps(out)


def _breakevens(variants: Sequence[CacheVariant]) -> tuple[tuple[float, str], ...]:
    marks = [(5.0, "5m TTL expires"), (60.0, "1h TTL expires")]
    for interval_m in sorted({v.keep_warm.interval_minutes for v in variants
                              if v.keep_warm is not None and v.ttl == "5m"}):  # fmt: skip
        marks.append(
            (PINGS_PER_REWRITE * interval_m,
             f"pings every {interval_m:g}m cost one 5m re-write")
        )  # fmt: skip
    return tuple(marks)


def _tokens(n: float) -> str:
    n = abs(n)
    if n >= 1e6:
        return f"{n / 1e6:.1f} M"
    if n >= 1e3:
        return f"{n / 1e3:.0f}k"
    return f"{n:.0f}"


def _reason(
    pick: Option, none: Option, gaps: Any, cols: _Columns, mask: Any, recorded_usd: float
) -> str:
    """One sentence: what the idle gaps cost as recorded, and what the pick changes."""
    window = int(np.sum((gaps >= 5) & (gaps < 60)))
    longer = int(np.sum(gaps >= 60))
    # The recorded calls the recorded TTL ran out before, and what they wrote
    expired = gaps >= cols.ttl_minutes[mask]
    recorded_writes = _written(cols, RECORDED)[mask]
    wrote, writes = ("sent", "sends") if cols.openai_only else ("re-wrote", "writes")
    misses = int(expired.sum())
    if window or longer:
        head = (
            f"{window:,} idle gap{'' if window == 1 else 's'} between 5 and 60 minutes and "
            f"{longer:,} longer; the TTL ran out before {misses:,} call"
            f"{'' if misses == 1 else 's'}, which {wrote} "
            f"{_tokens(int(recorded_writes[expired].sum()))} tokens"
            f"{' uncached' if cols.openai_only else ''} as recorded"
        )
    else:
        head = "no idle gap reached 5 minutes, so no TTL ran out"
    if pick.name == none.name:
        return (
            f"{head}; no variant costs less than the cache as recorded "
            f"(${pick.cost_usd:,.2f} against ${recorded_usd:,.2f} recorded)"
        )
    write_delta = pick.write_usd - none.write_usd
    read_delta = pick.read_usd - none.read_usd
    parts = [
        f"{pick.name} {writes} {_tokens(none.write_tokens - pick.write_tokens)} "
        f"{'fewer' if pick.write_tokens <= none.write_tokens else 'more'} tokens"
        f"{' uncached' if cols.openai_only else ''} "
        f"({'-' if write_delta <= 0 else '+'}${abs(write_delta):,.2f}"
        f"{'' if cols.openai_only else ', the premium included'})",
        f"reads {_tokens(pick.read_tokens - none.read_tokens)} "
        f"{'more' if pick.read_tokens >= none.read_tokens else 'fewer'} "
        f"({'+' if read_delta >= 0 else '-'}${abs(read_delta):,.2f})",
    ]
    if pick.pings:
        plural = "" if pick.pings == 1 else "s"
        parts.append(f"sends {pick.pings:,} ping{plural} (${pick.ping_usd:,.2f})")
    saved = none.cost_usd - pick.cost_usd
    return f"{head}; {', '.join(parts)}: ${saved:,.2f} less than no change"
