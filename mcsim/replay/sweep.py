"""Sweeps: many variants of one policy over a parameter grid, and a recommendation.

    --grid keep_recent=1..20 --grid ttl=5m,1h      # lists, integer ranges, ranges with a step
    --grid cached_microcompact.keep_recent=3..8    # in a stack, kind.param picks the layer

Every variant is one more scenario of the same replay, so all of them share one load of the
cached calibrated sessions and run on all cores. The recommendation is the variant with the
highest savings net of re-fetches whose re-fetch risk stays under a limit.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from mcsim.accounting.recorded import savings_pct
from mcsim.errors import UsageError
from mcsim.replay.policies import REGISTRY
from mcsim.replay.run import PolicyTotals, ReplayReport
from mcsim.replay.scenario import BASELINE, TTLS, Layer, PolicyFileError, Scenario, check_value
from mcsim.text import SHOWN_CHARS, escaped, shown

# At most half of what a variant clears may be needed again: re-fetches are already priced
# into the net savings, so the limit guards what they do not price (latency, lost context).
DEFAULT_MAX_RISK = 0.50
# Each variant is one more full replay of every session (about 0.1 s each on a real corpus):
# a grid past this is a typo (1..1000000000) rather than a plan.
MAX_VARIANTS = 1000
_RANGE = re.compile(r"^(-?\d+)\.\.(-?\d+)(?::(\d+))?$")


class GridError(UsageError):
    """A --grid option that cannot be used; the message names the key."""


@dataclass(frozen=True)
class Axis:
    key: str  # "ttl", "param" or "kind.param"
    values: tuple[Any, ...]


@dataclass(frozen=True)
class Variant:
    params: tuple[tuple[str, Any], ...]
    scenario: Scenario

    @property
    def name(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.params)


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
    names = [str(v) for v in parsed]  # as variant names show them: 1 and 01 are one variant
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
    variants = []
    for combo in itertools.product(*values):
        scenario = base
        for (layer_index, param), (_, value) in zip(targets, combo, strict=True):
            scenario = _set(scenario, layer_index, param, value)
        params = tuple((key, given) for key, (given, _) in zip(keys, combo, strict=True))
        variants.append(Variant(params, replace(scenario, name=_name(params))))
    return variants


def _name(params: tuple[tuple[str, Any], ...]) -> str:
    return ",".join(f"{k}={v}" for k, v in params)


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
                raise GridError(f"{where}: {shown(value)} is not one of 5m, 1h, recorded")
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
    if layer_index < 0:
        return replace(scenario, ttl=value)
    layer = scenario.layers[layer_index]
    values = tuple((k, value if k == param else v) for k, v in layer.values)
    layers = list(scenario.layers)
    layers[layer_index] = Layer(layer.kind, values)
    return replace(scenario, layers=tuple(layers))


# ---------------------------------------------------------------- choosing


@dataclass(frozen=True)
class Outcome:
    variant: Variant
    totals: PolicyTotals
    savings_pct: float  # vs the baseline, as simulated
    net_savings_pct: float  # vs the baseline, re-fetches paid


@dataclass(frozen=True)
class Recommendation:
    best: Outcome | None
    runner_up: Outcome | None
    reason: str


def outcomes(report: ReplayReport, variants: Sequence[Variant]) -> list[Outcome]:
    base = report.baseline.cost_usd
    out = []
    for v in variants:
        t = report.policies.get(v.scenario.name) or PolicyTotals(v.scenario.name)
        savings = savings_pct(t.cost_usd, base)
        net = savings_pct(t.net_cost_usd, base)
        out.append(Outcome(v, t, savings, net))
    return out


def recommend(results: Sequence[Outcome], max_risk: float) -> Recommendation:
    """The highest net savings among variants whose re-fetch risk is at most `max_risk`."""
    allowed = [o for o in results if o.totals.refetch_risk <= max_risk]
    ranked = sorted(allowed, key=lambda o: (-o.net_savings_pct, o.totals.refetch_risk))
    if not ranked:
        reason = f"no variant keeps re-fetch risk at or under {max_risk:.0%}"
        safest = min(results, key=lambda o: o.totals.refetch_risk, default=None)
        if safest is not None:
            reason += f"; the lowest is {safest.variant.name} at {safest.totals.refetch_risk:.0%}"
        return Recommendation(None, None, reason)
    best = ranked[0]
    runner = ranked[1] if len(ranked) > 1 else None
    reason = (
        f"highest savings net of re-fetches ({best.net_savings_pct:+.2f}% vs no pruning; "
        f"{best.savings_pct:+.2f}% as simulated) among {len(ranked)} of {len(results)} "
        f"variants with re-fetch risk at most {max_risk:.0%} (its risk: "
        f"{best.totals.refetch_risk:.0%}, {best.totals.refetch_hazards} hazards)"
    )
    if runner is not None:
        reason += (
            f"; runner-up {runner.variant.name} at {runner.net_savings_pct:+.2f}% net, "
            f"risk {runner.totals.refetch_risk:.0%}"
        )
    return Recommendation(best, runner, reason)


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
