"""PNG charts of a replay, readable without the code: titles, axis labels and units on each.

matplotlib is imported here only (with the non-interactive Agg backend), so nothing else
pays for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mcsim.replay import RECORDED, ReplayReport

_MAX_POINTS = 4000  # per line: enough to read, small enough to draw fast


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _ordered_calls(report: ReplayReport) -> Any:
    from mcsim.replay_output import calls_frame

    return calls_frame(report).sort(["timestamp", "session_id", "thread_id", "call_index"])


def _order(report: ReplayReport) -> list[str]:
    return [RECORDED, *(s.name for s in report.scenarios)]


def _thin(values: Sequence[float]) -> tuple[list[int], list[float]]:
    step = max(1, len(values) // _MAX_POINTS)
    xs = list(range(0, len(values), step))
    return xs, [values[i] for i in xs]


def cumulative_cost(report: ReplayReport, path: Path) -> None:
    import polars as pl

    plt = _plt()
    calls = _ordered_calls(report)
    fig, ax = plt.subplots(figsize=(10, 5.5))
    for name in _order(report):
        costs = calls.filter(pl.col("policy") == name)["cost_usd"].fill_null(0.0)
        series = costs.cum_sum().to_list()
        total = series[-1] if series else 0.0
        xs, ys = _thin(series)
        style = {"color": "black", "linewidth": 2.2} if name == RECORDED else {"linewidth": 1.4}
        ax.plot(xs, ys, label=f"{name} (${total:,.2f})", **style)
    ax.set_title("Cumulative cost over calls, recorded vs each policy")
    ax.set_xlabel("API call (all sessions, in time order)")
    ax.set_ylabel("cumulative cost (USD)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def context_size(report: ReplayReport, path: Path) -> None:
    import polars as pl

    plt = _plt()
    calls = _ordered_calls(report)
    fig, ax = plt.subplots(figsize=(10, 5.5))
    for name in _order(report):
        if name == RECORDED:
            continue  # the baseline's prompt is the recorded prompt
        prompts = calls.filter(pl.col("policy") == name)["prompt_tokens"] / 1000
        xs, ys = _thin(prompts.to_list())
        ax.plot(xs, ys, label=name, linewidth=1.0, alpha=0.85)
    ax.set_title("Context size sent on each call, per policy")
    ax.set_xlabel("API call (all sessions, in time order)")
    ax.set_ylabel("prompt size (thousand tokens)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def savings(report: ReplayReport, path: Path) -> None:
    plt = _plt()
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
        ax.annotate(f"{value:+.1f}%", (x - 0.2, value), ha="center",
                    va="bottom" if value >= 0 else "top", fontsize=8)  # fmt: skip
    ax.set_xticks(list(xs), names, rotation=20, ha="right")
    ax.set_ylabel("savings (% of cost; negative = costs more)")
    ax.set_title("Savings by policy")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def break_timeline(report: ReplayReport, path: Path) -> None:
    import polars as pl

    plt = _plt()
    names = _order(report)
    breaks = _ordered_calls(report).filter(pl.col("is_break"))
    fig, ax = plt.subplots(figsize=(10, 1.2 + 0.6 * len(names)))
    causes = sorted(set(breaks["break_cause"].to_list()))
    for cause in causes:
        part = breaks.filter(pl.col("break_cause") == cause)
        ys = [names.index(p) for p in part["policy"].to_list()]
        ax.scatter(part["timestamp"].to_list(), ys, label=cause, s=22, alpha=0.75)
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
