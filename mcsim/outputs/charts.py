"""PNG charts of a replay, readable without the code: titles, axis labels and units on each.

The data the charts need is extracted once from a report (`chart_data`, plain numpy arrays
and lists); drawing it needs only matplotlib. That split lets the command line draw in another
process (`ChartProcess`), started before the replay so matplotlib's import and the drawing
overlap the replay and the tables. matplotlib is imported here only.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import signal
import sys
import threading
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcsim.processes import STOP, Parent, end_with
from mcsim.replay.run import RECORDED, ReplayReport
from mcsim.text import NAME_LIMIT, printable

_MAX_POINTS = 2000  # per line: enough to read, small enough to draw fast


def pyplot() -> Any:
    """matplotlib.pyplot with the non-interactive Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # A policy or project name in a script the default font lacks (CJK, emoji) is drawn as
    # boxes; matplotlib would also print a warning per missing glyph, dozens on stderr.
    warnings.filterwarnings("ignore", message=r"Glyph \d+ .* missing from", category=UserWarning)
    return plt


@dataclass
class ChartData:
    """Everything the replay charts draw, as numpy arrays and lists (picklable)."""

    names: list[str]  # the recording, then every scenario, in order
    cumulative_cost: dict[str, tuple[Any, Any]] = field(default_factory=dict)  # name -> (x, y)
    prompt_k: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    breaks: dict[str, tuple[Any, Any]] = field(default_factory=dict)  # cause -> (time, row)
    savings: list[tuple[str, float, float]] = field(default_factory=list)  # vs base, vs rec


def _label(name: str) -> str:
    """A policy name as chart text: printable (matplotlib would warn about a control character
    on the terminal, quoting it raw), shortened, and `$` escaped (two would start mathtext)."""
    return printable(name, limit=NAME_LIMIT).replace("$", r"\$")


def _thin(values: Any) -> tuple[Any, Any]:
    """Every n-th point of a series so a line has at most _MAX_POINTS points."""
    step = max(1, len(values) // _MAX_POINTS)
    return range(0, len(values), step), values[::step]


def savings_data(report: ReplayReport) -> ChartData:
    """What the savings chart draws: the totals alone, ready as soon as the replay is."""
    names = [RECORDED, *(s.name for s in report.scenarios)]
    data = ChartData(names)
    data.savings = [
        (s.name, s.savings_pct(report.baseline.cost_usd), s.savings_pct(report.recorded.cost_usd))
        for s in report.summaries()
        if s.name != "baseline"
    ]
    return data


def chart_data(report: ReplayReport) -> ChartData:
    """What every chart draws."""
    import numpy as np

    rows = report.call_rows()
    data = savings_data(report)
    order = rows.time_order()
    causes = rows.values["break_cause"]
    for index, name in enumerate(rows.policies):
        part = rows.policy_slice(index)
        cost = rows.numbers["cost_usd"][part][order]
        data.cumulative_cost[name] = _thin(np.nancumsum(cost))
        data.prompt_k[name] = _thin(rows.numbers["prompt_tokens"][part][order] / 1000)
    broke = np.flatnonzero(rows.numbers["is_break"])
    broke_cause = rows.codes["break_cause"][broke]
    stamps = (rows.numbers["timestamp"][broke] * 1000).round().astype("datetime64[ms]")
    for code, cause in enumerate(causes):
        mine = broke_cause == code
        data.breaks[cause] = (stamps[mine], broke[mine] // rows.calls)  # row = policy
    return data


def _fit_to_labels(fig: Any) -> None:
    """Margins fitted to the labels (what `fig.tight_layout()` does), without leaving a layout
    engine on the figure: with one, `savefig` draws the whole figure twice."""
    from matplotlib.layout_engine import TightLayoutEngine

    TightLayoutEngine().execute(fig)


def save(plt: Any, fig: Any, path: Path, tight: bool = True) -> None:
    """Write the PNG and free the figure.

    `tight` fits the margins to the labels (a quarter of a chart's drawing time); charts
    whose labels are fixed text and numbers use fixed margins instead.
    """
    if tight:
        _fit_to_labels(fig)
    else:
        fig.subplots_adjust(left=0.08, right=0.98, top=0.94, bottom=0.09)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def finish(
    plt: Any,
    fig: Any,
    ax: Any,
    path: Path,
    title: str,
    xlabel: str,
    ylabel: str,
    tight: bool = True,
) -> None:
    """Title, axis labels, grid and legend, then `save`."""
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    save(plt, fig, path, tight)


def cumulative_cost(data: ChartData, path: Path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(10, 5.5))
    for name in data.names:
        if name not in data.cumulative_cost:
            continue
        xs, ys = data.cumulative_cost[name]
        total = float(ys[-1]) if len(ys) else 0.0
        style = {"color": "black", "linewidth": 2.2} if name == RECORDED else {"linewidth": 1.4}
        ax.plot(xs, ys, label=f"{_label(name)} (${total:,.2f})", **style)
    finish(plt, fig, ax, path, "Cumulative cost over calls, recorded vs each policy",
            "API call (all sessions, in time order)", "cumulative cost (USD)",
            tight=False)  # fmt: skip


def context_size(data: ChartData, path: Path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(10, 5.5))
    for name in data.names:
        if name == RECORDED or name not in data.prompt_k:
            continue  # the baseline's prompt is the recorded prompt
        xs, ys = data.prompt_k[name]
        ax.plot(xs, ys, label=_label(name), linewidth=1.0, alpha=0.85)
    finish(plt, fig, ax, path, "Context size sent on each call, per policy",
            "API call (all sessions, in time order)", "prompt size (thousand tokens)",
            tight=False)  # fmt: skip


def savings(data: ChartData, path: Path) -> None:
    plt = pyplot()
    names = [_label(s[0]) for s in data.savings]
    vs_base = [s[1] for s in data.savings]
    vs_rec = [s[2] for s in data.savings]
    fig, ax = plt.subplots(figsize=(max(6, 1.3 * len(names) + 3), 5))
    xs = range(len(names))
    ax.bar([x - 0.2 for x in xs], vs_base, width=0.4, label="vs no pruning (baseline)")
    ax.bar([x + 0.2 for x in xs], vs_rec, width=0.4, label="vs recorded spend")
    ax.axhline(0, color="black", linewidth=0.8)
    for x, value in zip(xs, vs_base, strict=True):
        ax.annotate(f"{value:+.1f}%", (x - 0.2, value), ha="center",
                    va="bottom" if value >= 0 else "top", fontsize=8)  # fmt: skip
    ax.set_xticks(list(xs), names, rotation=20, ha="right")
    finish(plt, fig, ax, path, "Savings by policy", "policy",
            "savings (% of cost; negative = costs more)")  # fmt: skip


def break_timeline(data: ChartData, path: Path) -> None:
    plt = pyplot()
    names = data.names
    fig, ax = plt.subplots(figsize=(10, 1.2 + 0.6 * len(names)))
    for cause, (times, rows) in sorted(data.breaks.items()):
        ax.scatter(times, rows, label=cause, s=22, alpha=0.75)
    ax.set_yticks(range(len(names)), list(map(_label, names)))
    ax.set_ylim(-0.5, len(names) - 0.5)
    ax.set_title("Cache breaks over time, by policy and cause")
    ax.set_xlabel("time (UTC)")
    if data.breaks:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.grid(alpha=0.3)
    fig.autofmt_xdate()
    save(plt, fig, path)


CHARTS = {
    "cumulative_cost.png": cumulative_cost,
    "context_size.png": context_size,
    "savings.png": savings,
    "break_timeline.png": break_timeline,
}


def draw_all(data: ChartData, folder: Path, names: Iterable[str] = CHARTS) -> None:
    for name in names:
        CHARTS[name](data, folder / name)


def _serve(conn: Any, parent: Parent) -> None:
    """The chart process: import matplotlib at once, then draw what the parent sends, one
    request (data, folder, chart names) at a time, until it sends None."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's: it stops this one
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a forked one has the parent's handler
    end_with(parent)
    pyplot()
    while (request := conn.recv()) is not None:
        try:
            draw_all(*request)
        except OSError as exc:  # the system's reason alone: the path is a temporary one
            conn.send(exc.strerror or f"{type(exc).__name__}: {exc}")
        except Exception as exc:  # reported to the parent, which fails the write
            conn.send(f"{type(exc).__name__}: {exc}")
        else:
            conn.send("ok")


# Modules that start threads: forking after one of them is loaded can deadlock the child.
_THREADED = ("polars", "pyarrow", "numpy")


class ChartProcess:
    """Draws the replay charts in another process.

    Start it before the replay: matplotlib's import then overlaps the replay, and the drawing
    overlaps writing the tables. It is forked while that is safe (nothing that starts threads
    is loaded yet: the command line's case, and the cheapest), else spawned. One process: a
    second one drew faster but its matplotlib import slowed the replay more (measured).
    """

    def __init__(self) -> None:
        safe = not any(name in sys.modules for name in _THREADED)
        ctx: Any = multiprocessing.get_context("fork" if safe else "spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve, args=(child, Parent.current()), daemon=True)
        self._proc.start()
        child.close()
        self._pending = 0  # requests sent and not answered yet
        self._sender: threading.Thread | None = None

    def start(self, data: ChartData, folder: Path, names: Iterable[str] = CHARTS) -> None:
        """Ask for some charts; may be called several times before `wait`.

        Sent from a thread: a request larger than the pipe's buffer would otherwise block the
        caller until the process finished drawing the previous one.
        """
        self._join_sender()
        request = (data, folder, list(names))
        self._sender = threading.Thread(target=self._send, args=(request,), daemon=True)
        self._sender.start()
        self._pending += 1

    def _send(self, request: tuple[ChartData, Path, list[str]]) -> None:
        # A process stopped by `close` reads no more; `wait` reports one that died.
        with contextlib.suppress(OSError):
            self._conn.send(request)

    def _join_sender(self) -> None:
        if self._sender is not None:
            self._sender.join()
            self._sender = None

    def wait(self) -> None:
        """Wait for every chart asked for, then let the process end."""
        self._join_sender()
        answers = []
        try:
            for _ in range(self._pending):
                answers.append(self._conn.recv())
            self._conn.send(None)
        except (EOFError, OSError):
            answers.append(f"the chart process ended with exit code {self._proc.exitcode}")
        self._pending = 0
        self._proc.join()
        failed = [a for a in answers if a != "ok"]
        if failed:
            raise OSError(f"could not draw the charts: {failed[0]}")

    def close(self) -> None:
        """Stop the process at once: it writes nothing after this returns (an error or an
        interrupt before or while the charts are drawn: their folder is about to go)."""
        with STOP.shielded():
            if self._pending:
                self._proc.kill()  # drawing: not worth finishing
            self._join_sender()
            if self._proc.is_alive():
                with contextlib.suppress(OSError):
                    self._conn.send(None)
                self._proc.join(timeout=5)
                if self._proc.is_alive():
                    self._proc.kill()
            self._proc.join()
        self._pending = 0
