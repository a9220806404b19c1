"""The replayed context of one thread: the items a policy may clear, what it has cleared so far,
and what the recording cleared itself.

The replayed prompt of a call is the recorded prompt minus what is cleared (net of
placeholders), so with nothing cleared it is the recorded prompt exactly. A rewrite replaces
an item by a placeholder in the messages; a cache edit deletes it from the server's cached
copy only (the local messages keep it: a later rewrite may still clear it, and it comes back
if the edits are dropped). What the recording already pruned (a microcompact boundary, a
cache deletion, a prompt that shrank) is missing from its prompt, so no policy saves it
again: the results it names, then the oldest results Claude Code may clear (both of its
mechanisms clear oldest first), up to the tokens it removed.
"""

from __future__ import annotations

import bisect
from typing import Any

from mcsim.model import ItemKind, ThreadKind
from mcsim.replay.calibrate import CalCall, CallColumns, CalThread
from mcsim.replay.policies import Clearing, LiveSegment, Mode, View, class_key, is_compactable
from mcsim.replay.scenario import CLAUDE_CODE_LEFT_OUT, DEFAULT_COMPACTABLE, Scenario

# Only these are ever cleared; text and attachments are tracked by their size alone.
_CLEARABLE = frozenset({ItemKind.TOOL_RESULT, ItemKind.TOOL_USE, ItemKind.THINKING})
# Each is a message of its own (View.messages); the response before them is one more.
_MESSAGES = frozenset({ItemKind.USER_TEXT, ItemKind.TOOL_RESULT})
# The tools Claude Code's own pruning clears (and their kin in other harnesses)
_CLAUDE_CODE = frozenset(DEFAULT_COMPACTABLE)
_CLAUDE_CODE_LEFT_OUT = frozenset(CLAUDE_CODE_LEFT_OUT)


def placeholder_tokens(text: str) -> int:
    """Tokens a placeholder costs (about 4 characters a token; they are a few tokens each)."""
    return (len(text) + 3) // 4 if text else 0


class PreparedThread:
    """A thread's clearable items as live segments, made once and shared by every scenario
    replayed on the thread (each replay starts by marking them all uncleared again)."""

    def __init__(self, thread: CalThread) -> None:
        self.segments: list[list[LiveSegment]] = []  # per call: clearable items added before it
        self.results: list[list[LiveSegment]] = []  # per call: the tool results among them
        self.messages: list[int] = []  # per call: messages in the conversation (View.messages)
        # resource key -> calls (in order) whose items include a tool call touching it
        self.uses: dict[str, list[int]] = {}
        # per call: index of the next compaction after it (len(calls) if none)
        self.next_compaction: list[int] = []
        self._compactable: dict[tuple[frozenset[str], frozenset[str]], list[list[LiveSegment]]]
        self._compactable = {}
        self._reuses: dict[str, tuple[list[int], list[str]]] = {}  # `reuses`, by resource
        # The policies' decisions on this thread by scenario less its TTL (simulate.py): they
        # never see the cache, so a scenario that differs only in TTL replays them again.
        self.decisions: dict[Any, Any] = {}
        # The segments a replay cleared, deleted or found pruned by the recording (`Context`),
        # for `reset`: a replay changes few of a long thread's segments.
        self.touched: list[LiveSegment] = []
        self.columns = CallColumns(thread.calls)  # for every scenario's replay (simulate.py)
        position = messages = 0
        start = thread.head_tokens  # where the next item starts in the recorded prompt
        for index, call in enumerate(thread.calls):
            if call.compaction:
                start = thread.head_tokens
            # A compaction restarts the conversation; otherwise the last call's response is in.
            messages = 0 if call.compaction or not index else messages + 1
            lives: list[LiveSegment] = []
            for seg in call.segments:  # one pass: a long thread has many
                kind = seg.kind
                if kind in _MESSAGES:
                    messages += 1
                if kind in _CLEARABLE:
                    lives.append(
                        LiveSegment(
                            position,
                            index,
                            kind,
                            seg.tokens,
                            seg.tool_name,
                            seg.tool_use_id,
                            seg.turn,
                            start,
                            resource=seg.resource,
                            class_key=class_key(seg.tool_class),
                        )
                    )
                    if kind is ItemKind.TOOL_USE and seg.resource:
                        for key in seg.resource.split():
                            uses = self.uses.setdefault(key, [])
                            if not uses or uses[-1] != index:
                                uses.append(index)
                position += 1
                start += seg.tokens
            start += call.adjustment_tokens
            self.messages.append(messages)
            self.segments.append(lives)
            self.results.append([s for s in lives if s.kind is ItemKind.TOOL_RESULT])

        upcoming = len(thread.calls)
        for i in range(len(thread.calls) - 1, -1, -1):
            self.next_compaction.append(upcoming)
            if thread.calls[i].compaction:
                upcoming = i
        self.next_compaction.reverse()

    def compactable(
        self, allowed: frozenset[str], excluded: frozenset[str]
    ) -> list[list[LiveSegment]]:
        key = (allowed, excluded)
        if key not in self._compactable:
            self._compactable[key] = [
                [s for s in results if is_compactable(s, allowed, excluded)]
                for results in self.results
            ]
        return self._compactable[key]

    def reuses(self, resource: str) -> tuple[list[int], list[str]]:
        """The calls whose tool calls touch any key of `resource` (the space-separated hashes
        of a result's keys: refetch.ResourceKeys), in order, each with the first of those keys
        it touches: where a result cleared before a call is first needed again
        (simulate.py). Worked out once per resource and thread."""
        found = self._reuses.get(resource)
        if found is None:
            first: dict[int, str] = {}
            for key in resource.split():
                for call in self.uses.get(key, ()):
                    first.setdefault(call, key)
            calls = sorted(first)
            found = self._reuses[resource] = (calls, [first[c] for c in calls])
        return found

    def reset(self) -> None:
        """Every segment uncleared again: those a replay changed (`touched`)."""
        for seg in self.touched:
            seg.cleared = seg.edited = seg.recorded = False
            seg.saved, seg.layer = 0, -1
        self.touched = []


class Context:
    """What one scenario's replay of a thread has in its context, call by call. Its `view`
    is what the policies see (one View, updated in place: a View per call costs a lot)."""

    def __init__(
        self, thread: CalThread, scenario: Scenario, prepared: PreparedThread, layers: int = 0
    ) -> None:
        self.thread = thread
        self.prepared = prepared
        # Per layer of the stack: the tokens its clearing keeps out of the prompt now (what
        # the client sends is the recorded prompt less the client-side layers')
        self.layer_saved = [0] * layers
        self.compactable_per_call = prepared.compactable(
            scenario.compactable_tools, scenario.exclude_tools
        )
        self.segments: list[LiveSegment] = []
        self.results: list[LiveSegment] = []
        self.compactable: list[LiveSegment] = []
        self.saved = 0  # tokens currently removed from the prompt
        # ... of which by cache edits (deleted from the cached copy, not rewritten): what the
        # other reading of their billing still bills as cache reads (simulate.py)
        self.edit_saved = 0
        # The recorded position of the first item a rewrite changed since `first_change` was
        # last set to None (the replay does so before each call): the prompt is unchanged
        # before it, so a prefix cache without breakpoints can still read up to there.
        self.first_change: int | None = None
        self.edited: list[LiveSegment] = []  # deleted by cache edits (some may be back)
        self.recorded_upto = 0  # results[:recorded_upto] were looked at for recorded pruning
        self.cleared_log: list[tuple[LiveSegment, int]] = []  # (tool result, cleared before)
        # The segments whose clearing ever saved something, in recorded order (`to_replay`).
        self.saving: list[LiveSegment] = []
        self._saving_at: set[int] = set()  # their positions
        main = thread.kind is ThreadKind.MAIN
        self.view = View(0, 0.0, None, 0, "", main, False, [], [], [], False)
        self.view.excluded_tools = scenario.exclude_tools  # for kinds that ignore `compactable`
        self._show_lists()

    def add(self, i: int) -> None:
        """The items added before call `i` (and what the recording pruned before it)."""
        prepared = self.prepared
        self.segments.extend(prepared.segments[i])
        self.results.extend(prepared.results[i])
        self.compactable.extend(self.compactable_per_call[i])
        self.view.messages = prepared.messages[i]
        call = self.thread.calls[i]
        if call.pruned_ids or call.pruned_tokens:
            self._recorded_pruning(call, i)

    def restart(self) -> None:
        """A compaction: the old conversation is gone."""
        self.segments = []
        self.results = []
        self.compactable = []
        self.saved = 0
        self.edit_saved = 0
        self.edited = []
        self.recorded_upto = 0
        self.saving = []
        self._saving_at = set()
        self.layer_saved = [0] * len(self.layer_saved)
        self._show_lists()

    def apply(self, clearing: Clearing, i: int, layer: int = -1) -> tuple[int, int]:
        """A policy's clearing before call `i` (the stack's layer `layer`): the net tokens it
        removes from the prompt, and (a cache edit) how many of them were in the cached prefix
        (items of earlier calls). A rewrite drops the cache edits sent so far (see
        `_drop_cache_edits`)."""
        net, earlier = self._clear(clearing, i, layer)
        if clearing.mode is Mode.REWRITE and self.edited:
            net -= self._drop_cache_edits()
        self.saved += net
        return net, earlier

    def _credit(self, seg: LiveSegment, layer: int, saved: int) -> None:
        """`seg` now keeps `saved` tokens out of the prompt, for `layer` (-1: none)."""
        if seg.layer >= 0:
            self.layer_saved[seg.layer] -= seg.saved
        if layer >= 0:
            self.layer_saved[layer] += saved
        seg.layer = layer

    def _clear(self, clearing: Clearing, i: int, layer: int = -1) -> tuple[int, int]:
        """Mark segments cleared (a rewrite) or deleted (a cache edit): the net tokens they
        stop costing (a placeholder stays), in all and among the items of earlier calls
        (those in the cached prefix)."""
        cost = placeholder_tokens(clearing.placeholder)
        rewrite = clearing.mode is Mode.REWRITE
        net = earlier = 0
        segments = clearing.segments
        for seg in (*segments, *clearing.inputs) if clearing.inputs else segments:
            if seg.cleared or (seg.edited and not rewrite):
                continue
            saved = max(seg.tokens - cost, 0)
            if saved and seg.position not in self._saving_at:
                self._saving_at.add(seg.position)
                if self.saving and self.saving[-1].start > seg.start:
                    bisect.insort(self.saving, seg, key=_start)
                else:
                    self.saving.append(seg)
            if seg.edited:  # deleted from the cache, now replaced in the messages too
                self._changed(seg)
                seg.edited, seg.cleared = False, True
                self.edit_saved -= seg.saved
                net += saved - seg.saved
                if self.layer_saved:
                    self._credit(seg, layer, saved)
                seg.saved = saved
                continue
            if self.layer_saved:
                self._credit(seg, layer, saved)
            seg.cleared, seg.edited, seg.saved = rewrite, not rewrite, saved
            self.prepared.touched.append(seg)
            if rewrite:
                self._changed(seg)
            net += saved
            if seg.call_index < i:
                earlier += saved
            if not rewrite:
                self.edited.append(seg)
                self.edit_saved += saved
            if seg.kind is ItemKind.TOOL_RESULT:
                self.cleared_log.append((seg, i))
        return net, earlier

    def _changed(self, seg: LiveSegment) -> None:
        if self.first_change is None or seg.start < self.first_change:
            self.first_change = seg.start

    def _drop_cache_edits(self) -> int:
        """A rewrite drops the cache edits sent so far (Claude Code resets their state): what
        they deleted and the rewrite did not clear is sent again. The tokens that come back."""
        back = 0
        for seg in self.edited:
            if seg.edited:
                self._changed(seg)
                seg.edited = False
                back += seg.saved
                if self.layer_saved:
                    self._credit(seg, -1, 0)
                seg.saved = 0
        self.edited = []
        self.edit_saved = 0  # (each edited segment's `saved` came back above)
        return back

    def _recorded_pruning(self, call: CalCall, i: int) -> None:
        """The recording cleared results itself before this call: its prompt is already
        without them, so they save nothing more, whatever a policy did to them. First the
        results it names, then the oldest results Claude Code may clear (both of its
        mechanisms clear oldest first) while what it removed is not accounted for (a rest
        under half a result is the calibration's rounding, not a result)."""
        left = call.pruned_tokens
        if call.pruned_ids:
            ids = set(call.pruned_ids)
            for seg in self.results:
                if seg.tool_use_id in ids and seg.call_index < i and not seg.recorded:
                    left -= seg.tokens
                    self._gone(seg)
        results = self.results
        while left > 0 and self.recorded_upto < len(results):
            seg = results[self.recorded_upto]
            if seg.call_index >= i:
                break
            if not seg.recorded and is_compactable(seg, _CLAUDE_CODE, _CLAUDE_CODE_LEFT_OUT):
                if 2 * left < seg.tokens:
                    break
                left -= seg.tokens
                self._gone(seg)
            self.recorded_upto += 1

    def _gone(self, seg: LiveSegment) -> None:
        """A result the recording cleared: whatever a policy saved on it, it saves no more."""
        self.saved -= seg.saved
        if self.layer_saved:
            self._credit(seg, -1, 0)
        if seg.edited:
            self.edit_saved -= seg.saved
        seg.cleared, seg.edited, seg.recorded, seg.saved = True, False, True, 0
        self.prepared.touched.append(seg)

    def _show_lists(self) -> None:
        self.view.segments = self.segments
        self.view.results = self.results
        self.view.compactable = self.compactable

    def to_replay(self, recorded_position: int) -> int:
        """A position in the recorded prompt, in the replayed prompt (less what was cleared).

        What is cleared before the position is all that is cleared (`saved`: the sum of every
        segment's `saved`) less what is cleared at or after it, summed from the end of the
        segments that ever saved something: the position is usually near the end (the first
        change of this call), where summing the whole context from its start made this a
        fifth of the policies' time on long threads.
        """
        after = 0
        for seg in reversed(self.saving):
            if seg.start < recorded_position:
                break
            after += seg.saved
        removed = self.saved - after
        return max(recorded_position - removed, 0)


def _start(seg: LiveSegment) -> int:
    return seg.start
