"""Calibration: item sizes add up to the recorded prompt at every call."""

from __future__ import annotations

import hashlib
from pathlib import Path

from lines import SESSION, assistant, tool_result, tool_use, usage, user, write

from mcsim.ingest.loaders import Detail
from mcsim.ingest.pipeline import load_sessions
from mcsim.model import ItemKind
from mcsim.replay.calibrate import ReadClass, calibrate_session, thinking_in_prompt
from mcsim.replay.tokens import TokenEstimator


def test_corpus_steps_add_up_to_the_recorded_prompt(corpus: Path) -> None:
    sessions, _ = load_sessions([str(corpus)], detail=Detail.TEXT)
    est = TokenEstimator()
    fallbacks = 0
    # Where growth is not usable, from the recorded usage alone: each thread's first call, each
    # compaction, and each prompt smaller than the one before.
    unusable = 0
    for session in sessions:
        for thread in session.threads:
            prompts = [c.usage.prompt_tokens for c in thread.calls]
            unusable += 1 + sum(
                c.compaction is not None or now < before
                for c, before, now in zip(thread.calls[1:], prompts, prompts[1:], strict=False)
            )
        for thread in calibrate_session(session, est).threads:
            position = thread.head_tokens
            for call in thread.calls:
                if call.compaction:
                    position = thread.head_tokens
                position += sum(s.tokens for s in call.segments) + call.adjustment_tokens
                assert position == call.prompt_tokens
                if not call.fallback:
                    assert call.adjustment_tokens == 0
                fallbacks += call.fallback
    assert fallbacks == unusable == 14


def test_growth_is_split_in_proportion_to_estimates(tmp_path: Path) -> None:
    big, small = "word " * 400, "word " * 100
    write(
        tmp_path / "p" / f"{SESSION}.jsonl",
        [
            user("u1", None, 0, "hi"),
            assistant(
                "a1",
                "u1",
                1,
                "m1",
                "r1",
                u=usage(3, 5_000, 0, out=20),
                content=[
                    tool_use("t1", "Read", file_path="a"),
                    tool_use("t2", "Grep", pattern="b"),
                ],
            ),
            user("u2", "a1", 2, tool_result("t1", big)),
            user("u3", "u2", 3, tool_result("t2", small)),
            assistant("a2", "u3", 4, "m2", "r2", u=usage(3, 1_000, 5_000, out=20)),
        ],
    )
    (session,), _ = load_sessions([str(tmp_path)], detail=Detail.TEXT)
    cal = calibrate_session(session, TokenEstimator())
    second = cal.threads[0].calls[1]
    assert second.read_class is ReadClass.FULL and second.read_delta == -3
    assert sum(s.tokens for s in second.segments) == 1_000  # the recorded growth
    results = [s for s in second.segments if s.kind is ItemKind.TOOL_RESULT]
    assert [s.tool_name for s in results] == ["Read", "Grep"]
    assert results[0].tokens > 3 * results[1].tokens  # 400 vs 100 words, plus the tool calls
    # What a tool call touched is kept as a hash only: calibrated sessions are cached on disk.
    hashed = [
        hashlib.blake2b(k.encode(), digest_size=16).hexdigest() for k in ("file:a", "grep:b|")
    ]
    assert [s.resource for s in results] == hashed


def test_thinking_is_in_the_prompt_only_on_newer_models() -> None:
    assert thinking_in_prompt("claude-opus-4-5-20251101")
    assert thinking_in_prompt("claude-sonnet-4-6")
    assert not thinking_in_prompt("claude-sonnet-4-5-20250929")
    assert not thinking_in_prompt("claude-opus-4-1")


class _Counting:
    """A token counter that records what it was asked to count."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def count(self, text: str) -> int:
        self.texts.append(text)
        return max(1, len(text) // 4)


def test_thinking_the_model_is_not_sent_back_is_not_tokenized(tmp_path: Path) -> None:
    thought = "a long chain of thought " * 50
    lines = []
    for model, at, session in (
        ("claude-sonnet-4-5-20250929", 0, "s-older"),
        ("claude-opus-4-5-20251101", 10, "s-newer"),
    ):
        content = [
            {"type": "thinking", "thinking": f"{thought}{model}"},
            {"type": "text", "text": "done"},
        ]
        lines += [
            user(f"u{at}", None, at, "hi", session=session),
            assistant(
                f"a{at}", f"u{at}", at + 1, f"m{at}", f"r{at}",
                model=model, session=session, u=usage(3, 2_000, 0), content=content,
            ),
            user(f"u{at + 2}", f"a{at}", at + 2, "next", session=session),
            assistant(
                f"a{at + 3}", f"u{at + 2}", at + 3, f"m{at + 3}", f"r{at + 3}",
                model=model, session=session, u=usage(3, 500, 2_000),
            ),
        ]  # fmt: skip
    write(tmp_path / "p" / f"{SESSION}.jsonl", lines)
    sessions, _ = load_sessions([str(tmp_path)], detail=Detail.TEXT)
    counter = _Counting()
    estimator = TokenEstimator(counter)
    thinking = {}
    for session in sessions:
        (thread,) = calibrate_session(session, estimator).threads
        (segment,) = [s for s in thread.calls[1].segments if s.kind is ItemKind.THINKING]
        thinking[session.session_id] = segment.tokens
    assert thinking["s-older"] == 0 and thinking["s-newer"] > 0
    assert f"{thought}claude-opus-4-5-20251101" in counter.texts
    assert f"{thought}claude-sonnet-4-5-20250929" not in counter.texts
