"""The normalised model every loader produces and every later stage consumes.

Pure data: a Session holds Threads (the main conversation and each sub-agent), a Thread holds
its API calls in conversation order, and each Call carries the recorded usage and the Items
that were added to the conversation since the previous call of the same thread. Nothing here
does I/O or knows about any transcript format.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from operator import add, attrgetter
from typing import Any, NamedTuple

from mcsim.frozen import quick_init


class ItemKind(StrEnum):
    """What an item added to the conversation is."""

    USER_TEXT = "user_text"
    TOOL_RESULT = "tool_result"
    ASSISTANT_TEXT = "assistant_text"
    THINKING = "thinking"
    TOOL_USE = "tool_use"
    IMAGE = "image"
    ATTACHMENT = "attachment"


class ToolClass(StrEnum):
    """What a tool does, whatever a harness calls it (`Bash`, `shell`, `exec_command`: shell).

    Policy tool lists name a class as `class:<value>` beside tool names, so one policy file
    prunes every harness alike. Each loader gives its own tools their class (MCP tools are
    `other`); docs/policy-files.md has the table.
    """

    READ = "read"  # returns a file's content
    SEARCH = "search"  # finds files or lines: grep, glob, a directory listing
    SHELL = "shell"  # runs a command (or reads a running command's output)
    WEB = "web"  # fetches a page or searches the web
    EDIT = "edit"  # writes or edits files
    PLAN = "plan"  # the agent's own plan or todo list
    INTERACTION = "interaction"  # asks the user
    OTHER = "other"  # sub-agents, MCP tools, anything else


@quick_init
@dataclass(frozen=True, slots=True)
class Item:
    """One block added to the conversation before a call.

    `chars` is the size of the content as the model saw it (for a tool_use, its JSON input).
    `text` is only kept when the loader was asked to (replay needs it for token estimates and
    re-fetch analysis; `inspect` does not, and keeping it would cost memory for nothing).
    `tokens` is a token count the recording gave instead of (or beside) the text (the
    interchange format lets a harness share sizes without content): replay uses it as it is
    rather than estimating one from the text or the size.
    `tool_class` is set on tool uses and results: what the tool does (ToolClass).
    """

    kind: ItemKind
    chars: int
    text: str | None = None
    tool_name: str | None = None
    tool_use_id: str | None = None
    is_error: bool = False
    tokens: int | None = None
    tool_class: ToolClass | None = None


class Tokens(NamedTuple):
    """Token counts by kind, as billed: the one type of every token vector (a call's usage,
    a policy's totals over a session or a run, a group's sums). Its arithmetic and its
    serialisation come from its fields (`_fields`, `_asdict`, `_make`): a kind added here is
    summed, written and read everywhere."""

    input_tokens: int = 0  # uncached input (after the last cache breakpoint)
    cache_write_5m_tokens: int = 0
    cache_write_1h_tokens: int = 0
    cache_read_tokens: int = 0
    output_tokens: int = 0

    def __add__(self, other: tuple[int, ...]) -> Tokens:  # type: ignore[override]
        """Kind by kind (a tuple's + would join them)."""
        return Tokens._make(map(add, self, other))

    @classmethod
    def total(cls, usages: Iterable[Any]) -> Tokens:
        """The sum of calls' usage (anything with the fields: Usage, CalCall, Tokens), kind by
        kind, one pass per kind in C."""
        listed = usages if isinstance(usages, list) else list(usages)
        return cls._make(sum(map(kind, listed)) for kind in _USAGE_KINDS)

    @classmethod
    def of(cls, call: Any) -> Tokens:
        """The counts of anything that has them by name (a Usage, a calibrated call)."""
        return cls._make(kind(call) for kind in _USAGE_KINDS)

    @property
    def cache_write_tokens(self) -> int:
        return self.cache_write_5m_tokens + self.cache_write_1h_tokens

    @property
    def prompt_tokens(self) -> int:
        """Everything the model read: uncached input, cache writes and cache reads."""
        return self.input_tokens + self.cache_write_tokens + self.cache_read_tokens

    @property
    def cache_hit_ratio(self) -> float:
        """Token-weighted: the share of prompt tokens that were cache reads."""
        prompt = self.prompt_tokens
        return self.cache_read_tokens / prompt if prompt else 0.0


_USAGE_KINDS = tuple(attrgetter(name) for name in Tokens._fields)
NO_TOKENS = Tokens()


@quick_init
@dataclass(frozen=True, slots=True)
class Usage:
    """Recorded token counts of one API call, as billed.

    `cache_write_5m_tokens + cache_write_1h_tokens` always equals the recorded
    `cache_creation_input_tokens`; when the recorded split did not add up, the unexplained
    part is in the 5-minute bucket and `split_mismatch` is set.
    """

    input_tokens: int
    cache_write_5m_tokens: int
    cache_write_1h_tokens: int
    cache_read_tokens: int
    output_tokens: int
    has_ttl_split: bool = False
    split_mismatch: bool = False
    speed: str | None = None
    inference_geo: str | None = None
    # `cache_deleted_input_tokens`: what cache edits deleted from the cached prefix so far
    # (cumulative over the conversation, as Claude Code's cached microcompact reports it).
    cache_deleted_tokens: int = 0

    @property
    def cache_write_tokens(self) -> int:
        return self.cache_write_5m_tokens + self.cache_write_1h_tokens

    @property
    def prompt_tokens(self) -> int:
        """Everything the model read: uncached input, cache writes and cache reads."""
        return self.input_tokens + self.cache_write_tokens + self.cache_read_tokens

    @property
    def tokens(self) -> Tokens:
        return Tokens(self.input_tokens, self.cache_write_5m_tokens, self.cache_write_1h_tokens,
                      self.cache_read_tokens, self.output_tokens)  # fmt: skip


class CompactionKind(StrEnum):
    BOUNDARY = "compact_boundary"  # 2.1.x system line
    SUMMARY = "compact_summary"  # 1.0.x isCompactSummary user line with no boundary
    # Pruning the recording itself shows (not a compaction: the conversation goes on)
    MICROCOMPACT = "microcompact_boundary"  # Claude Code cleared tool results itself
    CACHE_DELETION = "cache_deletion"  # usage reports more cache_deleted_input_tokens


@quick_init
@dataclass(frozen=True, slots=True)
class Compaction:
    """A compaction (or, kinds MICROCOMPACT and CACHE_DELETION, a pruning) recorded between
    two calls of a thread."""

    kind: CompactionKind
    timestamp_s: float | None
    trigger: str | None = None
    pre_tokens: int | None = None
    tokens_saved: int | None = None
    tool_use_ids: tuple[str, ...] = ()  # the results a microcompact cleared, when recorded


@quick_init
@dataclass(frozen=True, slots=True)
class SourceRef:
    """Where a record came from, for messages a user can act on."""

    file: str
    line: int


@quick_init
@dataclass(frozen=True, slots=True)
class Call:
    """One billed API call, de-duplicated across all files."""

    message_id: str
    request_id: str | None
    timestamp_s: float
    model: str
    usage: Usage
    items: tuple[Item, ...]
    source: SourceRef
    compaction: Compaction | None = None  # a compaction happened since the previous call
    # When the request was sent: the last line written before the call (a user message or
    # tool result), and when its response was complete: the call's last line. Time-based
    # pruning measures idle time from one call's `done_s` to the next one's `sent_s`; the
    # cache TTL runs from request to request. None: not recorded (use `timestamp_s`).
    sent_s: float | None = None
    done_s: float | None = None
    pruned: Compaction | None = None  # the recording itself pruned since the previous call
    provider: str = "anthropic"  # who served the call ("openai" for Codex rollouts)

    @property
    def request_s(self) -> float:
        """When the request was sent (the cache TTL runs from request to request)."""
        return self.timestamp_s if self.sent_s is None else self.sent_s

    @property
    def key(self) -> tuple[str, str | None]:
        return (self.message_id, self.request_id)


class ThreadKind(StrEnum):
    MAIN = "main"
    SUBAGENT = "subagent"
    COMPACT = "compact"  # Claude Code's own compaction calls (agent-acompact-*)


@dataclass(frozen=True, slots=True)
class Thread:
    """One conversation that shares a prompt cache: the main thread or a sub-agent."""

    thread_id: str
    kind: ThreadKind
    calls: tuple[Call, ...]


@dataclass(frozen=True, slots=True)
class Session:
    """A Claude Code session with all its threads."""

    session_id: str
    project: str  # the project folder name, e.g. -Users-me-src-app
    cwd: str | None
    files: tuple[str, ...]
    threads: tuple[Thread, ...]

    @property
    def calls(self) -> list[Call]:
        return [c for t in self.threads for c in t.calls]

    @property
    def call_keys(self) -> list[tuple[str, str | None]]:
        return [c.key for t in self.threads for c in t.calls]

    @property
    def call_counts(self) -> list[int]:
        """A hash of each call's input, cache write and cache read counts, in `call_keys`
        order: two copies of one call must agree on them. (Hashes of int tuples do not depend
        on the process, and are cheap to send between processes.)"""
        return [
            hash((u.input_tokens, u.cache_write_tokens, u.cache_read_tokens))
            for t in self.threads
            for u in (c.usage for c in t.calls)
        ]

    @property
    def start_s(self) -> float | None:
        stamps = [c.timestamp_s for t in self.threads for c in t.calls]
        return min(stamps) if stamps else None

    @property
    def end_s(self) -> float | None:
        stamps = [c.timestamp_s for t in self.threads for c in t.calls]
        return max(stamps) if stamps else None


def add_counts(into: Counter[str], more: Mapping[str, int]) -> None:
    """`into.update(more)`: the same counts, without the check of `more`'s kind that
    `Counter.update` makes first (an abstract-class isinstance, most of the cost of updating
    with the few counts a session's result holds: a run merges tens of thousands)."""
    get = into.get
    for key, count in more.items():
        into[key] = get(key, 0) + count


_NEW_COUNTER = Counter.__new__


def counter_of(counts: dict[str, int]) -> Counter[str]:
    """`Counter(counts)` for a dict, made without `Counter.__init__` (which goes through
    `update` and its isinstance check): a warm replay reads tens of thousands of them."""
    made: Counter[str] = _NEW_COUNTER(Counter)
    dict.update(made, counts)
    return made


@dataclass(frozen=True, slots=True)
class Skip:
    """One input line that could not be used, and why."""

    file: str
    line: int
    reason: str
    detail: str = ""


@dataclass
class SkipReport:
    """Counts of every line that was not used (or used only in part), by reason, with examples.

    Three kinds: `counts` (skipped: the line was not used), `repaired` (used after dropping or
    fixing a bad part) and `notes` (used as it is, but something about it deserves a word: a
    call written twice with different usage, a line uuid used by two lines, a damaged cache
    entry that was rebuilt). Mutable on purpose: loaders add to it while streaming; `merge`
    folds worker reports.
    Every skip is kept as an example up to `max_examples` (the JSON output lists them); past
    that, counts stay exact and `examples_omitted` says how many were not kept, so a corpus of
    garbage cannot exhaust memory.
    """

    lines_read: int = 0  # non-blank lines read: each is used, or counted in `counts`
    counts: Counter[str] = field(default_factory=Counter)
    repaired: Counter[str] = field(default_factory=Counter)
    notes: Counter[str] = field(default_factory=Counter)
    examples: list[Skip] = field(default_factory=list)
    examples_omitted: int = 0
    max_examples: int = 100_000

    def add(self, file: str, line: int, reason: str, detail: str = "") -> None:
        """Count a line that was not used at all."""
        self.counts[reason] += 1
        self._example(file, line, reason, detail)

    def repair(self, file: str, line: int, reason: str, detail: str = "") -> None:
        """Count a line that was used after dropping or fixing a bad part of it."""
        self.repaired[reason] += 1
        self._example(file, line, reason, detail)

    def note(self, file: str, line: int, reason: str, detail: str = "") -> None:
        """Count a line that was used as it is, with something worth telling the user."""
        self.notes[reason] += 1
        self._example(file, line, reason, detail)

    def _example(self, file: str, line: int, reason: str, detail: str) -> None:
        if len(self.examples) < self.max_examples:
            self.examples.append(Skip(file, line, reason, detail))
        else:
            self.examples_omitted += 1

    def merge(self, other: SkipReport) -> None:
        self.lines_read += other.lines_read
        add_counts(self.counts, other.counts)
        add_counts(self.repaired, other.repaired)
        add_counts(self.notes, other.notes)
        room = max(0, self.max_examples - len(self.examples))
        self.examples.extend(other.examples[:room])
        self.examples_omitted += other.examples_omitted + len(other.examples[room:])

    @property
    def total(self) -> int:
        return sum(self.counts.values())
