"""`mcsim convert`: write sessions of any supported format as interchange files.

One file per session, `DIR/<project>/<session_id>.jsonl`, in the format the interchange
loader reads (mcsim.ingest.loaders.interchange; docs/interchange.md), and a
`run.json` that records the inputs. Everything the model holds is written, so loading the
files back gives the same sessions (only where each call was read from differs). The folder
is written under a temporary name and renamed into place, as run directories are, or, for an
`s3://` or `gs://` prefix, written in the system's temporary folder and uploaded as a run is
(run.json last: run_dir.py); `--force` replaces only a folder or prefix `convert` wrote.
"""

from __future__ import annotations

import heapq
import re
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from mcsim.errors import McsimError, OutputRefusedError
from mcsim.ingest.disk_cache import default_cache_dir
from mcsim.ingest.loaders import Detail, sniff
from mcsim.ingest.loaders.interchange import FORMAT, VERSION, format_time, read_header
from mcsim.ingest.loaders.jsonl import read_regular
from mcsim.ingest.pipeline import LoadStats, iter_sessions
from mcsim.ingest.storage import ObjectPath
from mcsim.model import Call, Compaction, Item, Session, Thread, Usage
from mcsim.outputs.run_dir import (
    RUN_JSON_MAX_BYTES,
    Replaceable,
    check_out_dir,
    input_paths,
    input_roots,
    is_run_dir,
    prefix_run_json,
    replace_dir,
    run_header,
    write_json,
)
from mcsim.processes import STOP

TARGETS = ("interchange",)
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]")


@dataclass
class ConvertReport:
    """What a conversion read and wrote."""

    out_dir: Path
    sessions: int = 0
    calls: int = 0
    files: list[str] = field(default_factory=list)  # written, relative to out_dir
    stats: LoadStats = field(default_factory=LoadStats)


def session_lines(session: Session, source_format: str | None = None) -> Iterator[dict[str, Any]]:
    """The interchange lines of one session: the header, the threads, then each call's
    compaction, items and call line, calls of all threads merged by request time (each
    thread's own order kept)."""
    yield _without_none(
        {
            "type": "session",
            "format": FORMAT,
            "version": VERSION,
            "session_id": session.session_id,
            "project": session.project,
            "cwd": session.cwd,
            "source_format": source_format,
            "source_files": list(session.files),
        }
    )
    for thread in session.threads:
        yield {"type": "thread", "thread": thread.thread_id, "kind": thread.kind.value}
    merged = heapq.merge(*(_timed(t) for t in session.threads), key=lambda e: e[0])
    for _request_s, thread, call in merged:
        yield from _call_lines(thread.thread_id, call)


def _timed(thread: Thread) -> Iterator[tuple[float, Thread, Call]]:
    for call in thread.calls:
        yield call.request_s, thread, call


def _call_lines(thread_id: str, call: Call) -> Iterator[dict[str, Any]]:
    for compaction in (call.compaction, call.pruned):
        if compaction is not None:
            yield _compaction_line(thread_id, compaction)
    for item in call.items:
        yield _item_line(thread_id, item)
    yield _without_none(
        {
            "type": "call",
            "thread": thread_id,
            "id": call.message_id,
            "request_id": call.request_id,
            "model": call.model,
            "provider": call.provider,
            "timestamp": format_time(call.timestamp_s),
            "sent_at": None if call.sent_s is None else format_time(call.sent_s),
            "done_at": None if call.done_s is None else format_time(call.done_s),
            "usage": _usage(call.usage),
        }
    )


def _usage(usage: Usage) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "input_tokens": usage.input_tokens,
        "cache_read_tokens": usage.cache_read_tokens,
        "cache_write_5m_tokens": usage.cache_write_5m_tokens,
        "cache_write_1h_tokens": usage.cache_write_1h_tokens,
        "output_tokens": usage.output_tokens,
        "speed": usage.speed,
        "inference_geo": usage.inference_geo,
    }
    if not usage.has_ttl_split:
        doc["ttl_split_recorded"] = False
    if usage.split_mismatch:
        doc["ttl_split_mismatch"] = True
    if usage.cache_deleted_tokens:
        doc["cache_deleted_tokens"] = usage.cache_deleted_tokens
    return _without_none(doc)


def _item_line(thread_id: str, item: Item) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "type": "item",
        "thread": thread_id,
        "kind": item.kind.value,
        "tool_name": item.tool_name,
        "tool_use_id": item.tool_use_id,
        "tool_class": item.tool_class,
        "text": item.text,
        "tokens": item.tokens,
    }
    if item.text is None or len(item.text) != item.chars:
        doc["chars"] = item.chars
    if item.is_error:
        doc["is_error"] = True
    return _without_none(doc)


def _compaction_line(thread_id: str, compaction: Compaction) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "type": "compaction",
        "thread": thread_id,
        "kind": compaction.kind.value,
        "timestamp": None
        if compaction.timestamp_s is None
        else format_time(compaction.timestamp_s),
        "trigger": compaction.trigger,
        "pre_tokens": compaction.pre_tokens,
        "tokens_saved": compaction.tokens_saved,
    }
    if compaction.tool_use_ids:
        doc["tool_use_ids"] = list(compaction.tool_use_ids)
    return _without_none(doc)


def _without_none(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if v is not None}


def file_name(name: str) -> str:
    """A project or session id as a file name: what is not a letter, a digit, '.', '_' or
    '-' becomes '_' (a leading dot too: no hidden files, no '..')."""
    safe = _UNSAFE_NAME.sub("_", name)[:200] or "_"
    return "_" + safe[1:] if safe.startswith(".") else safe


def not_a_conversion(folder: Path) -> str | None:
    """Why `--force` may not replace the non-empty `folder`, or None: it must hold mcsim's
    run.json written by `convert`, listing every file it wrote (`written`), and nothing but
    those files, their folders and run.json. A file convert did not write (a transcript
    copied in, a hand-written interchange file) is never replaced."""
    try:
        doc = orjson.loads(read_regular(folder / "run.json", RUN_JSON_MAX_BYTES))
    except (OSError, orjson.JSONDecodeError):
        doc = None
    files = _written(doc if is_run_dir(folder) else None)
    if isinstance(files, str):
        return files
    folders = {w.split("/", 1)[0] for w in files if "/" in w}
    for entry in sorted(folder.iterdir()):
        if entry.name == "run.json" and entry.is_file() and not entry.is_symlink():
            continue
        if entry.name not in folders or not entry.is_dir() or entry.is_symlink():
            return f"holds {entry.name}, not a file mcsim convert wrote"
        for inner in sorted(entry.iterdir()):
            name = f"{entry.name}/{inner.name}"
            if name not in files or inner.is_symlink() or not inner.is_file():
                return f"holds {name}, not a file mcsim convert wrote"
    return None


def _conversion_prefix(fs: Any, out: ObjectPath) -> tuple[set[str], str | None]:
    """not_a_conversion for a prefix in object storage: every object under it (names
    relative to it), and why --force may not replace them."""
    fs.invalidate_cache(out.key)
    found: dict[str, dict[str, Any]] = fs.find(out.key, detail=True)
    if out.key in found:
        return set(found), "is an object, not a prefix"
    entries = {name[len(out.key) + 1 :]: info for name, info in found.items()}
    if not entries:
        return set(), None
    files = _written(prefix_run_json(fs, out, entries.get("run.json")))
    if isinstance(files, str):
        return set(entries), files
    for name in sorted(entries):
        if name != "run.json" and name not in files:
            return set(entries), f"holds {name}, not a file mcsim convert wrote"
    return set(entries), None


def _written(doc: Any) -> set[str] | str:
    """The files a run.json of `convert` lists, or why `doc` (mcsim's run.json, or None) is
    not one."""
    if not (isinstance(doc, dict) and doc.get("command") == "convert"):
        return "not empty and not a folder written by mcsim convert; --force replaces only those"
    written = doc.get("written")
    if not (isinstance(written, list) and all(isinstance(w, str) for w in written)):
        return "its run.json does not list the files mcsim convert wrote; not replaced"
    return set(written)


CONVERSION = Replaceable(not_a_conversion, _conversion_prefix)


def _inside_an_input(out_dir: Path, inputs: Sequence[Path]) -> None:
    """Refuse an `out_dir` inside an input folder or prefix (`input_roots`: a glob's is the
    folder it searches): the files written would be read back as inputs by the next run
    over it."""
    target = out_dir.resolve()
    for path in inputs:
        if path.resolve() in target.parents:
            raise OutputRefusedError(f"{out_dir}: is inside the input {path}; choose another --out")


def convert(
    paths: Sequence[str],
    out_dir: Path,
    *,
    to: str = "interchange",
    force: bool = False,
    since_s: float | None = None,
    until_s: float | None = None,
    workers: int | None = None,
) -> ConvertReport:
    """Write every session under PATHS to `out_dir` in the `to` format (interchange).

    Sessions are loaded with their text (Detail.TEXT), one unit at a time, and written into
    a temporary sibling folder that is renamed to `out_dir` at the end (for a prefix in
    object storage, a temporary folder of the system's, uploaded at the end).
    """
    if to not in TARGETS:
        raise McsimError(f"--to {to}: not a format mcsim writes (one of {', '.join(TARGETS)})")
    _inside_an_input(out_dir, input_roots(paths))
    cache = default_cache_dir()  # as replay refuses it (convert itself keeps nothing there)
    check_out_dir(out_dir, force, input_paths(paths), cache, replaceable=CONVERSION)
    report = ConvertReport(out_dir)
    remote = isinstance(out_dir, ObjectPath)
    if not remote:
        out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=None if remote else out_dir.parent))
    try:
        sessions = iter_sessions(
            list(paths),
            detail=Detail.TEXT,
            since_s=since_s,
            until_s=until_s,
            workers=workers,
            stats=report.stats,
        )
        taken: set[str] = set()
        for session in sessions:
            STOP.check()
            name = _unique(f"{file_name(session.project)}/{file_name(session.session_id)}", taken)
            target = tmp / name
            target.parent.mkdir(exist_ok=True)
            with target.open("wb") as fh:
                for line in session_lines(session, _source_format(session)):
                    fh.write(orjson.dumps(line) + b"\n")
            report.sessions += 1
            report.calls += len(session.calls)
            report.files.append(name)
        if report.sessions:
            doc = {
                **run_header(paths, report.stats),
                "command": "convert",
                "to": to,
                "sessions": report.sessions,
                "calls": report.calls,
                "written": report.files,
            }
            write_json(tmp / "run.json", doc)
            replace_dir(tmp, out_dir, force, CONVERSION)
    except OSError as exc:
        raise McsimError(f"{out_dir}: could not write the conversion ({exc.strerror})") from exc
    finally:
        with STOP.shielded():
            shutil.rmtree(tmp, ignore_errors=True)
    return report


def _unique(stem: str, taken: set[str]) -> str:
    name, n = f"{stem}.jsonl", 1
    while name in taken:
        n += 1
        name = f"{stem}-{n}.jsonl"
    taken.add(name)
    return name


def _source_format(session: Session) -> str | None:
    """The format the session was read from (an interchange file's own `source_format`)."""
    path = Path(session.files[0]) if session.files else None
    loader = sniff(path) if path is not None else None
    if loader is None or loader.name != "interchange":
        return loader.name if loader is not None else None
    value = (read_header(path) or {}).get("source_format") if path is not None else None
    return value if isinstance(value, str) and value else None
