"""Import LiteLLM's `model_prices_and_context_window.json` as a price table.

An import format, not a source of truth (DOMAIN.md §3.2): its 1-hour write prices are wrong
for several models, so the 1-hour rate is always Anthropic's documented 2x the input rate.
Rows from the `anthropic` provider win over Bedrock, Vertex and other resellers of the same
model, whose prices can differ.
"""

from __future__ import annotations

from typing import Any

from mcsim.errors import PriceTableError
from mcsim.prices import LongContextRule, ModelPrice, PriceTable, Rates, parse_model

_PER_MILLION = 1e6


def import_litellm(data: Any, source: str) -> PriceTable:
    if not isinstance(data, dict):
        raise PriceTableError(f"{source}: neither an mcsim price table nor LiteLLM's JSON object")
    chosen: dict[tuple[str, str], tuple[int, ModelPrice]] = {}
    for model_id, row in data.items():
        if not isinstance(row, dict) or "input_cost_per_token" not in row:
            continue
        parsed = parse_model(str(model_id))
        if parsed is None:
            continue
        try:
            price = _row_price(parsed, row)
        except (TypeError, ValueError):
            raise PriceTableError(f"{source}: key '{model_id}' has a non-numeric price") from None
        rank = 1 if row.get("litellm_provider") == "anthropic" else 0
        if parsed not in chosen or rank > chosen[parsed][0]:
            chosen[parsed] = (rank, price)
    if not chosen:
        raise PriceTableError(f"{source}: no Anthropic model prices found (LiteLLM format)")
    return PriceTable(f"litellm:{source}", "", {k: v for k, (_, v) in chosen.items()})


def _row_price(parsed: tuple[str, str], row: dict[str, Any]) -> ModelPrice:
    base = _rates(row, "")
    rules: tuple[LongContextRule, ...] = ()
    if "input_cost_per_token_above_200k_tokens" in row:
        rules = (LongContextRule(_rates(row, "_above_200k_tokens", base), 200_000),)
    return ModelPrice(parsed[0], parsed[1], base, rules)


def _rates(row: dict[str, Any], suffix: str, fallback: Rates | None = None) -> Rates:
    def get(key: str, default: float) -> float:
        value = row.get(key + suffix)
        return default if value is None else float(value) * _PER_MILLION

    input_rate = get("input_cost_per_token", fallback.input if fallback else 0.0)
    return Rates(
        input=input_rate,
        cache_write_5m=get("cache_creation_input_token_cost", 1.25 * input_rate),
        cache_write_1h=2 * input_rate,
        cache_read=get("cache_read_input_token_cost", 0.1 * input_rate),
        output=get("output_cost_per_token", fallback.output if fallback else 0.0),
    )
