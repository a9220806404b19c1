"""Keep-warm pings: a scenario setting, not a policy layer.

During an idle gap of a thread, a client that keeps the cache warm sends a tiny request every
`interval_minutes` (below the TTL) for at most `max_idle_minutes` of idleness. Each ping is
a real request: it reads the cached prompt at the cache-read price (which refreshes the
entry's lifetime, docs/domain.md#cache-mechanics), sends a few uncached tokens of its own and
gets a token or so back. The next real call after the gap then finds the cache warm if the
pings kept it so.

Why a scenario setting rather than a kind in `replay/policies/`: a policy decides what the
prompt loses (it sees the context, never the cache), while pings change only how the cache
serves the prompts the policies left. Kept apart, keep-warm composes with every pruning
policy and stack unchanged: the policies decide on the recorded gaps (pings are not agent
turns, so a time-based microcompact that fires after an idle gap sees the real user gap),
and the cache (`replay/cache.py`) then sends the pings in those gaps. It also means a
scenario's decisions are shared whatever its keep-warm (`Scenario.decision_key`).

When a ping is sent, on the request clock the TTL runs on (from the previous request, or the
previous ping, which refreshed the entry): the k-th ping of a gap goes at k x interval after
the previous request, if that is before the next request, no later than `max_idle_minutes`
into the gap, and the entry is still alive then (a ping that would land after the TTL ran out
is not sent: the cache is already cold, and nothing would be kept warm).

What happens in a gap of `max_idle_minutes` or more is a reading, and both are offered
(`longer_gaps`):
- `none` (the default, as the feature was asked for: pings keep the cache warm through the
  idle gaps up to `max_idle_minutes`): such a gap gets no pings; pings appear only in gaps
  shorter than `max_idle_minutes`, where the cache was still warm. This is a client that knows
  whether its user is coming back (the best case for pings).
- `paid`: a scheduler that cannot see when its user comes back pings for the first
  `max_idle_minutes` of every gap; in a longer gap those pings are paid and, past the TTL, the
  next call still misses (the worst case). The advisor prices its picks both ways.
Pings are sent only in gaps between two calls of a thread: the pings a scheduler would send
after a thread's last call (at most max_idle / interval of them, each a read of the last
prompt) are not modelled.

The defaults of a ping's own tokens: 10 uncached input tokens (a one-word user message and
its turn markers; an assumption, not a measurement) and 1 output token (`max_tokens: 1`, the
smallest the Messages API accepts).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple

from mcsim.errors import UsageError
from mcsim.text import shown

DEFAULT_INPUT_TOKENS = 10
DEFAULT_OUTPUT_TOKENS = 1
THREAD_KINDS = ("main", "subagent", "compact")
KEYS = (
    "interval_minutes", "max_idle_minutes", "input_tokens", "output_tokens", "threads",
    "longer_gaps",
)  # fmt: skip
LONGER_GAPS = ("none", "paid")  # the readings of a gap of max_idle_minutes or more
_MAX_MINUTES = 10_080.0  # a week: no TTL is longer than a day
_MAX_TOKENS = 1_000_000


@dataclass(frozen=True)
class KeepWarm:
    """Pings every `interval_minutes`, for at most `max_idle_minutes` of a gap, on the
    threads of the kinds in `threads`."""

    interval_minutes: float
    max_idle_minutes: float
    input_tokens: int = DEFAULT_INPUT_TOKENS
    output_tokens: int = DEFAULT_OUTPUT_TOKENS
    threads: tuple[str, ...] = ("main", "subagent")
    longer_gaps: str = "none"  # one of LONGER_GAPS

    @property
    def interval_s(self) -> float:
        return self.interval_minutes * 60.0

    @property
    def max_idle_s(self) -> float:
        return self.max_idle_minutes * 60.0

    def applies(self, kind: str) -> bool:
        return kind in self.threads

    def describe(self) -> str:
        """`every 4.5m up to 30m` (and the threads and tokens when not the defaults)."""
        text = f"every {_minutes(self.interval_minutes)} up to {_minutes(self.max_idle_minutes)}"
        if self.threads != ("main", "subagent"):
            text += f" on {'+'.join(self.threads)}"
        if (self.input_tokens, self.output_tokens) != (DEFAULT_INPUT_TOKENS, DEFAULT_OUTPUT_TOKENS):
            text += f", {self.input_tokens} in/{self.output_tokens} out"
        if self.longer_gaps != "none":
            text += f", longer gaps {self.longer_gaps}"
        return text


class PingGap(NamedTuple):
    """The `pings` keep-warm pings of one idle gap, alike but for their times: the k-th is
    sent at `from_s + k * interval_s`, reads `cache_read_tokens` of the cached prompt, sends
    `input_tokens` uncached (its own and, on a prefix cache, the cached prompt's part of a
    block) and gets `output_tokens` back, for `cost_usd` each (None: unpriced, or not priced
    yet). `at`: the call after the gap, by its index in its thread (a replayed thread) or its
    row in its session (`rows.SessionRows`)."""

    at: int
    pings: int
    from_s: float
    interval_s: float
    cache_read_tokens: int
    input_tokens: int
    output_tokens: int
    cost_usd: float | None


def _minutes(value: float) -> str:
    return f"{value:g}m"


def pings_in_gap(
    gap_s: float, lifetime_s: float, interval_s: float, max_idle_s: float, longer_paid: bool
) -> int:
    """How many pings a gap of `gap_s` seconds between two requests gets: one every
    `interval_s` after the previous request while it is before the next request and at most
    `max_idle_s` into the gap, each sent only if the entry (lifetime `lifetime_s`, refreshed
    by the ping before) is still alive when it lands; a gap of `max_idle_s` or more gets none
    unless `longer_paid` (the `paid` reading of `longer_gaps`)."""
    if interval_s >= lifetime_s or interval_s <= 0:
        return 0  # the first ping would land on a cold cache: none is sent
    if gap_s >= max_idle_s and not longer_paid:
        return 0
    # k x interval < gap and k x interval <= max_idle, with k a whole number from 1
    before_next = math.ceil(gap_s / interval_s) - 1
    within = math.floor(max_idle_s / interval_s + 1e-9)
    return max(0, min(before_next, within))


def parse_keep_warm(raw: Any, where: str, error: type[UsageError]) -> KeepWarm | None:
    """A `keep_warm:` value of a policy file (a mapping, or null/false for none)."""
    if raw is None or raw is False:
        return None
    bad = f"{where}: key 'keep_warm'"
    if not isinstance(raw, dict):
        raise error(f"{bad}: must be a mapping with interval_minutes and max_idle_minutes")
    for key in raw:
        if key not in KEYS:
            raise error(f"{bad}: unknown key {shown(key)} (allowed: {', '.join(KEYS)})")
    for key in ("interval_minutes", "max_idle_minutes"):
        if key not in raw:
            raise error(f"{bad}: key '{key}' is required")
    interval = _number(raw["interval_minutes"], f"{bad}.interval_minutes", error, low=0.0)
    if interval <= 0:
        raise error(
            f"{bad}.interval_minutes: must be above 0, not {shown(raw['interval_minutes'])}"
        )
    max_idle = _number(raw["max_idle_minutes"], f"{bad}.max_idle_minutes", error, low=0.0)
    if max_idle < interval:
        raise error(
            f"{bad}.max_idle_minutes: {max_idle:g} is below interval_minutes ({interval:g}): "
            "no ping would ever be sent"
        )
    tokens = []
    for key, default in (("input_tokens", DEFAULT_INPUT_TOKENS),
                         ("output_tokens", DEFAULT_OUTPUT_TOKENS)):  # fmt: skip
        value = raw.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX_TOKENS:
            raise error(f"{bad}.{key}: must be a whole number from 0 to {_MAX_TOKENS:_}, "
                        f"not {shown(value)}")  # fmt: skip
        tokens.append(value)
    threads = raw.get("threads", ["main", "subagent"])
    if isinstance(threads, str):
        threads = [threads]
    if not isinstance(threads, list) or not threads:
        raise error(f"{bad}.threads: must be a list of thread kinds ({', '.join(THREAD_KINDS)})")
    for kind in threads:
        if kind not in THREAD_KINDS:
            raise error(
                f"{bad}.threads: {shown(kind)} is not a thread kind (allowed: "
                f"{', '.join(THREAD_KINDS)})"
            )
    ordered = tuple(k for k in THREAD_KINDS if k in threads)
    longer = raw.get("longer_gaps", "none")
    if longer not in LONGER_GAPS:
        raise error(
            f"{bad}.longer_gaps: must be one of {', '.join(LONGER_GAPS)}, not {shown(longer)}"
        )
    return KeepWarm(interval, max_idle, tokens[0], tokens[1], ordered, longer)


def _number(value: Any, where: str, error: type[UsageError], low: float) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not low <= value <= _MAX_MINUTES
    ):
        raise error(f"{where}: must be a number of minutes from {low:g} to {_MAX_MINUTES:g}, "
                    f"not {shown(value)}")  # fmt: skip
    return float(value)
