"""Import LiteLLM's `model_prices_and_context_window.json` as a price table.

An import format, not a source of truth (docs/domain.md#prices): its 1-hour write prices are
wrong for several models, so the 1-hour rate is always Anthropic's documented 2x the input
rate.
Rows from the `anthropic` provider win over Bedrock, Vertex and other resellers of the same
model, whose prices can differ.

Only rows for Claude models and for OpenAI's own chat models (`litellm_provider` "openai",
`mode` "chat" or "responses"; not Azure's or other resellers') are read: the file prices
thousands of other models mcsim never uses, so they are not checked. Only the keys mcsim uses
are read. An OpenAI row's cache writes cost its `cache_creation_input_token_cost` if it has
one, else the input rate (no write premium before GPT-5.6); without a
`cache_read_input_token_cost` a cached token costs the input rate, as on a model with no
caching discount. A dated row (`gpt-5-2025-08-07`) prices its model only where the file has no
undated row. Every value read must be a number from 0 to `MAX_RATE` per million tokens, and
each row needs its input and output prices; one bad value refuses the whole file, naming the
model and the key. Skipping bad rows instead would quietly price a model from another row (a
reseller's) or from the built-in table, so the costs would no longer be the file's, and a
file with a wrong price is better fixed than half used. The real file passes: in v1.110.2,
319 of its 4,878 rows are Claude models and 126 OpenAI chat models, none with a bad value.
"""

from __future__ import annotations

from typing import Any

from mcsim.accounting.prices import (
    MAX_RATE,
    MISSING,
    OPENAI,
    LongContextRule,
    ModelPrice,
    PriceTable,
    Rates,
    is_rate,
    openai_name,
    parse_model,
    value_error,
)
from mcsim.errors import PriceTableError

_PER_MILLION = 1e6
_ALLOWED = f"a number from 0 to {MAX_RATE / _PER_MILLION:g} (USD per token)"


def import_litellm(data: Any, source: str) -> PriceTable:
    if not isinstance(data, dict):
        raise PriceTableError(f"{source}: neither an mcsim price table nor LiteLLM's JSON object")
    chosen: dict[tuple[str, str], tuple[int, ModelPrice]] = {}
    for model_id, row in data.items():
        if not isinstance(row, dict) or "input_cost_per_token" not in row:
            continue
        parsed = parse_model(str(model_id))
        if parsed is not None:
            price = _row_price(parsed, row, source, str(model_id))
            rank = 1 if row.get("litellm_provider") == "anthropic" else 0
        elif _is_openai_chat(str(model_id), row):
            parsed = (OPENAI, openai_name(str(model_id)))
            price = _row_price(parsed, row, source, str(model_id))
            rank = 1 if parsed[1] == str(model_id).lower() else 0  # undated beats dated
        else:
            continue
        if parsed not in chosen or rank > chosen[parsed][0]:
            chosen[parsed] = (rank, price)
    if not chosen:
        raise PriceTableError(
            f"{source}: no Anthropic model prices (nor OpenAI ones) found (LiteLLM format)"
        )
    return PriceTable(f"litellm:{source}", "", {k: v for k, (_, v) in chosen.items()})


def _is_openai_chat(model_id: str, row: dict[str, Any]) -> bool:
    """OpenAI's own chat or Responses model, not a fine-tune (`ft:gpt-4o...`)."""
    provider_mode = (row.get("litellm_provider"), row.get("mode"))
    return provider_mode in _OPENAI_CHAT and ":" not in model_id


_OPENAI_CHAT = frozenset({(OPENAI, "chat"), (OPENAI, "responses")})
# LiteLLM's long-context keys: Anthropic's threshold, and OpenAI's above 272k input tokens.
_LONG_CONTEXT = (("_above_200k_tokens", 200_000), ("_above_272k_tokens", 272_000))


def _row_price(
    parsed: tuple[str, str], row: dict[str, Any], source: str, model_id: str
) -> ModelPrice:
    openai = parsed[0] == OPENAI
    base = _rates(row, "", None, source, model_id, openai)
    rules = tuple(
        LongContextRule(_rates(row, suffix, base, source, model_id, openai), above)
        for suffix, above in _LONG_CONTEXT
        if "input_cost_per_token" + suffix in row
    )
    return ModelPrice(parsed[0], parsed[1], base, rules)


def _rates(
    row: dict[str, Any],
    suffix: str,
    fallback: Rates | None,
    source: str,
    model_id: str,
    openai: bool,
) -> Rates:
    def get(key: str, default: float | None) -> float:
        value = row.get(key + suffix, MISSING)
        if (value is None or value is MISSING) and default is not None:
            return default
        if not is_rate(value, per_tokens=1):  # a missing input or output price included
            raise value_error(source, key + suffix, model_id, value, _ALLOWED)
        return value * _PER_MILLION

    input_rate = get("input_cost_per_token", fallback.input if fallback else None)
    if openai:
        # A long-context price without its own cached rate keeps the base discount.
        discount = fallback.cache_read / fallback.input if fallback and fallback.input else 1.0
        write = get("cache_creation_input_token_cost", input_rate)
        return Rates(
            input=input_rate,
            cache_write_5m=write,
            cache_write_1h=write,
            cache_read=get("cache_read_input_token_cost", input_rate * discount),
            output=get("output_cost_per_token", fallback.output if fallback else None),
        )
    return Rates(
        input=input_rate,
        cache_write_5m=get("cache_creation_input_token_cost", 1.25 * input_rate),
        cache_write_1h=2 * input_rate,
        cache_read=get("cache_read_input_token_cost", 0.1 * input_rate),
        output=get("output_cost_per_token", fallback.output if fallback else None),
    )
