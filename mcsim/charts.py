"""PNG charts of a replay, readable without the code: titles, axis labels and units on each.

matplotlib is imported here only (with the non-interactive Agg backend), so nothing else
pays for it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcsim.replay import RECORDED, ReplayReport

_MAX_POINTS = 4000  # per line: enough to read, small enough to draw fast


def pyplot() -> Any:
    """matplotlib.pyplot with the non-interactive Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _series(report: ReplayReport) -> dict[str, Any]:
    """Per policy, its calls in time order (computed once per report, shared by the charts)."""
    if report.chart_series is None:
        import polars as pl

        from mcsim.replay_output import calls_frame

        ordered = calls_frame(report).sort(["timestamp", "session_id", "thread_id", "call_index"])
        report.chart_series = {
            name: part.select(
                pl.col("cost_usd").fill_null(0.0).cum_sum().alias("cumulative_cost"),
                (pl.col("prompt_tokens") / 1000).alias("prompt_k"),
                "timestamp",
                "is_break",
                "break_cause",
            )
            for (name,), part in ordered.group_by("policy", maintain_order=True)
        }
    series: dict[str, Any] = report.chart_series
    return series


def _finish(plt: Any, fig: Any, ax: Any, path: Path, title: str, xlabel: str, ylabel: str) -> None:
    """Title, axis labels, grid and legend, then write the PNG and free the figure."""
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _order(report: ReplayReport) -> list[str]:
    return [RECORDED, *(s.name for s in report.scenarios)]


def _thin(column: Any) -> tuple[Any, Any]:
    """Every n-th point of a series so a line has at most _MAX_POINTS (x, y) points."""
    step = max(1, len(column) // _MAX_POINTS)
    values = column.to_numpy()[::step]
    return range(0, len(column), step), values


def cumulative_cost(report: ReplayReport, path: Path) -> None:
    plt = pyplot()
    series = _series(report)
    fig, ax = plt.subplots(figsize=(10, 5.5))
    for name in _order(report):
        if name not in series:
            continue
        cumulative = series[name]["cumulative_cost"]
        total = float(cumulative[-1]) if len(cumulative) else 0.0
        xs, ys = _thin(cumulative)
        style = {"color": "black", "linewidth": 2.2} if name == RECORDED else {"linewidth": 1.4}
        ax.plot(xs, ys, label=f"{name} (${total:,.2f})", **style)
    _finish(plt, fig, ax, path, "Cumulative cost over calls, recorded vs each policy",
            "API call (all sessions, in time order)", "cumulative cost (USD)")  # fmt: skip


def context_size(report: ReplayReport, path: Path) -> None:
    plt = pyplot()
    series = _series(report)
    fig, ax = plt.subplots(figsize=(10, 5.5))
    for name in _order(report):
        if name == RECORDED or name not in series:
            continue  # the baseline's prompt is the recorded prompt
        xs, ys = _thin(series[name]["prompt_k"])
        ax.plot(xs, ys, label=name, linewidth=1.0, alpha=0.85)
    _finish(plt, fig, ax, path, "Context size sent on each call, per policy",
            "API call (all sessions, in time order)", "prompt size (thousand tokens)")  # fmt: skip


def savings(report: ReplayReport, path: Path) -> None:
    plt = pyplot()
    summaries = [s for s in report.summaries() if s.name != "baseline"]
    names = [s.name for s in summaries]
    vs_base = [s.savings_pct(report.baseline.cost_usd) for s in summaries]
    vs_rec = [s.savings_pct(report.recorded.cost_usd) for s in summaries]
    fig, ax = plt.subplots(figsize=(max(6, 1.3 * len(names) + 3), 5))
    xs = range(len(names))
    ax.bar([x - 0.2 for x in xs], vs_base, width=0.4, label="vs no pruning (baseline)")
    ax.bar([x + 0.2 for x in xs], vs_rec, width=0.4, label="vs recorded spend")
    ax.axhline(0, color="black", linewidth=0.8)
    for x, value in zip(xs, vs_base, strict=True):
        ax.annotate(
            f"{value:+.1f}%",
            (x - 0.2, value),
            ha="center",
            va="bottom" if value >= 0 else "top",
            fontsize=8,
        )
    ax.set_xticks(list(xs), names, rotation=20, ha="right")
    _finish(plt, fig, ax, path, "Savings by policy", "policy",
            "savings (% of cost; negative = costs more)")  # fmt: skip


def break_timeline(report: ReplayReport, path: Path) -> None:
    import polars as pl

    plt = pyplot()
    names = _order(report)
    parts = [
        series.filter(pl.col("is_break")).with_columns(pl.lit(names.index(name)).alias("y"))
        for name, series in _series(report).items()
        if name in names
    ]
    breaks = pl.concat(parts) if parts else pl.DataFrame()
    fig, ax = plt.subplots(figsize=(10, 1.2 + 0.6 * len(names)))
    causes = sorted(set(breaks["break_cause"].to_list())) if len(breaks) else []
    for cause in causes:
        part = breaks.filter(pl.col("break_cause") == cause)
        ax.scatter(
            part["timestamp"].to_numpy(), part["y"].to_numpy(), label=cause, s=22, alpha=0.75
        )
    ax.set_yticks(range(len(names)), names)
    ax.set_ylim(-0.5, len(names) - 0.5)
    ax.set_title("Cache breaks over time, by policy and cause")
    ax.set_xlabel("time (UTC)")
    if causes:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.grid(alpha=0.3)
    fig.autofmt_xdate()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


CHARTS = {
    "cumulative_cost.png": cumulative_cost,
    "context_size.png": context_size,
    "savings.png": savings,
    "break_timeline.png": break_timeline,
}
