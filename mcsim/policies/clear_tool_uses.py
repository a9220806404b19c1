"""`clear_tool_uses`: Anthropic's context editing `clear_tool_uses_20250919` (DOMAIN.md §2.3).

Applied server-side to every request whose prompt exceeds the trigger: all tool uses but the
`keep` newest have their results replaced by a placeholder (and their inputs too with
`clear_tool_inputs`). If fewer than `clear_at_least` tokens would be cleared, nothing is.
Clearing changes the prompt from the first cleared block, so it breaks the cached prefix.
"""

from __future__ import annotations

from collections.abc import Mapping

from mcsim.model import ItemKind
from mcsim.policies import (
    FREED_NOTHING,
    Clearing,
    LiveSegment,
    Mode,
    Param,
    Policy,
    View,
    keep_newest,
    register,
)


@register
class ClearToolUses(Policy):
    kind = "clear_tool_uses"
    summary = "API context editing: past a prompt size, clear all but the newest tool uses."
    params = (
        Param("trigger_input_tokens", int, 100_000, "prompt size that triggers it", minimum=0),
        Param("trigger_tool_uses", int, None, "or: tool uses that trigger it", 1, (), True),
        Param("keep", int, 3, "newest tool uses kept", minimum=0),
        Param("clear_at_least", int, None, "clear nothing unless this many tokens", 0, (), True),
        Param("exclude_tools", list, [], "tools never cleared"),
        Param("clear_tool_inputs", bool, False, "also clear the tool_use inputs"),
    )

    figure_names = ("largest_prompt", "most_tool_uses", "most_clearable")
    largest_prompt = 0  # the largest prompt at a call, in tokens
    most_tool_uses = 0  # the most tool uses in the prompt at a call
    most_clearable = 0  # the most tokens it could clear at once when triggered (clear_at_least)

    def before_call(self, view: View) -> Clearing | None:
        results = view.tool_results()
        if view.prompt_tokens > self.largest_prompt:
            self.largest_prompt = view.prompt_tokens
        if len(results) > self.most_tool_uses:
            self.most_tool_uses = len(results)
        by_uses = self.values["trigger_tool_uses"]
        if by_uses is not None:
            if len(results) <= by_uses:
                return None
        elif view.prompt_tokens <= self.values["trigger_input_tokens"]:
            return None
        excluded = set(self.values["exclude_tools"])
        candidates = [s for s in view.compactable if s.tool_name not in excluded]
        cleared = keep_newest(candidates, self.values["keep"])
        inputs: list[LiveSegment] = []
        if self.values["clear_tool_inputs"]:
            ids = {s.tool_use_id for s in cleared}
            inputs = [
                s
                for s in view.segments
                if s.kind is ItemKind.TOOL_USE and s.tool_use_id in ids and not s.cleared
            ]
        least = self.values["clear_at_least"]
        if least is not None:
            clearable = sum(s.tokens for s in cleared + inputs)
            self.most_clearable = max(self.most_clearable, clearable)
            if clearable < least:
                return None
        if not cleared:
            return None
        return Clearing(tuple(cleared), Mode.REWRITE, inputs=tuple(inputs))

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
