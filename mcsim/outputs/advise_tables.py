"""What `mcsim advise cache` prints and writes: the advice as text (80 columns), as JSON, and
the chart of the idle gaps with the break-even points marked (mcsim.replay.advise)."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from mcsim.replay.advise import ALL, NAMING, CacheAdvice, GroupAdvice, Option
from mcsim.text import NAME_LIMIT, printable


def _number(x: float) -> float | None:
    return None if math.isnan(x) else x


def _option_json(o: Option, recorded_usd: float) -> dict[str, Any]:
    return {
        "name": o.name,
        "cost_usd": o.cost_usd,
        "saved_usd": recorded_usd - o.cost_usd,
        "saved_pct": 100 * (recorded_usd - o.cost_usd) / recorded_usd if recorded_usd else 0.0,
        "pings": o.pings,
        "ping_cost_usd": o.ping_usd,
        "cache_write_tokens": o.write_tokens,
        "cache_read_tokens": o.read_tokens,
        "policy_yaml": o.policy,
        "if_longer_gaps_paid": _paid_json(o, recorded_usd),
    }


def _paid_json(o: Option, recorded_usd: float) -> dict[str, Any] | None:
    """The option's figures under the other reading of its longer gaps (pings paid in gaps
    of max_idle_minutes or more); None when it has no pings or they make no difference."""
    if not o.paid_differs:
        return None
    saved = recorded_usd - o.paid_cost_usd
    return {
        "cost_usd": o.paid_cost_usd,
        "saved_usd": saved,
        "saved_pct": 100 * saved / recorded_usd if recorded_usd else 0.0,
        "pings": o.paid_pings,
    }


def _group_json(a: GroupAdvice) -> dict[str, Any]:
    return {
        "group": a.group,
        "sessions": a.sessions,
        "threads": a.threads,
        "recorded_cost_usd": a.recorded_usd,
        "pick": a.pick.name,
        "pick_policy_yaml": a.pick.policy,
        "cost_usd": a.pick.cost_usd,
        "saved_usd": a.saved_usd,
        "saved_pct": a.saved_pct,
        "saved_interval_pct": (
            None if math.isnan(a.low_pct) else [_number(a.low_pct), _number(a.high_pct)]
        ),
        "interval": a.interval_text(),
        "pings": a.pick.pings,
        "ping_cost_usd": a.pick.ping_usd,
        "if_longer_gaps_paid": _paid_json(a.pick, a.recorded_usd),
        "reason": a.reason,
        "options": [_option_json(o, a.recorded_usd) for o in a.options],
    }


def advice_json(advice: CacheAdvice) -> dict[str, Any]:
    """The advice as JSON: the whole input's, then each project's, per group of threads."""
    return {
        "variants": list(advice.variants),
        "openai_only": advice.openai_only,
        "overall": [_group_json(a) for a in advice.overall],
        "projects": {
            p: [_group_json(a) for a in groups] for p, groups in sorted(advice.projects.items())
        },
        "breakevens_minutes": [{"minutes": m, "what": w} for m, w in advice.breakevens],
        "idle_gaps": {
            group: {"count": len(g), "median_minutes": _median(g)}
            for group, g in advice.gaps.minutes.items()
        },
    }


def _median(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _usd(x: float, digits: int = 2) -> str:
    return f"{x:,.{digits}f}"


def _digits(recorded_usd: float) -> int:
    """Cents for a group that cost $10 or more, else hundredths of a cent (a small input's
    differences would all read 0.00)."""
    return 2 if recorded_usd >= 10 else 4


def _wrapped(text: str, indent: str = "  ") -> list[str]:
    import textwrap

    from mcsim.text import terminal_width

    width = min(terminal_width() or 80, 100)
    return textwrap.wrap(text, width=width, subsequent_indent=indent, break_long_words=False,
                         break_on_hyphens=False)  # fmt: skip


def advice_text(advice: CacheAdvice, out_dir: str | None = None) -> str:
    """The advice for a terminal of 80 columns: per group, every variant's cost and savings
    against what was recorded, the pick marked; then the pick's interval and reason; then a
    line per project."""
    from mcsim.outputs.terminal import table

    lines: list[str] = []
    groups = [a for a in advice.overall if a.group != ALL]
    for a in advice.overall:
        if a.group == ALL and len(groups) == 1:
            lines.append(f"{a.group}: as {groups[0].group} (no other threads)")
            lines.append("")
            continue
        d = _digits(a.recorded_usd)
        lines.append(
            f"{a.group}: {a.threads:,} thread{'' if a.threads == 1 else 's'} in "
            f"{a.sessions:,} session{'' if a.sessions == 1 else 's'}, recorded "
            f"${_usd(a.recorded_usd, d)}"
        )
        rows = []
        for o in a.options:
            saved = a.recorded_usd - o.cost_usd
            pct = 100 * saved / a.recorded_usd if a.recorded_usd else 0.0
            mark = "*" if o is a.pick else ""
            rows.append([
                mark + printable(o.name, limit=NAME_LIMIT), _usd(o.cost_usd, d),
                _usd(saved, d), f"{pct:+.1f}%", f"{o.pings:,}", _usd(o.ping_usd, d),
            ])  # fmt: skip
        lines += table(["variant", "cost $", "saved $", "saved", "pings", "ping $"], rows,
                       right={1, 2, 3, 4, 5}, key=1)  # fmt: skip
        lines += _wrapped(
            f"pick: {printable(a.pick.name, limit=NAME_LIMIT)}, saves "
            f"${_usd(a.saved_usd, d)} ({a.saved_pct:+.1f}%; {a.interval_text()})"
        )
        if a.pick.paid_differs:
            paid = a.recorded_usd - a.pick.paid_cost_usd
            pct = 100 * paid / a.recorded_usd if a.recorded_usd else 0.0
            lines += _wrapped(
                f"if its pings also went out in gaps of max_idle_minutes or more (a scheduler "
                f"that cannot see the user's return: {a.pick.paid_pings:,} pings), it saves "
                f"${_usd(paid, d)} ({pct:+.1f}%)"
            )
        lines += _wrapped(f"why: {printable(a.reason, limit=1000)}")
        lines.append("")
    pick = advice.pick
    lines.append("the pick as a policy file (mcsim replay --policy FILE gives its cost):")
    lines += ["  " + line for line in pick.pick.policy.rstrip("\n").splitlines()]
    if advice.projects:
        lines.append("")
        lines.append("per project (all threads; the picks for main threads / sub-agents):")
        rows = []
        d = _digits(pick.recorded_usd)
        for project, project_groups in sorted(advice.projects.items()):
            whole = next(g for g in project_groups if g.group == ALL)
            apart = " / ".join(g.pick.name for g in project_groups if g.group != ALL)
            rows.append([
                printable(project, limit=NAME_LIMIT), printable(whole.pick.name, limit=NAME_LIMIT),
                _usd(whole.saved_usd, d), f"{whole.saved_pct:+.1f}%", printable(apart, limit=200),
            ])  # fmt: skip
        lines += table(["project", "pick", "saved $", "saved", "main / sub-agents"], rows,
                       right={2, 3}, key=1)  # fmt: skip
    lines.append("")
    lines += _wrapped(
        "saved: against what was recorded; pings are keep-warm requests, priced apart "
        f"(ping $) and included in cost $; {NAMING}",
        "",
    )
    if out_dir is not None:
        lines.append(f"wrote {printable(out_dir)}/ (advice.json, idle_gaps.png, replay tables)")
    return "\n".join(lines)


def idle_gaps_chart(advice: CacheAdvice, path: Path) -> None:
    """The idle gaps between consecutive calls of a thread (minutes, log scale), main threads
    and sub-agents apart, with the break-even points marked."""
    import numpy as np

    from mcsim.outputs.charts import finish, integer_ticks, pyplot

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(10, 5.2))
    every = [v for g in advice.gaps.minutes.values() for v in g if v > 0]
    low = max(min(every, default=0.1), 0.05)
    high = max(max(every, default=600.0), 300.0)
    bins = np.geomspace(low, high * 1.01, 40)
    colours = {"main": "tab:blue", "sub-agents": "tab:orange"}
    for group, values in advice.gaps.minutes.items():
        shown = [v for v in values if v > 0]
        if shown:
            ax.hist(shown, bins=bins, alpha=0.55, color=colours.get(group, "tab:grey"),
                    label=f"{group} ({len(shown):,} gaps)")  # fmt: skip
    ax.set_xscale("log")
    ticks = [t for t in (0.1, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1440, 2880, 10080)
             if bins[0] <= t <= bins[-1]]  # fmt: skip
    ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
    ax.set_xlim(bins[0], bins[-1])
    integer_ticks(ax.yaxis)
    marks = list(advice.breakevens)
    warm = advice.pick.pick.policy
    pick = advice.pick.pick.name
    found = next((o for o in advice.pick.options if o.name == pick), None)
    longest = re.search(r"max_idle_minutes: ([0-9.]+)", warm)
    if found is not None and found.pings and longest is not None:
        marks.append(
            (float(longest[1]), "longer gaps get none of the pick's pings (max_idle_minutes)")
        )
    # Okabe and Ito's colours (as the break causes'), each with a dash of its own
    looks = (("#000000", "--"), ("#0072B2", ":"), ("#D55E00", "-."), ("#009E73", (0, (5, 1))),
             ("#CC79A7", (0, (1, 3))))  # fmt: skip
    for i, (minutes, what) in enumerate(marks):
        colour, dash = looks[i % len(looks)]
        ax.axvline(minutes, color=colour, linestyle=dash, linewidth=1.6,
                   label=f"{minutes:g} min: {what}")  # fmt: skip
        ax.annotate(f"{minutes:g}m", (minutes, 1.0), xycoords=("data", "axes fraction"),
                    xytext=(3, -12 - 11 * i), textcoords="offset points", fontsize=8,
                    color=colour)  # fmt: skip
    finish(
        plt, fig, ax, path,
        f"Idle gaps between calls, and where each cache choice breaks even (pick: {pick})"[:110],
        "gap between consecutive calls of a thread (minutes, log scale)",
        "gaps",
        legend_below=True,
    )  # fmt: skip
