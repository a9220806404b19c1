"""`clear_thinking`: Anthropic's context editing `clear_thinking_20251015`.

The mechanism, with the defaults of the systems that use it: docs/domain.md#clearing-thinking.

Keeps the thinking of the `keep` newest assistant turns that carry thinking (or all of it with
`all`) and clears the older thinking, as the API's `keep: {type: thinking_turns, value: N}`
does (N ≥ 1; that mapping is accepted as well as N). An assistant turn is the API's: the
assistant's answer to one user message, its whole tool-use loop included ("a tool-use loop is
one assistant turn"; "an assistant conversation turn may include ... multiple thinking blocks",
platform.claude.com/docs/en/build-with-claude/thinking-tool-workflows and .../context-editing),
so thinking is grouped by the user turn it answers. Turns without thinking are not counted.

Earlier turns' thinking is in the prompt only on Opus 4.5+ and Sonnet 4.6+; on older models it
is stripped anyway, so there is nothing to clear. Clearing breaks the cached prefix.

Thinking recorded as a signature alone (recent Claude Code writes no thinking text) has no
known size: its turn still counts as a turn with thinking, but it is left alone rather than
cleared for nothing, since a clearing that saves nothing would still break the cache in the
simulation. On such transcripts this policy clears nothing, and the replay says so.

The API's default `keep` depends on the model (all turns on the models above, where it
matters); here it is 1, the value the strategy shipped with, so that a bare `kind:
clear_thinking` shows what clearing does.

Claude Code sends `keep: "all"` (which never breaks the cache) except on the cold start:
after an idle gap of at least `after_gap_minutes`, when the cache is cold anyway, it keeps
the newest turn's thinking only (docs/domain.md#clearing-thinking). With `after_gap_minutes`
the strategy applies only on such a call; what it cleared stays cleared, as every clearing
in the replay does. `latched: true` keeps it applying on every later call until a
compaction, as Claude Code's source does (`thinkingClearLatched`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from mcsim.model import ItemKind
from mcsim.replay.policies import (
    FREED_NOTHING,
    Clearing,
    Mode,
    Param,
    Policy,
    View,
    amount,
    minutes,
    register,
)


@register
class ClearThinking(Policy):
    kind = "clear_thinking"
    needs = "context_editing"  # docs/domain.md#model-support
    summary = "Clear the thinking of all but the newest assistant turns with thinking."
    params = (
        Param(
            "keep",
            int,
            1,
            "newest assistant turns with thinking whose thinking is kept",
            minimum=1,
            choices=("all",),
            api_type="thinking_turns",
            conservative=1,
        ),
        Param(
            "after_gap_minutes",
            float,
            None,
            "apply only on a call after an idle gap this long (the cold start); none: always",
            minimum=0,
            optional=True,
            conservative=1,
        ),
        Param(
            "latched",
            bool,
            False,
            "with after_gap_minutes: once applied, apply on every later call until a compaction",
            conservative=-1,  # true applies it on more calls
        ),
    )
    renamed: ClassVar[dict[str, str]] = {
        "keep_turns": "now 'keep', as in the API: it counts assistant turns that carry thinking",
    }

    figure_names = ("resends_thinking", "most_blocks", "most_sized", "most_turns", "longest_gap_s")
    resends_thinking = 0  # 1 once a call was on a model that re-sends earlier thinking
    most_blocks = 0  # the most thinking blocks in a prompt, signature-only ones included
    most_sized = 0  # the most thinking blocks of a known size in a prompt
    most_turns = 0  # the most assistant turns with thinking in a prompt
    longest_gap_s = 0.0  # the longest idle gap before a call (after_gap_minutes)

    def reset(self) -> None:
        self.latched_on = False  # it applied since the conversation started or was compacted

    def before_call(self, view: View) -> Clearing | None:
        keep = self.values["keep"]
        if keep == "all" or not view.thinking_in_prompt:
            return None
        self.resends_thinking = 1
        after = self.values["after_gap_minutes"]
        if after is not None:
            gap = view.gap_seconds
            if gap is not None and gap > self.longest_gap_s:
                self.longest_gap_s = gap
            cold = gap is not None and gap >= 60 * after
            if not cold and not self.latched_on:
                return None  # Claude Code sends keep "all" on a warm cache
            self.latched_on = self.values["latched"]
        thinking = [s for s in view.segments if s.kind is ItemKind.THINKING]
        turns = sorted({s.turn for s in thinking})  # the assistant turns that carry thinking
        self.most_blocks = max(self.most_blocks, len(thinking))
        self.most_sized = max(self.most_sized, sum(1 for s in thinking if s.tokens))
        self.most_turns = max(self.most_turns, len(turns))
        if len(turns) <= keep:
            return None
        oldest_kept = turns[-keep]
        cleared = [s for s in thinking if s.turn < oldest_kept and s.tokens and not s.cleared]
        return Clearing(tuple(cleared), Mode.REWRITE, placeholder="") if cleared else None

    def value_notes(self) -> list[str]:
        if self.values["latched"] and self.values["after_gap_minutes"] is None:
            return [
                "latched changes nothing without after_gap_minutes: it applies on every call "
                "already"
            ]
        return []

    def idle_note(self, figures: Mapping[str, float]) -> str:
        keep = self.values["keep"]
        if keep == "all":
            return "keep: all keeps every turn's thinking"
        if not figures["resends_thinking"]:
            return (
                "no earlier thinking in the prompt: no call was on a model that re-sends it "
                "(Opus 4.5+, Sonnet 4.6+)"
            )
        after = self.values["after_gap_minutes"]
        if after is not None and figures["longest_gap_s"] < 60 * after:
            return (
                f"never applied: no idle gap reached {amount(after)} min (longest "
                f"{minutes(figures['longest_gap_s'])} min)"
            )
        blocks, turns = int(figures["most_blocks"]), int(figures["most_turns"])
        if not blocks:
            return "no earlier thinking in the prompt: the responses carried none"
        if not figures["most_sized"]:
            return (
                "no earlier thinking of a known size in the prompt: it was all recorded as a "
                f"signature only (most: {blocks} blocks)"
            )
        if turns <= keep:
            return (
                f"never more than {keep} assistant turns with thinking in the prompt "
                f"(most: {turns})"
            )
        return FREED_NOTHING
