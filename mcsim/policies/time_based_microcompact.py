"""`time_based_microcompact`: Claude Code's client-side rewrite after an idle gap (DOMAIN.md §2.1).

When the time since the last assistant message reaches the threshold, the cache is certainly
cold, so rewriting old tool results costs nothing extra: all compactable results but the
`keep_recent` newest are replaced by a placeholder. Main thread only.
"""

from __future__ import annotations

from mcsim.policies import Clearing, Mode, Param, Policy, View, keep_newest, register


@register
class TimeBasedMicrocompact(Policy):
    kind = "time_based_microcompact"
    summary = "After an idle gap, clear all but the newest compactable tool results."
    params = (
        Param("gap_threshold_minutes", float, 60.0, "idle gap that triggers it", minimum=0),
        Param("keep_recent", int, 5, "newest compactable results kept", minimum=1),
    )

    def before_call(self, view: View) -> Clearing | None:
        if not view.main_thread or view.gap_seconds is None:
            return None
        if view.gap_seconds < 60 * self.values["gap_threshold_minutes"]:
            return None
        cleared = keep_newest(view.compactable_results(), self.values["keep_recent"])
        return Clearing(tuple(cleared), Mode.REWRITE) if cleared else None
