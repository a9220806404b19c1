"""Parquet tables of an inspect report, and atomic run-directory writes.

Every table has a `schema_version` column; the schemas are documented in the README and
checked by tests, so downstream notebooks can rely on them. Polars is imported here only,
so commands that write no tables never pay for it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mcsim.errors import OutputExistsError
from mcsim.recorded import InspectReport

SCHEMA_VERSION = 1


def check_out_dir(out_dir: Path, force: bool) -> None:
    """Refuse, before any work, to overwrite a non-empty directory without --force."""
    if out_dir.exists() and not force:
        if not out_dir.is_dir():
            raise OutputExistsError(f"{out_dir}: exists and is not a directory")
        if any(out_dir.iterdir()):
            raise OutputExistsError(f"{out_dir}: already holds a run (use --force to replace it)")


def write_run_dir(
    out_dir: Path,
    writers: dict[str, Callable[[Path], None]],
    force: bool,
    background: Callable[[Path], Callable[[], None]] | None = None,
) -> None:
    """Write every file into a temporary sibling directory, then swap it into place.

    A reader never sees a half-written run, and a failed write leaves the old run intact.
    `background(folder)` starts more writing elsewhere (another process) and returns the
    function that waits for it; the swap happens only after it finished.
    """
    check_out_dir(out_dir, force)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes it private; a run dir is not
    try:
        wait = background(tmp) if background is not None else None
        for name, write in writers.items():
            write(tmp / name)
        if wait is not None:
            wait()
        if out_dir.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old.", dir=out_dir.parent))
            os.rename(out_dir, old / "run")
            os.rename(tmp, out_dir)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, out_dir)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _utc(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


def sessions_frame(report: InspectReport) -> Any:
    rows = [
        {
            "session_id": s.session_id,
            "project": s.project,
            "cwd": s.cwd,
            "start": _utc(s.start_s),
            "end": _utc(s.end_s),
            "calls": s.calls,
            "threads": s.threads,
            "models": ",".join(s.models),
            "input_tokens": s.tokens.input_tokens,
            "cache_write_5m_tokens": s.tokens.cache_write_5m_tokens,
            "cache_write_1h_tokens": s.tokens.cache_write_1h_tokens,
            "cache_read_tokens": s.tokens.cache_read_tokens,
            "output_tokens": s.tokens.output_tokens,
            "cost_usd": s.cost_usd,
            "unpriced_calls": s.unpriced_calls,
            "cache_hit_ratio": s.tokens.cache_hit_ratio,
            "cache_breaks": s.cache_breaks,
            "compactions": s.compactions,
        }
        for s in report.sessions
    ]
    return frame(rows, SESSIONS_SCHEMA)


def calls_frame(report: InspectReport) -> Any:
    rows = []
    for r in report.calls:
        u, c, b = r.call.usage, r.cost, r.cache_break
        rows.append(
            {
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
        )
    return frame(rows, CALLS_SCHEMA)


def breaks_frame(report: InspectReport) -> Any:
    rows = [
        {
            "session_id": b.session_id,
            "project": b.project,
            "thread_id": b.thread_id,
            "call_index": b.cache_break.call_index,
            "timestamp": _utc(b.timestamp_s),
            "model": b.model,
            "previous_read_tokens": b.cache_break.previous_read_tokens,
            "read_tokens": b.cache_break.read_tokens,
            "drop_tokens": b.cache_break.drop_tokens,
            "gap_seconds": b.cache_break.gap_seconds,
            "cause": b.cache_break.cause.value,
            "expected": b.cache_break.expected,
            "source_file": b.source.file,
            "source_line": b.source.line,
        }
        for b in report.breaks
    ]
    return frame(rows, BREAKS_SCHEMA)


TS = "datetime"
SESSIONS_SCHEMA: dict[str, str] = {
    "session_id": "str", "project": "str", "cwd": "str", "start": TS, "end": TS,
    "calls": "int", "threads": "int", "models": "str", "input_tokens": "int",
    "cache_write_5m_tokens": "int", "cache_write_1h_tokens": "int", "cache_read_tokens": "int",
    "output_tokens": "int", "cost_usd": "float", "unpriced_calls": "int",
    "cache_hit_ratio": "float", "cache_breaks": "int", "compactions": "int",
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


def frame(rows: list[dict[str, Any]], schema: dict[str, str]) -> Any:
    """A DataFrame with the documented dtypes, even when there are no rows."""
    import polars as pl

    dtypes: dict[str, Any] = {
        "str": pl.String,
        "int": pl.Int64,
        "float": pl.Float64,
        "bool": pl.Boolean,
        TS: pl.Datetime("ms", "UTC"),
    }
    full: dict[str, Any] = {"schema_version": pl.Int32, **{k: dtypes[v] for k, v in schema.items()}}
    for row in rows:
        row["schema_version"] = SCHEMA_VERSION
    return pl.DataFrame(rows, schema=full, orient="row" if not rows else None)


def write_inspect_tables(report: InspectReport, out_dir: Path, force: bool) -> list[Path]:
    frames = {
        "sessions.parquet": sessions_frame,
        "calls.parquet": calls_frame,
        "breaks.parquet": breaks_frame,
    }

    def writer(fn: Callable[[InspectReport], Any]) -> Callable[[Path], None]:
        return lambda path: fn(report).write_parquet(path)

    writers = {name: writer(fn) for name, fn in frames.items()}
    write_run_dir(out_dir, writers, force)
    return [out_dir / name for name in frames]
