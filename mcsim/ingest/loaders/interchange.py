"""mcsim's interchange format: one JSONL file per session that any harness can write.

docs/interchange.md documents it for harness authors, and
`interchange.schema.json` next to this module is its JSON Schema (draft 2020-12); this
loader checks the same rules by hand (no schema library at run time). Version 1:

* line 1 is the header `{"type": "session", "format": "mcsim-interchange", "version": 1,
  "session_id", "project", "cwd", "source_format", ...}`. A file whose first line is an
  interchange line other than the header (thread, item, call, compaction, with a `thread` key)
  is claimed all the same; a file with no header, a version this mcsim does not know (or the
  string "1") or a bad session_id or project is not read: line 1 is one bad_field with the
  reason, and the lines after it are counted as `file_not_read` (one example);
* then, in conversation order: `thread` lines declare each thread (`kind` main, subagent or
  compact) before it is used; `item` lines are what was added to a thread's context;
  `compaction` lines are a compaction (kinds compact_boundary, compact_summary) or a pruning
  the recording shows (microcompact_boundary, cache_deletion) since the thread's last call;
  a `call` line is one billed API call and takes the items and compaction of its thread
  written since the thread's previous call;
* times are ISO-8601 strings (UTC when no zone is given) or Unix seconds; token counts are
  non-negative integers (usage's four required counts not null; cache_write_1h_tokens and
  cache_deleted_tokens may be null: 0); an item's `tokens` wins over its text's estimate;
  unknown keys are allowed (later minor additions), unknown line types are passed over.
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
from mcsim.ingest.loaders.fields import (
    EARLIEST_S,
    LATEST_S,
    BadField,
    file_size,
    parse_timestamp,
    read_objects,
    token_count,
)
from mcsim.ingest.loaders.jsonl import iter_lines, open_regular
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
    Usage,
)
from mcsim.text import from_fs

FORMAT = "mcsim-interchange"
VERSION = 1
SCHEMA_FILE = Path(__file__).with_name("interchange.schema.json")
PROVIDERS = ("anthropic", "openai")
_JSON_TYPES = {
    str: "a string",
    float: "a number",
    bool: "a boolean",
    list: "a list",
    dict: "an object",
}
_LINE_TYPES = frozenset({b"thread", b"item", b"call", b"compaction"})
# An item that gives neither text nor a size: its size from its token count, at the ratio
# mcsim assumes whenever it only has sizes (mcsim.replay.calibrate._chars_estimate).
CHARS_PER_TOKEN = 4
_PRUNINGS = frozenset({CompactionKind.MICROCOMPACT, CompactionKind.CACHE_DELETION})
_HEAD_LINE_BYTES = 1024 * 1024
_USAGE_COUNTS = (
    "input_tokens",
    "cache_read_tokens",
    "cache_write_5m_tokens",
    "cache_write_1h_tokens",
    "output_tokens",
)
CallKey = tuple[str, str | None]


def _str(obj: dict[str, Any], key: str, where: str = "", *, required: bool = False) -> str | None:
    """A string field: absent or null is None (or an error when `required`); "" is refused."""
    value = obj.get(key)
    if value is None:
        if required:
            raise BadField(where + key, "missing")
        return None
    if not isinstance(value, str):
        raise BadField(where + key, f"not a string ({type(value).__name__})")
    if not value:
        raise BadField(where + key, "empty")
    return value


def _bool(obj: dict[str, Any], key: str, where: str = "", default: bool = False) -> bool:
    value = obj.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise BadField(where + key, f"not true or false ({type(value).__name__})")
    return value


def _time(obj: dict[str, Any], key: str, *, required: bool = False) -> float | None:
    """A time: an ISO-8601 string or Unix seconds (a number)."""
    value = obj.get(key)
    if value is None and not required:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        if not EARLIEST_S <= value < LATEST_S:  # 1970 to 2999, as for ISO times
            raise BadField(key, "outside the years 1970 to 2999")
        return float(value)
    return parse_timestamp(value, key)


def _optional_count(obj: dict[str, Any], key: str) -> int | None:
    """A token count at the top of a line: absent or null is None."""
    if obj.get(key) is None:
        return None
    try:
        return token_count(obj, key, "")
    except BadField as exc:  # named ".key" by token_count: the path is the key itself
        raise BadField(key, str(exc).split(": ", 1)[1]) from None


def _enum(value: Any, kind: type[Any], key: str) -> Any:
    if not isinstance(value, str):
        raise BadField(
            key, "missing" if value is None else f"not a string ({type(value).__name__})"
        )
    try:
        return kind(value)
    except ValueError:
        known = ", ".join(k.value for k in kind)
        raise BadField(key, f"unknown value {value[:40]!r} (one of {known})") from None


def parse_usage(raw: Any) -> Usage:
    """A call's `usage` object."""
    if not isinstance(raw, dict):
        raise BadField("usage", "missing" if raw is None else "not an object")
    for key in _USAGE_COUNTS[:3] + _USAGE_COUNTS[4:]:  # the 1-hour writes may be left out
        if raw.get(key) is None:  # as the schema says: required, and not null
            raise BadField(f"usage.{key}", "missing" if key not in raw else "null, not a count")
    counts = [token_count(raw, key, "usage") for key in _USAGE_COUNTS]
    speed = _str(raw, "speed", "usage.")
    geo = _str(raw, "inference_geo", "usage.")
    return Usage(
        input_tokens=counts[0],
        cache_write_5m_tokens=counts[2],
        cache_write_1h_tokens=counts[3],
        cache_read_tokens=counts[1],
        output_tokens=counts[4],
        has_ttl_split=_bool(raw, "ttl_split_recorded", "usage.", default=True),
        split_mismatch=_bool(raw, "ttl_split_mismatch", "usage."),
        speed=speed,
        inference_geo=geo,
        cache_deleted_tokens=token_count(raw, "cache_deleted_tokens", "usage"),
    )


def parse_item(obj: dict[str, Any], detail: Detail) -> Item:
    kind = _enum(obj.get("kind"), ItemKind, "kind")
    text = obj.get("text")
    if text is not None and not isinstance(text, str):
        raise BadField("text", f"not a string ({type(text).__name__})")
    tokens = _optional_count(obj, "tokens")
    chars = _optional_count(obj, "chars")
    if text is None and tokens is None and chars is None:
        raise BadField("text", "missing (an item gives its text, its tokens or its chars)")
    if chars is None:
        chars = len(text) if text is not None else CHARS_PER_TOKEN * (tokens or 0)
    return Item(
        kind,
        chars,
        text if detail >= Detail.TEXT else None,
        tool_name=_str(obj, "tool_name"),
        tool_use_id=_str(obj, "tool_use_id"),
        is_error=_bool(obj, "is_error"),
        tokens=tokens,
    )


def parse_compaction(obj: dict[str, Any]) -> Compaction:
    ids = obj.get("tool_use_ids", [])
    if not isinstance(ids, list) or not all(isinstance(i, str) and i for i in ids):
        raise BadField("tool_use_ids", "not a list of strings")
    return Compaction(
        _enum(obj.get("kind"), CompactionKind, "kind"),
        _time(obj, "timestamp"),
        trigger=_str(obj, "trigger"),
        pre_tokens=_optional_count(obj, "pre_tokens"),
        tokens_saved=_optional_count(obj, "tokens_saved"),
        tool_use_ids=tuple(ids),
    )


@dataclass(slots=True)
class _ThreadAcc:
    kind: ThreadKind
    calls: list[Call] = field(default_factory=list)
    items: list[Item] = field(default_factory=list)
    compaction: Compaction | None = None
    pruned: Compaction | None = None


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

    def line(self, obj: dict[str, Any], number: int) -> None:
        kind = obj.get("type")
        if self.refused:
            self.unread += 1
            self.first_unread = self.first_unread or number
            return
        if self.header is None:
            self.refused = True  # until the header is read
            self._header(obj, number)
            self.refused = False
            return
        if kind == "session":
            raise BadField("type", "a second session header (one file holds one session)")
        if kind == "thread":
            self._thread(obj)
        elif kind in ("item", "call", "compaction"):
            thread_id = _str(obj, "thread", required=True)
            assert thread_id is not None
            thread = self.threads.get(thread_id)
            if thread is None:
                raise BadField("thread", f"{thread_id[:40]!r} is not declared by a thread line")
            if kind == "item":
                if self.detail >= Detail.SIZES:
                    thread.items.append(parse_item(obj, self.detail))
                else:
                    parse_item(obj, self.detail)  # checked all the same
            elif kind == "compaction":
                self._compaction(thread, parse_compaction(obj), number)
            else:
                self._call(thread, obj, number)
        elif not isinstance(kind, str):
            raise BadField("type", "missing" if kind is None else "not a string")
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
        if isinstance(version, int) and not isinstance(version, bool):
            if version != VERSION:
                raise BadField(
                    "version",
                    f"{str(version)[:20]} is not a version this mcsim reads ({VERSION}); "
                    "the file is not read",
                )
        else:
            shown = orjson.dumps(version).decode()[:20] if version is not None else "missing"
            kind = _JSON_TYPES.get(type(version), type(version).__name__)
            raise BadField(
                "version",
                f"{shown} is {kind}, not the integer {VERSION}; the file is not read",
            )
        try:
            _str(obj, "session_id", required=True)
            _str(obj, "project", required=True)
            _str(obj, "cwd")
        except BadField as exc:
            raise BadField(
                str(exc).split(": ", 1)[0], f"{str(exc).split(': ', 1)[1]}; the file is not read"
            ) from None
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
        thread_id = _str(obj, "thread", required=True)
        assert thread_id is not None
        kind = _enum(obj.get("kind"), ThreadKind, "kind")
        if thread_id in self.threads:
            raise BadField("thread", f"{thread_id[:40]!r} is declared twice")
        self.threads[thread_id] = _ThreadAcc(kind)

    def _compaction(self, thread: _ThreadAcc, compaction: Compaction, number: int) -> None:
        slot = "pruned" if compaction.kind in _PRUNINGS else "compaction"
        if getattr(thread, slot) is not None:
            self.skips.add(
                self.name, number, "duplicate_compaction", f"a second {slot} before one call"
            )
            return
        setattr(thread, slot, compaction)

    def _call(self, thread: _ThreadAcc, obj: dict[str, Any], number: int) -> None:
        message_id = _str(obj, "id", required=True)
        assert message_id is not None
        request_id = _str(obj, "request_id")
        model = _str(obj, "model", required=True)
        assert model is not None
        provider = _str(obj, "provider") or "anthropic"
        if provider not in PROVIDERS:
            raise BadField(
                "provider", f"unknown value {provider[:40]!r} (one of {', '.join(PROVIDERS)})"
            )
        timestamp_s = _time(obj, "timestamp", required=True)
        assert timestamp_s is not None
        usage = parse_usage(obj.get("usage"))
        sent_s = _time(obj, "sent_at")
        done_s = _time(obj, "done_at")
        key = (message_id, request_id)
        if key in self.seen:
            self.skips.add(self.name, number, "duplicate_call", "a call written before")
            return
        self.seen.add(key)
        thread.calls.append(
            Call(
                message_id=message_id,
                request_id=request_id,
                timestamp_s=timestamp_s,
                model=model,
                usage=usage,
                items=tuple(thread.items),
                source=SourceRef(self.name, number),
                compaction=thread.compaction,
                sent_s=sent_s,
                done_s=done_s,
                pruned=thread.pruned,
                provider=provider,
            )
        )
        thread.items, thread.compaction, thread.pruned = [], None, None

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
    try:
        if parse_timestamp(text) == seconds:
            return text
    except BadField:
        pass
    return seconds


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
