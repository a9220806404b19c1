"""`clear_tool_uses`: Anthropic's context editing `clear_tool_uses_20250919`.

The mechanism, with the defaults of the systems that use it: docs/domain.md#api-context-editing.

Applied server-side to every request whose prompt exceeds the trigger: every tool use but the
`keep` newest has its result replaced by a placeholder, oldest first. The rules, as Anthropic
documents them (platform.claude.com/docs/en/build-with-claude/context-editing):

* Candidates are the results of every tool, MCP tools and sub-agent (Task/Agent) calls
  included, except `exclude_tools` ("tool names whose tool uses and results should never be
  cleared"). The scenario's `compactable_tools` list is Claude Code's client-side list and does
  not apply here; the scenario's `exclude_tools` does, as the user's own "never clear".
* `keep` counts the newest tool uses whatever their tool ("how many recent tool use/result
  pairs to keep"), excluded tools' uses included: the docs do not carry excluded tools out of
  the count, and LangChain's re-implementation of this strategy counts them too. Anthropic's
  own recorded run (the cookbook's) is reproduced only when it counts the tools it may clear
  alone: `keep_counts_excluded: false` (docs/domain.md#api-context-editing).
* `clear_tool_inputs`: true clears the tool_use inputs of the cleared tool uses too; a list of
  tool names clears the inputs of those tools' uses only. Tool lists may name classes of tools
  (`class:shell`), as every tool list may (mcsim.replay.policies.CLASS_PREFIX).
* `clear_at_least`: nothing is cleared unless the blocks to clear hold at least this many
  tokens, inputs included ("context will only be modified if at least this many tokens can be
  removed"; the API reports them as `cleared_input_tokens`).
* The trigger is measured on the history the client sends (the edit is worked out on the
  server, on every request, from what the client sends: View.sent_prompt_tokens, net of
  client-side rewrites only): `trigger_input_tokens` its tokens, `trigger_tool_uses` its
  tool uses.
* Which results are cleared on a request (`cleared_set`) is not documented, and Anthropic's
  recorded runs rule out clearing everything older than `keep` on every request:
  `in_steps` (the default, what reproduces them best) grows the cleared set only on a
  request where the history, less what this strategy already clears, exceeds the trigger
  (and only by `clear_at_least` or more), and holds it otherwise; `every_request` clears
  everything older than `keep` on every request over the trigger (`clear_at_least` then
  weighs all it clears). Cleared content stays cleared on later requests. The replay
  reports both readings' savings.

Clearing changes the prompt from the first cleared block, so it breaks the cached prefix.
"""

from __future__ import annotations

from collections.abc import Mapping

from mcsim.model import ItemKind
from mcsim.replay.policies import (
    FREED_NOTHING,
    Clearing,
    LiveSegment,
    Mode,
    Param,
    Policy,
    View,
    listed,
    register,
)

IN_STEPS, EVERY_REQUEST = "in_steps", "every_request"
READINGS = (IN_STEPS, EVERY_REQUEST)


def _mine(seg: LiveSegment, layer: int) -> bool:
    """Whether this strategy (the stack's `layer`) cleared the segment."""
    return seg.cleared and seg.layer == layer


def _ours(seg: LiveSegment, layer: int) -> bool:
    """Whether the segment is in the request for this strategy to remove: not cleared, or
    cleared by it (another layer's clearing is not in what the client sends, or not its)."""
    return not seg.cleared or seg.layer == layer


def other_reading(reading: str) -> str:
    """The other reading of the undocumented cleared-set rule."""
    return EVERY_REQUEST if reading == IN_STEPS else IN_STEPS


@register
class ClearToolUses(Policy):
    kind = "clear_tool_uses"
    needs = "context_editing"  # docs/domain.md#model-support
    summary = "API context editing: past a prompt size, clear all but the newest tool uses."
    params = (
        Param(
            "trigger_input_tokens",
            int,
            100_000,
            "prompt size that triggers it",
            minimum=0,
            conservative=1,
        ),
        Param(
            "trigger_tool_uses",
            int,
            None,
            "or: tool uses still in the prompt that trigger it",
            minimum=1,
            optional=True,
            conservative=1,
        ),
        Param(
            "keep",
            int,
            3,
            "newest tool uses kept (of any tool, excluded ones too)",
            minimum=0,
            api_type="tool_uses",
            conservative=1,
        ),
        Param(
            "clear_at_least",
            int,
            None,
            "clear nothing unless this many tokens",
            minimum=0,
            optional=True,
            api_type="input_tokens",
            conservative=1,
        ),
        Param("exclude_tools", list, [], "tools (or class:<class>) never cleared"),
        Param(
            "clear_tool_inputs",
            (bool, list),
            False,
            "also clear the tool_use inputs: true, or the tools (or classes) whose inputs go",
        ),
        Param(
            "cleared_set",
            str,
            IN_STEPS,
            "which results a request clears (undocumented): in_steps, growing only when the "
            "history less what it clears exceeds the trigger, or every_request, all but keep",
            choices=READINGS,
        ),
        Param(
            "keep_counts_excluded",
            bool,
            True,
            "keep counts excluded tools' uses too (false: only the tools it may clear)",
            conservative=-1,  # true keeps fewer of the results it may clear
        ),
    )

    figure_names = ("largest_prompt", "most_tool_uses", "most_clearable")
    largest_prompt = 0  # the largest prompt at a call, in tokens
    most_tool_uses = 0  # the most tool uses still in the prompt at a call (trigger_tool_uses)
    most_clearable = 0  # the most tokens it could clear at once when triggered (clear_at_least)

    def before_call(self, view: View) -> Clearing | None:
        results = view.tool_results()
        every = self.values["cleared_set"] == EVERY_REQUEST
        sent = view.sent_prompt_tokens  # the history the client sends
        if sent > self.largest_prompt:
            self.largest_prompt = sent
        me = view.layer
        by_uses = self.values["trigger_tool_uses"]
        if by_uses is not None:
            # Tool uses in the history; in steps, less those whose results it clears itself.
            present = len(results) if every else sum(not _mine(s, me) for s in results)
            self.most_tool_uses = max(self.most_tool_uses, present)
            if present <= by_uses:
                return None
        elif (sent if every else sent - view.own_saved) <= self.values["trigger_input_tokens"]:
            return None
        excluded = view.excluded_tools.union(self.values["exclude_tools"])
        keep = self.values["keep"]
        if self.values["keep_counts_excluded"]:
            older = [
                s
                for s in results[: max(len(results) - keep, 0)]
                if not excluded or not listed(s, excluded)
            ]
        else:
            clearable = [s for s in results if not excluded or not listed(s, excluded)]
            older = clearable[: max(len(clearable) - keep, 0)]
        cleared = [s for s in older if not s.cleared]
        inputs = self._inputs(view, older)
        if not cleared and not inputs:
            return None
        least = self.values["clear_at_least"]
        if least is not None:
            if every:  # all it removes from this request, what it cleared before included
                total = [s for s in older + self._inputs(view, older, True) if _ours(s, me)]
            else:  # what this step adds
                total = cleared + inputs
            clearable_tokens = sum(s.tokens for s in total)
            self.most_clearable = max(self.most_clearable, clearable_tokens)
            if clearable_tokens < least:
                return None
        return Clearing(tuple(cleared), Mode.REWRITE, inputs=tuple(inputs))

    def _inputs(
        self, view: View, older: list[LiveSegment], cleared_too: bool = False
    ) -> list[LiveSegment]:
        """The tool_use inputs cleared with the results of `older`: not cleared yet (or all,
        `cleared_too`)."""
        which = self.values["clear_tool_inputs"]
        if which is False:
            return []
        ids = {s.tool_use_id for s in older if which is True or listed(s, which)}
        return [
            s
            for s in view.segments
            if s.kind is ItemKind.TOOL_USE
            and s.tool_use_id in ids
            and (cleared_too or not s.cleared)
        ]

    def idle_note(self, figures: Mapping[str, float]) -> str:
        by_uses, least = self.values["trigger_tool_uses"], self.values["clear_at_least"]
        if by_uses is not None:
            most = int(figures["most_tool_uses"])
            if most <= by_uses:
                return f"never more than {by_uses} tool uses (most: {most})"
        else:
            trigger, largest = self.values["trigger_input_tokens"], int(figures["largest_prompt"])
            if largest <= trigger:
                return f"the prompt never exceeded {trigger:,} tokens (largest {largest:,})"
        clearable = int(figures["most_clearable"])
        if least is not None and clearable < least:
            return f"never {least:,} tokens to clear at once (most: {clearable:,})"
        return FREED_NOTHING
