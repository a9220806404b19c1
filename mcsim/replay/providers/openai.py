"""OpenAI's automatic prompt caching: no breakpoints; every prompt of 1,024 tokens or more is
cached as it is sent, and a later prompt reads the longest cached prefix it shares, in
128-token steps (1,024, 1,152, ...). Writing costs nothing extra: what is not read is
uncached input. Retention: in memory for minutes of inactivity (5 to 10, at most an hour;
modelled as 5m, refreshed on every hit, and a recorded hit after a longer gap is kept as
recorded), or 24 hours with the extended option (`ttl: 24h`). GPT-5.6 and later bill cache
writes; recordings that carry them are priced as recorded, but the replay bills what is not
read as uncached input (not modelled: the write count of a prompt nobody recorded). There are
no cache edits: a policy's cache edit (cached microcompact) clears nothing here, and is
counted as `unavailable_edits`."""

from __future__ import annotations

from mcsim.replay.providers import CacheRules, register


def min_tokens(model: str) -> int:
    return 1024


register(
    CacheRules(
        "openai",
        ("5m", "1h", "24h"),
        min_tokens,
        block_tokens=128,
        bills_writes=False,
        cache_edits=False,
    )
)
