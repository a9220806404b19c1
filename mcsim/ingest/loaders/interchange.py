"""mcsim's interchange format: one JSONL file per session that any harness can write.

docs/interchange.md documents it for harness authors, and `interchange.schema.json` next to
this module is its JSON Schema (draft 2020-12) and the single source of its rules: every line
is checked against it (mcsim.ingest.loaders.schema, no schema library at run time), so a line
the schema accepts is read and one it refuses is skipped as a bad_field naming the path of
the field at fault. Version 1:

* line 1 is the header `{"type": "session", "format": "mcsim-interchange", "version": 1,
  "session_id", "project", "cwd", "source_format", ...}` (version 1.0 is 1). A file whose first
  line is an interchange line other than the header (thread, item, call, compaction, with a
  `thread` key) is claimed all the same; a file with no header, a version this mcsim does not
  know (or the string "1") or a header the schema refuses is not read: line 1 is one bad_field
  with the reason, and the lines after it are counted as `file_not_read` (one example);
* then, in conversation order: `thread` lines declare each thread (`kind` main, subagent or
  compact) before it is used; `item` lines are what was added to a thread's context;
  `compaction` lines are a compaction (kinds compact_boundary, compact_summary) or a pruning
  the recording shows (microcompact_boundary, cache_deletion) since the thread's last call;
  a `call` line is one billed API call and takes the items and compaction of its thread
  written since the thread's previous call;
* what the schema cannot say is checked here: a thread is declared once, before a line names
  it; a call written twice is read once; a tool item without a class takes the one mcsim
  knows for its tool's name (tool_classes), else its tool_use's; and times that cannot be
  true are taken as they must have been, each noted as `time_clamped` with file and line (as
  the Codex loader does): a sent_at after the call's timestamp is the timestamp, a done_at
  before it is the timestamp, and a call sent before its thread's previous call was done is
  sent then (its timestamp and done_at moved up with it).
A unit is every interchange file of one project (the header's `project`), so a call written
twice (a session converted twice) is counted once. Every line that cannot be used is counted
in the skip report with its file, line and the path of the field at fault.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from mcsim.ingest.loaders import Detail, LoadResult, LoadUnit, register
from mcsim.ingest.loaders.fields import BadField, file_size, read_objects
from mcsim.ingest.loaders.jsonl import iter_lines, open_regular
from mcsim.ingest.loaders.schema import compile_schema, json_type, shown
from mcsim.ingest.loaders.tool_classes import EVERY_HARNESS, tool_class
from mcsim.model import (
    Call,
    Compaction,
    CompactionKind,
    Item,
    ItemKind,
    Session,
    SkipReport,
    SourceRef,
    Thread,
    ThreadKind,
    ToolClass,
    Usage,
)
from mcsim.text import from_fs

FORMAT = "mcsim-interchange"
VERSION = 1
SCHEMA_FILE = Path(__file__).with_name("interchange.schema.json")
_CHECK = compile_schema(orjson.loads(SCHEMA_FILE.read_bytes()))
_LINE_TYPES = frozenset({b"thread", b"item", b"call", b"compaction"})
# An item that gives neither text nor a size: its size from its token count, at the ratio
# mcsim assumes whenever it only has sizes (mcsim.replay.calibrate._chars_estimate).
CHARS_PER_TOKEN = 4
_PRUNINGS = frozenset({CompactionKind.MICROCOMPACT, CompactionKind.CACHE_DELETION})
_HEAD_LINE_BYTES = 1024 * 1024
CallKey = tuple[str, str | None]
_UTC_LETTERS = str.maketrans("tz", "TZ")


def parse_time(value: Any) -> float:
    """A time the schema accepted: Unix seconds, or an RFC 3339 date-time (UTC when it has no
    zone; `t` and `z` as `T` and `Z`)."""
    if not isinstance(value, str):
        return float(value)
    moment = datetime.fromisoformat(value.translate(_UTC_LETTERS))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _time(obj: dict[str, Any], key: str) -> float | None:
    value = obj.get(key)
    return None if value is None else parse_time(value)


def _count(obj: dict[str, Any], key: str) -> int | None:
    """A count the schema accepted (1.0 is 1); absent or null is None."""
    value = obj.get(key)
    return None if value is None else int(value)


def parse_usage(raw: dict[str, Any]) -> Usage:
    """A call's `usage` object, as the schema accepted it."""
    return Usage(
        input_tokens=int(raw["input_tokens"]),
        cache_write_5m_tokens=int(raw["cache_write_5m_tokens"]),
        cache_write_1h_tokens=_count(raw, "cache_write_1h_tokens") or 0,
        cache_read_tokens=int(raw["cache_read_tokens"]),
        output_tokens=int(raw["output_tokens"]),
        has_ttl_split=raw.get("ttl_split_recorded", True) is True,
        split_mismatch=raw.get("ttl_split_mismatch") is True,
        speed=raw.get("speed"),
        inference_geo=raw.get("inference_geo"),
        cache_deleted_tokens=_count(raw, "cache_deleted_tokens") or 0,
    )


def parse_item(obj: dict[str, Any], detail: Detail, classes: dict[str, ToolClass]) -> Item:
    """An item line, as the schema accepted it. A tool item's class: as written, else the one
    mcsim knows for its tool's name, else its tool_use's (`classes`, by tool_use_id)."""
    kind = ItemKind(obj["kind"])
    text = obj.get("text")
    tokens, chars = _count(obj, "tokens"), _count(obj, "chars")
    if chars is None:
        chars = len(text) if text is not None else CHARS_PER_TOKEN * (tokens or 0)
    name, use_id = obj.get("tool_name"), obj.get("tool_use_id")
    what: ToolClass | None = None
    if kind in (ItemKind.TOOL_USE, ItemKind.TOOL_RESULT):
        written = obj.get("tool_class")
        if written is not None:
            what = ToolClass(written)
        elif name is not None:
            what = tool_class(name, EVERY_HARNESS)
        else:
            what = classes.get(use_id or "", ToolClass.OTHER)
        if kind is ItemKind.TOOL_USE and use_id is not None:
            classes[use_id] = what
    return Item(
        kind,
        chars,
        text if detail >= Detail.TEXT else None,
        tool_name=name,
        tool_use_id=use_id,
        is_error=obj.get("is_error") is True,
        tokens=tokens,
        tool_class=what,
    )


def parse_compaction(obj: dict[str, Any]) -> Compaction:
    """A compaction line, as the schema accepted it."""
    return Compaction(
        CompactionKind(obj["kind"]),
        _time(obj, "timestamp"),
        trigger=obj.get("trigger"),
        pre_tokens=_count(obj, "pre_tokens"),
        tokens_saved=_count(obj, "tokens_saved"),
        tool_use_ids=tuple(obj.get("tool_use_ids", ())),
    )


@dataclass(slots=True)
class _ThreadAcc:
    kind: ThreadKind
    calls: list[Call] = field(default_factory=list)
    items: list[Item] = field(default_factory=list)
    compaction: Compaction | None = None
    pruned: Compaction | None = None
    done_s: float | None = None  # when the thread's last call was done


@dataclass(slots=True)
class _FileReader:
    """One interchange file's lines turned into a session."""

    name: str
    detail: Detail
    skips: SkipReport
    seen: set[CallKey]  # calls of the unit so far
    header: dict[str, Any] | None = None
    threads: dict[str, _ThreadAcc] = field(default_factory=dict)
    refused: bool = False  # the header was refused: no later line is read
    unread: int = 0  # lines after a refused header
    first_unread: int = 0
    classes: dict[str, ToolClass] = field(default_factory=dict)  # tool_use_id -> its class

    def line(self, obj: dict[str, Any], number: int) -> None:
        if self.refused:
            self.unread += 1
            self.first_unread = self.first_unread or number
            return
        if self.header is None:
            self.refused = True  # until the header is read
            self._header(obj, number)
            self.refused = False
            return
        kind = obj.get("type")
        if kind == "session":
            raise BadField("type", "a second session header (one file holds one session)")
        _CHECK(obj, "")
        if kind == "thread":
            self._thread(obj)
        elif kind in ("item", "call", "compaction"):
            thread_id = obj["thread"]
            thread = self.threads.get(thread_id)
            if thread is None:
                raise BadField("thread", f"{shown(thread_id)} is not declared by a thread line")
            if kind == "item":
                item = parse_item(obj, self.detail, self.classes)
                if self.detail >= Detail.SIZES:
                    thread.items.append(item)
            elif kind == "compaction":
                self._compaction(thread, parse_compaction(obj), number)
            else:
                self._call(thread, obj, number)
        # other types: added by a later minor version, nothing this mcsim uses

    def _header(self, obj: dict[str, Any], number: int) -> None:
        """Read the header; a bad one raises, and the file is not read (`refused`)."""
        if obj.get("type") != "session":
            raise BadField(
                "session",
                f'line {number} is not the session header ({{"type": "session", '
                f'"format": "{FORMAT}", ...}}), which must come first; the file is not read',
            )
        if obj.get("format") != FORMAT:
            raise BadField("format", f"not {FORMAT!r} in the session header; the file is not read")
        version = obj.get("version")
        found = json_type(version)
        if found not in ("integer", "number"):
            text = orjson.dumps(version).decode()[:20] if "version" in obj else "missing"
            article = "an" if found[0] in "aeiou" else "a"
            why = "missing" if "version" not in obj else f"{text} is {article} {found}"
            raise BadField("version", f"{why}, not the integer {VERSION}; the file is not read")
        if version != VERSION:
            raise BadField(
                "version",
                f"{shown(version)} is not a version this mcsim reads ({VERSION}); "
                "the file is not read",
            )
        try:
            _CHECK(obj, "")
        except BadField as exc:
            key, why = str(exc).split(": ", 1)
            raise BadField(key, f"{why}; the file is not read") from None
        self.header = obj

    def finish(self) -> None:
        """Count the lines a refused header left unread, with one example."""
        if self.unread:
            self.skips.add(
                self.name,
                self.first_unread,
                "file_not_read",
                f"this line and the {self.unread - 1} after it: the header (line 1) was refused",
            )
            self.skips.counts["file_not_read"] += self.unread - 1

    def _thread(self, obj: dict[str, Any]) -> None:
        thread_id = obj["thread"]
        if thread_id in self.threads:
            raise BadField("thread", f"{shown(thread_id)} is declared twice")
        self.threads[thread_id] = _ThreadAcc(ThreadKind(obj["kind"]))

    def _compaction(self, thread: _ThreadAcc, compaction: Compaction, number: int) -> None:
        slot = "pruned" if compaction.kind in _PRUNINGS else "compaction"
        if getattr(thread, slot) is not None:
            self.skips.add(
                self.name, number, "duplicate_compaction", f"a second {slot} before one call"
            )
            return
        setattr(thread, slot, compaction)

    def _call(self, thread: _ThreadAcc, obj: dict[str, Any], number: int) -> None:
        key = (obj["id"], obj.get("request_id"))
        if key in self.seen:
            self.skips.add(self.name, number, "duplicate_call", "a call written before")
            return
        self.seen.add(key)
        timestamp_s = parse_time(obj["timestamp"])
        sent_s, done_s = _time(obj, "sent_at"), _time(obj, "done_at")
        timestamp_s, sent_s, done_s = self._consistent(thread, timestamp_s, sent_s, done_s, number)
        thread.calls.append(
            Call(
                message_id=key[0],
                request_id=key[1],
                timestamp_s=timestamp_s,
                model=obj["model"],
                usage=parse_usage(obj["usage"]),
                items=tuple(thread.items),
                source=SourceRef(self.name, number),
                compaction=thread.compaction,
                sent_s=sent_s,
                done_s=done_s,
                pruned=thread.pruned,
                provider=obj.get("provider", "anthropic"),
            )
        )
        thread.items, thread.compaction, thread.pruned = [], None, None

    def _consistent(
        self, thread: _ThreadAcc, stamp: float, sent: float | None, done: float | None, line: int
    ) -> tuple[float, float | None, float | None]:
        """A call's times as they must have been, each change noted (`time_clamped`): sent no
        later than the timestamp, done no earlier, and sent no earlier than the thread's
        previous call was done (the timestamp and done moved up with it)."""
        problems = []
        if sent is not None and sent > stamp:
            problems.append(f"sent_at {sent - stamp:,.3f} s after the timestamp: taken as it")
            sent = stamp
        if done is not None and done < stamp:
            problems.append(f"done_at {stamp - done:,.3f} s before the timestamp: taken as it")
            done = stamp
        before = thread.done_s
        start = stamp if sent is None else sent
        if before is not None and start < before:
            problems.append(
                f"sent {before - start:,.3f} s before the thread's previous call was done: "
                "taken as sent then"
            )
            stamp = max(stamp, before)
            sent = None if sent is None else before
            done = None if done is None else max(done, before)
        thread.done_s = stamp if done is None else done
        for problem in problems:
            self.skips.note(self.name, line, "time_clamped", problem)
        return stamp, sent, done

    def session(self) -> Session | None:
        if self.header is None:
            return None
        threads = []
        for thread_id, acc in self.threads.items():
            if acc.items or acc.compaction or acc.pruned:
                self.skips.note(
                    self.name, 0, "items_after_last_call", f"thread {thread_id[:40]}: not billed"
                )
            if acc.calls:
                threads.append(Thread(thread_id, acc.kind, tuple(acc.calls)))
        if not threads:
            return None
        head = self.header
        return Session(
            head["session_id"], head["project"], head.get("cwd"), (self.name,), tuple(threads)
        )


def read_header(path: Path) -> dict[str, Any] | None:
    """The header of an interchange file, or None when its first line is not one."""
    try:
        with open_regular(path) as fh:
            for _number, raw, size, _last in iter_lines(fh, _HEAD_LINE_BYTES):
                if raw is None or not size:
                    return None
                obj = orjson.loads(raw)
                if (
                    isinstance(obj, dict)
                    and obj.get("type") == "session"
                    and obj.get("format") == FORMAT
                ):
                    return obj
                return None
    except (OSError, orjson.JSONDecodeError):
        return None
    return None


def format_time(seconds: float) -> str | float:
    """A time as the writer puts it: ISO-8601 in UTC when that reads back as the very same
    float, else Unix seconds (so a round trip is exact)."""
    text = datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")
    return text if parse_time(text) == seconds else seconds


class InterchangeLoader:
    """Loader for mcsim interchange files."""

    name = "interchange"

    def sniff(self, path: Path, head: bytes) -> int:
        first = head.split(b"\n", 1)[0]
        # Surer than any other format: the header names this one.
        if b'"mcsim-interchange"' in first and b'"session"' in first:
            return 4
        # A file without its header (or with it further down) is still recognisable by its
        # lines, {"type": "thread" | "item" | "call" | "compaction", "thread": ...}: claimed,
        # so the loader says once that the header is missing (over Claude Code's 1 and 2).
        try:
            obj = orjson.loads(first)
        except orjson.JSONDecodeError:
            return 0
        if (
            isinstance(obj, dict)
            and isinstance(obj.get("type"), str)
            and obj["type"].encode() in _LINE_TYPES
            and isinstance(obj.get("thread"), str)
            and not {"sessionId", "parentUuid", "payload"} & obj.keys()
        ):
            return 3
        return 0

    def units(self, files: Sequence[Path]) -> list[LoadUnit]:
        groups: dict[str, list[Path]] = {}
        for path in files:
            header = read_header(path) or {}
            project = header.get("project")
            project = project if isinstance(project, str) and project else "interchange"
            groups.setdefault(project, []).append(path)
        units = []
        for project, paths in groups.items():
            paths.sort()
            size = sum(file_size(p) for p in paths)
            units.append(LoadUnit(self.name, f"interchange/{project}", tuple(paths), size))
        return units

    def load(self, unit: LoadUnit, detail: Detail) -> LoadResult:
        result = LoadResult()
        seen: set[CallKey] = set()
        for path in unit.files:
            name = from_fs(str(path))
            reader = _FileReader(name, detail, result.skips, seen)
            for number, obj in read_objects(path, name, result.skips):
                try:
                    reader.line(obj, number)
                except BadField as exc:
                    result.skips.add(name, number, "bad_field", str(exc))
            reader.finish()
            session = reader.session()
            if session is not None:
                result.sessions.append(session)
        return result


register(InterchangeLoader())
