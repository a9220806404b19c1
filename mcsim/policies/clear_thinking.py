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

from mcsim.model import ItemKind
from mcsim.policies import Clearing, Mode, Param, Policy, View, register


@register
class ClearThinking(Policy):
    kind = "clear_thinking"
    summary = "Clear thinking blocks of all but the newest user turns."
    params = (Param("keep_turns", int, 1, "newest turns whose thinking is kept", 0, ("all",)),)

    def before_call(self, view: View) -> Clearing | None:
        keep = self.values["keep_turns"]
        if keep == "all" or not view.thinking_in_prompt:
            return None
        thinking = [s for s in view.segments if s.kind is ItemKind.THINKING and s.tokens]
        if not thinking:
            return None
        cleared = [s for s in thinking if not s.cleared and s.turn <= view.turn - keep]
        return Clearing(tuple(cleared), Mode.REWRITE, placeholder="") if cleared else None
