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
  the count, and LangChain's re-implementation of this strategy counts them too.
* `clear_tool_inputs`: true clears the tool_use inputs of the cleared tool uses too; a list of
  tool names clears the inputs of those tools' uses only. Tool lists may name classes of tools
  (`class:shell`), as every tool list may (mcsim.replay.policies.CLASS_PREFIX).
* `clear_at_least`: nothing is cleared unless the blocks to clear hold at least this many
  tokens, inputs included ("context will only be modified if at least this many tokens can be
  removed"; the API reports them as `cleared_input_tokens`).
* The trigger compares the prompt as this request would send it: `trigger_input_tokens` the
  prompt net of what is already cleared (the simulation's prompt), `trigger_tool_uses` the tool
  uses whose results are still in it. Cleared content stays cleared on later requests.

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


@register
class ClearToolUses(Policy):
    kind = "clear_tool_uses"
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
    )

    figure_names = ("largest_prompt", "most_tool_uses", "most_clearable")
    largest_prompt = 0  # the largest prompt at a call, in tokens
    most_tool_uses = 0  # the most tool uses still in the prompt at a call (trigger_tool_uses)
    most_clearable = 0  # the most tokens it could clear at once when triggered (clear_at_least)

    def before_call(self, view: View) -> Clearing | None:
        results = view.tool_results()
        if view.prompt_tokens > self.largest_prompt:
            self.largest_prompt = view.prompt_tokens
        by_uses = self.values["trigger_tool_uses"]
        if by_uses is not None:
            present = sum(not s.cleared for s in results)
            self.most_tool_uses = max(self.most_tool_uses, present)
            if present <= by_uses:
                return None
        elif view.prompt_tokens <= self.values["trigger_input_tokens"]:
            return None
        excluded = view.excluded_tools.union(self.values["exclude_tools"])
        older = [
            s
            for s in results[: max(len(results) - self.values["keep"], 0)]
            if not excluded or not listed(s, excluded)
        ]
        cleared = [s for s in older if not s.cleared]
        inputs = self._inputs(view, older)
        if not cleared and not inputs:
            return None
        least = self.values["clear_at_least"]
        if least is not None:
            clearable = sum(s.tokens for s in cleared + inputs)
            self.most_clearable = max(self.most_clearable, clearable)
            if clearable < least:
                return None
        return Clearing(tuple(cleared), Mode.REWRITE, inputs=tuple(inputs))

    def _inputs(self, view: View, older: list[LiveSegment]) -> list[LiveSegment]:
        """The tool_use inputs cleared with the results of `older` (cleared before or now)."""
        which = self.values["clear_tool_inputs"]
        if which is False:
            return []
        ids = {s.tool_use_id for s in older if which is True or listed(s, which)}
        return [
            s
            for s in view.segments
            if s.kind is ItemKind.TOOL_USE and s.tool_use_id in ids and not s.cleared
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
