"""Token estimates: offline encoding, content-hash cache, and nothing tokenized by inspect."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcsim.accounting.prices import default_table
from mcsim.accounting.recorded import inspect_usage
from mcsim.replay.tokens import TiktokenCounter, TokenEstimator


def test_offline_cl100k_counts_without_network() -> None:
    assert TiktokenCounter().count("hello world") == 2
    assert TiktokenCounter().count("def f(x):\n    return x * 2\n") == 11


def test_each_distinct_text_is_tokenized_once() -> None:
    seen: list[str] = []

    class Counting:
        def count(self, text: str) -> int:
            seen.append(text)
            return len(text)

    est = TokenEstimator(Counting())
    assert [est.estimate(t) for t in ["abc", "abcd", "abc", "", "abc"]] == [3, 4, 3, 0, 3]
    assert seen == ["abc", "abcd"]
    assert est.tokenized == 2 == len(est)


def test_inspect_tokenizes_nothing(monkeypatch: pytest.MonkeyPatch, corpus: Path) -> None:
    def refuse(self: object, text: str) -> int:
        raise AssertionError("inspect must not tokenize")

    monkeypatch.setattr(TiktokenCounter, "count", refuse)
    report = inspect_usage([str(corpus)], default_table())
    assert report.call_count == 355


def test_very_long_texts_are_estimated_from_their_ends() -> None:
    seen: list[int] = []

    class Counting:
        def count(self, text: str) -> int:
            seen.append(len(text))
            return len(text) // 4  # 4 characters a token

    est = TokenEstimator(Counting())
    text = "abcd" * 1_000_000  # 4 MB
    assert est.estimate(text) == 1_000_000
    assert seen == [500_000, 500_000]  # never the whole text
    assert est.estimate("abcd" * 250_000) == 250_000  # 1 MB: counted whole
    assert seen[-1] == 1_000_000
