"""Parquet tables of an inspect report, and safe run-directory writes.

Every table has a `schema_version` column; the schemas are documented in the README and
checked by tests, so downstream notebooks can rely on them. Polars is imported here only,
so commands that write no tables never pay for it.

Data is never lost to an output: a run directory is written into a temporary sibling and
renamed into place, and `--force` replaces only a run directory mcsim wrote: a folder holding
nothing but files mcsim writes into run directories (`RUN_FILES`), with mcsim's run.json. Never
a folder that is or holds an input, the session cache, the current directory or one of its
parents, or a home directory.
"""

from __future__ import annotations

import errno
import glob
import io
import os
import platform
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import orjson

from mcsim import __version__
from mcsim.discovery import default_roots
from mcsim.errors import McsimError, OutputExistsError, OutputRefusedError
from mcsim.loaders.jsonl import file_kind, read_regular
from mcsim.pipeline import LoadStats
from mcsim.processes import STOP
from mcsim.recorded import InspectReport

SCHEMA_VERSION = 1
RUN_FORMAT = "mcsim-run/1"  # run.json's "format": how --force knows mcsim wrote a folder
# Every name mcsim writes into a run directory: `inspect --out`, `replay` (its charts are
# mcsim.charts.CHARTS), `sweep` and `report`. --force replaces a folder only if it holds
# nothing else, so a file mcsim did not write (a transcript, a policy file) is never lost.
RUN_FILES = frozenset(
    {
        "run.json",
        "summary.parquet",
        "sessions.parquet",
        "calls.parquet",
        "breaks.parquet",
        "cumulative_cost.png",
        "context_size.png",
        "savings.png",
        "break_timeline.png",
        "sweep.parquet",
        "savings_curve.png",
        "risk_tradeoff.png",
        "report.html",
        "report.md",
    }
)
# Far above any run.json mcsim writes (one line per input file): a bound on what is read back.
RUN_JSON_MAX_BYTES = 256 * 1024 * 1024


def run_header(paths: Sequence[str], stats: LoadStats) -> dict[str, Any]:
    """What every run.json starts with: mcsim's format marker and version, the time, and
    every input file with its size."""
    return {
        "format": RUN_FORMAT,
        "mcsim_version": __version__,
        "python": platform.python_version(),
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "paths": list(paths),
        "input_files": stats.files,
        "input_bytes": stats.bytes,
        "files": [{"path": p, "bytes": n} for p, n in stats.inputs],
    }


def write_json(path: Path, doc: dict[str, Any]) -> None:
    path.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")


def is_run_dir(folder: Path) -> bool:
    """Whether `folder` has mcsim's run.json: a JSON object with mcsim's format marker (or,
    written before the marker existed, an `mcsim_version`).

    Only a mark, easy to forge: --force also requires that nothing else is there.
    """
    try:
        doc = orjson.loads(read_regular(folder / "run.json", RUN_JSON_MAX_BYTES))
    except (OSError, orjson.JSONDecodeError):
        return False
    if not isinstance(doc, dict):
        return False
    return str(doc.get("format", "")).startswith("mcsim-run/") or "mcsim_version" in doc


def _not_replaceable(folder: Path) -> str | None:
    """Why `--force` may not replace the non-empty `folder`, or None if it may: every entry is
    a regular file named in RUN_FILES, and run.json is mcsim's."""
    foreign = _foreign_entry(folder)
    if foreign is not None:
        return (
            f"holds {foreign}, not a file mcsim writes; --force replaces only a run directory "
            "mcsim wrote"
        )
    if not is_run_dir(folder):
        return (
            "not empty and not a run directory written by mcsim (no mcsim run.json); --force "
            "replaces only those"
        )
    return None


def _foreign_entry(folder: Path) -> str | None:
    """The first entry of `folder` (by name) that is not a file mcsim writes, or None.

    At most one entry more than RUN_FILES holds is listed: one of those must be foreign, and
    a folder of millions of files is not read through.
    """
    entries: list[os.DirEntry[str]] = []
    with os.scandir(folder) as listing:
        for entry in listing:
            entries.append(entry)
            if len(entries) > len(RUN_FILES):
                break
    for entry in sorted(entries, key=lambda e: e.name):
        if entry.name not in RUN_FILES:
            return entry.name
        if not entry.is_file(follow_symlinks=False):
            if entry.is_symlink():
                return f"{entry.name} (a symbolic link)"
            return f"{entry.name} ({file_kind(entry.stat(follow_symlinks=False).st_mode)})"
    return None


def input_paths(paths: Sequence[str]) -> list[Path]:
    """What PATHS name (globs expanded, as discovery does), or Claude Code's default folders
    when there are none: the folders a run directory may never be or hold."""
    if not paths:
        return default_roots()
    return [Path(m) for p in paths for m in glob.glob(str(Path(p).expanduser()), recursive=True)]


def check_out_dir(
    out_dir: Path, force: bool, inputs: Sequence[Path] = (), cache: Path | None = None
) -> None:
    """Refuse, before any work, an output directory the run may not write or replace.

    Without `force` an existing non-empty directory is refused; with it, only a run directory
    mcsim wrote may be replaced (`_not_replaceable`). Whatever `force` says, `out_dir` may not
    be or hold any of `inputs`, be, hold or lie in the session `cache` folder, be the current
    directory or one of its parents, or a home directory (symlinks resolved). And a folder
    must really be creatable where the run goes: a replay can take minutes, and failing after
    it would waste them (os.access answers yes to root even on a read-only mount, so a folder
    is made and removed). A path the system cannot even look at (a name too long) is refused
    with the system's reason.
    """
    try:
        why = _never_a_run_dir(out_dir, inputs, cache)
        if why:
            raise OutputRefusedError(f"{out_dir}: {why}; choose another --out")
        if os.path.lexists(out_dir) and not out_dir.is_dir():
            raise OutputRefusedError(f"{out_dir}: exists and is not a directory")
        if _has_entries(out_dir):
            why = _not_replaceable(out_dir)
            if why:
                raise OutputRefusedError(f"{out_dir}: {why}")
            if not force:
                raise OutputExistsError(
                    f"{out_dir}: already holds a run (use --force to replace it)"
                )
    except OSError as exc:
        raise OutputRefusedError(f"{out_dir}: {exc.strerror or exc}") from exc
    _check_writable(out_dir)


def _never_a_run_dir(out_dir: Path, inputs: Sequence[Path], cache: Path | None) -> str | None:
    """Why `out_dir` may never be written as a run directory, or None."""
    cwd = _cwd()
    if cwd is None and not out_dir.is_absolute():
        return "is relative, and the current directory no longer exists"
    target = out_dir.resolve()
    if target == Path(target.anchor):
        return "is the root directory"
    if cwd is not None:  # deleted, it holds nothing to protect
        if target == cwd:
            return "is the current directory"
        if target in cwd.parents:
            return "is a parent of the current directory"
    homes = {Path.home(), Path(os.environ.get("HOME") or Path.home())}
    if target in {home.resolve() for home in homes}:
        return "is a home directory"
    for path in inputs:
        resolved = path.resolve()
        if target == resolved:
            return f"is an input ({path})"
        if target in resolved.parents:
            return f"holds the input {path}"
    if cache is not None:
        resolved = cache.resolve()
        if target == resolved:
            return f"is the session cache folder ({cache})"
        if target in resolved.parents:
            return f"holds the session cache folder {cache}"
        if resolved in target.parents:
            return f"is inside the session cache folder {cache}"
    return None


def _cwd() -> Path | None:
    try:
        return Path.cwd().resolve()
    except FileNotFoundError:  # the working directory was deleted
        return None


def _has_entries(folder: Path) -> bool:
    return folder.is_dir() and any(folder.iterdir())


def _check_writable(out_dir: Path) -> None:
    """Make and remove a folder where the run's temporary folder will be made."""
    parent = out_dir.absolute().parent
    try:
        while not parent.exists():
            parent = parent.parent
        if not parent.is_dir():
            raise OutputRefusedError(f"{out_dir}: {parent} is not a directory")
        os.rmdir(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=parent))
    except OSError as exc:
        raise OutputRefusedError(f"{out_dir}: cannot write in {parent}: {exc.strerror}") from exc


class Background(Protocol):
    """Files another process writes into the run folder while the tables are written."""

    def wait(self) -> None:
        """Return when every file asked for is written; raise if one could not be."""

    def close(self) -> None:
        """Stop at once: nothing is written into the folder after this returns."""


def write_run_dir(
    out_dir: Path,
    writers: dict[str, Callable[[Path], None]],
    force: bool,
    background: Callable[[Path], Background | None] | None = None,
) -> None:
    """Write every file into a temporary sibling directory, then swap it into place.

    A reader never sees a half-written run, and a failed or interrupted write leaves the old
    run intact and no temporary folder behind. `background(folder)` starts more writing
    elsewhere and returns it (None if it already finished); the swap waits for it, and a
    failure stops it before the temporary folder is removed, or it would write into a folder
    that no longer exists and leave it behind again. A write that fails (a full disk, a
    folder removed meanwhile) is an McsimError naming `out_dir` and the system's reason.
    """
    check_out_dir(out_dir, force)
    try:
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
        pending: Background | None = None
        try:
            os.chmod(tmp, 0o777 & ~umask())  # mkdtemp makes it private; a run dir is not
            pending = background(tmp) if background is not None else None
            for name, write in writers.items():
                STOP.check()  # a stop polars swallowed while building a table resurfaces here
                write(tmp / name)
            if pending is not None:
                pending.wait()
            STOP.check()
            with STOP.shielded():  # half a swap would leave the old run aside
                _swap_in(tmp, out_dir, force)
        finally:
            with STOP.shielded():
                if pending is not None:
                    pending.close()
                if tmp.exists():
                    shutil.rmtree(tmp, ignore_errors=True)
    except Exception as exc:
        reason = _write_failure(exc)
        if reason is None:
            raise
        raise McsimError(f"{out_dir}: could not write the run ({reason})") from exc


def _write_failure(exc: Exception) -> str | None:
    """Why writing failed, if `exc` is a failure to write; None for anything else (a bug keeps
    its traceback). Polars reports the system's errors as ComputeError ("underlying IO
    error: No space left on device")."""
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    polars = sys.modules.get("polars")  # not imported: none of its errors can have happened
    if polars is not None and isinstance(exc, polars.exceptions.ComputeError):
        return (str(exc).splitlines() or ["polars could not write a table"])[0]
    return None


def _swap_in(tmp: Path, out_dir: Path, force: bool) -> None:
    """Rename the finished run to `out_dir`, replacing what is there only with `force`.

    The run checked at the start may have been replaced meanwhile, or another run may have
    taken a new `out_dir` (two runs racing for it): with `force` the folder is checked again
    and the old run is moved aside, then removed once the new one is in place (or put back if
    that fails); without, rename itself refuses a non-empty directory.
    """
    if not (force and _has_entries(out_dir)):
        _rename(tmp, out_dir)
        return
    if _not_replaceable(out_dir) is not None:
        raise OutputRefusedError(
            f"{out_dir}: no longer a run directory written by mcsim; not replaced"
        )
    old = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old.", dir=out_dir.parent))
    try:
        os.rename(out_dir, old / "run")
        _rename(tmp, out_dir)
    finally:
        if not os.path.lexists(out_dir) and os.path.lexists(old / "run"):
            os.rename(old / "run", out_dir)
        shutil.rmtree(old, ignore_errors=True)


def _rename(tmp: Path, out_dir: Path) -> None:
    try:
        os.rename(tmp, out_dir)  # onto an empty directory only, on every POSIX system
    except OSError as exc:
        if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
            raise OutputExistsError(
                f"{out_dir}: already holds a run, written while this one ran (use --force to "
                "replace it)"
            ) from exc
        raise McsimError(f"{out_dir}: could not move the run into place: {exc.strerror}") from exc


def umask() -> int:
    """The process's umask (reading it means setting it: it is put back at once)."""
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
            "cache_edit_drops": s.cache_edit_drops,
            "compactions": s.compactions,
            "recorded_prunes": s.recorded_prunes,
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
    "cache_hit_ratio": "float", "cache_breaks": "int", "cache_edit_drops": "int",
    "compactions": "int", "recorded_prunes": "int",
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


def write_parquet(frame: Any, path: Path) -> None:
    """A table to a file. Polars encodes it in memory and the file is written here, so a full
    disk fails as an OSError with the system's reason (writing a small table itself, polars
    reports the failed write of its footer as "Invalid thrift: transport error"). The encoded
    table is compressed: far smaller than the frame already in memory."""
    buffer = io.BytesIO()
    frame.write_parquet(buffer)
    with open(path, "wb") as fh:
        fh.write(buffer.getbuffer())


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
    frames = {
        "sessions.parquet": sessions_frame,
        "calls.parquet": calls_frame,
        "breaks.parquet": breaks_frame,
    }

    def writer(fn: Callable[[InspectReport], Any]) -> Callable[[Path], None]:
        return lambda path: write_parquet(fn(report), path)

    writers = {name: writer(fn) for name, fn in frames.items()}
    writers["run.json"] = lambda path: write_json(path, run)
    write_run_dir(out_dir, writers, force)
    return [out_dir / name for name in writers]
