"""Pruning policies: one kind per module, one small interface, a registry keyed by YAML `kind`.

A policy sees the replayed conversation before each call (a `View`) and may ask to clear
some of it (a `Clearing`). It never touches token counts or the cache: the simulation applies
the clearing, prices it and decides what it does to the prompt cache. Adding a kind is one
module that subclasses `Policy`, declares its `params` and overrides `before_call`, plus one
import line at the bottom of this file.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar, NamedTuple

from mcsim.model import ItemKind


class Mode(StrEnum):
    REWRITE = "rewrite"  # the prompt itself changes: the cached prefix breaks at the change
    CACHE_EDIT = "cache_edit"  # deleted server-side from the cached copy: no break


@dataclass(frozen=True, slots=True)
class Param:
    """A policy parameter as users write it in YAML."""

    name: str
    # int, float, bool, list (of tool names), str (one of `choices`); (bool, list): either
    kind: type | tuple[type, ...]
    default: Any
    help: str
    minimum: float | None = None
    choices: tuple[Any, ...] = ()  # extra literal values allowed besides `kind` (e.g. "all")
    optional: bool = False  # None allowed
    # The API's own spelling of a count, `{type: <api_type>, value: N}` (and `{type: all}` when
    # "all" is a choice), accepted as N so a context_management edit can be copied as it is.
    api_type: str | None = None
    # Numbers only. Far above any useful setting (counts, tokens, minutes): a bound keeps
    # infinities and thousand-digit numbers out of the replay and out of error messages.
    maximum: float = 1_000_000_000
    # Which way the value makes the policy more conservative (clear less, or later): +1 when a
    # higher value does (keep_recent, a longer gap, a higher trigger), -1 when a lower value
    # does, 0 when neither (a sweep then falls back on re-fetch risk to compare variants).
    conservative: int = 0


@dataclass(slots=True)
class LiveSegment:
    """An item in the replayed context, with its clearing state (owned by the simulation)."""

    position: int  # order in the context
    call_index: int  # the call it was added before
    kind: ItemKind
    tokens: int
    tool_name: str | None
    tool_use_id: str | None
    turn: int
    start: int = 0  # where it starts in the recorded prompt (tokens)
    cleared: bool = False  # replaced by a placeholder in the messages (a rewrite)
    # Deleted from the server's cached copy by a cache edit: the local messages still hold it,
    # so a rewrite may still clear it, and it comes back if the edits are dropped.
    edited: bool = False
    recorded: bool = False  # the recording itself cleared it (it is not in the recorded prompt)
    saved: int = 0  # tokens its clearing (or deletion) removed from the prompt
    layer: int = -1  # the index of the layer of the stack that cleared it (-1: none)
    resource: str | None = None  # what its tool call touched (calibrate.Segment.resource)
    # `class:<its tool's class>` (CLASS_PREFIX): how tool lists name the class of its tool
    class_key: str | None = None


@dataclass(slots=True)
class View:
    """What a policy may look at before a call.

    Valid only during `before_call`: the simulation updates one View per thread in place
    (building one per call was a measurable share of the replay), so a policy must not keep it.
    """

    call_index: int
    timestamp_s: float
    gap_seconds: float | None  # since the previous call of the thread
    prompt_tokens: int  # the replayed prompt before this call's clearing
    model: str
    main_thread: bool
    thinking_in_prompt: bool
    segments: Sequence[LiveSegment]  # what could be cleared (tool results and calls,
    # thinking), oldest first; text is never cleared and is not listed
    results: Sequence[LiveSegment]  # the tool results among them
    compactable: Sequence[LiveSegment]  # the results the scenario allows to clear
    rewritten: bool  # an earlier layer of the stack rewrote the prompt for this call
    # Messages in the conversation since it started or was compacted: each user text and
    # each tool result is one, and so is each earlier call's response (PreparedThread).
    messages: int = 0
    excluded_tools: frozenset[str] = frozenset()  # the scenario's exclude_tools: never cleared
    # The prompt the client sends: the recorded one less what client-side layers cleared
    # (not what the server removes: API context editing, cache edits). API context editing
    # measures its trigger on it, the history the client sends (docs/domain.md#api-context-editing).
    sent_prompt_tokens: int = 0
    layer: int = -1  # the index in the stack of the policy looking (set before each asks)
    own_saved: int = 0  # the tokens that policy's own clearing keeps out of the prompt

    def tool_results(self) -> Sequence[LiveSegment]:
        return self.results

    def compactable_results(self) -> Sequence[LiveSegment]:
        return self.compactable


class Clearing(NamedTuple):  # immutable; a NamedTuple because one is made almost every call
    """What a policy asks to clear before a call."""

    segments: tuple[LiveSegment, ...]
    mode: Mode
    placeholder: str = "[Old tool result content cleared]"
    inputs: tuple[LiveSegment, ...] = ()  # tool_use inputs cleared too


class Policy:
    """Base class: a policy with no effect. Subclasses override `before_call` (and `reset`).

    `main_thread_only` policies are not applied to sub-agents (Claude Code's microcompact
    paths); the scenario's `main_thread_only` setting can extend that to every policy.

    A policy that can clear also keeps the largest of each quantity it compares with a
    threshold (the longest gap, the largest prompt, the most results): plain attributes,
    listed in `figure_names`, updated in `before_call` (a comparison: the replay loop is hot)
    and not forgotten by `reset`. The replay keeps the largest of each over the threads the
    policy ran on; when it cleared nothing over a whole run, `idle_note` says why in the
    policy's own terms, from those figures.
    """

    kind: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    params: ClassVar[tuple[Param, ...]] = ()
    # Parameters that had another name: old name -> why it changed (a file using it is refused).
    renamed: ClassVar[dict[str, str]] = {}
    figure_names: ClassVar[tuple[str, ...]] = ()  # the attributes `figures` hands the replay
    # The server-side mechanism the kind needs the call's model to support
    # (mcsim.replay.model_support: "context_editing", "cache_editing"); None: any model.
    needs: ClassVar[str | None] = None
    # Whether the harness itself rewrites the messages it sends (a microcompact, masking),
    # rather than the server editing them (API context editing, cache edits)
    client_side: ClassVar[bool] = False

    def __init__(self, **values: Any) -> None:
        self.values = {p.name: values.get(p.name, p.default) for p in self.params}
        self.reset()

    def reset(self) -> None:
        """Forget all state: a new thread, or the conversation was compacted."""

    def before_call(self, view: View) -> Clearing | None:
        return None

    def after_rewrite(self) -> None:
        """Another layer rewrote the prompt this call (Claude Code resets cache-edit state)."""

    def figures(self) -> dict[str, float]:
        """The largest of each quantity this policy compared with a threshold on the thread:
        the attributes named in `figure_names`."""
        return {name: getattr(self, name) for name in self.figure_names}

    def idle_note(self, figures: Mapping[str, float]) -> str:
        """Why the policy cleared nothing, from the largest `figures` over the threads it ran
        on (a clause to follow "cleared nothing: ")."""
        return "found nothing to clear"

    def value_notes(self) -> list[str]:
        """What the replay does with a value the file gave that it reads otherwise than
        written (`keep_recent: 0` acts as 1): clauses for the run's notes."""
        return []


# The clause of a policy whose trigger was reached but whose clearing freed nothing: what it
# could clear was all kept, or no larger than the placeholder left in its place.
FREED_NOTHING = (
    "it triggered, but found nothing left to clear: already cleared (by another layer or by "
    "the recording itself) or no larger than its placeholder"
)
NO_MAIN_THREAD = "no main thread to act on (it acts on main threads only)"


def minutes(seconds: float) -> str:
    """A duration in minutes for a note, rounded down to a tenth: a gap just short of a
    threshold must not read as reaching it."""
    return f"{math.floor(seconds / 6) / 10:,.1f}".removesuffix(".0")


def amount(value: float) -> str:
    """A parameter's value for a note, as written (`1,234,567`, `0.5`): never rounded to
    `1.23457e+06` as `:g` would."""
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,}"


def can_clear(kind: type[Policy]) -> bool:
    """Whether a policy kind can ever clear anything (`none` keeps the base class's hook)."""
    return kind.before_call is not Policy.before_call


REGISTRY: dict[str, type[Policy]] = {}


def register(cls: type[Policy]) -> type[Policy]:
    REGISTRY[cls.kind] = cls
    return cls


# A tool list (compactable_tools, exclude_tools, clear_tool_inputs) names tools, and classes
# of tools as `class:<class>` (mcsim.model.ToolClass): `class:shell` is Bash, shell,
# exec_command, ... whatever the harness. A tool is in a list if its name or its class is.
CLASS_PREFIX = "class:"


def class_key(tool_class: str | None) -> str | None:
    """How a tool list names a class: `class:shell`."""
    return None if tool_class is None else CLASS_PREFIX + tool_class


def listed(seg: LiveSegment, tools: frozenset[str] | tuple[str, ...]) -> bool:
    """Whether a tool list names the segment's tool or its class."""
    return seg.tool_name in tools or seg.class_key in tools


# Claude Code's shell tools, which its compactable list takes in where ours says "Bash":
# `SHELL_TOOL_NAMES = [BASH_TOOL_NAME, POWERSHELL_TOOL_NAME]` (src/utils/shell/shellToolUtils.ts),
# spread into COMPACTABLE_TOOLS (src/services/compact/microCompact.ts) and into the API
# configuration's clear_tool_inputs (src/services/compact/apiMicrocompact.ts); read in a public
# copy of Claude Code's source (github.com/Esonhugh/claude-code). BashOutput, KillShell and
# KillBash are tools of their own, not in the list.
SHELL_TOOL_NAMES = frozenset({"Bash", "PowerShell"})


def is_compactable(seg: LiveSegment, allowed: frozenset[str], excluded: frozenset[str]) -> bool:
    """Whether a tool's results may be cleared: listed by name or class (Claude Code's shell
    tools count as Bash), not excluded by either. MCP tools and sub-agent calls are of class
    other, which no default list names."""
    tool = seg.tool_name
    if tool is None or listed(seg, excluded):
        return False
    return listed(seg, allowed) or (tool in SHELL_TOOL_NAMES and "Bash" in allowed)


def at_least_one(keep: int) -> int:
    """Claude Code's floor on a microcompact's kept results, `Math.max(1, keepRecent)` in its
    time-based path (src/services/compact/microCompact.ts): keeping 0 would clear the
    result the model has just been given, so 0 acts as 1."""
    return max(1, keep)


KEEP_ZERO_NOTE = (
    "keep_recent 0 acts as 1: Claude Code never keeps fewer than the newest result "
    "(Math.max(1, keepRecent))"
)


def keep_newest(candidates: Sequence[LiveSegment], keep: int) -> list[LiveSegment]:
    """All but the `keep` newest of `candidates` that are not cleared yet."""
    older = candidates[: max(len(candidates) - keep, 0)]
    return [s for s in older if not s.cleared]


from mcsim.replay.policies import (  # noqa: E402,F401  (each module registers its kind)
    cached_microcompact,
    clear_thinking,
    clear_tool_uses,
    keep_last_n,
    none,
    time_based_microcompact,
)
