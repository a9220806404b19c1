"""`keep_last_n`: count-based observation masking (DOMAIN.md §2.4).

Simple harnesses and SWE-agent keep the `n` newest tool results and mask the rest, once the
conversation has more than `min_messages` messages. With `polling`, masking happens only
every `polling` calls, so the kept count moves between n and n + polling (fewer cache breaks).
`keep_first` never masks the first result (SWE-agent). Runs on every call: it breaks the cached
prefix almost every time it masks something.
"""

from __future__ import annotations

from mcsim.policies import Clearing, Mode, Param, Policy, View, register


@register
class KeepLastN(Policy):
    kind = "keep_last_n"
    summary = "Keep the newest n tool results, mask older ones (every `polling` calls)."
    params = (
        Param("n", int, 5, "newest tool results kept", minimum=1),
        Param("min_messages", int, 0, "start once the conversation has more messages", 0),
        Param("polling", int, 1, "mask only every this many calls", minimum=1),
        Param("keep_first", bool, False, "never mask the first tool result"),
    )

    def reset(self) -> None:
        self.calls = 0
        self.done = 0

    def before_call(self, view: View) -> Clearing | None:
        self.calls += 1
        if self.calls % self.values["polling"] != 0:
            return None
        messages = 2 * (view.call_index + 1)  # a user and an assistant message per call
        if messages <= self.values["min_messages"]:
            return None
        results = view.compactable_results()
        first = 1 if self.values["keep_first"] else 0
        end = max(len(results) - self.values["n"], 0)  # results before this are masked
        # Every result before `done` is masked already: each masking clears all older ones.
        cleared = [s for s in results[max(first, self.done) : end] if not s.cleared]
        self.done = max(self.done, end)
        if not cleared:
            return None
        return Clearing(tuple(cleared), Mode.REWRITE, placeholder="Old environment output omitted")
