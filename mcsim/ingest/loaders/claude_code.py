"""Claude Code JSONL transcripts (every layout from 1.0.x to 2.1.x).

Layouts (docs/domain.md#where-transcripts-live): `<project>/<sessionId>.jsonl` with inline
sidechain lines (≤1.0.x), `<project>/agent-<id>.jsonl` beside the sessions (2.0.x) and
`<project>/<sessionId>/subagents/agent-<id>.jsonl` (2.1.2+). A unit is one project folder:
resumed sessions copy earlier history into a new file of the same project, so the copies and
their originals meet inside one unit and are counted once.

Rules applied here (docs/domain.md#claude-code-transcripts, docs/counting.md):
* one API call per (message.id, requestId) across all files of the unit; input and cache
  fields from its first line, output = max over its lines; `<synthetic>` lines are not calls;
  a later line of a call whose input or cache counts differ from the first is noted
  (`conflicting_usage`), the first line's counts stand;
* side-question logs (`/btw`) replay parent messages as sidechain lines with the same
  message.id and a new requestId: within a session, two calls with one message.id where
  either is a sidechain line are one call, and the non-sidechain one stands (ccusage's rule,
  ccusage/ccusage#913, PR #1155; like its daily report, the timestamps need not match);
  counted as a `sidechain_replay` note;
* lines are placed by their `sessionId` field (copied history keeps the original's id) and
  their thread (`agentId`, else the root of an inline sidechain, else main);
* a thread's order follows the `parentUuid` tree (depth first, children in file order). Calls
  never depend on line uuids being unique: each line is its own node; a line repeating the
  uuid, type, time and call of an earlier one is a copy (resumed sessions copy history
  verbatim) and adds nothing; any other line reusing a uuid is kept and noted
  (`uuid_collision`), and a `parentUuid` names the latest line with that uuid before it;
* compaction boundaries and compaction summaries become explicit events;
* a line without `type` that carries a whole assistant message (model, id, usage) is read as
  an assistant line, as ccusage reads it;
* a token count must be a non-negative integer no larger than `MAX_TOKENS_PER_CALL`.
Every line that cannot be used is counted in the skip report with file and line number; skip
details describe the problem (sizes, positions, field names), never transcript content.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, cast

import msgspec
import orjson
from msgspec import UNSET, Meta, Raw, Struct, UnsetType

from mcsim.ingest.loaders import Detail, LoadResult, LoadUnit, register
from mcsim.ingest.loaders.fields import (
    MAX_TOKENS_PER_CALL,
    BadField,
    file_size,
    json_text,
    optional_timestamp,
    parse_timestamp,
    raw_json_text,
    read_typed,
    token_count,
)
from mcsim.ingest.loaders.tool_classes import CLAUDE_CODE, tool_class
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

# Line types that carry nothing mcsim uses; they still link the parentUuid chain.
_IGNORED_TYPES = frozenset(
    {
        "summary",
        "file-history-snapshot",
        "queue-operation",
        "progress",
        "permission-mode",
        "last-prompt",
        "custom-title",
        "agent-name",
        "tag",
        "pr-link",
    }
)
_CONVERSATION_TYPES = frozenset({"user", "assistant", "system", "attachment"})
_SYNTHETIC_MODEL = "<synthetic>"
# system line subtype -> what it records, and the key of its metadata
_BOUNDARIES = {
    "compact_boundary": (CompactionKind.BOUNDARY, "compactMetadata"),
    "microcompact_boundary": (CompactionKind.MICROCOMPACT, "microcompactMetadata"),
}
_MAIN = "main"
CallKey = tuple[str, str | None]


# ---------------------------------------------------------------- per-line records


@dataclass(slots=True)
class _CallAcc:
    """A call being accumulated over its lines."""

    message_id: str
    request_id: str | None
    timestamp_s: float
    model: str
    usage: Usage
    output_tokens: int
    source: SourceRef
    first_node: _Node
    sidechain: bool
    first_counts: tuple[Any, ...]  # the first line's input and cache counts as written
    conflict_noted: bool = False

    @property
    def key(self) -> CallKey:
        return (self.message_id, self.request_id)


@dataclass(slots=True)
class _Node:
    """One line in a thread's parentUuid tree. Identity is the object, never the uuid."""

    uuid: str
    parent: str | None
    items: list[Item]
    kind: str  # with `stamp` and `call_key`: tells a copied line from a reused uuid
    stamp: Any
    call_key: CallKey | None = None
    compaction: Compaction | None = None

    def same_line(self, other: _Node) -> bool:
        return (
            self.kind == other.kind
            and self.stamp == other.stamp
            and self.call_key == other.call_key
        )


@dataclass(slots=True)
class _ThreadAcc:
    nodes: list[_Node] = field(default_factory=list)  # in reading order
    first: dict[str, _Node] = field(default_factory=dict)  # the first node of each uuid
    reused: dict[str, list[_Node]] = field(default_factory=dict)  # later nodes of a uuid


@dataclass(slots=True)
class _SessionAcc:
    session_id: str
    project: str
    cwd: str | None = None
    files: dict[str, None] = field(default_factory=dict)  # ordered set
    threads: dict[str, _ThreadAcc] = field(default_factory=dict)
    thread_of: dict[str, str] = field(default_factory=dict)  # uuid -> thread, latest line


# ---------------------------------------------------------------- typed lines
#
# What `read_typed` decodes a line into: only the fields this loader reads, each of the one
# type the rules above take without a note or a skip (a count within its limits, an id that is
# a string, ...). A line with any of them of another type is refused by the decoder and read
# from its dict by `_LineReader._line`, the reference: these only spare the dict walk where
# the outcome cannot differ. Every other field is skipped unbuilt. Two decoders: `inspect`
# (Detail.CALLS) does not even look at the messages' content.

_Count = Annotated[int, Meta(ge=0, le=MAX_TOKENS_PER_CALL)]
_NULL = Raw(b"null")


class _TSplit(Struct, gc=False):
    """usage.cache_creation; UNSET: the key is absent (a null one still makes it a split)."""

    ephemeral_5m_input_tokens: _Count | UnsetType | None = UNSET
    ephemeral_1h_input_tokens: _Count | UnsetType | None = UNSET


class _TUsage(Struct, gc=False):
    input_tokens: _Count | None = None
    cache_creation_input_tokens: _Count | None = None
    cache_read_input_tokens: _Count | None = None
    output_tokens: _Count | None = None
    cache_creation: _TSplit | None = None
    speed: str | None = None
    inference_geo: str | None = None
    cache_deleted_input_tokens: _Count | None = None


class _TResultBlock(Struct, gc=False):
    """A block of a tool result's content; an image's (whose text is the whole block) and any
    other kind's is read from the dict."""

    type: Literal["text", "tool_reference"] | None = None
    text: str | None = None


class _TBlock(Struct, gc=False):
    type: str | None = None
    text: str | None = None
    thinking: str | None = None
    data: str | None = None
    id: str | None = None
    name: str | None = None
    input: Raw = _NULL  # (a Raw cannot be optional: null is Raw(b"null") too)
    tool_use_id: str | None = None
    content: str | list[_TResultBlock] | None = None
    is_error: bool | None = None
    source: Raw = _NULL


class _TMessageCalls(Struct, gc=False):
    model: str | None = None
    id: str | None = None
    usage: _TUsage | None = None


class _TMessage(_TMessageCalls, gc=False):
    content: str | list[_TBlock] | None = None


class _TMeta(Struct, gc=False):
    """A compaction boundary's metadata: read as the dict's values are (any type)."""

    trigger: Any = None
    preTokens: Any = None
    tokensSaved: Any = None
    compactedToolIds: Any = None


class _TLineCalls(Struct, gc=False):
    type: str | None = None
    sessionId: str | None = None
    uuid: str | None = None
    parentUuid: str | None = None
    timestamp: str | None = None
    message: _TMessageCalls | None = None
    requestId: str | None = None
    isSidechain: bool | None = None
    agentId: str | None = None
    cwd: str | None = None
    subtype: str | None = None
    isCompactSummary: bool | None = None
    compactMetadata: _TMeta | None = None
    microcompactMetadata: _TMeta | None = None


class _TLine(_TLineCalls, gc=False):
    # The message with its content.
    message: _TMessage | None = None
    attachment: Raw = _NULL


_DECODERS: dict[bool, Callable[[Any], Any]] = {
    False: msgspec.json.Decoder(_TLineCalls).decode,
    True: msgspec.json.Decoder(_TLine).decode,
}


def _typed_usage(raw: _TUsage) -> Usage:
    """`_usage` of a typed usage: every count is one `token_count` takes as it is."""
    cache_write = raw.cache_creation_input_tokens or 0
    split = raw.cache_creation
    write_1h = 0
    has_split = mismatch = False
    if split is not None:
        five, hour = split.ephemeral_5m_input_tokens, split.ephemeral_1h_input_tokens
        has_split = five is not UNSET or hour is not UNSET
        if has_split:
            write_1h = hour or 0
            if (five or 0) + write_1h != cache_write:
                mismatch = True
                write_1h = min(write_1h, cache_write)
    return Usage(
        raw.input_tokens or 0,
        cache_write - write_1h,
        write_1h,
        raw.cache_read_input_tokens or 0,
        raw.output_tokens or 0,
        has_split,
        mismatch,
        raw.speed or None,
        raw.inference_geo or None,
        raw.cache_deleted_input_tokens or 0,
    )


def _usage(raw: Any) -> Usage:
    if not isinstance(raw, dict):
        raise BadField("message.usage", "missing" if raw is None else "not an object")
    cache_write = token_count(raw, "cache_creation_input_tokens")
    split = raw.get("cache_creation")
    has_split = isinstance(split, dict) and (
        "ephemeral_5m_input_tokens" in split or "ephemeral_1h_input_tokens" in split
    )
    write_1h = write_5m = 0
    mismatch = False
    if has_split:
        assert isinstance(split, dict)
        write_5m = token_count(split, "ephemeral_5m_input_tokens", "message.usage.cache_creation")
        write_1h = token_count(split, "ephemeral_1h_input_tokens", "message.usage.cache_creation")
        if write_5m + write_1h != cache_write:
            # The billed total wins; the unexplained part is priced as 5-minute writes.
            mismatch = True
            write_1h = min(write_1h, cache_write)
    write_5m = cache_write - write_1h
    speed = raw.get("speed")
    geo = raw.get("inference_geo")
    return Usage(
        input_tokens=token_count(raw, "input_tokens"),
        cache_write_5m_tokens=write_5m,
        cache_write_1h_tokens=write_1h,
        cache_read_tokens=token_count(raw, "cache_read_input_tokens"),
        output_tokens=token_count(raw, "output_tokens"),
        has_ttl_split=has_split,
        split_mismatch=mismatch,
        speed=speed if isinstance(speed, str) and speed else None,
        inference_geo=geo if isinstance(geo, str) and geo else None,
        cache_deleted_tokens=0 if _deleted_problem(raw) else token_count(raw, _DELETED),
    )


_DELETED = "cache_deleted_input_tokens"


def _deleted_problem(usage: dict[str, Any]) -> str | None:
    """What is wrong with a call's cache_deleted_input_tokens, if anything: a bad value there
    is dropped (the line is used, with the repair counted), since it bills nothing."""
    if usage.get(_DELETED) is None:
        return None
    try:
        token_count(usage, _DELETED)
    except BadField as exc:
        return f"{exc}; ignored"
    return None


def _tool_result_text(content: Any) -> str:
    """What the model saw of a tool result: its string, or its text blocks joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict):
                text = block.get("text")
                if isinstance(text, str):
                    parts.append(text)
                elif block.get("type") == "image":
                    parts.append(json_text(block))
        return "\n".join(parts)
    return ""


class _LineReader:
    """Turns one unit's lines into session/thread/call accumulators."""

    def __init__(self, project: str, detail: Detail, skips: SkipReport) -> None:
        self.project = project
        self.items = detail >= Detail.SIZES
        self.keep_text = detail >= Detail.TEXT
        self.skips = skips
        self.sessions: dict[str, _SessionAcc] = {}
        self.calls: dict[CallKey, _CallAcc] = {}
        self.by_message: dict[tuple[str, str], _CallAcc] = {}  # (session, message id) -> call
        self.replays: set[CallKey] = set()  # sidechain copies of calls counted elsewhere
        self.tool_names: dict[str, str] = {}  # tool_use_id -> tool name
        self._file_thread: str | None = None  # agent-<id> for sub-agent files
        self._decode = _DECODERS[self.items]
        self._times: dict[str, float | None] = {}  # time strings parsed (`_seconds`)

    # ---------------------------------------------------------------- entry points

    def read_file(self, path: Path) -> None:
        name = from_fs(str(path))
        # Lines without a sessionId belong to the session the file is about.
        stem = from_fs(path.stem)
        fallback = from_fs(path.parent.parent.name) if path.parent.name == "subagents" else stem
        self._file_thread = stem if stem.startswith("agent-") else None
        read_line, read_typed_line = self._line, self._typed_line
        for number, obj in read_typed(path, name, self.skips, self._decode):
            try:
                if obj.__class__ is dict:  # a line the typed decode refused
                    fallback = read_line(obj, name, number, fallback)
                else:
                    fallback = read_typed_line(obj, name, number, fallback)
            except BadField as exc:
                self.skips.add(name, number, "bad_field", str(exc))

    # ---------------------------------------------------------------- one line

    def _line(self, obj: dict[str, Any], file: str, line: int, fallback: str) -> str:
        """Read one parsed line; returns the session id later lines without one belong to."""
        get = obj.get
        kind = get("type")
        if kind is None and _is_whole_call(obj):
            kind = "assistant"  # ccusage counts such lines too: they carry a billed call
        if not isinstance(kind, str):
            raise BadField("type", "missing" if kind is None else "not a string")
        if kind not in _CONVERSATION_TYPES:
            if kind not in _IGNORED_TYPES:
                self.skips.add(file, line, "unknown_type", kind[:60])
            else:
                self._link_only(obj, kind, file, line, fallback)
            return fallback
        sid = get("sessionId")
        session_id = sid if isinstance(sid, str) and sid else fallback
        uuid = get("uuid")
        if not isinstance(uuid, str) or not uuid:
            uuid = f"{file}:{line}"
        parent = get("parentUuid")
        if parent is not None and not isinstance(parent, str):
            self.skips.repair(file, line, "bad_field", "parentUuid: not a string, treated as root")
            parent = None

        node = _Node(uuid, parent, [], kind, get("timestamp"))
        if kind == "assistant":
            self._assistant(obj, node, file, line, session_id)
        elif kind == "user":
            self._user(obj, node, file, line)
        elif kind == "system":
            self._system(obj, node)
        elif self.items:  # attachment: injected context the model reads
            att = obj.get("attachment")
            if att is not None:
                text = json_text(att)
                node.items.append(self._item(ItemKind.ATTACHMENT, text))
        self._place(node, file, line, session_id, *_where(obj))
        return session_id

    def _check_counts(self, acc: _CallAcc, counts: tuple[Any, ...], file: str, line: int) -> None:
        """A later line of a call whose input or cache counts differ from its first line's is
        noted once per call (the first line's counts stand)."""
        if not acc.conflict_noted and counts != acc.first_counts:
            acc.conflict_noted = True
            self.skips.note(
                file, line, "conflicting_usage",
                "input or cache counts differ from the call's first line",
            )  # fmt: skip

    def _typed_line(self, obj: _TLine, file: str, line: int, fallback: str) -> str:
        """`_line` for a typed line: the same steps in the same order, on attributes whose
        types the decoder checked (so none of `_line`'s type checks can fail here)."""
        kind = obj.type
        msg = obj.message
        if (
            kind is None
            and msg is not None
            and msg.usage is not None
            and msg.model is not None
            and msg.id is not None
        ):
            kind = "assistant"  # _is_whole_call
        if kind is None:
            raise BadField("type", "missing")
        if kind not in _CONVERSATION_TYPES:
            if kind not in _IGNORED_TYPES:
                self.skips.add(file, line, "unknown_type", kind[:60])
            elif obj.uuid:  # _link_only
                node = _Node(obj.uuid, obj.parentUuid, [], kind, None)
                session_id = obj.sessionId or fallback
                self._place(node, file, line, session_id, obj.cwd, obj.agentId or None,
                            obj.isSidechain is True)  # fmt: skip
            return fallback
        session_id = obj.sessionId or fallback
        node = _Node(obj.uuid or f"{file}:{line}", obj.parentUuid, [], kind, obj.timestamp)
        if kind == "assistant":
            if msg is None:
                raise BadField("message", "missing")
            self._typed_assistant(obj, msg, node, file, line, session_id)
        elif kind == "user":
            if msg is None:
                raise BadField("message", "missing")
            if obj.isCompactSummary is True:
                node.compaction = Compaction(
                    CompactionKind.SUMMARY, optional_timestamp(obj.timestamp)
                )
            if self.items:
                self._typed_content(msg.content, node, file, line, False)
        elif kind == "system":
            subtype = obj.subtype
            if subtype in _BOUNDARIES:
                compaction, key = _BOUNDARIES[subtype]
                meta = getattr(obj, key) or _NO_META
                node.compaction = Compaction(
                    compaction,
                    optional_timestamp(obj.timestamp),
                    trigger=_optional_str(meta.trigger),
                    pre_tokens=_optional_int(meta.preTokens),
                    tokens_saved=_optional_int(meta.tokensSaved),
                    tool_use_ids=_strings(meta.compactedToolIds),
                )
        elif self.items:
            att = orjson.loads(memoryview(obj.attachment))
            if att is not None:
                node.items.append(self._item(ItemKind.ATTACHMENT, json_text(att)))
        self._place(node, file, line, session_id, obj.cwd, obj.agentId or None,
                    obj.isSidechain is True)  # fmt: skip
        return session_id

    def _typed_assistant(
        self, obj: _TLine, msg: _TMessage, node: _Node, file: str, line: int, session_id: str
    ) -> None:
        """`_assistant` for a typed line."""
        model = msg.model
        if model == _SYNTHETIC_MODEL:
            self.skips.add(file, line, "synthetic", "not an API call (error or interrupt)")
            if self.items:
                self._typed_content(msg.content, node, file, line, True)
            return
        if not model:
            raise BadField("message.model", "missing" if model is None else "not a string")
        message_id = msg.id
        if not message_id:
            raise BadField("message.id", "missing" if message_id is None else "not a string")
        request_id = obj.requestId or None
        key = (message_id, request_id)
        acc = self.calls.get(key)
        raw = msg.usage
        if acc is not None:
            if raw is None:
                raise BadField("message.usage", "missing")
            output = raw.output_tokens or 0
            if output > acc.output_tokens:
                acc.output_tokens = output
            counts = (raw.cache_read_input_tokens, raw.cache_creation_input_tokens,
                      raw.input_tokens)  # fmt: skip
            self._check_counts(acc, counts, file, line)
            node.call_key = key
        elif key not in self.replays:
            if raw is None:
                raise BadField("message.usage", "missing")
            usage = _typed_usage(raw)
            acc = _CallAcc(
                message_id,
                request_id,
                parse_timestamp(obj.timestamp),
                model,
                usage,
                usage.output_tokens,
                SourceRef(file, line),
                node,
                obj.isSidechain is True,
                (raw.cache_read_input_tokens, raw.cache_creation_input_tokens, raw.input_tokens),
            )
            if self._is_replay(acc, session_id, file, line):
                self.replays.add(key)
            else:
                self.calls[key] = acc
                node.call_key = key
        if self.items:
            self._typed_content(msg.content, node, file, line, True)

    def _typed_content(
        self, content: str | list[_TBlock] | None, node: _Node, file: str, line: int,
        assistant: bool,
    ) -> None:  # fmt: skip
        """`_content_items` for a typed message's content."""
        if content is None:
            return
        if content.__class__ is str:
            kind = ItemKind.ASSISTANT_TEXT if assistant else ItemKind.USER_TEXT
            node.items.append(self._item(kind, content))
            return
        for block in cast(list[_TBlock], content):
            item = self._typed_block(block, assistant)
            if item is None:
                if block.type is None:
                    self.skips.repair(file, line, "bad_block", "message.content[]: not a block")
                continue
            node.items.append(item)

    def _typed_block(self, block: _TBlock, assistant: bool) -> Item | None:
        """`_block` for a typed block."""
        btype = block.type
        if btype == "text":
            kind = ItemKind.ASSISTANT_TEXT if assistant else ItemKind.USER_TEXT
            return self._item(kind, block.text or "")
        if btype == "tool_result":
            tool_id = block.tool_use_id or None
            name = self.tool_names.get(tool_id) if tool_id else None
            content = block.content
            if content is None:
                text = ""
            elif content.__class__ is str:
                text = content
            else:
                results = cast(list[_TResultBlock], content)
                text = "\n".join([b.text for b in results if b.text is not None])
            return self._item(
                ItemKind.TOOL_RESULT,
                text,
                tool_name=name,
                tool_use_id=tool_id,
                is_error=block.is_error is True,
                tool_class=tool_class(name, CLAUDE_CODE),
            )
        if btype == "tool_use":
            tool_id = block.id or None
            name = block.name or None
            if tool_id and name:
                self.tool_names[tool_id] = name
            return self._item(
                ItemKind.TOOL_USE,
                raw_json_text(block.input),
                tool_name=name,
                tool_use_id=tool_id,
                tool_class=tool_class(name, CLAUDE_CODE),
            )
        if btype == "thinking":
            return self._item(ItemKind.THINKING, block.thinking or "")
        if btype == "redacted_thinking":
            return self._item(ItemKind.THINKING, block.data or "")
        if btype in ("image", "document"):
            return self._item(ItemKind.IMAGE, raw_json_text(block.source))
        return None

    def _link_only(
        self, obj: dict[str, Any], kind: str, file: str, line: int, fallback: str
    ) -> None:
        """Ignored line types that sit in the parentUuid chain keep it connected."""
        uuid = obj.get("uuid")
        if isinstance(uuid, str) and uuid:
            sid = obj.get("sessionId")
            parent = obj.get("parentUuid")
            node = _Node(uuid, parent if isinstance(parent, str) else None, [], kind, None)
            session_id = sid if isinstance(sid, str) and sid else fallback
            self._place(node, file, line, session_id, *_where(obj))

    def _place(
        self,
        node: _Node,
        file: str,
        line: int,
        session_id: str,
        cwd: str | None,
        agent: str | None,
        sidechain: bool,
    ) -> None:
        """Put a line's node in its session's thread. `cwd`, `agent` (a non-empty agentId)
        and `sidechain` (isSidechain is true): the line's, as `_where` reads them."""
        session = self.sessions.get(session_id)
        if session is None:
            session = self.sessions[session_id] = _SessionAcc(session_id, self.project)
        session.files[file] = None
        if session.cwd is None and cwd is not None:
            session.cwd = cwd
        # The thread (_thread_id, inlined: it runs for every line)
        uuid = node.uuid
        if agent is not None:
            thread_id = f"agent-{agent}"
        elif self._file_thread is not None:
            thread_id = self._file_thread
        elif sidechain:
            known = session.thread_of.get(node.parent) if node.parent is not None else None
            thread_id = known if known is not None else f"sidechain-{uuid}"
        else:
            thread_id = _MAIN
        session.thread_of[uuid] = thread_id
        thread = session.threads.get(thread_id)
        if thread is None:
            thread = session.threads[thread_id] = _ThreadAcc()
        first = thread.first.get(uuid)
        if first is not None:
            same = next(
                (n for n in (first, *thread.reused.get(node.uuid, ())) if n.same_line(node)), None
            )
            if same is not None:  # a copy (resumed sessions copy history): the first stands
                call = self.calls.get(node.call_key) if node.call_key else None
                if call is not None and call.first_node is node:
                    call.first_node = same
                return
            thread.reused.setdefault(node.uuid, []).append(node)
            self.skips.note(file, line, "uuid_collision", "a uuid an earlier, different line has")
        else:
            thread.first[node.uuid] = node
        thread.nodes.append(node)

    def _item(self, kind: ItemKind, text: str, **extra: Any) -> Item:
        return Item(kind, len(text), text if self.keep_text else None, **extra)

    def _assistant(
        self, obj: dict[str, Any], node: _Node, file: str, line: int, session_id: str
    ) -> None:
        msg = obj.get("message")
        if not isinstance(msg, dict):
            raise BadField("message", "missing" if msg is None else "not an object")
        model = msg.get("model")
        if model == _SYNTHETIC_MODEL:
            self.skips.add(file, line, "synthetic", "not an API call (error or interrupt)")
            if self.items:
                self._content_items(msg.get("content"), node, file, line, assistant=True)
            return
        if not isinstance(model, str) or not model:
            raise BadField("message.model", "missing" if model is None else "not a string")
        message_id = msg.get("id")
        if not isinstance(message_id, str) or not message_id:
            raise BadField("message.id", "missing" if message_id is None else "not a string")
        request = obj.get("requestId")
        if isinstance(request, int) and not isinstance(request, bool):
            request = str(request)  # a number written by some gateway: still an id
        request_id = request if isinstance(request, str) and request else None
        key = (message_id, request_id)
        acc = self.calls.get(key)
        raw = msg.get("usage")
        if acc is not None:  # a later line of the same call: only its output count can differ
            if not isinstance(raw, dict):
                raise BadField("message.usage", "missing" if raw is None else "not an object")
            acc.output_tokens = max(acc.output_tokens, token_count(raw, "output_tokens"))
            self._check_counts(acc, _counts(raw), file, line)
            node.call_key = key
        elif key not in self.replays:
            usage = _usage(raw)
            problem = _deleted_problem(cast(dict[str, Any], raw))
            if problem is not None:
                self.skips.repair(file, line, "bad_field", problem)
            sidechain = obj.get("isSidechain") is True
            acc = _CallAcc(
                message_id,
                request_id,
                parse_timestamp(obj.get("timestamp")),
                model,
                usage,
                usage.output_tokens,
                SourceRef(file, line),
                node,
                sidechain,
                _counts(cast(dict[str, Any], raw)),  # _usage refused anything but an object
            )
            if self._is_replay(acc, session_id, file, line):
                self.replays.add(key)
            else:
                self.calls[key] = acc
                node.call_key = key
        if self.items:
            self._content_items(msg.get("content"), node, file, line, assistant=True)

    def _is_replay(self, acc: _CallAcc, session_id: str, file: str, line: int) -> bool:
        """Whether `acc` is a side-question log's copy of a call of its session (or that
        call's original, read after its copy: then the original takes the copy's place)."""
        where = (session_id, acc.message_id)
        other = self.by_message.get(where)
        if other is None:
            self.by_message[where] = acc
            return False
        if not (acc.sidechain or other.sidechain) or other.request_id == acc.request_id:
            return False  # two calls that share a message id, as some gateways write
        self.skips.note(
            file, line, "sidechain_replay", "a side-question log repeats a call; counted once"
        )
        if other.sidechain and not acc.sidechain:
            del self.calls[other.key]
            self.replays.add(other.key)
            self.by_message[where] = acc
            return False
        return True

    def _user(self, obj: dict[str, Any], node: _Node, file: str, line: int) -> None:
        msg = obj.get("message")
        if not isinstance(msg, dict):
            raise BadField("message", "missing" if msg is None else "not an object")
        if obj.get("isCompactSummary") is True:
            node.compaction = Compaction(
                CompactionKind.SUMMARY, optional_timestamp(obj.get("timestamp"))
            )
        if self.items:
            self._content_items(msg.get("content"), node, file, line, assistant=False)

    def _system(self, obj: dict[str, Any], node: _Node) -> None:
        subtype = obj.get("subtype")
        if isinstance(subtype, str) and subtype in _BOUNDARIES:  # (a list is not hashable)
            kind, key = _BOUNDARIES[subtype]
            meta = obj.get(key)
            meta = meta if isinstance(meta, dict) else {}
            node.compaction = Compaction(  # saved tokens and ids: only pruning reads them
                kind,
                optional_timestamp(obj.get("timestamp")),
                trigger=_optional_str(meta.get("trigger")),
                pre_tokens=_optional_int(meta.get("preTokens")),
                tokens_saved=_optional_int(meta.get("tokensSaved")),
                tool_use_ids=_strings(meta.get("compactedToolIds")),
            )

    def _content_items(
        self, content: Any, node: _Node, file: str, line: int, *, assistant: bool
    ) -> None:
        if not self.items:
            return
        if isinstance(content, str):
            kind = ItemKind.ASSISTANT_TEXT if assistant else ItemKind.USER_TEXT
            node.items.append(self._item(kind, content))
            return
        if content is None:
            return
        if not isinstance(content, list):
            self.skips.repair(file, line, "bad_block", "message.content: not a string or list")
            return
        for block in content:
            item = self._block(block, assistant) if isinstance(block, dict) else None
            if item is None:
                if not (isinstance(block, dict) and isinstance(block.get("type"), str)):
                    self.skips.repair(file, line, "bad_block", "message.content[]: not a block")
                continue
            node.items.append(item)

    def _block(self, block: dict[str, Any], assistant: bool) -> Item | None:
        btype = block.get("type")
        if btype == "text":
            text = block.get("text")
            kind = ItemKind.ASSISTANT_TEXT if assistant else ItemKind.USER_TEXT
            return self._item(kind, text if isinstance(text, str) else "")
        if btype == "thinking":
            text = block.get("thinking")
            return self._item(ItemKind.THINKING, text if isinstance(text, str) else "")
        if btype == "redacted_thinking":
            data = block.get("data")
            return self._item(ItemKind.THINKING, data if isinstance(data, str) else "")
        if btype == "tool_use":
            tool_id = _optional_str(block.get("id"))
            name = _optional_str(block.get("name"))
            if tool_id and name:
                self.tool_names[tool_id] = name
            return self._item(
                ItemKind.TOOL_USE,
                json_text(block.get("input")),
                tool_name=name,
                tool_use_id=tool_id,
                tool_class=tool_class(name, CLAUDE_CODE),
            )
        if btype == "tool_result":
            tool_id = _optional_str(block.get("tool_use_id"))
            name = self.tool_names.get(tool_id) if tool_id else None
            return self._item(
                ItemKind.TOOL_RESULT,
                _tool_result_text(block.get("content")),
                tool_name=name,
                tool_use_id=tool_id,
                is_error=block.get("is_error") is True,
                tool_class=tool_class(name, CLAUDE_CODE),
            )
        if btype in ("image", "document"):
            return self._item(ItemKind.IMAGE, json_text(block.get("source")))
        return None

    # ---------------------------------------------------------------- assembly

    def sessions_out(self) -> list[Session]:
        out = []
        for session in self.sessions.values():
            threads = []
            for thread_id, acc in session.threads.items():
                calls = self._thread_calls(acc)
                if calls:
                    threads.append(Thread(thread_id, _thread_kind(thread_id), tuple(calls)))
            if threads:
                threads.sort(key=lambda t: (t.thread_id != _MAIN, t.calls[0].timestamp_s))
                out.append(
                    Session(
                        session.session_id,
                        session.project,
                        session.cwd,
                        tuple(session.files),
                        tuple(threads),
                    )
                )
        return out

    def _thread_calls(self, acc: _ThreadAcc) -> list[Call]:
        found: list[tuple[_CallAcc, Usage, list[Item], Compaction | None, Any]] = []
        prunings: list[Compaction | None] = []
        pending: list[Item] = []
        compaction: Compaction | None = None
        pruned: Compaction | None = None
        before: Any = None  # the time of the last line so far: the next call's request
        last: list[Any] = []  # per call, the time of its last line (the response was done)
        current: CallKey | None = None
        deleted = 0  # cache_deleted_input_tokens so far (cumulative)
        for node in _depth_first(acc):
            if node.compaction is not None:
                if node.compaction.kind is CompactionKind.MICROCOMPACT:
                    pruned = pruned or node.compaction  # tool results cleared, no restart
                else:
                    pending = []  # what came before a compaction is summarised away
                    # A boundary followed by its summary line is one compaction: the first.
                    compaction = compaction or node.compaction
            call = self.calls.get(node.call_key) if node.call_key is not None else None
            if call is not None and call.first_node is node:
                usage = call.usage
                if usage.output_tokens != call.output_tokens:
                    usage = _with_output(usage, call.output_tokens)
                if usage.cache_deleted_tokens > deleted:
                    # The billed deletion is what left the prompt; a boundary line since the
                    # previous call (written after the call that deleted) adds its ids.
                    pruned = Compaction(
                        CompactionKind.CACHE_DELETION,
                        None,
                        tokens_saved=usage.cache_deleted_tokens - deleted,
                        tool_use_ids=pruned.tool_use_ids if pruned is not None else (),
                    )
                deleted = usage.cache_deleted_tokens  # back to 0 when the edits were dropped
                found.append((call, usage, pending, compaction, before))
                prunings.append(pruned)
                last.append(node.stamp)
                current = call.key
                pending = []
                compaction = pruned = None
            elif current is not None and node.call_key == current:
                last[-1] = node.stamp
            pending.extend(node.items)
            if node.stamp is not None:
                before = node.stamp
        calls = []
        for (call, usage, items, compaction, sent), done, pruned in zip(
            found, last, prunings, strict=True
        ):
            sent_s = self._seconds(sent) if sent is not None else None
            # (a call's last line is mostly its first, whose time is the call's)
            done_s = call.timestamp_s if done == call.first_node.stamp else self._seconds(done)
            calls.append(
                Call(
                    call.message_id,
                    call.request_id,
                    call.timestamp_s,
                    call.model,
                    usage,
                    tuple(items),
                    call.source,
                    compaction,
                    call.timestamp_s if sent_s is None else sent_s,
                    call.timestamp_s if done_s is None else done_s,
                    pruned,
                )
            )
        return calls

    def _seconds(self, stamp: Any) -> float | None:
        """`optional_timestamp`, each distinct string parsed once: a call's request time is
        the time of the line before it, often another call's."""
        if stamp.__class__ is not str:
            return optional_timestamp(stamp)
        times = self._times
        if stamp not in times:
            times[stamp] = optional_timestamp(stamp)
        return times[stamp]


def _with_output(usage: Usage, output_tokens: int) -> Usage:
    """`usage` with another output count: dataclasses.replace, spelled out (replace inspects
    the fields on every call, which showed in profiles of a load)."""
    return Usage(
        usage.input_tokens,
        usage.cache_write_5m_tokens,
        usage.cache_write_1h_tokens,
        usage.cache_read_tokens,
        output_tokens,
        usage.has_ttl_split,
        usage.split_mismatch,
        usage.speed,
        usage.inference_geo,
        usage.cache_deleted_tokens,
    )


def _depth_first(thread: _ThreadAcc) -> list[_Node]:
    """Nodes in conversation order: depth first over the parentUuid tree, children in file order.

    A `parentUuid` names the latest node with that uuid read before the child (or, for a
    parent written later, its first node). Roots are nodes whose parent is absent from this
    thread (a new chain, a compaction, or a resumed session continuing history held
    elsewhere). Every node appears exactly once. Iterative: chains can be very deep.
    """
    first = thread.first
    if not thread.reused and _is_chain(thread.nodes, first):
        return thread.nodes
    children: dict[int, list[_Node]] = {}
    roots: list[_Node] = []
    latest: dict[str, _Node] = {}
    for node in thread.nodes:
        parent = None
        if node.parent is not None:
            parent = latest.get(node.parent) or first.get(node.parent)
        if parent is None or parent is node:
            roots.append(node)
        else:
            children.setdefault(id(parent), []).append(node)
        latest[node.uuid] = node
    order: list[_Node] = []
    seen: set[int] = set()
    stack = list(reversed(roots))
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        order.append(node)
        stack.extend(reversed(children.get(id(node), ())))
    if len(order) < len(thread.nodes):  # cycles in a corrupt file: keep the rest in file order
        order.extend(n for n in thread.nodes if id(n) not in seen)
    return order


def _is_chain(nodes: list[_Node], first: dict[str, _Node]) -> bool:
    """Whether every node's parent is the node before it, or none of the thread's (a root):
    then the depth-first order is the file order. Only for a thread whose uuids are unique
    (no reused ones). Most threads are such chains; telling so costs a fraction of the walk
    (`_depth_first`) it saves."""
    previous: str | None = None
    for node in nodes:
        parent = node.parent
        if parent is not None and parent != previous and parent != node.uuid and parent in first:
            return False  # a branch, or a parent written later
        previous = node.uuid
    return True


_NO_META = _TMeta()


def _thread_kind(thread_id: str) -> ThreadKind:
    if thread_id == _MAIN:
        return ThreadKind.MAIN
    if thread_id.startswith("agent-acompact"):
        return ThreadKind.COMPACT
    return ThreadKind.SUBAGENT


def _optional_str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _strings(value: Any) -> tuple[str, ...]:
    """The strings of a list (anything else in it, or a value that is not a list, is ignored)."""
    if not isinstance(value, list):
        return ()
    return tuple(v for v in value if isinstance(v, str))


def _optional_int(value: Any) -> int | None:
    """A count from metadata; None unless it is a plausible non-negative integer."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TOKENS_PER_CALL:
        return value
    return None


def _is_whole_call(obj: dict[str, Any]) -> bool:
    """A line with no `type` that still holds an assistant message with model, id and usage."""
    msg = obj.get("message")
    return (
        isinstance(msg, dict)
        and isinstance(msg.get("usage"), dict)
        and isinstance(msg.get("model"), str)
        and isinstance(msg.get("id"), str)
    )


def _counts(usage: dict[str, Any]) -> tuple[Any, ...]:
    """A line's input and cache counts as written: a later line of a call whose counts differ
    from its first line's bills other input or cache counts."""
    return (
        usage.get("cache_read_input_tokens"),
        usage.get("cache_creation_input_tokens"),
        usage.get("input_tokens"),
    )


def _where(obj: dict[str, Any]) -> tuple[str | None, str | None, bool]:
    """A line's cwd (a string), agent (a non-empty agentId) and whether it is a sidechain
    line: where `_LineReader._place` puts it."""
    cwd = obj.get("cwd")
    agent = obj.get("agentId")
    return (
        cwd if isinstance(cwd, str) else None,
        agent if isinstance(agent, str) and agent else None,
        obj.get("isSidechain") is True,
    )


def _project_dir(path: Path) -> Path:
    """The project folder a transcript belongs to, whichever layout it uses."""
    if path.parent.name == "subagents":
        return path.parent.parent.parent
    return path.parent


class ClaudeCodeLoader:
    """Loader for Claude Code's `.jsonl` session transcripts."""

    name = "claude-code"

    def sniff(self, path: Path, head: bytes) -> int:
        if path.suffix != ".jsonl":
            return 0
        # Any .jsonl is taken (broken or empty files must be reported, not ignored); lines
        # that look like Claude Code make it a sure match against other JSONL formats.
        return 2 if b'"sessionId"' in head or b'"parentUuid"' in head else 1

    def units(self, files: Sequence[Path]) -> list[LoadUnit]:
        groups: dict[Path, list[Path]] = {}
        for path in files:
            groups.setdefault(_project_dir(path), []).append(path)
        units = []
        for folder, paths in groups.items():
            paths.sort()
            size = sum(file_size(p) for p in paths)
            units.append(LoadUnit(self.name, str(folder), tuple(paths), size))
        return units

    def load(self, unit: LoadUnit, detail: Detail) -> LoadResult:
        result = LoadResult()
        reader = _LineReader(from_fs(Path(unit.key).name), detail, result.skips)
        for path in unit.files:
            reader.read_file(path)
        result.sessions = reader.sessions_out()
        return result


register(ClaudeCodeLoader())
