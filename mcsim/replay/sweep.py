"""Sweeps: many variants of one policy over a parameter grid, and a recommendation.

    --grid keep_recent=1..20 --grid ttl=5m,1h      # lists, integer ranges, ranges with a step
    --grid cached_microcompact.keep_recent=3..8    # in a stack, kind.param picks the layer

Every variant is one more scenario of the same replay, so all of them share one load of the
cached calibrated sessions and run on all cores. The recommendation is the variant with the
highest savings net of re-fetches whose re-fetch risk stays under a limit, unless a more
conservative variant is within noise of it.

Uncertainty. Each variant's net savings carries a 95% interval from a bootstrap over
sessions: `DEFAULT_RESAMPLES` (1000) resamples of the session indices drawn with replacement
(numpy `default_rng(DEFAULT_SEED)`, seed 0, so a sweep is reproducible), and for each resample
the net savings of every variant as a ratio of sums, 1 - sum(net cost) / sum(baseline cost),
as the headline figure is computed. The interval is the 2.5th to 97.5th percentile of those
(numpy's default linear interpolation). With fewer than two sessions there is no spread: the
interval is NaN and the reason says "one session: no interval".

The recommendation. Among variants with re-fetch risk at most the limit, the best is the one
with the highest net savings. It is "clearly ahead" of another when, on the same resamples,
the lower end of the 95% interval of (best - other) is above 0: a paired comparison, not two
overlapping intervals. A variant is more conservative than the best when it clears less or
later: each parameter declares which way is conservative (`Param.conservative`: a higher
keep_recent, n, keep, trigger, gap or clear_at_least, a false latched or
keep_counts_excluded); the variant is at least as conservative
on every such parameter and more on one, or, with all of those equal (or none swept, e.g.
`ttl`), has a lower re-fetch risk. Among the allowed variants that are more conservative and
that the best is not clearly ahead of, and that clearly save where the best clearly saves
(the lower end of their own interval above 0 when the best's is), and that no allowed variant
beats on both net savings and re-fetch risk, the most conservative
(furthest in the declared directions, the first --grid key first; then the lowest re-fetch
risk) is recommended instead, and the reason says so: with keep_recent 1..8, 1 best, and 3,
4 and 5 within noise of it, 5.

So the recommendation is never dominated: no variant of the sweep has net savings at least as
high and re-fetch risk at least as low, with one of the two strictly better (it lies on the
Pareto front that risk_tradeoff.png draws). The best is on that front by construction (none
saves more; of those that save as much it has the lowest risk), and a variant over the risk
limit cannot dominate one under it. tests/test_sweep.py checks this over random grids.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from mcsim.accounting.recorded import savings_pct
from mcsim.errors import UsageError
from mcsim.replay.policies import REGISTRY
from mcsim.replay.refetch import DEFAULT_MAX_RISK as DEFAULT_MAX_RISK
from mcsim.replay.results import PolicyTotals
from mcsim.replay.run import ReplayReport, cleared_set_reading
from mcsim.replay.scenario import (
    BASELINE,
    TTLS,
    Layer,
    PolicyFileError,
    Scenario,
    check_retention,
    check_value,
)
from mcsim.text import SHOWN_CHARS, escaped, shown

# Each variant is one more full replay of every session (about 0.1 s each on a real corpus):
# a grid past this is a typo (1..1000000000) rather than a plan.
MAX_VARIANTS = 1000
DEFAULT_RESAMPLES = 1000  # bootstrap resamples over sessions for the intervals
DEFAULT_SEED = 0
_CHUNK_CELLS = 4_000_000  # resamples x sessions drawn at once: 32 MB of counts
LEVEL = 95  # percent: the intervals run from the 2.5th to the 97.5th percentile
_RANGE = re.compile(r"^(-?\d+)\.\.(-?\d+)(?::(\d+))?$")


class GridError(UsageError):
    """A --grid option that cannot be used; the message names the key."""


@dataclass(frozen=True)
class Axis:
    key: str  # "ttl", "param" or "kind.param"
    values: tuple[Any, ...]


@dataclass(frozen=True)
class Swept:
    """A swept key as sweep.parquet types it and as the recommendation compares it."""

    key: str
    kind: str  # the column's type: "int", "float", "bool" or "str"
    conservative: int = 0  # Param.conservative: +1 higher clears less, -1 lower, 0 neither


@dataclass(frozen=True)
class Variant:
    params: tuple[tuple[str, Any], ...]  # the values as given
    scenario: Scenario
    swept: tuple[Swept, ...] = ()
    checked: tuple[Any, ...] = ()  # the values as validated, in the order of `params`

    @property
    def name(self) -> str:
        """`keep_recent=3,ttl=5m`; a policy compared as it is (no params): its name."""
        return _name(self.params) or self.scenario.name


def parse_axis(spec: str) -> Axis:
    """KEY=VALUES with VALUES a comma list (5m,1h), a range (1..20) or a stepped range
    (0..120:15)."""
    key, sep, values = spec.partition("=")
    key, values = key.strip(), values.strip()
    if not sep or not key or not values:
        raise GridError(f"--grid {escaped(spec)}: expected KEY=VALUES, e.g. keep_recent=1..20")
    where = f"--grid {escaped(key, 80)}"
    texts = [v.strip() for v in values.split(",") if v.strip()]
    if not texts:
        raise GridError(f"{where}: no values (write them separated by commas, or a range 1..20)")
    for text in texts:
        # No parameter takes a longer value; this also keeps int() off thousand-digit text.
        if len(text) > SHOWN_CHARS:
            raise GridError(f"{where}: value {shown(text)} is too long to be a parameter value")
    match = _RANGE.match(values)
    if match:
        lo, hi, step = int(match[1]), int(match[2]), int(match[3] or 1)
        if hi < lo or step < 1:
            raise GridError(
                f"{where}: a range goes up (lo..hi) with a step of at least 1, not {shown(values)}"
            )
        count = (hi - lo) // step + 1
        if count > MAX_VARIANTS:
            raise GridError(
                f"{where}: {count:_} values; a sweep runs at most {MAX_VARIANTS:_} variants"
            )
        return Axis(key, tuple(range(lo, hi + 1, step)))
    parsed = tuple(_literal(text) for text in texts)
    names = [spelled(v) for v in parsed]  # as variant names show them: 1 and 01 are one variant
    if len(set(names)) < len(names):
        twice = next(n for n in names if names.count(n) > 1)
        raise GridError(f"{where}: value {escaped(twice)} is given twice")
    return Axis(key, parsed)


def _literal(text: str) -> Any:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("none", "null"):
        return None
    return text


def pick_policy(scenarios: Sequence[Scenario], name: str | None, source: str) -> Scenario:
    candidates = [s for s in scenarios if s.name != BASELINE]
    if name is not None:
        for s in candidates:
            if s.name == name:
                return s
        names = escaped(", ".join(s.name for s in candidates), 80)
        raise GridError(f"--name {shown(name)}: no such policy in {source} (policies: {names})")
    if len(candidates) != 1:
        names = escaped(", ".join(s.name for s in candidates), 80)
        raise GridError(f"{source} holds {len(candidates)} policies ({names}): choose with --name")
    return candidates[0]


def build_variants(base: Scenario, axes: Sequence[Axis]) -> list[Variant]:
    """Every combination of the axes' values applied to `base`, validated like a policy file."""
    if not axes:
        raise GridError("give at least one --grid KEY=VALUES")
    keys = [a.key for a in axes]
    if len(set(keys)) != len(keys):
        twice = next(k for k in keys if keys.count(k) > 1)
        raise GridError(f"--grid {escaped(twice, 80)}: the key is given twice")
    count = math.prod(len(a.values) for a in axes)
    if count > MAX_VARIANTS:
        sizes = " x ".join(str(len(a.values)) for a in axes)
        raise GridError(
            f"--grid: {sizes} = {count:_} variants; a sweep runs at most {MAX_VARIANTS:_}"
        )
    targets = [_target(base, a.key) for a in axes]
    for i, target in enumerate(targets):
        # `n` and `keep_last_n.n`: two keys, one parameter (only `ttl` names the TTL, and a
        # key given twice is refused above, so this is a layer's parameter).
        if target in targets[:i]:
            first = keys[targets.index(target)]
            name = f"{base.layers[target[0]].kind}.{target[1]}"
            raise GridError(
                f"--grid {escaped(first, 80)} and --grid {escaped(keys[i], 80)} name the same "
                f"parameter ({name}): give it once"
            )
    values = [_checked(base, target, axis) for target, axis in zip(targets, axes, strict=True)]
    swept = tuple(_swept(base, target, key) for target, key in zip(targets, keys, strict=True))
    variants = []
    for combo in itertools.product(*values):
        scenario = base
        for (layer_index, param), (_, value) in zip(targets, combo, strict=True):
            scenario = _set(scenario, layer_index, param, value)
        params = tuple((key, given) for key, (given, _) in zip(keys, combo, strict=True))
        checked = tuple(value for _, value in combo)
        variants.append(Variant(params, replace(scenario, name=_name(params)), swept, checked))
    return variants


def _swept(base: Scenario, target: tuple[int, str], key: str) -> Swept:
    layer_index, param = target
    if layer_index < 0:
        return Swept(key, "str")
    spec = next(p for p in REGISTRY[base.layers[layer_index].kind].params if p.name == param)
    # A parameter that also takes a word ("all") or a list is a text column.
    plain = spec.kind if not spec.choices and isinstance(spec.kind, type) else None
    kind = {int: "int", float: "float", bool: "bool"}.get(plain, "str")  # type: ignore[arg-type]
    return Swept(key, kind, spec.conservative)


def _name(params: tuple[tuple[str, Any], ...]) -> str:
    return ",".join(f"{k}={spelled(v)}" for k, v in params)


def spelled(value: Any) -> str:
    """A grid value as a policy file (and --grid) writes it: true, false, none."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _target(base: Scenario, key: str) -> tuple[int, str]:
    """(layer index, parameter) a grid key addresses; layer -1 is the scenario's TTL."""
    if key == "ttl":
        return -1, "ttl"
    kind, dot, param = key.rpartition(".")
    matches = [
        i
        for i, layer in enumerate(base.layers)
        if (not dot or layer.kind == kind) and param in dict(layer.values)
    ]
    if not matches:
        known = sorted({f"{layer.kind}.{p}" for layer in base.layers for p, _ in layer.values})
        raise GridError(
            f"--grid {escaped(key, 80)}: not a parameter of policy {shown(base.name)} "
            f"(known: ttl, {', '.join(known)})"
        )
    if len(matches) > 1:
        raise GridError(f"--grid {key}: several layers have it; write kind.{param}")
    return matches[0], param


def _checked(base: Scenario, target: tuple[int, str], axis: Axis) -> list[tuple[Any, Any]]:
    """(value as given, value as validated) for each value of an axis. Two values that
    validate equal (1 and 1.0 of a whole-number parameter) would be two identical variants:
    that value is given twice."""
    layer_index, param = target
    where = f"--grid {escaped(axis.key, 80)}"
    out = []
    seen = set()
    for value in axis.values:
        if layer_index < 0:
            if value not in TTLS:
                raise GridError(f"{where}: {shown(value)} is not one of {', '.join(TTLS)}")
            try:
                check_retention(value, base.provider, where)
            except PolicyFileError as exc:
                raise GridError(str(exc)) from None
            checked = value
        else:
            kind = base.layers[layer_index].kind
            spec = next(p for p in REGISTRY[kind].params if p.name == param)
            try:
                checked = check_value(spec, value, where)
            except PolicyFileError as exc:
                raise GridError(str(exc)) from None
        if (type(checked), checked) in seen:
            raise GridError(f"{where}: value {escaped(str(checked))} is given twice")
        seen.add((type(checked), checked))
        out.append((value, checked))
    return out


def _set(scenario: Scenario, layer_index: int, param: str, value: Any) -> Scenario:
    """`scenario` with one validated value set: the TTL (layer -1) or a layer's parameter."""
    if layer_index < 0:  # one TTL for every thread kind
        return replace(scenario, ttl=value, ttl_by_kind=())
    layer = scenario.layers[layer_index]
    values = tuple((k, value if k == param else v) for k, v in layer.values)
    layers = list(scenario.layers)
    layers[layer_index] = Layer(layer.kind, values)
    return replace(scenario, layers=tuple(layers))


# ---------------------------------------------------------------- choosing


@dataclass(frozen=True)
class Spread:
    """How the intervals were drawn: over how many sessions, resamples and with which seed."""

    sessions: int
    resamples: int
    seed: int

    @property
    def has_interval(self) -> bool:
        return self.sessions >= 2 and self.resamples >= 1

    def describe(self) -> str:
        if not self.has_interval:
            return "one session: no interval" if self.sessions == 1 else "no sessions: no interval"
        return f"{self.sessions:,} sessions, {self.resamples:,} resamples, seed {self.seed}"


@dataclass(frozen=True)
class Outcome:
    variant: Variant
    totals: PolicyTotals
    savings_pct: float  # vs the baseline, as simulated
    net_savings_pct: float  # vs the baseline, re-fetches paid
    low_pct: float = math.nan  # the 95% interval of net_savings_pct (NaN: no interval)
    high_pct: float = math.nan
    # The net savings on each bootstrap resample (None: not drawn); the paired comparisons of
    # `recommend` use the same resamples for every variant.
    draws: npt.NDArray[np.float64] | None = field(default=None, compare=False, repr=False)
    spread: Spread | None = None
    # net_savings_pct if what cache edits deleted were still billed as cache reads (the other
    # reading of their undocumented billing); NaN when the variant made no cache edits
    reread_net_pct: float = math.nan
    # net_savings_pct under the other reading of API context editing's undocumented
    # cleared-set rule, and the reading the figure takes (`cleared_set`); NaN and None when
    # the variant has no clear_tool_uses layer
    other_cleared_set_net_pct: float = math.nan
    cleared_set: str | None = None

    def cleared_set_caveat(self) -> str | None:
        """The range of its net savings over the two readings of which results API context
        editing clears on a request, for a policy with a clear_tool_uses layer: Anthropic
        does not document it, so the figure rests on it."""
        if self.cleared_set is None or math.isnan(self.other_cleared_set_net_pct):
            return None
        net, other = self.net_savings_pct, self.other_cleared_set_net_pct
        shown = {
            "in_steps": ("clearing in steps (modelled)", "clearing all but keep on every request"),
            "every_request": (
                "clearing all but keep on every request (as set)",
                "clearing in steps",
            ),
        }.get(self.cleared_set, ("as set", "with each clear_tool_uses layer's reading swapped"))
        return (
            f"API context editing's cleared-set rule, which Anthropic does not document: "
            f"{net:+.2f}% net {shown[0]}, {other:+.2f}% {shown[1]}"
        )

    def edits_caveat(self) -> str | None:
        """The range of its net savings over the two readings of cache edits' billing, when
        they made any: Anthropic does not document it, so the figure rests on it."""
        if math.isnan(self.reread_net_pct):
            return None
        return (
            f"cache edits, whose billing Anthropic does not document: "
            f"{self.net_savings_pct:+.2f}% net if deleted tokens are billed no more (modelled), "
            f"{self.reread_net_pct:+.2f}% if they are still billed as cache reads"
        )

    def interval_text(self) -> str:
        """'+12.30% net (95% interval +9.80..+14.10 over 412 sessions, ...)'."""
        head = f"{self.net_savings_pct:+.2f}% net"
        if self.spread is None:
            return head
        if not self.spread.has_interval:
            return f"{head} ({self.spread.describe()})"
        return (
            f"{head} ({LEVEL}% interval {self.low_pct:+.2f}..{self.high_pct:+.2f} over "
            f"{self.spread.describe()})"
        )


@dataclass(frozen=True)
class Recommendation:
    best: Outcome | None
    runner_up: Outcome | None
    reason: str
    # The variant with the highest net savings, when a more conservative one within noise of
    # it is recommended instead (`best`); None otherwise.
    passed_over: Outcome | None = None
    cautions: tuple[str, ...] = ()  # what to weigh before shipping it (`cautions`)


def cautions(best: Outcome, results: Sequence[Outcome]) -> tuple[str, ...]:
    """What the recommendation cannot tell: that it saves nothing (every variant under the
    risk limit costs at least what no pruning costs: the best of them is still named, as the
    least bad), that its own interval reaches below 0, or that a swept number sits at the end
    of its range (the best may lie beyond what was tried)."""
    out = []
    for caveat in (best.edits_caveat(), best.cleared_set_caveat()):
        if caveat is not None:
            out.append(f"its savings rest on {caveat}")
    if best.net_savings_pct <= 0:
        out.append(
            f"it saves nothing net of re-fetches ({best.net_savings_pct:+.2f}%): no pruning "
            "(the baseline) costs less"
        )
    if best.low_pct <= 0 < best.net_savings_pct:  # (False for NaN: one session, no interval)
        out.append(
            f"its {LEVEL}% interval reaches below 0 ({best.low_pct:+.2f}..{best.high_pct:+.2f}):"
            " on other sessions it may save nothing"
        )
    for i, (key, value) in enumerate(best.variant.params):
        values = sorted(
            {
                o.variant.params[i][1]
                for o in results
                if isinstance(o.variant.params[i][1], int | float)
            }
        )
        if len(values) >= 3 and isinstance(value, int | float) and value in (values[0], values[-1]):
            out.append(
                f"{key}={value} is at the {'top' if value == values[-1] else 'bottom'} of the "
                f"values tried ({values[0]}..{values[-1]}): try beyond it"
            )
    return tuple(out)


def resample_counts(sessions: int, resamples: int, seed: int) -> npt.NDArray[np.int64]:
    """How often each session is drawn in each resample (resamples x sessions): `sessions`
    indices drawn with replacement per resample, by numpy's default_rng(seed)."""
    return np.concatenate(list(_counts_in_chunks(sessions, resamples, seed)))


def _counts_in_chunks(sessions: int, resamples: int, seed: int) -> Iterator[npt.NDArray[np.int64]]:
    """`resample_counts` a few resamples at a time, so a company's 100,000 sessions need tens
    of MB rather than GB. The same draws as one call: numpy's generator hands out the same
    stream of integers in any split of the rows (checked in tests/test_sweep.py)."""
    rng = np.random.default_rng(seed)
    rows = max(1, min(resamples, _CHUNK_CELLS // max(sessions, 1)))
    for start in range(0, resamples, rows):
        n = min(rows, resamples - start)
        drawn = rng.integers(0, sessions, size=(n, sessions))
        counts = np.zeros((n, sessions), dtype=np.int64)
        for i in range(n):
            counts[i] = np.bincount(drawn[i], minlength=sessions)
        yield counts


def net_savings_draws(
    counts: npt.NDArray[np.int64],
    baseline: npt.NDArray[np.float64],
    net: npt.NDArray[np.float64],
) -> npt.NDArray[np.float64]:
    """Net savings in percent per resample and variant (resamples x variants), each a ratio of
    sums: 1 - sum(net cost) / sum(baseline cost) over the resample's sessions. `baseline` holds
    one cost per session, `net` one per session and variant. A resample whose baseline costs
    nothing saves 0%, as `savings_pct` says of a free run."""
    base = counts @ baseline
    cost = counts @ net
    safe = np.where(base > 0, base, 1.0)
    return np.where(base[:, None] > 0, 100 * (1 - cost / safe[:, None]), 0.0)


def interval(draws: npt.NDArray[np.float64]) -> tuple[float, float]:
    """The 2.5th and 97.5th percentiles of `draws` along the first axis."""
    low, high = np.percentile(draws, [(100 - LEVEL) / 2, (100 + LEVEL) / 2], axis=0)
    return float(low), float(high)


def outcomes(
    report: ReplayReport,
    variants: Sequence[Variant],
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> list[Outcome]:
    """Each variant's totals, savings and (over two sessions or more) bootstrap interval."""
    base = report.baseline.cost_usd
    spread = Spread(len(report.sessions), resamples, seed)
    draws = None
    if spread.has_interval:
        # Each session's net costs follow the scenarios' order (CountedSession.net_costs); the
        # baseline's is its cost (it clears nothing: no re-fetches).
        order = {s.name: i for i, s in enumerate(report.scenarios)}
        costs = np.array([s.net_costs for s in report.sessions], dtype=np.float64)
        baseline = costs[:, order[BASELINE]]
        net = costs[:, [order[v.scenario.name] for v in variants]]
        draws = np.concatenate(
            [
                net_savings_draws(counts, baseline, net)
                for counts in _counts_in_chunks(spread.sessions, resamples, seed)
            ]
        )
    out = []
    for j, v in enumerate(variants):
        t = report.policies.get(v.scenario.name) or PolicyTotals(v.scenario.name)
        savings = savings_pct(t.cost_usd, base)
        net_pct = savings_pct(t.net_cost_usd, base)
        mine = None if draws is None else draws[:, j]
        low, high = (math.nan, math.nan) if mine is None else interval(mine)
        reread = (
            savings_pct(t.net_cost_usd + t.edit_reread_usd, base) if t.edit_reread_usd else math.nan
        )
        reading = cleared_set_reading(v.scenario)
        other = (
            math.nan
            if reading is None
            else savings_pct(t.net_cost_usd + t.cleared_set_other_usd, base)
        )
        out.append(Outcome(v, t, savings, net_pct, low, high, mine, spread, reread, other, reading))
    return out


def _leaning(o: Outcome) -> tuple[float, ...]:
    """The variant's values in their conservative directions (higher: more conservative);
    -inf for a value that is not a number (None: no gap, no floor) or a key with no
    direction, but +inf for `all` where a higher value is more conservative (`keep: all`
    keeps everything: no count kept is more conservative)."""
    out = []
    for swept, value in zip(o.variant.swept, o.variant.checked, strict=True):
        number = isinstance(value, int | float)
        if value == "all" and swept.conservative > 0:
            out.append(math.inf)
            continue
        out.append(
            swept.conservative * float(value) if number and swept.conservative else -math.inf
        )
    return tuple(out)


def more_conservative(o: Outcome, than: Outcome) -> bool:
    """Whether `o` clears less or later than `than` (see the module docstring)."""
    directed = [i for i, s in enumerate(o.variant.swept) if s.conservative]
    mine, theirs = _leaning(o), _leaning(than)
    if any(mine[i] < theirs[i] or math.isinf(mine[i]) for i in directed):
        return False
    if any(mine[i] > theirs[i] for i in directed):
        return True
    return o.totals.refetch_risk < than.totals.refetch_risk


def stand_in_why(o: Outcome, than: Outcome) -> str:
    """What makes the stand-in `o` more conservative than `than`: further on a swept
    parameter's direction (it clears less or later), else only its lower re-fetch risk."""
    further = any(a > b for a, b in zip(_leaning(o), _leaning(than), strict=True))
    return "clears less" if further else "has a lower re-fetch risk"


def paired_interval(best: Outcome, other: Outcome) -> tuple[float, float] | None:
    """The 95% interval of best - other net savings on the same resamples (None: no draws)."""
    if best.draws is None or other.draws is None:
        return None
    return interval(best.draws - other.draws)


def recommend(results: Sequence[Outcome], max_risk: float) -> Recommendation:
    """The highest net savings among variants whose re-fetch risk is known and at most
    `max_risk`, or the most conservative of those it is not clearly ahead of. A risk no
    cleared result could assess (PolicyTotals.refetch_known) is not taken for none."""
    allowed = [o for o in results if o.totals.refetch_known and o.totals.refetch_risk <= max_risk]
    ranked = sorted(allowed, key=lambda o: (-o.net_savings_pct, o.totals.refetch_risk))
    if not ranked:
        reason = f"no variant keeps re-fetch risk at or under {max_risk:.0%}"
        known = [o for o in results if o.totals.refetch_known]
        safest = min(known, key=lambda o: o.totals.refetch_risk, default=None)
        if safest is not None:
            reason += f"; the lowest is {safest.variant.name} at {safest.totals.refetch_risk:.0%}"
        if len(known) < len(results):
            reason += f"; {len(results) - len(known)} with a risk not assessed"
        return Recommendation(None, None, reason)
    top = ranked[0]
    # Only a variant that no allowed variant beats on both net savings and risk (the front)
    # may stand in for the best; the best itself is on it (none saves more, and of those
    # that save as much it has the lowest risk). A variant over the limit cannot beat an
    # allowed one on risk, so this is the front of every variant the sweep ran.
    front = {id(o) for o in pareto_front(allowed)}
    within: list[tuple[Outcome, tuple[float, float]]] = []
    for o in ranked[1:]:
        paired = paired_interval(top, o)
        # Not one that may not save at all where the best clearly saves.
        keeps_sign = not top.low_pct > 0 or o.low_pct > 0
        if (
            id(o) in front
            and paired is not None
            and paired[0] <= 0
            and keeps_sign
            and more_conservative(o, top)
        ):
            within.append((o, paired))
    if within:
        # Of those, the furthest in the conservative directions, then the lowest risk.
        pick, (low, high) = min(
            within,
            key=lambda w: (tuple(-x for x in _leaning(w[0])), w[0].totals.refetch_risk),
        )
        difference = top.net_savings_pct - pick.net_savings_pct
        reason = (
            f"within noise of the highest, {top.variant.name} (difference "
            f"{difference:+.2f} points, {LEVEL}% interval {low:+.2f}..{high:+.2f}), and "
            f"{stand_in_why(pick, top)}; {pick.interval_text()}, re-fetch risk "
            f"{pick.totals.refetch_risk:.0%} ({pick.totals.refetch_hazards} hazards); "
            f"{top.variant.name}: {top.interval_text().split(' (')[0]}, risk "
            f"{top.totals.refetch_risk:.0%}"
        )
        runner = next((o for o in ranked if o is not pick), None)
        return Recommendation(pick, runner, reason, top, cautions(pick, results))
    best = top
    runner = ranked[1] if len(ranked) > 1 else None
    reason = (
        f"highest savings net of re-fetches ({best.interval_text()} vs no pruning; "
        f"{best.savings_pct:+.2f}% as simulated) among {len(ranked)} of {len(results)} "
        f"variants with re-fetch risk at most {max_risk:.0%} (its risk: "
        f"{best.totals.refetch_risk:.0%}, {best.totals.refetch_hazards} hazards)"
    )
    if runner is not None:
        reason += (
            f"; runner-up {runner.variant.name} at {runner.net_savings_pct:+.2f}% net, "
            f"risk {runner.totals.refetch_risk:.0%}"
        )
        paired = paired_interval(best, runner)
        if paired is not None:
            reason += (
                f", behind by {best.net_savings_pct - runner.net_savings_pct:+.2f} points "
                f"({LEVEL}% interval {paired[0]:+.2f}..{paired[1]:+.2f})"
            )
    return Recommendation(best, runner, reason, cautions=cautions(best, results))


def pareto_front(results: Sequence[Outcome]) -> list[Outcome]:
    """Variants no other variant beats on both net savings (higher) and risk (lower)."""
    front = []
    for o in results:
        dominated = any(
            p.net_savings_pct >= o.net_savings_pct
            and p.totals.refetch_risk <= o.totals.refetch_risk
            and (
                p.net_savings_pct > o.net_savings_pct
                or p.totals.refetch_risk < o.totals.refetch_risk
            )
            for p in results
        )
        if not dominated:
            front.append(o)
    return sorted(front, key=lambda o: o.totals.refetch_risk)
