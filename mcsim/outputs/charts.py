"""PNG charts of a replay, readable without the code: titles, axis labels and units on each.

The data the charts need is extracted once from a report (`chart_data`, plain numpy arrays
and lists); drawing it needs only matplotlib. That split lets the command line draw in another
process (`ChartProcess`), started before the replay so matplotlib's import and the drawing
overlap the replay and the tables. matplotlib is imported here only.
"""

from __future__ import annotations

import contextlib
import hashlib
import multiprocessing
import os
import signal
import sys
import threading
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from mcsim.accounting.breaks import BreakCause
from mcsim.accounting.recorded import savings_pct
from mcsim.model import ThreadKind
from mcsim.processes import STOP, Parent, end_with
from mcsim.replay.rows import RowsTable
from mcsim.replay.run import RECORDED, ReplayReport
from mcsim.replay.scenario import BASELINE, NAME_MAX_CHARS
from mcsim.text import printable

_MAX_POINTS = 2000  # per line: enough to read, small enough to draw fast
_LABEL_LIMIT = NAME_MAX_CHARS  # the longest policy name: shown whole (wrapped), never cut
_WRAP = 30  # characters per line of a name in a legend or on an axis
_MAX_BANDS = 400  # sessions shaded in alternate stripes on the break timeline (more: no shade)
_COLOURS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown",
            "tab:pink", "tab:grey", "tab:olive", "tab:cyan")  # fmt: skip
# Dash patterns and markers cycle at other lengths than the colours: no two of the first
# dozens of lines share all three.
_DASHES: tuple[Any, ...] = ("-", (0, (5, 2)), (0, (1, 1.5)), (0, (6, 2, 1, 2)), (0, (2, 3)))
_MARKERS = ("o", "s", "^", "D", "v", "P", "X")


class Look(NamedTuple):
    colour: str
    marker: str


# One look per break cause, the same on every chart of every run (colours handed out in order
# of appearance made red mean prefix_changed in one run and ttl_expired in another), listed
# in this order in a legend. The colours are Okabe and Ito's palette, told apart with the
# common colour blindnesses, and each cause has a marker of its own, told apart in grey too.
CAUSE_LOOKS: dict[BreakCause, Look] = {
    BreakCause.TTL_EXPIRED: Look("#0072B2", "o"),  # blue
    BreakCause.COMPACTION: Look("#009E73", "D"),  # bluish green
    BreakCause.MODEL_SWITCH: Look("#CC79A7", "v"),  # reddish purple
    BreakCause.POLICY_CLEARING: Look("#E69F00", "s"),  # orange
    BreakCause.CACHE_EDIT: Look("#56B4E9", "P"),  # sky blue
    BreakCause.PREFIX_CHANGED: Look("#D55E00", "^"),  # vermillion
    BreakCause.UNKNOWN: Look("#000000", "X"),  # black
}


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
    """Everything the replay charts draw, as numpy arrays and lists (picklable).

    The x of the line charts is a call's position with the sessions laid end to end: sessions
    in start order (ties: session id), and within a session its calls in time order (ties:
    thread, call). Sessions can overlap in time; laid end to end each is one contiguous block,
    and `boundaries` are the positions where a session other than the first begins.
    """

    names: list[str]  # the recording, then every scenario, in order
    cumulative_cost: dict[str, tuple[Any, Any]] = field(default_factory=dict)  # name -> (x, y)
    # The prompt (thousand tokens) of the main thread's calls, and apart, of the other
    # threads' (sub-agents, compaction): a sub-agent's prompt of 13k between main calls of
    # 100k made one line zigzag between two conversations.
    prompt_k: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    apart_prompt_k: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    # Groups of names whose whole series are equal (each group in `names` order, 2+ names).
    same_cost: list[list[str]] = field(default_factory=list)
    same_prompt: list[list[str]] = field(default_factory=list)
    boundaries: list[int] = field(default_factory=list)  # x where a new session begins
    sessions: int = 0
    # cause -> (x, row): x = the session's number (0-based, start order) plus the break's
    # place among the session's calls, (position + 0.5) / calls; row = the policy's index.
    breaks: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    # (name, simulated vs baseline %, net of re-fetches vs baseline %, simulated vs recorded %)
    savings: list[tuple[str, float, float, float]] = field(default_factory=list)
    baseline: str = ""  # what the baseline is (ReplayReport.baseline_text), for the labels


def _label(name: str) -> str:
    """A policy name as chart text: printable (matplotlib would warn about a control character
    on the terminal, quoting it raw), shortened, and `$` escaped (two would start mathtext)."""
    return printable(name, limit=_LABEL_LIMIT).replace("$", r"\$")


def _wrapped(name: str, width: int = _WRAP) -> str:
    """`_label`, broken into lines of at most `width` characters (at `+`, `-`, `_` or spaces
    where it can) so a long name widens no legend or axis beyond that."""
    return _wrap(_label(name), width)


def _wrap(text: str, width: int) -> str:
    lines: list[str] = []
    while len(text) > width:
        cut = max(text.rfind(c, 0, width) for c in "+-_ ")
        cut = cut + 1 if cut > width // 3 else width
        lines.append(text[:cut])
        text = text[cut:]
    return "\n".join([*lines, text])


def savings_data(report: ReplayReport) -> ChartData:
    """What the savings chart draws: the totals alone, ready as soon as the replay is."""
    names = [RECORDED, *(s.name for s in report.scenarios)]
    data = ChartData(names)
    base, rec = report.baseline.cost_usd, report.recorded.cost_usd
    data.savings = [
        (s.name, s.savings_pct(base), savings_pct(s.totals.net_cost_usd, base), s.savings_pct(rec))
        for s in report.summaries()
        if s.name != BASELINE
    ]
    data.baseline = report.baseline_text()
    return data


def session_order(rows: RowsTable) -> tuple[Any, Any]:
    """One policy's row indices with the sessions laid end to end (see `ChartData`), and each
    of those rows' session number (0-based, in start order)."""
    import numpy as np

    n = rows.calls
    codes = rows.codes["session_id"][:n]
    ids = rows.values["session_id"]
    start = np.full(len(ids), np.inf)
    np.minimum.at(start, codes, rows.numbers["timestamp"][:n])
    ranked = sorted(range(len(ids)), key=lambda s: (start[s], ids[s]))
    number = np.empty(len(ids), dtype=np.int64)
    number[ranked] = np.arange(len(ids))
    order = rows.time_order()
    order = order[np.argsort(number[codes[order]], kind="stable")]
    return order, number[codes[order]]


def chart_data(report: ReplayReport, lines: CallLines | None = None) -> ChartData:
    """What every chart draws; the per-call lines from `lines` (what a `RowsSink` gathered
    while writing the calls table), else from the rows the report holds."""
    data = savings_data(report)
    if lines is None:
        add_calls(data, report.call_rows())
    else:
        lines.finish(data)
    return data


def add_calls(data: ChartData, rows: RowsTable) -> None:
    """The per-call part of `data` from one table of rows."""
    lines = CallLines(rows.policies, rows.calls)
    lines.add(rows)
    lines.finish(data)


class CallLines:
    """The per-call part of `ChartData` (lines, session boundaries, coinciding lines, breaks),
    built from batches of whole sessions given in start order: a `RowsSink` hands over each
    batch it writes, so the driver never holds every call's row (reading the
    written calls table back grew the driver by about 20 MB per GB of transcripts). A line
    keeps only its thinned points, and a hash of its whole series to find the lines that
    coincide; `calls` (rows per policy over all batches) fixes the thinning step up front.
    Batches give exactly what one table of all the rows gives (`tests/test_rows_sink.py`)."""

    def __init__(self, policies: Sequence[str], calls: int) -> None:
        self.policies = list(policies)
        self.calls = calls
        self.step = max(1, calls // _MAX_POINTS)  # every step-th call: at most _MAX_POINTS
        self.done = 0  # calls laid so far, per policy
        self.sessions = 0
        self.boundaries: list[int] = []
        self._carry = [0.0 for _ in self.policies]  # each line's cumulative cost so far
        self._cost: list[list[Any]] = [[] for _ in self.policies]
        self._prompt: list[list[Any]] = [[] for _ in self.policies]  # main thread's calls
        self._apart: list[list[Any]] = [[] for _ in self.policies]  # other threads' calls
        self._main_x: list[Any] = []  # the x of the thinned points, main thread's and others'
        self._apart_x: list[Any] = []
        self._cost_hash = [hashlib.blake2b() for _ in self.policies]
        self._prompt_hash = [hashlib.blake2b() for _ in self.policies]
        self._breaks: dict[str, list[list[Any]]] = {}  # cause -> per policy, its breaks' x

    def add(self, rows: RowsTable) -> None:
        """The next batch: whole sessions, later in start order than any batch before."""
        import numpy as np

        if list(rows.policies) != self.policies:
            raise ValueError(f"a batch holds runs {rows.policies}, not {self.policies}")
        n = rows.calls
        if not n:
            return
        order, session = session_order(rows)
        if self.done:  # the batch's first session begins a new one
            self.boundaries.append(self.done)
        self.boundaries.extend((np.flatnonzero(np.diff(session)) + 1 + self.done).tolist())
        picked = np.arange((-self.done) % self.step, n, self.step)  # the thinned points' rows
        main_kind = np.array([k == ThreadKind.MAIN for k in rows.values["thread_kind"]])
        on_main = main_kind[rows.codes["thread_kind"][:n][order]][picked]
        main, apart = picked[on_main], picked[~on_main]
        self._main_x.append(main + self.done)
        self._apart_x.append(apart + self.done)
        for index in range(len(self.policies)):
            part = rows.policy_slice(index)
            # The carry goes first, so every sum is added in the order of one whole series.
            # A run's cost includes its keep-warm pings, at the call after their gap.
            own = rows.numbers["cost_usd"][part] + rows.numbers["ping_cost_usd"][part]
            costs = np.concatenate(([self._carry[index]], own[order]))
            cumulative = np.nancumsum(costs)[1:]
            self._carry[index] = float(cumulative[-1])
            prompts = rows.numbers["prompt_tokens"][part][order] / 1000
            # Indexed by arrays: copies (a view would keep the whole batch's series alive).
            self._cost[index].append(cumulative[picked])
            self._prompt[index].append(prompts[main])
            self._apart[index].append(prompts[apart])
            self._cost_hash[index].update(cumulative.tobytes())
            self._prompt_hash[index].update(prompts.tobytes())
        # Where each call of a policy falls on the break timeline's x.
        sessions = len(rows.values["session_id"])
        calls = np.bincount(session, minlength=sessions)
        first = np.cumsum(calls) - calls
        place = np.empty(n)
        place[order] = (session + self.sessions) + (
            np.arange(n) - first[session] + 0.5
        ) / np.maximum(calls, 1)[session]
        broke = np.flatnonzero(rows.numbers["is_break"])
        broke_cause = rows.codes["break_cause"][broke]
        for code, cause in enumerate(rows.values["break_cause"]):
            mine = broke[broke_cause == code]
            if not len(mine):
                continue
            per_policy = self._breaks.setdefault(cause, [[] for _ in self.policies])
            policy = mine // n
            for index in np.unique(policy).tolist():
                at = mine[policy == index] % n
                per_policy[index].append(place[at])
        self.done += n
        self.sessions += sessions

    def finish(self, data: ChartData) -> None:
        """Put the lines, boundaries and breaks into `data`."""
        import numpy as np

        if self.done != self.calls:
            raise ValueError(f"the batches held {self.done} calls, not {self.calls}")
        data.sessions = self.sessions
        data.boundaries = list(self.boundaries)
        x = range(0, self.calls, self.step)
        main_x, apart_x = _joined(np, self._main_x), _joined(np, self._apart_x)
        for index, name in enumerate(self.policies):
            data.cumulative_cost[name] = (x, _joined(np, self._cost[index]))
            data.prompt_k[name] = (main_x, _joined(np, self._prompt[index]))
            data.apart_prompt_k[name] = (apart_x, _joined(np, self._apart[index]))
        data.same_cost = _same(self.policies, self._cost_hash)
        # Not drawn: the baseline's prompt is the recorded prompt.
        drawn = [i for i, name in enumerate(self.policies) if name != RECORDED]
        data.same_prompt = _same(
            [self.policies[i] for i in drawn], [self._prompt_hash[i] for i in drawn]
        )
        for cause in sorted(self._breaks):
            per_policy = self._breaks[cause]
            xs = [_joined(np, parts) for parts in per_policy]
            rows = [np.full(len(v), index, dtype=np.int64) for index, v in enumerate(xs)]
            data.breaks[cause] = (np.concatenate(xs), np.concatenate(rows))  # row = policy


def _joined(np: Any, parts: list[Any]) -> Any:
    return np.concatenate(parts) if parts else np.empty(0)


def _same(names: Sequence[str], hashes: Sequence[Any]) -> list[list[str]]:
    """Groups (2+ names, in `names` order) of series whose hashes are equal."""
    groups: dict[bytes, list[str]] = {}
    for name, digest in zip(names, hashes, strict=True):
        groups.setdefault(digest.digest(), []).append(name)
    return [g for g in groups.values() if len(g) > 1]


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
    legend_outside: bool = False,
    legend_below: bool = False,
) -> None:
    """Title, axis labels, grid and legend (inside the axes, or right of them or below them:
    never over the data), then `save`."""
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    if legend_outside:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    elif legend_below:  # long entries: the axes keep the figure's width
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(0.0, -0.16), ncols=1)
    else:
        ax.legend(fontsize=8)
    save(plt, fig, path, tight)


def _coincide_note(groups: list[list[str]]) -> str | None:
    """The legend's title naming the lines drawn on top of each other, if any."""
    if not groups:
        return None
    parts = [_wrap(" = ".join(_label(n) for n in g), _WRAP) for g in groups]
    return "\n".join(["identical lines:", *parts])


def integer_ticks(axis: Any) -> None:
    """Ticks on whole numbers only, for an axis that counts (calls, sessions): matplotlib's
    own put a run of 2 calls at 0.0, 0.2, 0.4, ... 1.0."""
    from matplotlib.ticker import MaxNLocator

    axis.set_major_locator(MaxNLocator(nbins="auto", integer=True))


def _look(names: list[str], name: str) -> dict[str, Any]:
    """A policy's colour, dash pattern and marker: by its place among all the run's names, so
    the same on every chart, whichever lines a chart leaves out."""
    i = names.index(name)
    if name == RECORDED:
        return {"color": "black", "linestyle": "-", "marker": _MARKERS[i % len(_MARKERS)]}
    return {"color": _COLOURS[i % len(_COLOURS)], "linestyle": _DASHES[i % len(_DASHES)],
            "marker": _MARKERS[i % len(_MARKERS)]}  # fmt: skip


def _lines(
    ax: Any, series: dict[str, tuple[Any, Any]], names: list[str], groups: list[list[str]],
    label: Any,
) -> None:  # fmt: skip
    """One line per name, each in its `_look` with its markers staggered along the line, so
    lines drawn on top of each other stay told apart; a line identical to an earlier one says
    which in its label."""
    same = {n: g[0] for g in groups for n in g[1:]}
    drawn = [n for n in names if n in series]
    for name in drawn:
        i = names.index(name)
        xs, ys = series[name]
        text = label(name, ys) + (f" (= {_label(same[name])})" if name in same else "")
        step = max(1, len(ys) // 10)
        ax.plot(xs, ys, label=_wrapped(text), markersize=4,
                linewidth=2.2 if name == RECORDED else 1.3,
                markevery=(i * step // max(1, len(names)), step),
                **_look(names, name))  # fmt: skip


def _finish_lines(
    plt: Any, fig: Any, ax: Any, data: ChartData, path: Path, title: str, ylabel: str,
    groups: list[list[str]], below: Any = None,
) -> None:  # fmt: skip
    """Session boundaries, titles and a legend beside the axes (long names wrap), then save;
    the x axis (calls, on whole numbers) is labelled on `below`, a panel sharing it, if any."""
    where = "; grey lines: session boundaries" if data.boundaries else ""
    for axes in (ax, below) if below is not None else (ax,):
        if data.boundaries:
            axes.vlines([b - 0.5 for b in data.boundaries], 0, 1, colors="grey", alpha=0.6,
                        transform=axes.get_xaxis_transform(), linewidth=0.6)  # fmt: skip
        axes.grid(alpha=0.3)
    integer_ticks(ax.xaxis)  # shared with `below`'s
    ax.set_title(title)
    (ax if below is None else below).set_xlabel(
        f"API call (sessions laid end to end in start order{where})"
    )
    ax.set_ylabel(ylabel)
    if ax.lines:
        legend = ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                           title=_coincide_note(groups), title_fontsize=8)  # fmt: skip
        legend.get_title().set_multialignment("left")
    else:
        ax.text(0.5, 0.5, "no calls replayed", transform=ax.transAxes, ha="center")
    save(plt, fig, path)


def cumulative_cost(data: ChartData, path: Path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(12, 5.5))
    _lines(ax, data.cumulative_cost, data.names, data.same_cost,
           lambda name, ys: f"{name} (${float(ys[-1]) if len(ys) else 0.0:,.2f})")  # fmt: skip
    _finish_lines(plt, fig, ax, data, path, "Cumulative cost over calls, recorded vs each policy",
                  "cumulative cost (USD)", data.same_cost)  # fmt: skip


def context_size(data: ChartData, path: Path) -> None:
    """The main thread's prompt on each of its calls, a line per policy; the calls of the
    other threads (sub-agents, compaction), each its own conversation, as dots in a panel
    below, sharing the x axis: at their place among the calls, never joined to the main line."""
    import numpy as np

    plt = pyplot()
    # The recording is left out (the baseline's prompt is the recorded one): `_lines` draws
    # only the names with a series, each in its look of the cost chart.
    prompts = {n: xy for n, xy in data.prompt_k.items() if n != RECORDED}
    apart = {n: xy for n, xy in data.apart_prompt_k.items() if n != RECORDED and len(xy[1])}
    below = None
    if apart:
        fig, (ax, below) = plt.subplots(2, 1, sharex=True, figsize=(12, 7.5),
                                        height_ratios=(3, 1.4))  # fmt: skip
        dots = {"linestyle": "none", "markersize": 3, "alpha": 0.6}
        xs, first = next(iter(apart.values()))
        same = all(np.array_equal(ys, first) for _, ys in apart.values())
        if same:  # drawn per policy, the last policy's dots would hide the others'
            below.plot(xs, first, color="dimgrey", marker="o", **dots)
        else:
            for name, (_, ys) in apart.items():  # every policy has the same calls: same x
                below.plot(xs, ys, **{**_look(data.names, name), **dots})
        whose = "the same under every policy" if same else "each policy in its look above"
        below.set_title("calls of sub-agents (and compaction), each its own conversation, so "
                        f"dots, not a line: {whose}", fontsize=9)  # fmt: skip
        below.set_ylabel("prompt size\n(thousand tokens)")
    else:
        fig, ax = plt.subplots(figsize=(12, 5.5))
    _lines(ax, prompts, data.names, data.same_prompt, lambda name, ys: name)
    _finish_lines(plt, fig, ax, data, path, "Context size sent on each call of the main thread, "
                  "per policy", "main thread's prompt (thousand tokens)", data.same_prompt,
                  below)  # fmt: skip


def savings(data: ChartData, path: Path) -> None:
    """Per policy, the range of its savings against the no-pruning baseline: from net of the
    estimated re-fetches (the terminal's headline, labelled) to the simulated figure; and its
    simulated savings against the recorded spend."""
    plt = pyplot()
    rows = data.savings
    fig, ax = plt.subplots(figsize=(10, 1.6 + 0.5 * max(1, len(rows))))
    ys = list(range(len(rows)))
    sim = [r[1] for r in rows]
    net = [r[2] for r in rows]
    low = [min(a, b) for a, b in zip(sim, net, strict=True)]
    ax.barh(ys, [abs(a - b) for a, b in zip(sim, net, strict=True)], left=low, height=0.5,
            color="tab:blue", alpha=0.25,
            label="range: net of re-fetches to simulated")  # fmt: skip
    ax.scatter(sim, ys, marker="|", s=220, color="tab:blue", linewidths=2,
               label="simulated vs no pruning (baseline)", zorder=3)  # fmt: skip
    ax.scatter(net, ys, marker="o", s=40, color="tab:red", zorder=4,
               label="net of re-fetches vs baseline (headline)")  # fmt: skip
    ax.scatter([r[3] for r in rows], ys, marker="D", s=28, facecolors="none", color="dimgrey",
               zorder=3, label="simulated vs recorded spend")  # fmt: skip
    for y, value in zip(ys, net, strict=True):
        ax.annotate(f"{value:+.1f}%", (value, y), xytext=(0, 7), textcoords="offset points",
                    ha="center", va="bottom", fontsize=8, color="tab:red")  # fmt: skip
    ax.axvline(0, color="black", linewidth=0.8)
    ends = [0.0, *sim, *net, *(r[3] for r in rows)]
    pad = 0.1 * ((max(ends) - min(ends)) or 1.0)  # room for the labels of the extreme dots
    ax.set_xlim(min(ends) - pad, max(ends) + pad)
    ax.set_yticks(ys, [_wrapped(r[0]) for r in rows])
    ax.set_ylim(len(rows) - 0.4, -0.7)  # first policy on top; room for the top label
    ax.set_title("Savings by policy: net of re-fetches (dot) to simulated (bar end)")
    ax.set_xlabel(
        "savings (% of cost; negative = costs more)\n"
        + _wrap(f"baseline: {data.baseline}".replace("$", r"\$"), 110)
    )
    ax.grid(alpha=0.3, axis="x")
    if rows:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    else:
        ax.text(0.5, 0.5, "no policies to compare", transform=ax.transAxes, ha="center")
    save(plt, fig, path)


def break_timeline(data: ChartData, path: Path) -> None:
    """Each break of each policy, one row per policy; x = the session (numbered in start
    order), and within a session's stripe, where among its calls the break came."""
    plt = pyplot()
    names = data.names
    fig, ax = plt.subplots(figsize=(12, 1.6 + 0.45 * len(names)))
    if data.sessions <= _MAX_BANDS:
        for s in range(1, data.sessions, 2):
            ax.axvspan(s, s + 1, color="grey", alpha=0.1, linewidth=0)
    for cause in sorted(map(BreakCause, data.breaks), key=list(CAUSE_LOOKS).index):
        xs, rows = data.breaks[cause]
        look = CAUSE_LOOKS[cause]
        ax.scatter(xs, rows, label=f"{cause} ({len(xs)})", s=20, alpha=0.8, linewidths=0,
                   color=look.colour, marker=look.marker)  # fmt: skip
    ax.set_yticks(range(len(names)), [_wrapped(n) for n in names])
    ax.set_ylim(len(names) - 0.5, -0.5)
    if data.sessions <= 40:  # numbered at their stripes' middles
        ax.set_xticks([s + 0.5 for s in range(data.sessions)],
                      [str(s + 1) for s in range(data.sessions)])  # fmt: skip
    else:
        integer_ticks(ax.xaxis)
    ax.set_xlim(0, max(1, data.sessions))
    ax.set_title("Cache breaks by policy and cause, session by session")
    ax.set_xlabel("session (in start order; within each stripe, its calls in order)")
    if data.breaks:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), title="cause")
    else:
        ax.text(0.5, 0.5, "no cache breaks", transform=ax.transAxes, ha="center")
    ax.grid(alpha=0.3, axis="y")
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
    """The chart process: draw what the parent sends, one request (data, folder, chart names)
    at a time, until it sends None. matplotlib is imported at the first message: `_WARM`
    (a run that will draw: the import then overlaps its replay) or a request."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's: it stops this one
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a forked one has the parent's handler
    end_with(parent)
    # numpy's OpenBLAS starts a thread per core as it loads unless told otherwise; with none
    # this process can fork a child per chart (`_drawn`). The charts use no BLAS routine.
    forks = hasattr(os, "fork") and "numpy" not in sys.modules
    if forks:
        os.environ["OPENBLAS_NUM_THREADS"] = "1"
    imported = False
    while (request := conn.recv()) is not None:
        if not imported:
            pyplot()
            imported = True
        if request == _WARM:
            continue
        data, folder, names = request
        conn.send(_drawn(data, folder, names) if forks else _answer(data, folder, names))


def _drawn(data: ChartData, folder: Path, names: list[str]) -> str:
    """`_answer` for the charts NAMES, the first drawn here and each other one at the same time
    in a child forked from here (matplotlib imported, the fonts loaded): the three charts drawn
    after the tables took 1.3 s of wall time one after the other on the 523 MB replica."""
    children, me = [], Parent.current()
    for name in names[1:]:
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover (the child ends in os._exit: coverage never sees it)
            try:
                os.close(read)
                end_with(me)
                os.write(write, _answer(data, folder, [name]).encode())
            finally:
                os._exit(0)
        os.close(write)
        children.append((pid, read))
    answers = [_answer(data, folder, names[:1])]
    for pid, read in children:
        with open(read, "rb") as pipe:
            answer = pipe.read().decode()
        _, status = os.waitpid(pid, 0)
        answers.append(answer or f"a chart's process ended with status {status}")
    return next((a for a in answers if a != "ok"), "ok")


def _answer(data: ChartData, folder: Path, names: list[str]) -> str:
    """Draw the charts NAMES: "ok", or why they could not be drawn (for the parent, which
    fails the write)."""
    try:
        draw_all(data, folder, names)
    except OSError as exc:  # the system's reason alone: the path is a temporary one
        return exc.strerror or f"{type(exc).__name__}: {exc}"
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return "ok"


_WARM = "import matplotlib"  # the message that has the chart process import it now
# How often a wait on the chart process returns to Python. polars (2.1) takes SIGINT over once
# imported, restarting the system call it interrupts: a wait blocked in one never saw a Ctrl-C
# (a chart process that hangs: matplotlib waits on a matplotlibrc that is a FIFO).
_POLL_SECONDS = 0.1
# Modules that start threads: forking after one of them is loaded can deadlock the child.
_THREADED = ("polars", "pyarrow", "numpy")


class ChartProcess:
    """Draws the replay charts in another process.

    Start it before the replay, and `warm` it once the replay has work to do (a unit that was
    not kept: mcsim.replay.result_cache): matplotlib's import then overlaps the replay, and the
    drawing overlaps writing the tables. A run whose charts are all kept (chart_cache) never
    warms it, and it never imports matplotlib. It is forked while that is safe (nothing that
    starts threads is loaded yet: the command line's case, and the cheapest), else spawned.
    One process: a second one drew faster but its matplotlib import slowed the replay more
    (measured); the charts of one request are drawn at once by children it forks once
    matplotlib is imported (`_drawn`).
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
        self._warm = False

    def warm(self) -> None:
        """Have the process import matplotlib now, not at the first chart asked for."""
        if not self._warm:
            self._warm = True
            self._join_sender()
            with contextlib.suppress(OSError):  # `wait` reports a process that died
                self._conn.send(_WARM)

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
            while self._sender.is_alive():  # a request larger than the pipe: sent as it reads
                self._sender.join(_POLL_SECONDS)
            self._sender = None

    def wait(self) -> None:
        """Wait for every chart asked for, then let the process end."""
        self._join_sender()
        answers = []
        try:
            for _ in range(self._pending):
                while not self._conn.poll(_POLL_SECONDS):
                    pass
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
