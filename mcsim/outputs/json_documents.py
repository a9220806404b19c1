"""Turn reports into what a program reads: `inspect --json`'s document and the parts every
command's JSON shares (what was skipped; a recorded session and break, as breaks.parquet and
sessions.parquet give them too). What a person reads in a terminal is mcsim/outputs/terminal.py."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

from mcsim.accounting.recorded import BreakRecord, InspectReport, SessionSummary, UsageGroup
from mcsim.ingest.pipeline import LoadStats
from mcsim.model import Tokens
from mcsim.outputs.run_dir import Each

T = TypeVar("T")


def iso_time(ts: float) -> str:
    """A time as ISO 8601 in UTC, with a Z."""
    return datetime.fromtimestamp(ts, UTC).isoformat().replace("+00:00", "Z")


def _tokens_json(t: Tokens) -> dict[str, int]:
    return t._asdict()


def skip_examples_json(stats: LoadStats) -> list[dict[str, object]]:
    return [
        {"file": e.file, "line": e.line, "reason": e.reason, "detail": e.detail}
        for e in stats.skips.examples
    ]


def session_json(s: SessionSummary) -> dict[str, Any]:
    return {
        "session_id": s.session_id,
        "project": s.project,
        "cwd": s.cwd,
        "start": iso_time(s.start_s),
        "end": iso_time(s.end_s),
        "calls": s.calls,
        "threads": s.threads,
        "models": list(s.models),
        **_tokens_json(s.tokens),
        "cost_usd": s.cost_usd,
        "unpriced_calls": s.unpriced_calls,
        "cache_hit_ratio": s.tokens.cache_hit_ratio,
        "cache_breaks": s.cache_breaks,
        "cache_edit_drops": s.cache_edit_drops,
        "cache_drops": s.cache_drops,
        "compactions": s.compactions,
        "recorded_prunes": s.recorded_prunes,
    }


def skipped_json(stats: LoadStats) -> dict[str, Any]:
    """What was skipped, repaired or noted, by reason, with every kept example."""
    skips = stats.skips
    invalid = skips.counts["invalid_json"] + skips.counts["truncated_line"]
    return {
        "lines_read": skips.lines_read,
        "invalid_lines": invalid,
        "total": skips.total,
        "by_reason": dict(sorted(skips.counts.items())),
        "repaired_lines": sum(skips.repaired.values()),
        "repaired_by_reason": dict(sorted(skips.repaired.items())),
        "notes_by_reason": dict(sorted(skips.notes.items())),
        "examples": skip_examples_json(stats),
        "examples_omitted": skips.examples_omitted,
        "examples_outside_dates": stats.examples_outside_dates,
    }


def break_json(b: BreakRecord) -> dict[str, Any]:
    """A recorded cache break's fields, as `--json` and breaks.parquet both give them (each
    adds its time and source in its own spelling)."""
    brk = b.cache_break
    return {
        "session_id": b.session_id,
        "project": b.project,
        "thread_id": b.thread_id,
        "call_index": brk.call_index,
        "model": b.model,
        "previous_read_tokens": brk.previous_read_tokens,
        "read_tokens": brk.read_tokens,
        "drop_tokens": brk.drop_tokens,
        "gap_seconds": brk.gap_seconds,
        "cause": brk.cause.value,
        "expected": brk.expected,
    }


def group_json(group: UsageGroup) -> dict[str, Any]:
    return {
        "key": group.key,
        **({"project": group.project} if group.project else {}),
        "calls": group.calls,
        "sessions": group.sessions,
        **_tokens_json(group.tokens),
        "cost_usd": group.cost_usd,
        "unpriced_calls": group.unpriced_calls,
        "cache_hit_ratio": group.tokens.cache_hit_ratio,
    }


def inspect_json(
    report: InspectReport,
    out_dir: str | None = None,
    grouped: tuple[str, str, list[UsageGroup]] | None = None,
    lazy: bool = False,
) -> dict[str, Any]:
    """`grouped`: (by, timezone, rows) of group_usage, listed under "groups" when given.
    `lazy`: the lists of sessions, breaks and groups as `Each`, made as `json_stream` writes
    them (what the command line prints); else plain lists, for any JSON writer."""
    stats = report.stats
    each = Each if lazy else _listed
    doc = {
        "totals": {
            "sessions": len(report.sessions),
            "calls": report.call_count,
            **_tokens_json(report.tokens),
            "cost_usd": report.cost_usd,
            "unpriced_calls": report.unpriced_calls,
            "cache_hit_ratio": report.tokens.cache_hit_ratio,
            "cache_breaks": len(report.breaks),
            "breaks_by_cause": report.breaks_by_cause,
            "split_mismatch_calls": report.split_mismatch_calls,
            "by_model": {m: group_json(g) for m, g in report.by_model.items()},
        },
        "unpriced_models": dict(sorted(report.unpriced_models.items())),
        "price_table": report.price_table,
        "input": {
            "files": stats.files,
            "bytes": stats.bytes,
            "files_skipped_by_date": stats.files_skipped_by_date,
            "sessions_outside_dates": stats.sessions_outside_dates,
            "files_skipped_by_project": stats.files_skipped_by_project,
            "duplicate_calls_across_projects": stats.duplicate_calls,
        },
        "sessions": each(report.sessions, session_json),
        "breaks": each(report.breaks, _located_break_json),
        "skipped": skipped_json(report.stats),
        "out_dir": out_dir,
    }
    if grouped is not None:
        by, tz, rows = grouped
        doc["groups"] = {"by": by, "timezone": tz, "rows": each(rows, group_json)}
    return doc


def _listed(items: Sequence[T], fn: Callable[[T], Any]) -> list[Any]:
    return [fn(item) for item in items]


def _located_break_json(b: BreakRecord) -> dict[str, Any]:
    return {
        **break_json(b),
        "timestamp": iso_time(b.timestamp_s),
        "file": b.source.file,
        "line": b.source.line,
    }
