"""Prompt-cache rules by provider, one module per provider behind a registry.

The cache model (mcsim.replay.cache) is one loop for every provider; what differs between
providers is stated here as data: which retentions (TTLs) a provider offers, the shortest
prompt it caches, the size of the blocks a cached prefix is made of, and whether writing to
the cache is billed apart from uncached input. A thread replays under its calls' provider
(as recorded), or the one a policy names (`provider:` in a policy file).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class CacheRules:
    name: str
    retentions: tuple[str, ...]  # TTL names (mcsim.accounting.recorded.TTL_SECONDS) offered
    min_tokens: Callable[[str], int]  # the shortest prompt it caches, by model id
    block_tokens: int  # a cached prefix is a whole number of these (1: any length)
    bills_writes: bool  # writes are counted (and priced) apart from uncached input
    cache_edits: bool  # deletes from the cached copy without breaking it (cached microcompact)
    # With breakpoints: how many blocks before its breakpoint a lookup checks for an entry an
    # earlier request wrote (0: none, a prefix cache reads up to the first change instead)
    lookback_blocks: int = 0


REGISTRY: dict[str, CacheRules] = {}


def register(rules: CacheRules) -> None:
    REGISTRY[rules.name] = rules


def rules_for(provider: str) -> CacheRules:
    """The rules of a provider; an unknown one (a newer loader's) gets Anthropic's."""
    return REGISTRY.get(provider) or REGISTRY["anthropic"]


from mcsim.replay.providers import anthropic as _anthropic  # noqa: E402,F401  (registers)
from mcsim.replay.providers import openai as _openai  # noqa: E402,F401

PROVIDERS = tuple(REGISTRY)
