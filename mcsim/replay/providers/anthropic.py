"""Anthropic's prompt cache (docs/domain.md#cache-mechanics): explicit breakpoints, a 5-minute
or 1-hour entry refreshed on every hit, writes billed at a premium (1.25x or 2x input) apart
from uncached input, reads at a tenth; below a per-model minimum nothing is cached. A lookup
checks the block boundaries up to 20 blocks before its breakpoint for an entry an earlier
request wrote (docs/domain.md#the-lookback)."""

from __future__ import annotations

import functools

from mcsim.accounting.prices import parse_model
from mcsim.replay.providers import CacheRules, register

# Minimum cacheable prompt by (family, version); 1024 for the rest
# (docs/domain.md#cache-mechanics).
_MIN_CACHEABLE = {
    ("opus", "4.5"): 4096,
    ("opus", "4.6"): 4096,
    ("opus", "4.7"): 2048,
    ("haiku", "4.5"): 4096,
    ("haiku", "3.5"): 2048,
    ("haiku", "3"): 2048,
}


@functools.lru_cache(maxsize=256)
def min_tokens(model: str) -> int:
    parsed = parse_model(model)
    return _MIN_CACHEABLE.get(parsed, 1024) if parsed else 1024


# How far back from its breakpoint a lookup checks block boundaries for an existing entry
LOOKBACK_BLOCKS = 20

register(
    CacheRules(
        "anthropic",
        ("5m", "1h"),
        min_tokens,
        block_tokens=1,
        bills_writes=True,
        cache_edits=True,
        lookback_blocks=LOOKBACK_BLOCKS,
    )
)
