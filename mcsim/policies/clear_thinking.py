"""`clear_thinking`: Anthropic's context editing `clear_thinking_20251015` (DOMAIN.md §2.3).

Keeps the thinking of the `keep_turns` newest user turns (or all of it with `all`) and clears
the rest. Earlier turns' thinking is in the prompt only on Opus 4.5+ and Sonnet 4.6+; on older
models it is stripped anyway, so there is nothing to clear. Clearing breaks the cached prefix.

Thinking recorded as a signature alone (recent Claude Code writes no thinking text) has no
known size: it is left alone rather than cleared for nothing, since a clearing that saves
nothing would still break the cache in the simulation. On such transcripts this policy clears
nothing, and the replay says so.
"""

from __future__ import annotations

from collections.abc import Mapping

from mcsim.model import ItemKind
from mcsim.policies import FREED_NOTHING, Clearing, Mode, Param, Policy, View, register


@register
class ClearThinking(Policy):
    kind = "clear_thinking"
    summary = "Clear thinking blocks of all but the newest user turns."
    params = (Param("keep_turns", int, 1, "newest turns whose thinking is kept", 0, ("all",)),)

    figure_names = ("resends_thinking", "most_blocks", "most_sized", "oldest_turns")
    resends_thinking = 0  # 1 once a call was on a model that re-sends earlier thinking
    most_blocks = 0  # the most thinking blocks in a prompt, signature-only ones included
    most_sized = 0  # the most thinking blocks of a known size in a prompt
    oldest_turns = 0  # the most user turns the oldest sized thinking in a prompt was old

    def before_call(self, view: View) -> Clearing | None:
        keep = self.values["keep_turns"]
        if keep == "all" or not view.thinking_in_prompt:
            return None
        self.resends_thinking = 1
        thinking = [s for s in view.segments if s.kind is ItemKind.THINKING]
        if len(thinking) > self.most_blocks:
            self.most_blocks = len(thinking)
        thinking = [s for s in thinking if s.tokens]
        if not thinking:
            return None
        self.most_sized = max(self.most_sized, len(thinking))
        self.oldest_turns = max(self.oldest_turns, view.turn - thinking[0].turn)
        cleared = [s for s in thinking if not s.cleared and s.turn <= view.turn - keep]
        return Clearing(tuple(cleared), Mode.REWRITE, placeholder="") if cleared else None

    def idle_note(self, figures: Mapping[str, float]) -> str:
        keep = self.values["keep_turns"]
        if keep == "all":
            return "keep_turns all keeps every turn's thinking"
        if not figures["resends_thinking"]:
            return (
                "no earlier thinking in the prompt: no call was on a model that re-sends it "
                "(Opus 4.5+, Sonnet 4.6+)"
            )
        blocks, oldest = int(figures["most_blocks"]), int(figures["oldest_turns"])
        if not blocks:
            return "no earlier thinking in the prompt: the responses carried none"
        if not figures["most_sized"]:
            return (
                "no earlier thinking of a known size in the prompt: it was all recorded as a "
                f"signature only (most: {blocks} blocks)"
            )
        if oldest < keep:
            return f"no thinking in the prompt was {keep} or more user turns old (oldest: {oldest})"
        return FREED_NOTHING
