"""The verdict of a replay: which policy of the file to ship, what it saves in dollars, at what
re-fetch risk, and how sure that is, in one line.

The policy is chosen by the sweep's rule (`sweep.recommend`) over the file's policies (each
compared as it is, none swept): the highest net savings among those whose re-fetch risk is at
most `DEFAULT_MAX_RISK`, or a lower-risk one within noise of it; never one that another beats
on both net savings and risk. A policy that cleared nothing is not weighed: it is the baseline
under another name. It *saves clearly* when its net savings are above 0 and so is
the lower end of their 95% interval (bootstrap over sessions; with one session there is no
interval, and the line says so). Otherwise the verdict is "no policy saves clearly", and still
names the best and its figures.

Dollars are against what was recorded (recorded cost minus the policy's cost with its
re-fetches); percentages against the baseline (no pruning, the cache as recorded), as every
"vs baseline" figure, with the interval. When the policy's figure rests on cache edits, whose
billing Anthropic does not document, or on API context editing, whose cleared-set rule it does
not document, the line gives the range over both readings.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from weakref import WeakKeyDictionary

from mcsim.replay.run import ReplayReport
from mcsim.replay.scenario import is_baseline
from mcsim.replay.sweep import (
    DEFAULT_MAX_RISK,
    LEVEL,
    Outcome,
    Recommendation,
    Variant,
    outcomes,
    recommend,
)


@dataclass(frozen=True)
class Verdict:
    """The chosen policy (None: none to choose), whether it saves clearly, and the line."""

    best: Outcome | None
    saves_clearly: bool
    text: str
    saved_usd: float  # recorded cost minus the best's cost with re-fetches (0 without one)
    results: tuple[Outcome, ...] = ()  # every policy's outcome, in the file's order

    def as_json(self) -> dict[str, object]:
        best = self.best
        low, high = (best.low_pct, best.high_pct) if best else (math.nan, math.nan)
        return {
            "text": self.text,
            "policy": best.variant.name if best else None,
            "saves_clearly": self.saves_clearly,
            "net_saved_usd": self.saved_usd if best else None,
            "net_savings_vs_baseline_pct": best.net_savings_pct if best else None,
            "net_savings_interval_pct": None if math.isnan(low) else [low, high],
            "refetch_risk": best.totals.refetch_risk if best else None,
            "net_savings_if_edits_reread_pct": (
                None if best is None or math.isnan(best.reread_net_pct) else best.reread_net_pct
            ),
            "net_savings_if_other_cleared_set_pct": (
                None
                if best is None or math.isnan(best.other_cleared_set_net_pct)
                else best.other_cleared_set_net_pct
            ),
        }


# The terminal, --json, summary.parquet and run.json all state the verdict: it is drawn once
# per finished report (its bootstrap resamples every session).
_MEMO: WeakKeyDictionary[ReplayReport, Verdict] = WeakKeyDictionary()


def verdict(report: ReplayReport) -> Verdict:
    """The verdict over the policies of a finished `report` (the baselines are what they are
    weighed against, not candidates), at the sweep's default risk limit."""
    found = _MEMO.get(report)
    if found is None:
        found = _MEMO[report] = weigh(report, DEFAULT_MAX_RISK)
    return found


def weigh(report: ReplayReport, max_risk: float) -> Verdict:
    """`verdict` at another risk limit, drawn anew."""
    variants = [Variant((), s) for s in report.scenarios if not is_baseline(s.name)]
    if not variants:
        return Verdict(None, False, "verdict: no policy to weigh (only baselines ran)", 0.0)
    results = outcomes(report, variants)
    # One that cleared nothing is the baseline under another name (the notes say why).
    acted = [o for o in results if o.totals.cleared_tokens]
    if not acted:
        text = "verdict: no policy cleared anything, so none saves (the notes say why)"
        return Verdict(None, False, text, 0.0, tuple(results))
    rec = recommend(acted, max_risk)
    best = rec.best
    if best is None:
        text = f"verdict: no policy keeps re-fetch risk at or under {max_risk:.0%}"
        known = [o for o in acted if o.totals.refetch_known]
        if known:
            safest = min(known, key=lambda o: o.totals.refetch_risk)
            text += f" (the lowest: {safest.variant.name}, {safest.totals.refetch_risk:.0%})"
        else:
            text += " that it can assess: no policy's cleared results could be checked"
        return Verdict(None, False, text, 0.0, tuple(results))
    recorded = report.recorded.cost_usd
    saved = recorded - best.totals.net_cost_usd
    clearly = best.net_savings_pct > 0 and not best.low_pct <= 0  # (NaN: one session)
    text = _line(best, recorded, clearly, rec, acted, max_risk)
    return Verdict(best, clearly, text, saved, tuple(results))


def _line(
    best: Outcome,
    recorded: float,
    clearly: bool,
    rec: Recommendation,
    results: Sequence[Outcome],
    max_risk: float,
) -> str:
    name = best.variant.name
    saved = recorded - best.totals.net_cost_usd
    money = (
        f"saves ${saved:,.2f} of the ${recorded:,.2f} recorded"
        if saved >= 0
        else f"costs ${-saved:,.2f} more than the ${recorded:,.2f} recorded"
    ) + ", net of re-fetches"
    spread = best.spread
    if spread is not None and spread.has_interval:
        sure = (
            f"{LEVEL}% interval {best.low_pct:+.2f}..{best.high_pct:+.2f} over "
            f"{spread.sessions:,} sessions"
        )
    else:
        sure = spread.describe() if spread is not None else "no interval"
    figures = (
        f"{money} ({best.net_savings_pct:+.2f}% vs baseline, {sure}); re-fetch risk "
        f"{best.totals.refetch_risk:.0%}"
    )
    if clearly:
        head = f"verdict: {name} {figures}"
    elif best.net_savings_pct > 0:
        head = f"verdict: no policy saves clearly; the best, {name}, {figures}"
    else:
        head = f"verdict: no policy saves; the best, {name}, {figures}"
    parts = [head]
    if rec.passed_over is not None:
        top = rec.passed_over
        parts.append(
            f"chosen over {top.variant.name} ({top.net_savings_pct:+.2f}%, risk "
            f"{top.totals.refetch_risk:.0%}): within noise of it, at a lower risk"
        )
    over = [o.variant.name for o in results if o.totals.refetch_risk > max_risk]
    if over:
        parts.append(f"not weighed, re-fetch risk over {max_risk:.0%}: {', '.join(over)}")
    unknown = [o.variant.name for o in results if not o.totals.refetch_known]
    if unknown:
        parts.append(f"not weighed, re-fetch risk not assessed: {', '.join(unknown)}")
    for caveat in (best.edits_caveat(), best.cleared_set_caveat()):
        if caveat is not None:
            parts.append(f"rests on {caveat}")
    return "; ".join(parts)
