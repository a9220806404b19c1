"""The tables of `mcsim inspect --out`: sessions, calls and breaks of the recording.

Each table is written a batch of rows at a time (a part file each, streamed into one table),
so writing holds one batch, never every call's row: memory must not grow with the corpus
(docs/design.md#performance).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from mcsim.accounting.recorded import BreakRecord, CallRecord, InspectReport, SessionSummary
from mcsim.outputs.json_documents import break_json, session_json
from mcsim.outputs.run_dir import run_header, write_json, write_run_dir
from mcsim.outputs.tables import TS, concat_parts, frame, write_parquet
from mcsim.processes import give_back_memory

T = TypeVar("T")


def _utc(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


BATCH_ROWS = 20_000  # rows of a table built at a time


def sessions_frame(sessions: Sequence[SessionSummary]) -> Any:
    """The sessions as `--json` gives them, with start and end as timestamps."""
    rows = [{**session_json(s), "start": _utc(s.start_s), "end": _utc(s.end_s)} for s in sessions]
    return frame(rows, SESSIONS_SCHEMA)


def calls_frame(calls: Sequence[CallRecord]) -> Any:
    return frame([_call_row(r) for r in calls], CALLS_SCHEMA)


def _call_row(r: CallRecord) -> dict[str, Any]:
    u, c, b = r.call.usage, r.cost, r.cache_break
    return {
        "session_id": r.session_id,
        "project": r.project,
        "thread_id": r.thread_id,
        "thread_kind": r.thread_kind.value,
        "call_index": r.call_index,
        "message_id": r.call.message_id,
        "request_id": r.call.request_id,
        "timestamp": _utc(r.call.timestamp_s),
        "model": r.call.model,
        "input_tokens": u.input_tokens,
        "cache_write_5m_tokens": u.cache_write_5m_tokens,
        "cache_write_1h_tokens": u.cache_write_1h_tokens,
        "cache_read_tokens": u.cache_read_tokens,
        "output_tokens": u.output_tokens,
        "prompt_tokens": u.prompt_tokens,
        "cost_usd": c.total_usd if c else None,
        "input_usd": c.input_usd if c else None,
        "cache_write_5m_usd": c.cache_write_5m_usd if c else None,
        "cache_write_1h_usd": c.cache_write_1h_usd if c else None,
        "cache_read_usd": c.cache_read_usd if c else None,
        "output_usd": c.output_usd if c else None,
        "long_context": c.long_context if c else False,
        "cache_hit_ratio": r.cache_hit_ratio,
        "ttl": r.ttl,
        "gap_seconds": r.gap_seconds,
        "compaction_before": r.call.compaction is not None,
        "is_break": b is not None,
        "break_cause": b.cause.value if b else None,
        "split_mismatch": u.split_mismatch,
        "speed": u.speed,
        "inference_geo": u.inference_geo,
        "source_file": r.call.source.file,
        "source_line": r.call.source.line,
    }


def breaks_frame(breaks: Sequence[BreakRecord]) -> Any:
    rows = [
        {
            **break_json(b),
            "timestamp": _utc(b.timestamp_s),
            "source_file": b.source.file,
            "source_line": b.source.line,
        }
        for b in breaks
    ]
    return frame(rows, BREAKS_SCHEMA)


SESSIONS_SCHEMA: dict[str, str] = {
    "session_id": "str", "project": "str", "cwd": "str", "start": TS, "end": TS,
    "calls": "int", "threads": "int", "models": "list[str]", "input_tokens": "int",
    "cache_write_5m_tokens": "int", "cache_write_1h_tokens": "int", "cache_read_tokens": "int",
    "output_tokens": "int", "cost_usd": "float", "unpriced_calls": "int",
    "cache_hit_ratio": "float", "cache_breaks": "int", "cache_edit_drops": "int",
    "cache_drops": "int", "compactions": "int", "recorded_prunes": "int",
}  # fmt: skip
CALLS_SCHEMA: dict[str, str] = {
    "session_id": "str", "project": "str", "thread_id": "str", "thread_kind": "str",
    "call_index": "int", "message_id": "str", "request_id": "str", "timestamp": TS,
    "model": "str", "input_tokens": "int", "cache_write_5m_tokens": "int",
    "cache_write_1h_tokens": "int", "cache_read_tokens": "int", "output_tokens": "int",
    "prompt_tokens": "int", "cost_usd": "float", "input_usd": "float",
    "cache_write_5m_usd": "float", "cache_write_1h_usd": "float", "cache_read_usd": "float",
    "output_usd": "float", "long_context": "bool", "cache_hit_ratio": "float", "ttl": "str",
    "gap_seconds": "float", "compaction_before": "bool", "is_break": "bool",
    "break_cause": "str", "split_mismatch": "bool", "speed": "str", "inference_geo": "str",
    "source_file": "str", "source_line": "int",
}  # fmt: skip
BREAKS_SCHEMA: dict[str, str] = {
    "session_id": "str", "project": "str", "thread_id": "str", "call_index": "int",
    "timestamp": TS, "model": "str", "previous_read_tokens": "int", "read_tokens": "int",
    "drop_tokens": "int", "gap_seconds": "float", "cause": "str", "expected": "bool",
    "source_file": "str", "source_line": "int",
}  # fmt: skip


def inspect_run_record(
    report: InspectReport, paths: Sequence[str], options: dict[str, Any]
) -> dict[str, Any]:
    """run.json of `inspect --out`: the input and options behind the tables, and mcsim's mark
    on the folder, so that --force may replace it later."""
    return {
        **run_header(paths, report.stats),
        "price_table": report.price_table,
        "options": options,
    }


def write_inspect_tables(
    report: InspectReport, out_dir: Path, force: bool, run: dict[str, Any]
) -> list[Path]:
    """The three tables and run.json (see `inspect_run_record`), written as one run."""
    writers: dict[str, Callable[[Path], None]] = {
        "sessions.parquet": lambda path: _batched(
            report.sessions, sessions_frame, SESSIONS_SCHEMA, path
        ),
        "calls.parquet": lambda path: _batched(report.calls, calls_frame, CALLS_SCHEMA, path),
        "breaks.parquet": lambda path: _batched(report.breaks, breaks_frame, BREAKS_SCHEMA, path),
        "run.json": lambda path: write_json(path, run),
    }
    write_run_dir(out_dir, writers, force)
    return [out_dir / name for name in writers]


def _batched(
    records: Iterable[T], table: Callable[[list[T]], Any], schema: dict[str, str], path: Path
) -> None:
    """`table` of `records`, BATCH_ROWS at a time, each batch a part file beside `path`, then
    the parts, in order, streamed into `path` in row groups of as many rows."""
    parts: list[Path] = []
    rows = iter(records)
    while batch := list(itertools.islice(rows, BATCH_ROWS)):
        parts.append(path.with_name(f".{path.stem}-{len(parts)}.parquet"))
        write_parquet(table(batch), parts[-1])
        del batch
        give_back_memory()
    concat_parts(parts, path, schema, BATCH_ROWS)
