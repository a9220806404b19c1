"""A self-contained cost review from a run directory: `report.html` and `report.md`.

Written for readers who have never heard of mcsim: what was analysed, what it really cost,
how well the prompt cache worked and why it broke, what each pruning policy would have cost
(and how much of what it cleared the agent needed again), the sweep and its recommendation,
how far the replay can be trusted, and the caveats. The HTML embeds its charts as data URIs
and references nothing outside itself, so it opens from a file with no network.
"""

from __future__ import annotations

import base64
import html
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from mcsim.errors import UsageError
from mcsim.text import NAME_LIMIT, TEXT_LIMIT, markdown, printable

CHART_CAPTIONS = {
    "cumulative_cost.png": "Cumulative cost over all calls, as recorded and under each policy.",
    "savings.png": "Savings by policy, against no pruning and against the recorded spend.",
    "context_size.png": "Context (prompt) size sent on each call under each policy.",
    "break_timeline.png": "When the prompt cache broke, by policy and cause.",
    "savings_curve.png": "Savings over the swept parameter (solid: as simulated; dashed: "
    "net of re-fetches).",
    "risk_tradeoff.png": "Each variant's net savings against its re-fetch risk; the Pareto "
    "front joins the variants no other beats on both.",
}
CAUSES = {
    "ttl_expired": "the cache entry expired during an idle gap longer than its TTL",
    "compaction": "the conversation was compacted (expected)",
    "model_switch": "the model changed (each model has its own cache)",
    "policy_clearing": "a pruning policy rewrote or deleted old content (expected)",
    "prefix_changed": "the start of the prompt changed while the cache was warm",
    "unknown": "nothing was read although the cache should have been warm",
}


@dataclass(frozen=True)
class Section:
    """One part of the report, in plain text: names are shortened when it is built, and each
    renderer escapes everything for its format, so nothing is escaped twice."""

    title: str
    paragraphs: list[str]
    table: tuple[list[str], list[list[str]]] | None = None
    charts: tuple[str, ...] = ()


def build_report(run_dir: Path) -> tuple[Path, Path]:
    """Write report.html and report.md into `run_dir` (a replay or sweep run directory)."""
    run_file = run_dir / "run.json"
    try:
        run = orjson.loads(run_file.read_bytes())
    except OSError:
        raise UsageError(f"{run_dir}: not a run directory (no run.json)") from None
    except orjson.JSONDecodeError:
        raise UsageError(f"{run_file}: not valid JSON") from None
    kind = "sweep" if (run_dir / "sweep.parquet").exists() else "replay"
    if kind == "replay" and not (run_dir / "summary.parquet").exists():
        raise UsageError(f"{run_dir}: neither summary.parquet nor sweep.parquet is there")
    sections = _sections(run, run_dir, kind)
    title = f"Prompt-cache and pruning cost review ({kind})"
    html_path, md_path = run_dir / "report.html", run_dir / "report.md"
    _atomic_write(html_path, _html(title, run, sections, run_dir))
    _atomic_write(md_path, _markdown(title, run, sections))
    return html_path, md_path


def _atomic_write(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)


def _name(value: object, limit: int = NAME_LIMIT) -> str:
    """A name from the run (project, model, policy), shortened for the reader."""
    return printable(value, limit=limit)


def _usd(x: float) -> str:
    return f"${x:,.2f}" if abs(x) >= 1 else f"${x:,.4f}"


def _sections(run: dict[str, Any], run_dir: Path, kind: str) -> list[Section]:
    import polars as pl

    a = run.get("analysed", {})
    rec = run.get("recorded", {})
    fid = run.get("fidelity", {})
    out = [
        Section(
            "What was analysed",
            [
                f"{a.get('sessions', 0)} sessions of a coding agent (Claude Code transcripts), "
                f"{a.get('calls', 0):,} model calls, from {str(a.get('start', '?'))[:10]} to "
                f"{str(a.get('end', '?'))[:10]}, in {len(a.get('projects', []))} projects.",
                "Models: " + (", ".join(map(_name, a.get("models", []))) or "none") + ".",
                "Projects: " + (", ".join(map(_name, a.get("projects", []))) or "none") + ".",
            ],
        ),
        Section(
            "What it really cost",
            [
                f"Recorded spend at list prices: {_usd(rec.get('cost_usd', 0.0))}"
                + (
                    f" ({rec['unpriced_calls']} calls of unknown models not priced)"
                    if rec.get("unpriced_calls")
                    else ""
                )
                + ".",
                "An agent re-sends the whole conversation on every call; a prompt cache makes "
                "re-sent tokens cheap (a cache read costs a tenth of normal input). "
                f"{100 * rec.get('cache_hit_ratio', 0.0):.1f}% of all prompt tokens were "
                "read from the cache.",
            ],
            (
                ["tokens", "count"],
                [
                    ["uncached input", f"{rec.get('input_tokens', 0):,}"],
                    ["written to cache (5-minute)", f"{rec.get('cache_write_5m_tokens', 0):,}"],
                    ["written to cache (1-hour)", f"{rec.get('cache_write_1h_tokens', 0):,}"],
                    ["read from cache", f"{rec.get('cache_read_tokens', 0):,}"],
                    ["output", f"{rec.get('output_tokens', 0):,}"],
                ],
            ),
        ),
    ]
    causes = rec.get("breaks_by_cause", {})
    out.append(
        Section(
            "When the cache broke, and why",
            [
                f"A cache break is a call that read much less from the cache than the call "
                f"before it (more than 5% and 2,000 tokens less), so it paid to write the "
                f"conversation again. The recording has {rec.get('cache_breaks', 0)}.",
            ],
            (
                ["cause", "breaks", "meaning"],
                [[_name(c), str(n), CAUSES.get(c, "")] for c, n in causes.items()],
            )
            if causes
            else None,
            ("break_timeline.png",) if kind == "replay" else (),
        )
    )
    # glob=False: a run directory named with `[` or `*` is a path, not a pattern.
    if kind == "replay":
        out.append(_policy_section(pl.read_parquet(run_dir / "summary.parquet", glob=False)))
    else:
        out.append(_sweep_section(run, pl.read_parquet(run_dir / "sweep.parquet", glob=False)))
    over = fid.get("sessions_over_threshold", [])
    out.append(
        Section(
            "How far to trust the numbers",
            [
                "Every policy is replayed by the same simulation. Replayed without pruning "
                "and with the recorded cache lifetime, it should reproduce what was really "
                f"read from and written to the cache: its error is "
                f"{100 * fid.get('overall_error', 0.0):.3f}% overall and "
                f"{100 * fid.get('worst_session_error', 0.0):.3f}% in the worst session"
                + (
                    f"; {len(over)} sessions exceed the {100 * fid.get('threshold', 0.05):.0f}%"
                    " threshold and their results are less certain."
                    if over
                    else "."
                ),
            ],
        )
    )
    out.append(
        Section(
            "Caveats",
            [
                *[n[0].upper() + n[1:] + "." for n in run.get("notes", [])],
                f"Prices: table {_name(run.get('price_table', '?'))} (Anthropic list prices); "
                "negotiated prices differ.",
                "Compactions are kept where they were recorded; each policy reports whether "
                "the prompt would still have grown large enough to trigger them.",
                "A re-fetch hazard is a cleared result whose file or command the agent used "
                "again later; content referred to without a repeated tool call is not counted.",
                f"Made by mcsim {run.get('mcsim_version', '?')} on "
                f"{str(run.get('created', '?'))[:10]}.",
            ],
        )
    )
    return out


def _policy_section(summary: Any) -> Section:
    rows = []
    for r in summary.iter_rows(named=True):
        is_recorded = r["policy"] == "recorded"
        rows.append(
            [
                _name(r["policy"]),
                _usd(r["cost_usd"]),
                "" if is_recorded else f"{r['savings_vs_baseline_pct']:+.1f}%",
                "" if is_recorded else f"{r['net_savings_vs_baseline_pct']:+.1f}%",
                f"{r['cleared_tokens']:,}",
                f"{100 * r['refetch_risk']:.0f}%" if r["cleared_results"] else "",
                f"{100 * r['cache_hit_ratio']:.1f}%",
                str(r["cache_breaks"]),
            ]
        )
    return Section(
        "What each pruning policy would have cost",
        [
            "Each policy clears old tool results (file reads, command output) from the "
            "conversation to make prompts smaller. Smaller prompts cost less, but rewriting "
            "old content breaks the prompt cache, which can cost more than it saves. "
            "'Savings' compares with the same sessions replayed without pruning; 'net' also "
            "pays for results the agent needed again (re-fetch risk: the share of cleared "
            "results it used again).",
        ],
        (
            [
                "policy",
                "cost",
                "savings",
                "net",
                "cleared tokens",
                "re-fetch risk",
                "cache hit",
                "breaks",
            ],
            rows,
        ),
        ("cumulative_cost.png", "savings.png", "context_size.png"),
    )


def _sweep_section(run: dict[str, Any], sweep: Any) -> Section:
    import polars as pl

    variants = sweep.filter(pl.col("level") == "variant")
    rows = [
        [
            _name(r["variant"], TEXT_LIMIT) + (" (recommended)" if r["recommended"] else ""),
            _usd(r["cost_usd"]),
            f"{r['savings_vs_baseline_pct']:+.1f}%",
            f"{r['net_savings_vs_baseline_pct']:+.1f}%",
            f"{r['cleared_tokens']:,}",
            f"{100 * r['refetch_risk']:.0f}%",
            str(r["cache_breaks"]),
        ]
        for r in variants.iter_rows(named=True)
    ]
    rec = run.get("recommendation") or {}
    text = (
        f"Recommendation: {_name(rec.get('name'), TEXT_LIMIT)}, for the {rec.get('reason', '')}."
        if rec.get("name")
        else f"No recommendation: {rec.get('reason', 'no variant qualified')}."
    )
    return Section(
        "Tuning: every variant of the policy",
        [
            f"Variants of policy '{_name(run.get('options', {}).get('policy', '?'))}' over "
            + ", ".join(_name(g, TEXT_LIMIT) for g in run.get("options", {}).get("grid", []))
            + f"; the no-pruning replay costs {_usd(run.get('baseline_cost_usd', 0.0))}.",
            text,
        ],
        (["variant", "cost", "savings", "net", "cleared tokens", "re-fetch risk", "breaks"], rows),
        ("savings_curve.png", "risk_tradeoff.png"),
    )


_NUMERIC = re.compile(r"^[+\-$]?[\d,.$]+%?$")
_CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;max-width:980px;margin:2em auto;
padding:0 1em;color:#1d1d1f;line-height:1.5}
h1{font-size:1.6em;border-bottom:2px solid #ddd;padding-bottom:.3em}
h2{font-size:1.25em;margin-top:1.8em}
table{border-collapse:collapse;margin:1em 0;font-size:.92em}
th,td{border:1px solid #ccc;padding:.35em .7em;text-align:left}
th{background:#f3f3f3}
td.n{text-align:right}
figure{margin:1.2em 0}
figure img{max-width:100%;border:1px solid #eee}
figcaption{font-size:.88em;color:#555}
.meta{color:#666;font-size:.9em}
"""


_BRACKETS = str.maketrans({"[": "&#91;", "]": "&#93;"})


def _html_text(value: object) -> str:
    """Any text as HTML that shows it: no tag, no attribute break, no control character, and
    brackets as references too, so the file holds no Markdown link or image for a tool that
    scans or converts it (the page looks the same)."""
    return html.escape(printable(value)).translate(_BRACKETS)


def _html(title: str, run: dict[str, Any], sections: list[Section], run_dir: Path) -> str:
    e = _html_text
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{e(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{e(title)}</h1>",
        f'<p class="meta">Run of {e(str(run.get("created", "")))} over '
        f"{e(', '.join(run.get('paths', [])) or 'the default transcript folders')}; policy "
        f"file {e(str(run.get('policy_file', '')))}.</p>",
    ]
    for section in sections:
        parts.append(f"<h2>{e(section.title)}</h2>")
        parts.extend(f"<p>{e(p)}</p>" for p in section.paragraphs)
        if section.table:
            head, rows = section.table
            parts.append("<table><thead><tr>")
            parts.extend(f"<th>{e(h)}</th>" for h in head)
            parts.append("</tr></thead><tbody>")
            for row in rows:
                cells = "".join(
                    f'<td class="n">{e(c)}</td>' if _NUMERIC.match(c) else f"<td>{e(c)}</td>"
                    for c in row
                )
                parts.append(f"<tr>{cells}</tr>")
            parts.append("</tbody></table>")
        for chart in section.charts:
            path = run_dir / chart
            if not path.exists():
                continue
            data = base64.b64encode(path.read_bytes()).decode()
            caption = CHART_CAPTIONS.get(chart, chart)
            parts.append(
                f'<figure><img alt="{e(caption)}" src="data:image/png;base64,{data}">'
                f"<figcaption>{e(caption)}</figcaption></figure>"
            )
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _markdown(title: str, run: dict[str, Any], sections: list[Section]) -> str:
    """The report as Markdown; every paragraph, cell and caption goes through markdown(), so
    what the run holds renders as the text it is (titles are mcsim's own)."""
    lines = [f"# {title}", ""]
    for section in sections:
        lines += [f"## {section.title}", ""]
        for p in section.paragraphs:
            lines += [markdown(p), ""]
        if section.table:
            head, rows = section.table
            lines.append("| " + " | ".join(map(markdown, head)) + " |")
            lines.append("|" + "---|" * len(head))
            lines += ["| " + " | ".join(map(markdown, row)) + " |" for row in rows]
            lines.append("")
        for chart in section.charts:
            lines += [f"![{markdown(CHART_CAPTIONS.get(chart, chart))}]({chart})", ""]
    return "\n".join(lines)
