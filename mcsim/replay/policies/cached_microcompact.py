"""`cached_microcompact`: Claude Code's server-side cache edits.

The mechanism, with the defaults of the systems that use it: docs/domain.md#cached-microcompact.

The state is Claude Code's: the compactable results registered in order (newly seen ones
each call; never forgotten), which of them are deleted, and the edits already sent (pinned:
re-sent with every later call, at no cost in the model). When more than
`trigger_threshold` results are registered, every registered result but the `keep_recent`
newest that is not deleted yet is deleted from the server's cached copy with a
`cache_edits` block. So after the first trigger each new result pushes one more out: a
rolling window of `keep_recent` (0 acts as 1, as Claude Code's time-based path floors it;
the cache-edit module is not in its public source), not batches. The local prompt is not
rewritten, so the prefix does not break. Skipped on a call where an earlier layer rewrote
the prompt (the time-based path wins), and the state is reset then: the next call registers
every result in the prompt again. Main thread only.

The billing of cache edits is not documented; the simulation models deleted tokens as no
longer billed, neither read nor written, from the call that carries the edit, with no
write penalty, and the drop in reads is not a cache break (Claude Code's detector is told).
"""

from __future__ import annotations

from collections.abc import Mapping

from mcsim.replay.policies import (
    FREED_NOTHING,
    KEEP_ZERO_NOTE,
    NO_MAIN_THREAD,
    Clearing,
    Mode,
    Param,
    Policy,
    View,
    at_least_one,
    register,
)


@register
class CachedMicrocompact(Policy):
    kind = "cached_microcompact"
    needs = "cache_editing"  # docs/domain.md#model-support
    summary = "Delete old tool results from the server's cache without breaking the prefix."
    params = (
        Param(
            "trigger_threshold",
            int,
            12,
            "registered results that trigger deletion",
            minimum=1,
            conservative=1,
        ),
        Param(
            "keep_recent",
            int,
            5,
            "newest results kept (0 acts as 1, as in Claude Code)",
            minimum=0,
            conservative=1,
        ),
    )

    figure_names = ("saw_main_thread", "most_registered")
    saw_main_thread = 0  # 1 once it saw a call of a main thread
    most_registered = 0  # the most results registered at a call

    def reset(self) -> None:
        # The registered results are the compactable results in the prompt, in order: the
        # view's list, which only grows until a compaction (and a reset here registers them
        # all again, as Claude Code does after a time-based rewrite).
        self.settled = 0  # registered[:settled] are all deleted (or cleared by another layer)

    def after_rewrite(self) -> None:
        self.reset()

    def before_call(self, view: View) -> Clearing | None:
        if not view.main_thread:
            return None
        self.saw_main_thread = 1
        if view.rewritten:
            return None
        registered = view.compactable_results()
        n = len(registered)
        if n > self.most_registered:
            self.most_registered = n
        end = n - at_least_one(self.values["keep_recent"])
        if n <= self.values["trigger_threshold"] or end <= self.settled:
            return None
        deleted = [s for s in registered[self.settled : end] if not s.cleared and not s.edited]
        self.settled = end
        return Clearing(tuple(deleted), Mode.CACHE_EDIT, placeholder="") if deleted else None

    def idle_note(self, figures: Mapping[str, float]) -> str:
        trigger, keep = self.values["trigger_threshold"], at_least_one(self.values["keep_recent"])
        if not figures["saw_main_thread"]:
            return NO_MAIN_THREAD
        most = int(figures["most_registered"])
        if most <= trigger:
            return f"never more than {trigger} compactable results registered (most: {most})"
        if most <= keep:
            return f"keep_recent {keep} kept every registered result (most: {most})"
        return FREED_NOTHING

    def value_notes(self) -> list[str]:
        return [KEEP_ZERO_NOTE] if self.values["keep_recent"] == 0 else []
