"""What a replay writes and prints: Parquet tables, run.json, charts, the summary table, JSON."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcsim.accounting.recorded import savings_pct
from mcsim.outputs.charts import ChartProcess
from mcsim.outputs.rows_sink import (
    REPLAY_BREAKS_SCHEMA as REPLAY_BREAKS_SCHEMA,
)
from mcsim.outputs.rows_sink import (
    REPLAY_CALLS_SCHEMA as REPLAY_CALLS_SCHEMA,
)
from mcsim.outputs.rows_sink import (
    REPLAY_SESSIONS_SCHEMA,
    RowsSink,
    breaks_columns_frame,
    rows_frame,
    session_rows,
)
from mcsim.outputs.run_dir import run_header, write_json, write_run_dir
from mcsim.outputs.tables import frame, write_dataset, write_parquet
from mcsim.replay.results import PolicyTotals
from mcsim.replay.run import RECORDED, ReplayReport
from mcsim.replay.scenario import BASELINE, cache_settings, is_baseline

if TYPE_CHECKING:
    from mcsim.replay.verdict import Verdict

from mcsim.text import MESSAGE_LIMIT, NAME_LIMIT, counted, printable

CACHE_EDIT_NOTE = (
    "cache edits (cached_microcompact) are modelled: deleted tokens stop being billed from "
    "the call that carries the edit (neither read nor written again), with no write penalty, "
    "and the drop in reads they cause is not a cache break (not documented by Anthropic)"
)

SUMMARY_SCHEMA: dict[str, str] = {
    "policy": "str", "description": "str", "cache": "str", "baseline": "str", "cost_usd": "float",
    "saved_usd": "float", "net_saved_usd": "float",
    "savings_vs_recorded_pct": "float", "savings_vs_baseline_pct": "float",
    "cleared_tokens": "int", "input_tokens": "int", "cache_write_5m_tokens": "int",
    "cache_write_1h_tokens": "int", "cache_read_tokens": "int", "output_tokens": "int",
    "cache_hit_ratio": "float", "mean_context_tokens": "float", "max_prompt_tokens": "int",
    "cache_breaks": "int", "cache_edit_drops": "int", "cache_drops": "int",
    "unexpected_breaks": "int", "unpriced_calls": "int", "compactions": "int",
    "compactions_still_reached": "int", "cleared_results": "int", "refetch_hazards": "int",
    "refetch_unassessed": "int", "refetch_risk": "float", "refetch_cost_usd": "float",
    "net_savings_vs_baseline_pct": "float",
    "net_savings_low_pct": "float", "net_savings_high_pct": "float",
    "net_savings_if_edits_reread_pct": "float", "net_savings_if_other_cleared_set_pct": "float",
    "verdict": "bool", "pings": "int", "ping_cost_usd": "float",
    "fidelity_overall_error": "float",
    "fidelity_worst_session_error": "float", "fidelity_ok": "bool",
}  # fmt: skip


def _utc(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


_pct = savings_pct


def _refetch_fields(t: PolicyTotals, baseline_usd: float) -> dict[str, Any]:
    """The re-fetch risk of a policy (null when no cleared result could be assessed), and its
    savings with the re-fetches paid."""
    return {
        "cleared_results": t.cleared_results,
        "refetch_hazards": t.refetch_hazards,
        "refetch_unassessed": t.refetch_unassessed,
        "refetch_risk": t.refetch_risk if t.refetch_known else None,
        "refetch_cost_usd": t.refetch_cost_usd,
        "net_savings_vs_baseline_pct": _pct(t.net_cost_usd, baseline_usd),
    }


def risk_text(t: PolicyTotals) -> str:
    """Re-fetch risk as the summary prints it: hazards of the assessed cleared results, and
    how many were not assessed (their tools' calls have no resource keys: refetch.py)."""
    if not t.cleared_results:
        return ""
    if not t.refetch_known:
        return f"unknown ({t.cleared_results} not assessed)"
    text = f"{t.refetch_hazards}/{t.refetch_assessed} ({100 * t.refetch_risk:.0f}%)"
    return text + (f", {t.refetch_unassessed} not assessed" if t.refetch_unassessed else "")


def _policy_rows(report: ReplayReport) -> list[tuple[str, str, PolicyTotals]]:
    rows = [(RECORDED, "as recorded", report.recorded)]
    rows += [(s.name, s.description, s.totals) for s in report.summaries()]
    return rows


def verdict(report: ReplayReport) -> Verdict:
    """The report's verdict (mcsim.replay.verdict). Imported when first asked for: it needs
    numpy, which must not be loaded before the replay forks its workers."""
    from mcsim.replay.verdict import verdict as drawn

    return drawn(report)


def _caches(report: ReplayReport) -> dict[str, str]:
    """Each run's cache settings in words (cache_settings), the recording's included."""
    return {RECORDED: "cache as recorded", **{s.name: cache_settings(s) for s in report.scenarios}}


def _saved(t: PolicyTotals, report: ReplayReport) -> dict[str, float]:
    """Dollars saved against what was recorded, as simulated and with re-fetches paid."""
    return {
        "saved_usd": report.recorded.cost_usd - t.cost_usd,
        "net_saved_usd": report.recorded.cost_usd - t.net_cost_usd,
    }


def _uncertain(name: str, verdict: Verdict) -> dict[str, Any]:
    """A policy's 95% interval of net savings and its figure if cache edits' deleted tokens
    were billed as reads (None: no interval, no cache edits), and whether it is the verdict's."""
    found = next((o for o in verdict.results if o.variant.name == name), None)
    numbers = (math.nan,) * 4 if found is None else (
        found.low_pct, found.high_pct, found.reread_net_pct, found.other_cleared_set_net_pct,
    )  # fmt: skip
    low, high, reread, other = (None if math.isnan(x) else x for x in numbers)
    chosen = verdict.best is not None and verdict.best.variant.name == name
    return {"net_savings_low_pct": low, "net_savings_high_pct": high,
            "net_savings_if_edits_reread_pct": reread,
            "net_savings_if_other_cleared_set_pct": other, "verdict": chosen}  # fmt: skip


def summary_frame(report: ReplayReport) -> Any:
    fidelity_ok = not report.sessions_over_threshold()
    caches, against, chosen = _caches(report), report.baseline_text(), verdict(report)
    rows = []
    for name, description, t in _policy_rows(report):
        rows.append(
            {
                "policy": name,
                "description": description,
                "cache": caches[name],
                "baseline": against,
                "cost_usd": t.cost_usd,
                **_saved(t, report),
                "savings_vs_recorded_pct": _pct(t.cost_usd, report.recorded.cost_usd),
                "savings_vs_baseline_pct": _pct(t.cost_usd, report.baseline.cost_usd),
                "cleared_tokens": t.cleared_tokens,
                "input_tokens": t.tokens.input_tokens,
                "cache_write_5m_tokens": t.tokens.cache_write_5m_tokens,
                "cache_write_1h_tokens": t.tokens.cache_write_1h_tokens,
                "cache_read_tokens": t.tokens.cache_read_tokens,
                "output_tokens": t.tokens.output_tokens,
                "cache_hit_ratio": t.tokens.cache_hit_ratio,
                "mean_context_tokens": t.context_tokens / t.calls if t.calls else 0.0,
                "max_prompt_tokens": t.max_prompt_tokens,
                "cache_breaks": t.cache_breaks,
                "cache_edit_drops": t.cache_edit_drops,
                "cache_drops": t.cache_drops,
                "unexpected_breaks": t.unexpected_breaks,
                "unpriced_calls": t.unpriced_calls,
                "compactions": t.compactions,
                "compactions_still_reached": t.compactions_still_reached,
                **_refetch_fields(t, report.baseline.cost_usd),
                **_uncertain(name, chosen),
                "pings": t.pings,
                "ping_cost_usd": t.ping_cost_usd,
                "fidelity_overall_error": report.fidelity_overall,
                "fidelity_worst_session_error": report.fidelity_worst,
                "fidelity_ok": fidelity_ok,
            }
        )
    return frame(rows, SUMMARY_SCHEMA)


def sessions_frame(report: ReplayReport) -> Any:
    """Every session's row under each policy, from the totals the report holds (a replay
    without a `RowsSink`)."""
    return frame([r for s in report.results for r in session_rows(s)], REPLAY_SESSIONS_SCHEMA)


def run_names(report: ReplayReport) -> list[str]:
    """The runs of a replay in table order: the recording, then each scenario's."""
    return [RECORDED, *(s.name for s in report.scenarios)]


def calls_frame(report: ReplayReport) -> Any:
    """Every call of every policy (and of the recording), ordered by policy, session, thread
    and call, from the rows the report holds (a replay without a `RowsSink`)."""
    return rows_frame(report.call_rows())


def breaks_frame(report: ReplayReport) -> Any:
    """Every break, session by session, from the rows the report holds."""
    return breaks_columns_frame([s.break_columns for s in report.results if s.break_columns])


def run_record(
    report: ReplayReport,
    paths: list[str],
    policy_file: Path,
    options: dict[str, Any],
    preset: str | None = None,
    with_verdict: bool = True,
) -> dict[str, Any]:
    """Everything needed to reproduce the run; `preset` names the built-in preset that
    `policy_file` is (null for a user's file), its text and hash are recorded either way.
    `with_verdict`: the replay's verdict (a sweep states its recommendation instead)."""
    policy_bytes = policy_file.read_bytes()
    return {
        **run_header(paths, report.stats),
        "policy_file": str(policy_file),
        "policy_preset": preset,
        "policy_file_sha256": hashlib.sha256(policy_bytes).hexdigest(),
        "policy_file_text": policy_bytes.decode("utf-8", "replace"),
        "scenarios": [{"name": s.name, "description": s.describe()} for s in report.scenarios],
        "price_table": report.price_table,
        "options": options,
        "notes": [
            CACHE_EDIT_NOTE,
            "output tokens are taken as recorded (a lower bound)",
            *report.layer_notes(),
        ],
        **run_summary(report),
        **({"verdict": verdict(report).as_json()} if with_verdict else {}),
    }


def run_summary(report: ReplayReport) -> dict[str, Any]:
    """What `mcsim report` shows that the tables do not hold: the input, the recording, the
    fidelity of the replay."""
    sessions = report.sessions
    rec = report.recorded
    return {
        "pings": ping_lines(report),
        "analysed": {
            "sessions": len(sessions),
            "calls": rec.calls,
            "start": _utc(min(s.start_s for s in sessions)).isoformat() if sessions else None,
            "end": _utc(max(s.end_s for s in sessions)).isoformat() if sessions else None,
            "projects": sorted({s.project for s in sessions}),
            "models": sorted({m for s in sessions for m in s.models}),
        },
        "recorded": {
            "cost_usd": rec.cost_usd,
            "unpriced_calls": rec.unpriced_calls,
            "input_tokens": rec.tokens.input_tokens,
            "cache_write_5m_tokens": rec.tokens.cache_write_5m_tokens,
            "cache_write_1h_tokens": rec.tokens.cache_write_1h_tokens,
            "cache_read_tokens": rec.tokens.cache_read_tokens,
            "output_tokens": rec.tokens.output_tokens,
            "cache_hit_ratio": rec.tokens.cache_hit_ratio,
            "cache_breaks": rec.cache_breaks,
            "breaks_by_cause": dict(sorted(rec.breaks_by_cause.items())),
            "cache_drops": rec.cache_drops,
            "drops_by_cause": dict(sorted(rec.drops_by_cause.items())),
        },
        "baseline_cost_usd": report.baseline.cost_usd,
        "baseline": baseline_json(report),
        "providers": dict(sorted(report.providers.items())),  # calls by provider
        "cleared_nothing": report.idle_notes(),  # policy name -> why
        "fidelity": {
            "overall_error": report.fidelity_overall,
            "worst_session_error": report.fidelity_worst,
            "threshold": report.fidelity_threshold,
            "sessions_over_threshold": [
                {"session_id": s.session_id, "error": s.fidelity_error}
                for s in report.sessions_over_threshold()
            ],
        },
    }


def write_replay_outputs(
    report: ReplayReport,
    out_dir: Path,
    force: bool,
    run: dict[str, Any],
    chart_process: ChartProcess | None = None,
    sink: RowsSink | None = None,
    cache_dir: Path | None = None,
    extra: dict[str, Callable[[Path], None]] | None = None,
) -> list[str]:
    """Tables, run.json and charts; the charts are drawn by `chart_process` when given, and
    then kept in `cache_dir` (a chart kept there for the same data is copied, not drawn:
    mcsim.outputs.chart_cache). With `sink` (the one the replay wrote its rows to) the calls,
    breaks and sessions tables are the sink's: its rows are read back for the charts, which
    are then drawn while the sink writes the tables into the run's temporary folder."""
    from mcsim.outputs.chart_cache import ChartCache, KeptCharts
    from mcsim.outputs.charts import CHARTS, CallLines, chart_data, draw_all, savings_data

    if sink is not None:
        calls: Callable[[Path], None] = lambda p: sink.write("calls", p)  # noqa: E731
        breaks: Callable[[Path], None] = lambda p: sink.write("breaks", p)  # noqa: E731
        sessions: Callable[[Path], None] = lambda p: sink.write("sessions", p)  # noqa: E731
    else:
        names = run_names(report)
        calls = lambda p: write_dataset(calls_frame(report), p, names)  # noqa: E731
        breaks = lambda p: write_dataset(breaks_frame(report), p, names)  # noqa: E731
        sessions = lambda p: write_dataset(sessions_frame(report), p, names)  # noqa: E731
    writers: dict[str, Callable[[Path], None]] = {
        "summary.parquet": lambda p: write_parquet(summary_frame(report), p),
        "sessions.parquet": sessions,
        "calls.parquet": calls,
        "breaks.parquet": breaks,
        "run.json": lambda p: write_json(p, run),
        **(extra or {}),  # a command's own files (advise: advice.json, idle_gaps.png)
    }

    def per_call() -> Any:
        if sink is None:
            return chart_data(report)
        lines = CallLines(sink.policies, sink.calls)
        sink.finish(report.sessions, lines)  # the tables' parts, and the lines as they go
        return chart_data(report, lines)

    def charts(folder: Path) -> KeptCharts | None:
        if chart_process is None:
            draw_all(per_call(), folder)
            return None
        cache = ChartCache(cache_dir) if cache_dir is not None else None
        kept = KeptCharts(chart_process, folder, cache)
        try:
            # The savings chart needs only the totals: it is drawn while the rest is prepared.
            kept.ask(savings_data(report), ["savings.png"])
            kept.ask(per_call(), [name for name in CHARTS if name != "savings.png"])
        except BaseException:
            chart_process.close()  # it may be drawing into the folder that is about to go
            raise
        return kept

    write_run_dir(out_dir, writers, force, background=charts)
    return [*writers, *CHARTS]


def baseline_json(report: ReplayReport) -> dict[str, Any]:
    """What every "vs baseline" figure is against: its name, its cache in words, the TTLs
    the recording used, its cost; and the other baselines the policy file asked for."""
    return {
        "name": BASELINE,
        "description": report.baseline_text(),
        "cost_usd": report.baseline.cost_usd,
        "recorded_ttls": dict(sorted(report.recorded_ttls.items())),
        "others": [
            {"name": s.name, "cache": cache_settings(s),
             "cost_usd": report.policies.get(s.name, PolicyTotals(s.name)).cost_usd}
            for s in report.scenarios
            if is_baseline(s.name) and s.name != BASELINE
        ],
    }  # fmt: skip


def replay_json(report: ReplayReport, out_dir: str | None) -> dict[str, Any]:
    from mcsim.outputs.json_documents import skipped_json

    over = report.sessions_over_threshold()
    providers = {s.name: s.provider for s in report.scenarios}
    caches, chosen = _caches(report), verdict(report)
    return {
        "verdict": chosen.as_json(),
        "baseline": baseline_json(report),
        "policies": [
            {
                "name": name,
                "description": description,
                "provider": providers.get(name, "recorded"),  # whose cache: recorded or named
                "cache": caches[name],
                "cost_usd": t.cost_usd,
                **_saved(t, report),
                "savings_vs_recorded_pct": _pct(t.cost_usd, report.recorded.cost_usd),
                "savings_vs_baseline_pct": _pct(t.cost_usd, report.baseline.cost_usd),
                "cleared_tokens": t.cleared_tokens,
                "cache_breaks": t.cache_breaks,
                "cache_edit_drops": t.cache_edit_drops,
                "cache_drops": t.cache_drops,
                "unexpected_breaks": t.unexpected_breaks,
                "breaks_by_cause": dict(sorted(t.breaks_by_cause.items())),
                "drops_by_cause": dict(sorted(t.drops_by_cause.items())),
                "cache_hit_ratio": t.tokens.cache_hit_ratio,
                "mean_context_tokens": t.context_tokens / t.calls if t.calls else 0,
                "max_prompt_tokens": t.max_prompt_tokens,
                "compactions": t.compactions,
                "compactions_still_reached": t.compactions_still_reached,
                **_refetch_fields(t, report.baseline.cost_usd),
                **_uncertain(name, chosen),
                "unpriced_calls": t.unpriced_calls,
                "pings": t.pings,
                "ping_cost_usd": t.ping_cost_usd,
            }
            for name, description, t in _policy_rows(report)[1:]
        ],
        "recorded": {
            "cost_usd": report.recorded.cost_usd,
            "calls": report.recorded.calls,
            "cache_breaks": report.recorded.cache_breaks,
            "cache_edit_drops": report.recorded.cache_edit_drops,
            "cache_drops": report.recorded.cache_drops,
            "drops_by_cause": dict(sorted(report.recorded.drops_by_cause.items())),
            "cache_hit_ratio": report.recorded.tokens.cache_hit_ratio,
            "prunes": dict(sorted(report.recorded_prunes.items())),
        },
        "fidelity": {
            "overall_error": report.fidelity_overall,
            "worst_session_error": report.fidelity_worst,
            "threshold": report.fidelity_threshold,
            "sessions_over_threshold": [
                {"session_id": s.session_id, "project": s.project, "error": s.fidelity_error}
                for s in over
            ],
            "ok": not over,
        },
        "sessions": len(report.sessions),
        "providers": dict(sorted(report.providers.items())),  # calls by provider
        "calibration_fallback_calls": report.calibration_fallbacks,
        "price_table": report.price_table,
        "notes": [
            CACHE_EDIT_NOTE,
            *(f"{name} cleared nothing: {why}" for name, why in report.idle_notes().items()),
            *report.layer_notes(),
            *report.provider_notes(),
        ],
        "skipped": skipped_json(report.stats),
        "out_dir": out_dir,
    }


def replay_text(report: ReplayReport) -> str:
    from mcsim.outputs.terminal import load_notes, table

    # As simulated, then net of re-fetches (what the verdict weighs), then the cache.
    headers = ["policy", "cost $", "saved $", "vs recorded", "vs baseline", "net saved $",
               "net vs baseline", "re-fetch risk", "cleared", "hit %", "breaks",
               "unexpected"]  # fmt: skip
    rows = []
    base = report.baseline.cost_usd
    for name, _desc, t in _policy_rows(report):
        saved = _saved(t, report)
        ours = name != RECORDED
        rows.append(
            [
                printable(name, limit=NAME_LIMIT),
                f"{t.cost_usd:.4f}",
                f"{saved['saved_usd']:.4f}" if ours else "",
                f"{_pct(t.cost_usd, report.recorded.cost_usd):+.2f}%",
                f"{_pct(t.cost_usd, base):+.2f}%" if ours else "",
                f"{saved['net_saved_usd']:.4f}" if ours else "",
                f"{_pct(t.net_cost_usd, base):+.2f}%" if ours else "",
                risk_text(t),
                f"{t.cleared_tokens:,}",
                f"{100 * t.tokens.cache_hit_ratio:.1f}",
                str(t.cache_breaks),
                str(t.unexpected_breaks),
            ]
        )
    lines = table(headers, rows, right=set(range(1, 12)))
    lines.extend(ping_lines(report))
    lines.append(printable(verdict(report).text, limit=MESSAGE_LIMIT))
    lines.append(
        f"baseline: {report.baseline_text()}; 'vs baseline' is against it, 'saved $' against "
        "the recorded cost; 'net': with the re-fetches of what was cleared paid"
    )
    for other in report.scenarios:
        if is_baseline(other.name) and other.name != BASELINE:
            lines.append(
                f"{printable(other.name, limit=NAME_LIMIT)}: no pruning, {cache_settings(other)}, "
                "as the policy file's defaults set it: what that cache alone changes"
            )
    over = report.sessions_over_threshold()
    many = counted(len(over), "session", "sessions")
    # :g, not :.0%: a threshold under 1% (0.005) read "over 0%"
    label = "OK" if not over else f"LOW: {many} over {100 * report.fidelity_threshold:g}%"
    lines.append(
        f"fidelity (no-pruning replay vs recording, reads+writes): overall "
        f"{report.fidelity_overall:.3%}, worst session {report.fidelity_worst:.3%} [{label}]"
    )
    for s in over[:5]:
        project, session = (printable(v, limit=NAME_LIMIT) for v in (s.project, s.session_id))
        lines.append(f"  {project} {session}: {s.fidelity_error:.2%}")
    lines.append(
        f"{counted(len(report.sessions), 'session', 'sessions')}, cache model "
        f"{report.cache_model_text() or 'none'}; "
        "savings are positive when cheaper. Note: " + CACHE_EDIT_NOTE + "."
    )
    prunes = report.recorded_prunes
    if prunes:
        kinds = ", ".join(f"{n} {kind.replace('_', ' ')}" for kind, n in sorted(prunes.items()))
        lines.append(
            f"note: the recording already pruned {sum(prunes.values())} times ({kinds}); "
            "replayed as recorded, not as compactions"
        )
    for name, why in report.idle_notes().items():
        lines.append(f"note: {printable(name, limit=NAME_LIMIT)} cleared nothing: {why}")
    notes = [*report.layer_notes(), *report.provider_notes()]
    lines.extend(f"note: {printable(n, limit=MESSAGE_LIMIT)}" for n in notes)
    unpriced = report.recorded.unpriced_calls
    if unpriced:
        lines.append(
            f"warning: {unpriced} recorded calls use a model not in price table "
            f"{printable(report.price_table, limit=NAME_LIMIT)}; every cost here excludes them"
        )
    lines.extend(load_notes(report.stats))
    return "\n".join(lines)


def ping_lines(report: ReplayReport) -> list[str]:
    """Per run with keep-warm pings: how many and what they cost, apart from the agent's
    calls (its cost $ includes them)."""
    out = []
    for s in report.scenarios:
        t = report.policies.get(s.name)
        if s.keep_warm is None or t is None:
            continue
        out.append(
            f"pings: {printable(s.name, limit=NAME_LIMIT)} sent {t.pings:,} keep-warm "
            f"ping{'' if t.pings == 1 else 's'} ({s.keep_warm.describe()}), ping $ "
            f"{t.ping_cost_usd:.4f} of its cost $ (not the agent's calls)"
        )
    return out
