"""Token estimates: offline encoding, content-hash cache, nothing tokenized by inspect, and
gigatoken's counts equal to tiktoken's wherever they are used."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import CORPUS, SAMPLES
from hypothesis import given, settings
from hypothesis import strategies as st

import mcsim.replay.tokens as tokens
from mcsim.accounting.prices import default_table
from mcsim.accounting.recorded import inspect_usage
from mcsim.ingest.loaders import Detail
from mcsim.ingest.pipeline import load_sessions
from mcsim.replay.tokens import FastCounter, TiktokenCounter, TokenEstimator


def test_offline_cl100k_counts_without_network() -> None:
    counter = TiktokenCounter()
    for count in (counter.exact, counter.count):  # tiktoken's, and gigatoken's where it counts
        assert count("hello world") == 2
        assert count("def f(x):\n    return x * 2\n") == 11


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

    for name in ("count", "count_many", "exact"):
        monkeypatch.setattr(TiktokenCounter, name, refuse)
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


# --- gigatoken (FastCounter): the same counts as tiktoken, or tiktoken counts ------------------


@pytest.fixture(scope="module")
def fast() -> FastCounter:
    counter = FastCounter.load()
    assert counter.usable
    return counter


@pytest.fixture(scope="module")
def encoding() -> object:
    return tokens._load_encoding()


def _safe_code_points() -> Iterator[str]:
    for start, end in re.findall("(.)-(.)", tokens.FAST_SAFE_RANGES, re.S):
        for code in range(ord(start), ord(end) + 1):
            yield chr(code)


def test_every_safe_character_splits_as_tiktoken(fast: FastCounter, encoding: object) -> None:
    """Each character of FAST_SAFE_RANGES, alone and beside letters, digits, spaces,
    apostrophes and newlines: gigatoken's tokens are tiktoken's, id for id. A character two
    Unicode versions class differently (letter, number, space) would split differently in one
    of these."""
    probes = [
        p
        for c in _safe_code_points()
        for p in (c, f"a{c}a", f"1{c}1", f" {c} ", f"'{c}", f"{c}s", f"\n{c}\n", c * 3, f"x {c}x")
    ]
    assert len(probes) == 9 * 6_432
    got = [fast._tokenizer.encode(p).tolist() for p in probes]  # (as count_many encodes)
    want = [encoding.encode_ordinary(p) for p in probes]  # type: ignore[attr-defined]
    assert [p for p, a, b in zip(probes, got, want, strict=True) if a != b] == []


def test_fast_counts_of_the_corpus_and_samples_are_tiktokens(fast: FastCounter) -> None:
    texts = [
        item.text
        for root in (CORPUS, SAMPLES)
        for session in load_sessions([str(root)], detail=Detail.TEXT, workers=1)[0]
        for call in session.calls
        for item in call.items
        if item.text
    ]
    assert len(texts) == 1_351
    exact = TiktokenCounter().exact
    assert fast.count_many(texts, exact) == [exact(t) for t in texts]


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    texts=st.lists(
        st.text(
            st.sampled_from(list("aZ09 \t\n\r'\"<|>.,_-é€→│😀\u3000\u00a0\x85"))
            | st.characters(codec="utf-8"),
            max_size=60,
        ),
        max_size=20,
    )
)
def test_fast_counts_of_any_text_are_tiktokens(texts: list[str], fast: FastCounter) -> None:
    """Any text (unsafe characters and special tokens are counted by tiktoken)."""
    exact = TiktokenCounter().exact
    assert fast.count_many(texts, exact) == [exact(t) for t in texts]


def test_unsafe_texts_are_counted_by_tiktoken(fast: FastCounter) -> None:
    asked: list[str] = []

    def exact(text: str) -> int:
        asked.append(text)
        return TiktokenCounter().exact(text)

    texts = ["plain", "a <|endoftext|> b", "\U00030000 a CJK extension G ideograph", "→ ok"]
    assert fast.count_many(texts, exact) == [1, 8, 11, 2]
    assert asked == texts[1:3]


def test_batches_count_as_estimates_do(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process counts with gigatoken, loaded afresh whenever its memory has grown by
    FAST_MAX_GROWTH_BYTES; every estimate stays tiktoken's."""
    texts = [f"def f{i}(x):\n    return x * {i}  # é → {i}" for i in range(300)] + ["", "x" * 10]
    exact = TiktokenCounter().exact
    want = [exact(t) if t else 0 for t in texts]
    monkeypatch.setattr(tokens, "FAST_MAX_GROWTH_BYTES", 0)  # a fresh tokenizer every batch
    est = TokenEstimator()
    for start in (0, 100, 200):
        part = slice(start, start + 100)
        with est.batch(texts[part] + texts[300:]):
            assert [est.estimate(t) for t in texts[part]] == want[part]
    assert est.tokenized == 301  # each distinct text once, the empty one never
    fast = est._counter._fast  # type: ignore[attr-defined]
    assert fast is not None and fast.usable
