"""`keep_last_n`: count-based observation masking.

The mechanism, with the defaults of the systems that use it: docs/domain.md#count-based-masking.

Simple harnesses and SWE-agent keep the `n` newest tool results and mask the rest, once the
conversation has more than `min_messages` messages. A message is what such a loop appends to
its message list: each user text, each tool result (every tool result is its own message, as
it is its own line in a Claude Code transcript and its own `tool` message in OpenAI-style
loops) and each earlier call's response. Tool calls and thinking are part of their response;
images and attachments are part of a user message. A compaction restarts the count, as it
restarts the conversation.

They mask every observation, so every tool's results are candidates, MCP tools and sub-agent
calls included (the scenario's `compactable_tools`, Claude Code's list, does not apply); only
the scenario's `exclude_tools` (the key beside `kind: keep_last_n`, or in the file's defaults)
are never masked. `n` counts every tool result, excluded ones too, as SWE-agent's window
counts the observations it always keeps.

With `polling`, masking happens only every `polling` calls, so the kept count moves between n
and n + polling (fewer cache breaks). `keep_first` never masks the first result (SWE-agent).
Runs on every call: it breaks the cached prefix almost every time it masks something.
"""

from __future__ import annotations

from collections.abc import Mapping

from mcsim.replay.policies import Clearing, Mode, Param, Policy, View, listed, register


@register
class KeepLastN(Policy):
    kind = "keep_last_n"
    client_side = True  # the harness rewrites the messages it sends
    summary = "Keep the newest n tool results, mask older ones (every `polling` calls)."
    params = (
        Param("n", int, 5, "newest tool results kept", minimum=1, conservative=1),
        Param(
            "min_messages",
            int,
            0,
            "start once the conversation has more messages",
            0,
            conservative=1,
        ),
        Param("polling", int, 1, "mask only every this many calls", minimum=1, conservative=1),
        Param("keep_first", bool, False, "never mask the first tool result", conservative=1),
    )

    figure_names = ("most_messages", "most_results")
    most_messages = 0  # the most messages in the conversation at a call
    most_results = 0  # the most tool results at a call where it could mask (past min_messages)

    def reset(self) -> None:
        self.calls = 0
        self.done = 0

    def before_call(self, view: View) -> Clearing | None:
        self.calls += 1
        if view.messages > self.most_messages:
            self.most_messages = view.messages
        if self.calls % self.values["polling"] != 0:
            return None
        if view.messages <= self.values["min_messages"]:
            return None
        results = view.results
        if len(results) > self.most_results:
            self.most_results = len(results)
        first = 1 if self.values["keep_first"] else 0
        end = max(len(results) - self.values["n"], 0)  # results before this are masked
        excluded = view.excluded_tools
        # Every result before `done` is masked already: each masking clears all older ones.
        cleared = [
            s
            for s in results[max(first, self.done) : end]
            if not s.cleared and (not excluded or not listed(s, excluded))
        ]
        self.done = max(self.done, end)
        if not cleared:
            return None
        return Clearing(tuple(cleared), Mode.REWRITE, placeholder="Old environment output omitted")

    def idle_note(self, figures: Mapping[str, float]) -> str:
        least, n, polling = (self.values[k] for k in ("min_messages", "n", "polling"))
        messages, results = int(figures["most_messages"]), int(figures["most_results"])
        if messages <= least:
            return f"the conversation never had more than {least} messages (most: {messages})"
        first = 1 if self.values["keep_first"] else 0
        if results - first > n:
            return (
                f"every result older than the newest {n} was of an excluded tool, or no larger "
                "than its placeholder"
            )
        most = f"most: {max(results - first, 0)}"
        counted = []
        if polling > 1:
            counted.append(f"every {polling} calls")
        if least:
            counted.append(f"past {least} messages")
        if counted:
            most += ", counted " + " ".join(counted)
        return f"never more than {n} tool results{' after the first' if first else ''} ({most})"
