"""What one replayed call costs: the price table's rates for its model and size, applied to
the call's uncached input, cache writes (5m or 1h), cache reads and recorded output."""

from __future__ import annotations

from collections.abc import Sequence

from mcsim.accounting.prices import (
    ModelPrice,
    PriceTable,
    Rates,
    base_rates_up_to,
    rates_for,
)
from mcsim.model import Tokens
from mcsim.replay.calibrate import CalCall
from mcsim.replay.keep_warm import PingGap


class Pricer:
    """Prices calls against one table, looking each model up once."""

    __slots__ = ("_models", "table")

    def __init__(self, table: PriceTable) -> None:
        self.table = table
        # model -> (its price or None, the prompt size up to which base rates apply)
        self._models: dict[str, tuple[ModelPrice | None, float]] = {}

    def costs(
        self,
        calls: Sequence[CalCall],
        prompts: Sequence[int],
        uncached: Sequence[int],
        writes_5m: Sequence[int],
        writes_1h: Sequence[int],
        reads: Sequence[int],
    ) -> list[float | None]:
        """USD per call (None: the model is not in the table), for a thread's columns."""
        out: list[float | None] = []
        models = self._models
        for call, prompt, fresh, w5, w1, read in zip(
            calls, prompts, uncached, writes_5m, writes_1h, reads, strict=True
        ):
            known = models.get(call.model) or self._known(call.model)
            price, plain_below = known
            if price is None:
                out.append(None)
                continue
            r = _rates(price, plain_below, prompt, call)
            out.append(r.usd_of(fresh, w5, w1, read, call.output_tokens))
        return out

    def _known(self, model: str) -> tuple[ModelPrice | None, float]:
        known = self._models.get(model)
        if known is None:
            price = self.table.lookup(model)
            known = self._models[model] = (price, base_rates_up_to(price) if price else 0)
        return known

    def reads_usd(
        self, calls: Sequence[CalCall], prompts: Sequence[int], tokens: Sequence[int]
    ) -> float:
        """USD of `tokens` more cache reads on each call, at the rate its prompt is billed at
        (models not in the table count nothing: their calls are unpriced)."""
        total = 0.0
        for call, prompt, extra in zip(calls, prompts, tokens, strict=True):
            if not extra:
                continue
            price, plain_below = self._known(call.model)
            if price is None:
                continue
            total += _rates(price, plain_below, prompt, call).usd_of(0, cache_read_tokens=extra)
        return total

    def pings_priced(
        self, calls: Sequence[CalCall], start: int, gaps: Sequence[PingGap]
    ) -> list[PingGap]:
        """`gaps` (each at the index of its call among `calls[start:]`) with each ping's cost
        and at its call's index in the thread: a ping is priced at the rates of the model of
        the call before the gap (whose entry it keeps warm), None where that model is not in
        the table."""
        out: list[PingGap] = []
        for gap in gaps:
            at = start + gap.at
            before = calls[at - 1]
            price = self.table.lookup(before.model)
            one = None
            if price is not None:
                prompt = gap.cache_read_tokens + gap.input_tokens
                r, _ = rates_for(price, prompt, before.timestamp_s, None, None)
                one = r.usd(Tokens(gap.input_tokens, 0, 0, gap.cache_read_tokens,
                                   gap.output_tokens))  # fmt: skip
            out.append(gap._replace(at=at, cost_usd=one))
        return out


def _rates(price: ModelPrice, plain_below: float, prompt: int, call: CalCall) -> Rates:
    """The rates CALL's PROMPT tokens are billed at: the model's own up to `plain_below`
    when no speed or region multiplies them (no long-context rule can apply), else
    `rates_for`'s."""
    if prompt <= plain_below and not call.speed and not call.inference_geo:
        return price.rates
    rates, _ = rates_for(price, prompt, call.timestamp_s, call.speed, call.inference_geo)
    return rates
