"""OpenAI Codex CLI rollout files (`$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl`).

Lines are `{timestamp, type, payload}` (docs/domain.md#other-agent-formats; its hazards as read
from openai/codex are in the loader's test data notes). A unit is every rollout of one
project (the session's cwd, or for a fork its first source's), so a fork, which copies its
source's lines into a new file, meets its source inside one unit; sources are read before
their forks, then files in name order (creation time).

Rules applied here:
* the first `session_meta` of a file is the session (`id`, else `session_id`); its cwd names
  the project as Claude Code names folders (non-alphanumerics become '-'). A sub-agent's
  rollout (`parent_thread_id`, `source: {subagent: ...}`) is a session of its own: its usage
  is its own and it has its own cache;
* a call is an `event_msg` `token_count` with an `info` object. Its usage is
  `last_token_usage`: input = `input_tokens - cached_input_tokens` (cached is a subset),
  cache read = `cached_input_tokens`, output = `output_tokens` (reasoning tokens are a subset
  of it, not added). `cache_write_input_tokens` (newer builds) is taken as part of
  `input_tokens`, like `cached_input_tokens`, so the prompt stays `input_tokens` as recorded:
  it is moved from the uncached input into the 5-minute write bucket (unverified upstream);
* `total_token_usage` is cumulative: a token_count whose totals equal the previous one's is
  a repeat (older builds sent one per rate-limit header) and not a call; a last usage with
  no input and no output (the post-compaction `recompute_token_usage` estimate, an empty
  placeholder) is not a call either. Totals that go down are a counter reset (a resume, a
  context-window overflow); `last_token_usage` stands either way, so nothing is counted
  twice or lost; a last usage that does not match the rise of the totals is noted;
* a call's key is `codex:<namespace>` and its ordinal among the namespace's calls, totals
  and last usage. The namespace is that of the latest session_meta line: its
  `forked_from_id`'s namespace when it has one (a fork of a fork keys in the first source's),
  else its own id; before any, the file's absolute path. A fork's copy of its source's lines
  repeats the source's token_count payloads in order (its timestamps may be new), with or
  without the source's session_meta, so a copied call has the key of its original and is
  counted once (noted as `forked_history`). A copy is a call that a session whose history
  the rollout carries (its own, its source, a session whose session_meta line it copied)
  holds too: two forks of one source that each make a new call with equal counts keep both
  (their keys are equal, but neither fork carries the other's history). A fork whose source
  is not among the files read takes any earlier call of the namespace for a copy. The
  ordinal keeps apart calls whose counts are equal (no totals recorded, or a call after a
  counter reset that repeats an earlier one);
* a fork is read in its first source's unit (whatever its own cwd; its session keeps its own
  project), after its source (by the forked_from_id chain of the files' first lines, then by
  name), so the source keeps its calls and the fork gets only its own;
* the model is the latest `turn_context.model` (or `thread_settings_applied` model) before
  the call; none yet: model "unknown", noted. A model that is not a non-empty string is a
  `bad_field` naming `payload.model` and the line is skipped;
* items (Detail.SIZES): user and developer messages are user text, assistant messages
  assistant text, reasoning is thinking (its summary and visible content; encrypted content
  is the model's own state, not text anyone reads, so it is left out), function, custom,
  local-shell and web-search calls are tool uses with their `call_id`, and their outputs
  tool results named after the matching call. Tool names stay Codex's own (`shell`,
  `exec_command`, `apply_patch`, ...), each with its class (tool_classes.CODEX; a tool in an
  `mcp__` namespace is other), so a policy that names classes clears Codex's results as it
  clears Claude Code's. A call's items are the outputs written after the previous
  call's inputs (that call's response) plus the inputs since; when a token_count is missing,
  outputs followed by more input are part of the next call's prompt;
* times: a call is at its token_count line; its request was sent at the last input line
  before its first output line; it was done at the token_count. A request time after the
  token_count is taken as the token_count, and a call sent before the previous call's
  token_count (a clock set back) as sent then, each noted (`time_clamped`);
* a `compacted` line or `context_compacted` event is a compaction on the next call; what came
  before it is summarised away, and the summary message is the next call's user text;
* line types not listed above are later additions and are passed over; lines without the
  envelope (rollouts before about September 2025) are counted as skipped, with the reason.
Every line that cannot be used is counted in the skip report with file and line number.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from mcsim.ingest.loaders import Detail, LoadResult, LoadUnit, register
from mcsim.ingest.loaders.fields import (
    BadField,
    file_size,
    json_text,
    optional_timestamp,
    parse_timestamp,
    read_objects,
    token_count,
)
from mcsim.ingest.loaders.jsonl import iter_lines, open_regular
from mcsim.ingest.loaders.tool_classes import CODEX, tool_class
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

PROVIDER = "openai"
UNKNOWN_MODEL = "unknown"
_KNOWN_TYPES = frozenset(
    {"session_meta", "response_item", "turn_context", "event_msg", "compacted"}
)
_OUTPUTS = frozenset(
    {"reasoning", "function_call", "custom_tool_call", "local_shell_call", "web_search_call"}
)
_TOOL_USES = _OUTPUTS - {"reasoning"}
_TOOL_RESULTS = frozenset({"function_call_output", "custom_tool_call_output"})
_USAGE_KEYS = ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_output_tokens")
_NOT_ALNUM = re.compile(r"[^A-Za-z0-9]")
_NO_PROJECT = "codex"
# The first line (session_meta, with the base instructions) is read to group files; past this
# a file is grouped under _NO_PROJECT and its lines are still read in full.
_HEAD_LINE_BYTES = 4 * 1024 * 1024
CallKey = tuple[str, str | None]


def project_name(cwd: str | None) -> str:
    """The folder name Claude Code gives a working directory: non-alphanumerics become '-'."""
    return _NOT_ALNUM.sub("-", cwd) if cwd else _NO_PROJECT


@dataclass(slots=True)
class _Pending:
    """What the conversation gained since the last call, in order."""

    carried: list[Item] = field(default_factory=list)  # the last call's response
    items: list[tuple[Item, bool]] = field(default_factory=list)  # (item, is an output)
    compaction: Compaction | None = None
    last_input_s: float | None = None
    sent_s: float | None = None  # frozen at the first output since the last call

    def take(self) -> list[Item]:
        """The items of a call made now; what follows the last input is its response."""
        last_input = max((i for i, (_, out) in enumerate(self.items) if not out), default=-1)
        taken = self.carried + [item for item, _ in self.items[: last_input + 1]]
        self.carried = [item for item, _ in self.items[last_input + 1 :]]
        self.items = []
        return taken


@dataclass(slots=True)
class _FileReader:
    """One rollout file's lines turned into a session."""

    name: str
    detail: Detail
    skips: SkipReport
    # The calls of the unit so far, each with the sessions whose rollouts hold it (its own
    # and those that copied it): a fork's copies are the calls its sources hold.
    recorded: dict[CallKey, set[str]]
    aliases: dict[str, str]  # session id -> the namespace its calls were keyed in
    # The namespace of the calls' keys: the latest session_meta's (_meta), else the file's
    # absolute path (a run may spell it relative or not; a cached unit is read either way).
    origin: str
    session_id: str | None = None
    ordinal: int = 0  # calls seen since the namespace began, copies included
    # This rollout's session and every session whose history it carries: the source it was
    # forked from and any whose session_meta line it copied. A call one of them recorded
    # before is a copy; a call another fork of the same source recorded is not.
    lineage: set[str] = field(default_factory=set)
    # Forked from a rollout that is not among the files read: its copies cannot be told
    # from its own calls by their source, so any call of the namespace read before is one.
    source_missing: bool = False
    cwd: str | None = None
    model: str | None = None
    totals: tuple[int, ...] | None = None
    pending: _Pending = field(default_factory=_Pending)
    calls: list[Call] = field(default_factory=list)
    tool_names: dict[str, tuple[str, ToolClass]] = field(default_factory=dict)  # by call_id
    done_s: float | None = None  # the previous call's token_count
    copies: int = 0

    def line(self, obj: dict[str, Any], number: int) -> None:
        kind = obj.get("type")
        payload = obj.get("payload")
        if kind not in _KNOWN_TYPES or not isinstance(payload, dict):
            if "payload" in obj and isinstance(kind, str):
                if kind in _KNOWN_TYPES:
                    raise BadField("payload", "not an object")
                return  # a line type added since: nothing mcsim uses
            raise BadField(
                "type", "no {timestamp, type, payload} envelope (a rollout before 0.4x?)"
            )
        if kind == "session_meta":
            self._meta(payload)
        elif kind == "turn_context":
            self._model(payload.get("model"), "payload.model")
        elif kind == "response_item":
            self._response_item(payload, optional_timestamp(obj.get("timestamp")))
        elif kind == "compacted":
            self._compacted(payload, obj.get("timestamp"))
        else:
            self._event(payload, obj, number)

    def _meta(self, payload: dict[str, Any]) -> None:
        sid = payload.get("id") or payload.get("session_id")
        if not isinstance(sid, str) or not sid:
            raise BadField("payload.id", "missing" if sid is None else "not a string")
        source = payload.get("forked_from_id")
        if source is not None and (not isinstance(source, str) or not source):
            raise BadField("payload.forked_from_id", "not a non-empty string")
        # A fork's calls are keyed in its source's namespace (and a fork of a fork in the
        # first source's), so the copies it holds, with or without the source's session_meta
        # line, get the keys of the source's own calls.
        origin = self.aliases.get(source, source) if source else sid
        if self.session_id is None:
            self.session_id = sid
            cwd = payload.get("cwd")
            self.cwd = cwd if isinstance(cwd, str) and cwd else None
            self.source_missing = source is not None and source not in self.aliases
            self.aliases.setdefault(sid, origin)
        self.lineage.update((sid, source) if source else (sid,))
        if origin != self.origin:
            self.origin, self.ordinal = origin, 0

    def _model(self, model: Any, where: str) -> None:
        if model is None:
            return
        if not isinstance(model, str) or not model:
            shown = json_text(model)[:60]
            raise BadField(where, f"not a model name (a non-empty string): {shown}")
        self.model = model

    def _event(self, payload: dict[str, Any], obj: dict[str, Any], number: int) -> None:
        etype = payload.get("type")
        if etype == "token_count":
            self._token_count(payload, obj, number)
        elif etype == "context_compacted":
            self._compacted({}, obj.get("timestamp"))
        elif etype == "thread_settings_applied":
            settings = payload.get("thread_settings")
            if isinstance(settings, dict):
                self._model(settings.get("model"), "payload.thread_settings.model")

    def _compacted(self, payload: dict[str, Any], stamp: Any) -> None:
        pending = self.pending
        if pending.compaction is None:  # the line and the event of one compaction: one
            pending.compaction = Compaction(CompactionKind.BOUNDARY, optional_timestamp(stamp))
            pending.carried, pending.items = [], []
        message = payload.get("message")
        if isinstance(message, str) and message and self.detail >= Detail.SIZES:
            pending.items.append((self._item(ItemKind.USER_TEXT, message), False))

    def _token_count(self, payload: dict[str, Any], obj: dict[str, Any], number: int) -> None:
        info = payload.get("info")
        if info is None:
            return  # rate limits only: no usage known yet
        if not isinstance(info, dict):
            raise BadField("payload.info", "not an object")
        last = _token_usage(info.get("last_token_usage"), "payload.info.last_token_usage")
        raw_total = info.get("total_token_usage")
        totals = (
            None if raw_total is None else _token_usage(raw_total, "payload.info.total_token_usage")
        )
        previous, self.totals = self.totals, totals
        if totals is not None and totals == previous:
            return  # a repeat of the previous count
        if last[0] == 0 and last[2] == 0:
            return  # no request: an estimate after compaction, or a placeholder
        timestamp_s = parse_timestamp(obj.get("timestamp"))
        if (
            totals is not None
            and previous is not None
            and all(t >= p for t, p in zip(totals, previous, strict=True))
        ):
            rise = tuple(t - p for t, p in zip(totals, previous, strict=True))
            if rise[:4] != last[:4]:
                self.skips.note(
                    self.name,
                    number,
                    "usage_mismatch",
                    "last_token_usage differs from the rise of total_token_usage; last stands",
                )
        # The ordinal among the namespace's calls tells apart equal counts (no totals recorded,
        # or a call after a counter reset that repeats an earlier one); a copy keeps it.
        key = (f"codex:{self.origin}", f"{self.ordinal}|{totals}|{last}")
        self.ordinal += 1
        holders = self.recorded.setdefault(key, set())
        copied = bool(holders) and (self.source_missing or not holders.isdisjoint(self.lineage))
        holders.add(self.session_id or self.origin)
        if copied:
            self.copies += 1
            self.pending.take()
            self.pending.compaction = None
            return
        model = self.model
        if model is None:
            model = UNKNOWN_MODEL
            self.skips.note(
                self.name, number, "unknown_model", "no model named before the call (turn_context)"
            )
        pending = self.pending
        sent_s = pending.sent_s if pending.sent_s is not None else pending.last_input_s
        compaction, pending.compaction = pending.compaction, None
        pending.sent_s = None
        items = pending.take()
        timestamp_s, sent_s = self._consistent(timestamp_s, sent_s, number)
        self.calls.append(
            Call(
                message_id=key[0],
                request_id=key[1],
                timestamp_s=timestamp_s,
                model=model,
                usage=_usage(last),
                items=tuple(items) if self.detail >= Detail.SIZES else (),
                source=SourceRef(self.name, number),
                compaction=compaction,
                sent_s=sent_s,
                done_s=timestamp_s,
                provider=PROVIDER,
            )
        )

    def _consistent(self, stamp: float, sent: float | None, line: int) -> tuple[float, float]:
        """A call's time and request time as they must have been, each change noted
        (`time_clamped`): the request no later than the token_count, and neither before the
        previous call's token_count (a clock set back)."""
        problems = []
        if sent is not None and sent > stamp:
            problems.append(f"request {sent - stamp:,.3f} s after its token_count: taken as it")
        if sent is None or sent > stamp:
            sent = stamp
        before = self.done_s
        if before is not None and sent < before:
            problems.append(
                f"sent {before - sent:,.3f} s before the previous call's token_count: taken as "
                "sent then"
            )
            stamp, sent = max(stamp, before), before
        self.done_s = stamp
        for problem in problems:
            self.skips.note(self.name, line, "time_clamped", problem)
        return stamp, sent

    # ---------------------------------------------------------------- items

    def _response_item(self, payload: dict[str, Any], stamp_s: float | None) -> None:
        rtype = payload.get("type")
        is_output = rtype in _OUTPUTS or (rtype == "message" and payload.get("role") == "assistant")
        pending = self.pending
        if is_output:
            if pending.sent_s is None:
                pending.sent_s = pending.last_input_s
        elif rtype == "message" or rtype in _TOOL_RESULTS:
            if stamp_s is not None:
                pending.last_input_s = stamp_s
            pending.sent_s = None  # more input: the request is sent after it
        if self.detail < Detail.SIZES:
            return
        item = self._to_item(rtype, payload)
        if item is not None:
            pending.items.append((item, is_output))

    def _to_item(self, rtype: Any, payload: dict[str, Any]) -> Item | None:
        if rtype == "message":
            role = payload.get("role")
            kind = ItemKind.ASSISTANT_TEXT if role == "assistant" else ItemKind.USER_TEXT
            return self._item(kind, _content_text(payload.get("content")))
        if rtype == "reasoning":
            parts = [_content_text(payload.get("summary")), _content_text(payload.get("content"))]
            return self._item(ItemKind.THINKING, "\n".join(p for p in parts if p))
        if rtype in _TOOL_USES:
            call_id = payload.get("call_id")
            call_id = call_id if isinstance(call_id, str) and call_id else None
            name = payload.get("name")
            name = name if isinstance(name, str) and name else str(rtype)
            namespace = payload.get("namespace")
            mcp = isinstance(namespace, str) and namespace.startswith("mcp__")
            what = ToolClass.OTHER if mcp else tool_class(name, CODEX)
            if call_id is not None:
                self.tool_names[call_id] = (name, what)
            body = payload.get("arguments", payload.get("input", payload.get("action")))
            text = body if isinstance(body, str) else json_text(body)
            return self._item(
                ItemKind.TOOL_USE, text, tool_name=name, tool_use_id=call_id, tool_class=what
            )
        if rtype in _TOOL_RESULTS:
            call_id = payload.get("call_id")
            call_id = call_id if isinstance(call_id, str) and call_id else None
            used, what = self.tool_names.get(call_id or "", (None, ToolClass.OTHER))
            return self._item(
                ItemKind.TOOL_RESULT,
                _output_text(payload.get("output")),
                tool_name=used,
                tool_use_id=call_id,
                tool_class=what,
            )
        return None  # ghost snapshots, tool search, images, ...: not counted as content

    def _item(self, kind: ItemKind, text: str, **extra: Any) -> Item:
        return Item(kind, len(text), text if self.detail >= Detail.TEXT else None, **extra)

    def session(self, project: str) -> Session | None:
        if not self.calls:
            return None
        thread = Thread("main", ThreadKind.MAIN, tuple(self.calls))
        return Session(
            self.session_id or Path(self.name).stem, project, self.cwd, (self.name,), (thread,)
        )


def _token_usage(raw: Any, where: str) -> tuple[int, ...]:
    """(input, cached, output, reasoning, cache write) of a TokenUsage object."""
    if not isinstance(raw, dict):
        raise BadField(where, "missing" if raw is None else "not an object")
    counts = [token_count(raw, key, where) for key in _USAGE_KEYS]
    counts.append(token_count(raw, "cache_write_input_tokens", where))
    if counts[1] + counts[4] > counts[0]:
        raise BadField(where, "cached and cache-write tokens exceed input_tokens")
    return tuple(counts)


def _usage(last: tuple[int, ...]) -> Usage:
    inp, cached, out, _reasoning, written = last
    return Usage(
        input_tokens=inp - cached - written,
        cache_write_5m_tokens=written,
        cache_write_1h_tokens=0,
        cache_read_tokens=cached,
        output_tokens=out,
    )


def _content_text(content: Any) -> str:
    """The text of a message's content list (input_text, output_text, summary_text, ...)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts = []
    for block in content:
        if isinstance(block, dict):
            text = block.get("text")
            if isinstance(text, str):
                parts.append(text)
            elif isinstance(block.get("image_url"), str):
                parts.append(block["image_url"])
    return "\n".join(parts)


def _output_text(output: Any) -> str:
    """A tool output: a string, a list of content blocks, or {content, success}."""
    if isinstance(output, dict):
        output = output.get("content", output.get("text"))
    return _content_text(output)


@dataclass(frozen=True, slots=True)
class _Head:
    """What a rollout's first line, when it is a session_meta line, says of the file."""

    cwd: str | None = None
    session_id: str | None = None
    forked_from: str | None = None


def _head(path: Path) -> _Head:
    try:
        with open_regular(path) as fh:
            for _number, raw, size, _last in iter_lines(fh, _HEAD_LINE_BYTES):
                if raw is None or not size:
                    return _Head()
                obj = orjson.loads(raw)
                payload = obj.get("payload") if isinstance(obj, dict) else None
                if not isinstance(payload, dict):
                    return _Head()
                found = [payload.get(k) for k in ("cwd", "id", "forked_from_id")]
                if not found[1]:
                    found[1] = payload.get("session_id")
                cwd, sid, source = (v if isinstance(v, str) and v else None for v in found)
                return _Head(cwd, sid, source)
    except (OSError, orjson.JSONDecodeError):
        return _Head()
    return _Head()


def _first_cwd(path: Path) -> str | None:
    """The cwd of a rollout's first line, when it is a session_meta line."""
    return _head(path).cwd


def _lineage(path: Path, heads: dict[Path, _Head], by_id: dict[str, Path]) -> list[Path]:
    """`path`, then its source, its source's source, ... among the files given (a cycle
    stops at the first file met twice)."""
    chain = [path]
    source = heads[path].forked_from
    while source is not None and source in by_id and by_id[source] not in chain:
        chain.append(by_id[source])
        source = heads[chain[-1]].forked_from
    return chain


class CodexLoader:
    """Loader for Codex CLI rollout files."""

    name = "codex"

    def sniff(self, path: Path, head: bytes) -> int:
        if path.suffix != ".jsonl":
            return 0
        first = head.split(b"\n", 1)[0]
        envelope = b'"type":"session_meta"' in first and b'"payload"' in first
        # Sure over Claude Code's 1 (any .jsonl) and 2 (a line with sessionId/parentUuid).
        return 3 if envelope or path.name.startswith("rollout-") else 0

    def units(self, files: Sequence[Path]) -> list[LoadUnit]:
        """One unit per project, a fork going with the first session it was forked from
        (whatever its own cwd), and each source read before its forks, so the copies a fork
        holds are recognised in the fork and the source keeps its own calls."""
        heads = {path: _head(path) for path in files}
        by_id: dict[str, Path] = {}
        for path in sorted(files, key=lambda p: (p.name, str(p))):
            sid = heads[path].session_id
            if sid is not None:
                by_id.setdefault(sid, path)
        depth: dict[Path, int] = {}
        groups: dict[str, list[Path]] = {}
        for path in files:
            chain = _lineage(path, heads, by_id)
            depth[path] = len(chain) - 1
            root_cwd = heads[chain[-1]].cwd or heads[path].cwd
            groups.setdefault(project_name(from_fs(root_cwd or "")), []).append(path)
        units = []
        for project, paths in groups.items():
            # sources before forks, then rollout-<time>: older first
            paths.sort(key=lambda p: (depth[p], p.name, str(p)))
            size = sum(file_size(p) for p in paths)
            units.append(LoadUnit(self.name, f"codex/{project}", tuple(paths), size))
        return units

    def load(self, unit: LoadUnit, detail: Detail) -> LoadResult:
        result = LoadResult()
        recorded: dict[CallKey, set[str]] = {}
        aliases: dict[str, str] = {}
        for path in unit.files:
            name = from_fs(str(path))
            reader = _FileReader(
                name, detail, result.skips, recorded, aliases, from_fs(str(path.absolute()))
            )
            for number, obj in read_objects(path, name, result.skips):
                try:
                    reader.line(obj, number)
                except BadField as exc:
                    result.skips.add(name, number, "bad_field", str(exc))
            if reader.copies:
                result.skips.note(
                    name, 0, "forked_history", f"{reader.copies} calls copied from another rollout"
                )
            # a fork recorded in another cwd is in its source's unit, under its own project
            session = reader.session(project_name(from_fs(_first_cwd(path) or "")))
            if session is not None:
                result.sessions.append(session)
        return result


register(CodexLoader())
