"""Hand-made calibrated threads whose recorded usage a simple, real cache would produce."""

from __future__ import annotations

from collections.abc import Sequence

from mcsim.ingest.loaders.tool_classes import EVERY_HARNESS, tool_class
from mcsim.model import ItemKind, ThreadKind
from mcsim.replay.calibrate import CalCall, CalThread, ReadClass, Segment

TTL_S = {"5m": 300, "1h": 3600}
INPUT = 3  # uncached tokens after the last breakpoint, every call
OUTPUT = 100


def result(
    tokens: int, tool: str = "Read", tool_id: str = "t", resource: str | None = None
) -> Segment:
    kind = tool_class(tool, EVERY_HARNESS)
    return Segment(ItemKind.TOOL_RESULT, tokens, tool, tool_id, resource=resource, tool_class=kind)


def use(resource: str, tool: str = "Read", tokens: int = 50) -> Segment:
    """The tool call that precedes a result (what it touched is `resource`)."""
    kind = tool_class(tool, EVERY_HARNESS)
    return Segment(ItemKind.TOOL_USE, tokens, tool, "u", resource=resource, tool_class=kind)


def tool_call(tool: str, input_tokens: int, result_tokens: int) -> list[Segment]:
    """A tool_use and its result, paired by tool_use_id as the API pairs them."""
    kind = tool_class(tool, EVERY_HARNESS)
    return [
        Segment(ItemKind.TOOL_USE, input_tokens, tool, "c", tool_class=kind),
        Segment(ItemKind.TOOL_RESULT, result_tokens, tool, "c", tool_class=kind),
    ]


def text(tokens: int, turn: int = 1) -> Segment:
    return Segment(ItemKind.USER_TEXT, tokens, turn=turn)


def thinking(tokens: int, turn: int = 1) -> Segment:
    """An assistant thinking block (0 tokens: recorded as a signature only)."""
    return Segment(ItemKind.THINKING, tokens, turn=turn)


def thread(
    steps: Sequence[tuple[float, Sequence[Segment]]],
    *,
    head: int = 10_000,
    ttl: str = "5m",
    model: str = "claude-sonnet-4-5-20250929",
    kind: ThreadKind = ThreadKind.MAIN,
) -> CalThread:
    """steps: (seconds since the previous call, segments added before the call).

    Tool ids are made unique per call as id + call + the segment's index among the call's
    segments of its kind, so a tool_use and a result given one id in a step pair up."""
    calls = []
    now = 1_800_000_000.0
    prompt_prev = 0
    for i, (gap, segments) in enumerate(steps):
        now += gap
        seen: dict[tuple[ItemKind, str | None], int] = {}
        numbered = []
        for s in segments:
            k = seen[s.kind, s.tool_use_id] = seen.get((s.kind, s.tool_use_id), -1) + 1
            tool_id = f"{s.tool_use_id}{i}-{k}"
            numbered.append(s._replace(tool_use_id=tool_id, is_error=False))
        prompt = (head if i == 0 else prompt_prev) + sum(s.tokens for s in numbered)
        if i == 0:
            read, cls = 0, ReadClass.FIRST
        elif gap > TTL_S[ttl]:
            read, cls = 0, ReadClass.TTL_MISS
        else:
            read, cls = prompt_prev, ReadClass.FULL
        write = prompt - read - INPUT
        calls.append(
            CalCall(
                f"m{i}",
                f"r{i}",
                now,
                model,
                INPUT,
                write if ttl == "5m" else 0,
                write if ttl == "1h" else 0,
                read,
                OUTPUT,
                None,
                None,
                ttl,
                tuple(numbered),
                0,
                False,
                None,
                cls,
                0,
                read,
                i == 0,
            )
        )
        prompt_prev = prompt
    return CalThread("main" if kind is ThreadKind.MAIN else "agent-x", kind, head, tuple(calls))
