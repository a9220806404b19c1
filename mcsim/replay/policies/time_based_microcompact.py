"""`time_based_microcompact`: Claude Code's client-side rewrite after an idle gap.

When the time since the last assistant message reaches the threshold, the cache is certainly
cold, so rewriting old tool results costs nothing extra: all compactable results but the
`keep_recent` newest are replaced by a placeholder (never fewer than 1 kept: 0 acts as 1, as
in Claude Code). Main thread only. The mechanism as Claude Code runs it:
docs/domain.md#time-based-microcompact.
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
    amount,
    at_least_one,
    keep_newest,
    minutes,
    register,
)


@register
class TimeBasedMicrocompact(Policy):
    kind = "time_based_microcompact"
    client_side = True  # the harness rewrites the messages it sends
    summary = "After an idle gap, clear all but the newest compactable tool results."
    params = (
        Param(
            "gap_threshold_minutes",
            float,
            60.0,
            "idle gap that triggers it",
            minimum=0,
            conservative=1,
        ),
        Param(
            "keep_recent",
            int,
            5,
            "newest compactable results kept (0 acts as 1, as in Claude Code)",
            minimum=0,
            conservative=1,
        ),
    )

    figure_names = ("saw_main_thread", "longest_gap_s", "most_after_gap")
    saw_main_thread = 0  # 1 once it saw a call of a main thread
    longest_gap_s = 0.0  # the longest idle gap before a call on a main thread
    most_after_gap = 0  # the most compactable results at a call after a long enough gap

    def before_call(self, view: View) -> Clearing | None:
        if not view.main_thread:
            return None
        self.saw_main_thread = 1
        gap = view.gap_seconds
        if gap is None:
            return None
        if gap > self.longest_gap_s:
            self.longest_gap_s = gap
        if gap < 60 * self.values["gap_threshold_minutes"]:
            return None
        results = view.compactable_results()
        if len(results) > self.most_after_gap:
            self.most_after_gap = len(results)
        cleared = keep_newest(results, at_least_one(self.values["keep_recent"]))
        return Clearing(tuple(cleared), Mode.REWRITE) if cleared else None

    def idle_note(self, figures: Mapping[str, float]) -> str:
        threshold = self.values["gap_threshold_minutes"]
        keep = at_least_one(self.values["keep_recent"])
        if not figures["saw_main_thread"]:
            return NO_MAIN_THREAD
        longest = figures["longest_gap_s"]
        if longest < 60 * threshold:
            return (
                f"never fired: no idle gap reached {amount(threshold)} min (longest "
                f"{minutes(longest)} min on a main thread)"
            )
        most = int(figures["most_after_gap"])
        if most <= keep:
            return (
                f"after every idle gap of {amount(threshold)} min or more, no more than {keep} "
                f"compactable results were in the prompt (most: {most})"
            )
        return FREED_NOTHING

    def value_notes(self) -> list[str]:
        return [KEEP_ZERO_NOTE] if self.values["keep_recent"] == 0 else []
