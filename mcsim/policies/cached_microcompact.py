"""`cached_microcompact`: Claude Code's server-side cache edits (DOMAIN.md §2.2).

Compactable results are registered as they appear; when more than `trigger_threshold` are
registered, all but the `keep_recent` newest are deleted from the server's cached copy with a
`cache_edits` block. The local prompt is not rewritten, so the prefix does not break. Skipped
on a call where an earlier layer rewrote the prompt (the time-based path wins), and its state
is reset then. Main thread only.

The billing of cache edits is not documented; the simulation models deleted tokens as no
longer billed as cache reads from the call after the edit, with no write penalty.
"""

from __future__ import annotations

from collections.abc import Mapping

from mcsim.policies import (
    FREED_NOTHING,
    NO_MAIN_THREAD,
    Clearing,
    LiveSegment,
    Mode,
    Param,
    Policy,
    View,
    register,
)


@register
class CachedMicrocompact(Policy):
    kind = "cached_microcompact"
    summary = "Delete old tool results from the server's cache without breaking the prefix."
    params = (
        Param("trigger_threshold", int, 12, "registered results that trigger deletion", minimum=1),
        Param("keep_recent", int, 5, "newest results kept", minimum=1),
    )

    figure_names = ("saw_main_thread", "most_registered")
    saw_main_thread = 0  # 1 once it saw a call of a main thread
    most_registered = 0  # the most results registered and not deleted yet at a call

    def reset(self) -> None:
        self.registered: list[LiveSegment] = []
        self.seen: set[int] = set()
        self.scanned = 0  # compactable results already looked at

    def after_rewrite(self) -> None:
        self.reset()

    def before_call(self, view: View) -> Clearing | None:
        if not view.main_thread:
            return None
        self.saw_main_thread = 1
        if view.rewritten:
            return None
        results = view.compactable_results()
        for seg in results[self.scanned :]:  # the list only grows until a reset
            if seg.position not in self.seen and not seg.cleared:
                self.seen.add(seg.position)
                self.registered.append(seg)
        self.scanned = len(results)
        if len(self.registered) > self.most_registered:
            self.most_registered = len(self.registered)
        if len(self.registered) <= self.values["trigger_threshold"]:
            return None
        keep = self.values["keep_recent"]
        deleted, self.registered = self.registered[:-keep], self.registered[-keep:]
        return Clearing(tuple(deleted), Mode.CACHE_EDIT, placeholder="")

    def idle_note(self, figures: Mapping[str, float]) -> str:
        trigger, keep = self.values["trigger_threshold"], self.values["keep_recent"]
        if not figures["saw_main_thread"]:
            return NO_MAIN_THREAD
        most = int(figures["most_registered"])
        if most <= trigger:
            return f"never more than {trigger} compactable results registered (most: {most})"
        if most <= keep:
            return f"keep_recent {keep} kept every registered result (most: {most})"
        return FREED_NOTHING
