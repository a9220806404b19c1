"""What a sweep writes and prints: sweep.parquet, two charts, run.json, a table, JSON.

sweep.parquet has the fixed columns of SWEEP_SCHEMA and then one typed column per swept key,
named `param_` + the key as given to --grid (`param_ttl`, `param_cached_microcompact.
keep_recent`): the prefix keeps a parameter from ever colliding with a fixed column. Its type
is the parameter's (int, float, bool; text for `ttl` and for parameters that also take a word
or a list), its value the validated one.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mcsim.accounting.recorded import savings_pct
from mcsim.outputs.replay_tables import CACHE_EDIT_NOTE, baseline_json
from mcsim.outputs.run_dir import write_json, write_run_dir
from mcsim.outputs.tables import frame, write_parquet
from mcsim.replay.results import PolicyTotals
from mcsim.replay.run import ReplayReport
from mcsim.replay.scenario import BASELINE
from mcsim.replay.sweep import (
    LEVEL,
    Outcome,
    Recommendation,
    Variant,
    pareto_front,
    spelled,
    stand_in_why,
)
from mcsim.text import counted, printable

SWEEP_SCHEMA: dict[str, str] = {
    "level": "str",
    "variant": "str",
    "params": "str",
    "session_id": "str",
    "project": "str",
    "cost_usd": "float",
    "savings_vs_baseline_pct": "float",
    "net_savings_vs_baseline_pct": "float",
    # The 95% bootstrap interval of the net savings (variant rows; null on session rows and
    # when there is no interval: fewer than two sessions).
    "net_savings_low_pct": "float",
    "net_savings_high_pct": "float",
    "cleared_tokens": "int",
    "cache_breaks": "int",
    "cleared_results": "int",
    "refetch_hazards": "int",
    "refetch_unassessed": "int",
    "refetch_risk": "float",  # null: no cleared result could be assessed (refetch.py)
    "refetch_cost_usd": "float",
    "recommended": "bool",
    "net_saved_usd": "float",
    "baseline": "str",
}


def _params_text(v: Variant) -> str:
    return ", ".join(f"{k}={spelled(val)}" for k, val in v.params)


def sweep_frame(report: ReplayReport, results: Sequence[Outcome], rec: Recommendation) -> Any:
    """One row per variant (level `variant`) and per variant x session (level `session`)."""
    best = rec.best.variant.name if rec.best else None
    costs = (report.baseline.cost_usd, report.recorded.cost_usd)
    against = report.baseline_text()
    rows = []
    for o in results:
        row = _row("variant", o.variant, None, None, o.totals, costs, best)
        row["net_savings_low_pct"] = _or_none(o.low_pct)
        row["net_savings_high_pct"] = _or_none(o.high_pct)
        rows.append(row)
    names = {o.variant.scenario.name: o.variant for o in results}
    for s in report.results:
        base = next((p for p in s.policies if p.name == BASELINE), None)
        session_costs = (base.cost_usd if base else 0.0, s.recorded.cost_usd)
        for t in s.policies:
            variant = names.get(t.name)
            if variant is not None:
                rows.append(
                    _row("session", variant, s.session_id, s.project, t, session_costs, best)
                )
    for row in rows:
        row["baseline"] = against
    swept = results[0].variant.swept if results else ()
    return frame(rows, {**SWEEP_SCHEMA, **{param_column(k.key): k.kind for k in swept}})


def param_column(key: str) -> str:
    return f"param_{key}"


def _or_none(value: float) -> float | None:
    return None if math.isnan(value) else value


def _row(
    level: str,
    variant: Variant,
    session_id: str | None,
    project: str | None,
    t: PolicyTotals,
    costs: tuple[float, float],
    best: str | None,
) -> dict[str, Any]:
    """One sweep.parquet row: a variant's totals over the run, or over one session; `costs`
    are the baseline's and the recording's over the same."""
    base_cost, recorded_cost = costs
    swept = {
        param_column(k.key): value if value is None or k.kind != "str" else str(value)
        for k, value in zip(variant.swept, variant.checked, strict=True)
    }
    return {
        **swept,
        "level": level,
        "variant": variant.name,
        "params": _params_text(variant),
        "session_id": session_id,
        "project": project,
        "cost_usd": t.cost_usd,
        "savings_vs_baseline_pct": _pct(t.cost_usd, base_cost),
        "net_savings_vs_baseline_pct": _pct(t.net_cost_usd, base_cost),
        "cleared_tokens": t.cleared_tokens,
        "cache_breaks": t.cache_breaks,
        "cleared_results": t.cleared_results,
        "refetch_hazards": t.refetch_hazards,
        "refetch_unassessed": t.refetch_unassessed,
        "refetch_risk": t.refetch_risk if t.refetch_known else None,
        "refetch_cost_usd": t.refetch_cost_usd,
        "recommended": variant.name == best,
        "net_savings_low_pct": None,
        "net_savings_high_pct": None,
        "net_saved_usd": recorded_cost - t.net_cost_usd,
    }


_pct = savings_pct

# A group's colour and marker, the same on both sweep charts: Okabe and Ito's colour-blind-safe
# palette without its vermillion (the recommended variant is circled in red) and its yellow
# (faint on white). The markers cycle at another length: no two of 42 groups look alike.
_GROUP_COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#000000")
_GROUP_MARKERS = ("o", "s", "^", "D", "v", "P", "X")


def _group_of(o: Outcome) -> str:
    """The variant's group: its values of every swept key but the first (`ttl=1h`), which
    the savings curve draws as a line over the first; "" when one key is swept."""
    return ", ".join(f"{k}={spelled(v)}" for k, v in o.variant.params[1:])


def _groups(results: Sequence[Outcome]) -> dict[str, list[Outcome]]:
    """The variants by `_group_of`, in the order tried."""
    groups: dict[str, list[Outcome]] = {}
    for o in results:
        groups.setdefault(_group_of(o), []).append(o)
    return groups


def _group_look(index: int) -> dict[str, str]:
    return {
        "color": _GROUP_COLOURS[index % len(_GROUP_COLOURS)],
        "marker": _GROUP_MARKERS[index % len(_GROUP_MARKERS)],
    }


def savings_curve(results: Sequence[Outcome], rec: Recommendation, path: Path) -> None:
    """Savings over the first swept parameter, one line per value of the others."""
    from mcsim.outputs.charts import finish, integer_ticks, pyplot

    plt = pyplot()
    x_key = results[0].variant.params[0][0]
    groups = _groups(results)
    fig, ax = plt.subplots(figsize=(12, 5.5))
    numeric = all(isinstance(dict(o.variant.params)[x_key], int | float) for o in results)
    values = sorted({float(dict(o.variant.params)[x_key]) for o in results}) if numeric else []
    # Text values (ttl=5m,1h) at 0, 1, ... in the order tried, named by their ticks: at
    # places of their own, the groups' intervals are set apart as numbers' are.
    places: dict[str, int] = {}
    if not numeric:
        for o in results:
            places.setdefault(spelled(dict(o.variant.params)[x_key]), len(places))

    def place(value: Any) -> float:
        return float(value) if numeric else float(places[spelled(value)])

    # Each group's intervals a little apart, so the error bars of two groups do not overlap.
    step = min((b - a for a, b in itertools.pairwise(values)), default=1.0) * 0.1
    shifts: dict[str, float] = {}
    for g, (group, members) in enumerate(groups.items()):
        label = f"{group}: " if group else ""  # the legend's prefix of the group's lines
        xs = [place(dict(o.variant.params)[x_key]) for o in members]
        line = ax.plot(
            xs, [o.savings_pct for o in members], label=f"{label}as simulated", **_group_look(g)
        )
        shift = (g - (len(groups) - 1) / 2) * step
        shifts[group] = shift
        net = [o.net_savings_pct for o in members]
        spread = not any(math.isnan(o.low_pct) for o in members)
        ax.errorbar(
            [x + shift for x in xs],
            net,
            # The 95% bootstrap interval over sessions, when there is one. A percentile
            # interval need not hold the estimate (a ratio of sums over every session): when
            # every session saves alike it collapses onto it, and the last bits of two sums
            # put it outside; matplotlib refuses a negative bar, so that side is drawn empty.
            yerr=[
                [max(n - o.low_pct, 0.0) for n, o in zip(net, members, strict=True)],
                [max(o.high_pct - n, 0.0) for n, o in zip(net, members, strict=True)],
            ]
            if spread
            else None,
            linestyle="--",
            marker=".",
            capsize=3,
            color=line[0].get_color(),
            label=f"{label}net of re-fetches" + (" (95% interval)" if spread else ""),
        )
    if rec.best is not None:
        x = place(dict(rec.best.variant.params)[x_key]) + shifts[_group_of(rec.best)]
        _mark(ax, x, rec.best)
    if not numeric:
        ax.set_xticks(range(len(places)), list(places))
    elif all(isinstance(dict(o.variant.params)[x_key], int) for o in results):
        # A count (keep_recent, a threshold in tokens): ticks on whole numbers, on each value
        # tried when there are few, never at 2.5 results.
        if len(values) <= 15:
            ax.set_xticks(values, [f"{v:g}" for v in values])
        else:
            integer_ticks(ax.xaxis)
    ax.axhline(0, color="black", linewidth=0.8)
    finish(plt, fig, ax, path, f"Savings vs no pruning over {x_key}", x_key,
           "savings (% of the no-pruning cost)", legend_outside=True)  # fmt: skip


def _mark(ax: Any, x: Any, best: Outcome, label: str | None = None) -> None:
    """Circle the recommended variant."""
    ax.scatter(
        [x],
        [best.net_savings_pct],
        s=210,
        facecolors="none",
        edgecolors="red",
        linewidths=2,
        label=label if label is not None else f"recommended: {best.variant.name}",
        zorder=5,
    )


# More numbered points than this and the key would outgrow the chart: then only the ends of
# the front and the variants the recommendation names are numbered.
_MAX_NUMBERED = 12


def risk_tradeoff(results: Sequence[Outcome], rec: Recommendation, path: Path) -> None:
    """Net savings against re-fetch risk, every variant a point in its group's look (as on the
    savings curve, named in the key), the Pareto front joined. The front's points are
    numbered, and the key below the axes names them: names written beside the points
    overlapped each other and the points whenever two variants were close. The risk axis
    starts at 0: risks of 37% to 39% spread over the whole width looked far apart."""
    from mcsim.outputs.charts import finish, pyplot

    front = pareto_front(results)
    notes: dict[int, str] = {}  # id(outcome) -> what the recommendation says of it
    if rec.best is not None:
        notes[id(rec.best)] = "recommended"
        if rec.passed_over is not None:
            notes[id(rec.passed_over)] = "highest net savings"
    ends = front if len(front) <= _MAX_NUMBERED else [front[0], front[-1]]
    numbered = sorted(
        {id(o): o for o in [*ends, *(o for o in results if id(o) in notes)]}.values(),
        key=lambda o: (o.totals.refetch_risk, -o.net_savings_pct),
    )
    plt = pyplot()
    # Taller by the key's lines, which sit below the axes: the axes keep their height.
    fig, ax = plt.subplots(figsize=(12, 5.5 + 0.18 * (3 + len(numbered))))
    for g, (group, members) in enumerate(_groups(results).items()):
        ax.scatter(
            [100 * o.totals.refetch_risk for o in members],
            [o.net_savings_pct for o in members],
            alpha=0.7,
            label=f"variant: {group}" if group else "variant",
            **_group_look(g),
        )
    ax.plot(
        [100 * o.totals.refetch_risk for o in front],
        [o.net_savings_pct for o in front],
        color="dimgrey",  # ringed, not filled: the group's marker shows through
        linewidth=1,
        marker="o",
        markersize=11,
        markerfacecolor="none",
        label="Pareto front (no variant is better on both)",
    )
    if rec.best is not None:
        # Off the front on purpose when a highest is passed over: it is not clearly ahead, and
        # the recommended variant clears less (or, all else equal, has a lower risk).
        why = ""
        if rec.passed_over is not None:
            why = f": {stand_in_why(rec.best, rec.passed_over)}, within noise of the highest"
        _mark(ax, 100 * rec.best.totals.refetch_risk, rec.best, f"recommended{why}")
    for number, o in enumerate(numbered, 1):
        ax.annotate(str(number), (100 * o.totals.refetch_risk, o.net_savings_pct), fontsize=8,
                    xytext=(9, 4), textcoords="offset points", fontweight="bold")  # fmt: skip
        note = notes.get(id(o))
        ax.plot([], [], linestyle="none",
                label=f"{number}: {o.variant.name}" + (f" ({note})" if note else ""))  # fmt: skip
    ax.axhline(0, color="black", linewidth=0.8)
    ax.axvline(0, color="black", linewidth=0.8)  # the risk axis starts at 0 (autoscaled to it)
    finish(plt, fig, ax, path, "Savings (net of re-fetches) vs re-fetch risk",
           "re-fetch risk (% of cleared results the agent needed again)",
           "net savings (% of the no-pruning cost)", legend_below=True)  # fmt: skip


def write_sweep_outputs(
    report: ReplayReport,
    results: Sequence[Outcome],
    rec: Recommendation,
    out_dir: Path,
    force: bool,
    run: dict[str, Any],
) -> None:
    writers: dict[str, Callable[[Path], None]] = {
        "sweep.parquet": lambda p: write_parquet(sweep_frame(report, results, rec), p),
        "savings_curve.png": lambda p: savings_curve(results, rec, p),
        "risk_tradeoff.png": lambda p: risk_tradeoff(results, rec, p),
        "run.json": lambda p: write_json(p, run),
    }
    write_run_dir(out_dir, writers, force)


def variant_json(o: Outcome, recorded_usd: float) -> dict[str, Any]:
    t = o.totals
    return {
        "name": o.variant.name,
        "params": dict(o.variant.params),
        "cost_usd": t.cost_usd,
        "net_saved_usd": recorded_usd - t.net_cost_usd,
        "savings_vs_baseline_pct": o.savings_pct,
        "net_savings_vs_baseline_pct": o.net_savings_pct,
        "net_savings_interval_pct": None if math.isnan(o.low_pct) else [o.low_pct, o.high_pct],
        "cleared_tokens": t.cleared_tokens,
        "cache_breaks": t.cache_breaks,
        "refetch_risk": t.refetch_risk if t.refetch_known else None,
        "refetch_hazards": t.refetch_hazards,
        "refetch_unassessed": t.refetch_unassessed,
        "refetch_cost_usd": t.refetch_cost_usd,
        "net_savings_if_edits_reread_pct": _or_none(o.reread_net_pct),
        "net_savings_if_other_cleared_set_pct": _or_none(o.other_cleared_set_net_pct),
    }


def sweep_json(
    report: ReplayReport, results: Sequence[Outcome], rec: Recommendation, out_dir: str
) -> dict[str, Any]:
    return {
        "variants": [variant_json(o, report.recorded.cost_usd) for o in results],
        "recommendation": {
            "params": dict(rec.best.variant.params) if rec.best else None,
            "name": rec.best.variant.name if rec.best else None,
            "reason": rec.reason,
            "runner_up": dict(rec.runner_up.variant.params) if rec.runner_up else None,
            "passed_over": dict(rec.passed_over.variant.params) if rec.passed_over else None,
            "cautions": list(rec.cautions),
        },
        "bootstrap": _bootstrap_json(results),
        "baseline": baseline_json(report),
        "recorded": {"cost_usd": report.recorded.cost_usd},
        "fidelity": {
            "overall_error": report.fidelity_overall,
            "worst_session_error": report.fidelity_worst,
            "sessions_over_threshold": len(report.sessions_over_threshold()),
        },
        "sessions": len(report.sessions),
        "notes": [CACHE_EDIT_NOTE, *report.layer_notes()],
        "out_dir": out_dir,
    }


def _bootstrap_json(results: Sequence[Outcome]) -> dict[str, Any] | None:
    spread = results[0].spread if results else None
    if spread is None:
        return None
    return {
        "sessions": spread.sessions,
        "resamples": spread.resamples,
        "seed": spread.seed,
        "level_pct": LEVEL,
        "note": spread.describe(),
    }


def _short_names(results: Sequence[Outcome]) -> tuple[dict[str, str], str | None]:
    """The variants' names for the terminal table, each swept key by its last part (keep_recent
    for cached_microcompact.keep_recent) when that still tells the keys apart, and the line
    saying so: whole, the names were cut in the middle at 80 columns. The recommendation,
    the JSON and sweep.parquet keep the whole names."""
    keys = [key for key, _ in results[0].variant.params] if results else []
    short = {key: key.rpartition(".")[2] for key in keys}
    if len(set(short.values())) < len(keys) or all(k == s for k, s in short.items()):
        return {}, None
    names = {
        o.variant.name: ",".join(f"{short[k]}={v}" for k, v in o.variant.params) for o in results
    }
    told = "; ".join(f"{s} is {k}" for k, s in short.items() if k != s)
    return names, f"variant keys: {told}"


def sweep_text(report: ReplayReport, results: Sequence[Outcome], rec: Recommendation) -> str:
    from mcsim.outputs.terminal import load_notes, table

    headers = [
        "variant",
        "cost $",
        "net saved $",
        "savings",
        "net of re-fetch",
        f"{LEVEL}% interval",
        "cleared",
        "re-fetch risk",
        "breaks",
        "pick",
    ]
    marks = {
        o.variant.name: mark
        for o, mark in (
            (rec.runner_up, "<- runner-up"),
            (rec.passed_over, "<- highest, within noise"),
            (rec.best, "<- recommended"),
        )
        if o is not None
    }
    shown, keys_note = _short_names(results)
    rows = [
        [
            shown.get(o.variant.name, o.variant.name),
            f"{o.totals.cost_usd:.4f}",
            f"{report.recorded.cost_usd - o.totals.net_cost_usd:.4f}",
            f"{o.savings_pct:+.2f}%",
            f"{o.net_savings_pct:+.2f}%",
            "-" if math.isnan(o.low_pct) else f"{o.low_pct:+.2f}..{o.high_pct:+.2f}%",
            f"{o.totals.cleared_tokens:,}",
            f"{100 * o.totals.refetch_risk:.0f}%" if o.totals.refetch_known else "unknown",
            str(o.totals.cache_breaks),
            marks.get(o.variant.name, ""),
        ]
        for o in results
    ]
    lines = table(headers, rows, right={1, 2, 3, 4, 5, 6, 7, 8})
    if keys_note is not None:
        lines.append(printable(keys_note))
    lines.append(
        f"baseline ({report.baseline_text()}) ${report.baseline.cost_usd:.4f}: 'savings' and "
        f"'net of re-fetch' are against it; recorded ${report.recorded.cost_usd:.4f}: 'net "
        f"saved $' is against it; {counted(len(report.sessions), 'session', 'sessions')}; "
        f"fidelity {report.fidelity_overall:.3%} overall, worst session {report.fidelity_worst:.3%}"
    )
    # Variant names are spelled from the --grid values; they are shown whole, made printable.
    if rec.best is not None:
        lines.append(printable(f"recommendation: {rec.best.variant.name} — {rec.reason}"))
        lines.extend(printable(f"caution: {c}") for c in rec.cautions)
    else:
        lines.append(printable(f"no recommendation: {rec.reason}"))
    lines.extend(printable(f"note: {n}") for n in report.layer_notes())
    lines.extend(load_notes(report.stats))
    return "\n".join(lines)
