"""Price table: family matching, each rule of DOMAIN.md §3.2, overrides and LiteLLM import."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from mcsim.errors import PriceTableError
from mcsim.model import Usage
from mcsim.prices import default_table, load_table, parse_model

T_2026_06 = datetime(2026, 6, 1, tzinfo=UTC).timestamp()


def u(inp: int = 0, w5: int = 0, w1: int = 0, read: int = 0, out: int = 0, **kw: object) -> Usage:
    return Usage(inp, w5, w1, read, out, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("model_id", "expected"),
    [
        ("claude-sonnet-4-5-20250929", ("sonnet", "4.5")),
        ("claude-sonnet-4-20250514", ("sonnet", "4")),
        ("claude-opus-4-0", ("opus", "4")),
        ("claude-opus-4-1-20250805", ("opus", "4.1")),
        ("claude-opus-4-7", ("opus", "4.7")),
        ("claude-opus-4-7[1m]", ("opus", "4.7")),
        ("claude-3-5-haiku-latest", ("haiku", "3.5")),
        ("claude-3-haiku-20240307", ("haiku", "3")),
        ("us.anthropic.claude-3-7-sonnet-20250219-v1:0", ("sonnet", "3.7")),
        ("anthropic/claude-haiku-4-5@20251001", ("haiku", "4.5")),
        ("Sonnet 4.6", ("sonnet", "4.6")),
        ("gpt-5", None),
        ("claude-instant-1", None),
    ],
)
def test_model_ids_match_by_family(model_id: str, expected: tuple[str, str] | None) -> None:
    assert parse_model(model_id) == expected


@pytest.mark.parametrize(
    ("model_id", "rates"),
    [  # input, 5m write, 1h write, read, output (DOMAIN.md §3.2)
        ("claude-opus-4-6", (5, 6.25, 10, 0.5, 25)),
        ("claude-opus-4-1", (15, 18.75, 30, 1.5, 75)),
        ("claude-3-opus-20240229", (15, 18.75, 30, 1.5, 75)),
        ("claude-sonnet-4-6", (3, 3.75, 6, 0.3, 15)),
        ("claude-3-5-sonnet-20241022", (3, 3.75, 6, 0.3, 15)),
        ("claude-haiku-4-5", (1, 1.25, 2, 0.1, 5)),
        ("claude-3-5-haiku-20241022", (0.8, 1, 1.6, 0.08, 4)),
        ("claude-3-haiku-20240307", (0.25, 0.3, 0.5, 0.03, 1.25)),
    ],
)
def test_list_prices_per_million(model_id: str, rates: tuple[float, ...]) -> None:
    cost = default_table().cost(model_id, u(10**6, 10**6, 10**6, 10**6, 10**6), T_2026_06)
    assert cost is not None
    got = (
        cost.input_usd,
        cost.cache_write_5m_usd,
        cost.cache_write_1h_usd,
        cost.cache_read_usd,
        cost.output_usd,
    )
    assert got == pytest.approx(rates)
    assert cost.total_usd == pytest.approx(sum(rates))


def test_sonnet_long_context_prices_the_whole_request() -> None:
    table = default_table()
    below = table.cost("claude-sonnet-4-5", u(100_000, 0, 0, 100_000, 1000), T_2026_06)
    above = table.cost("claude-sonnet-4-5", u(100_001, 0, 0, 100_000, 1000), T_2026_06)
    assert below is not None and above is not None
    assert below.total_usd == pytest.approx(0.3 + 0.03 + 0.015)
    # 200,001 prompt tokens: every token at the long-context rate, not just the excess.
    assert above.long_context
    assert above.total_usd == pytest.approx(100_001 * 6e-6 + 100_000 * 0.6e-6 + 1000 * 22.5e-6)
    # Sonnet 4.6 bills 1M context at standard prices.
    s46 = table.cost("claude-sonnet-4-6", u(300_000), T_2026_06)
    assert s46 is not None and s46.total_usd == pytest.approx(0.9)


def test_opus_4_6_long_context_only_in_its_dated_window() -> None:
    table = default_table()
    inside = datetime(2026, 3, 1, tzinfo=UTC).timestamp()
    after = datetime(2026, 3, 14, tzinfo=UTC).timestamp()
    big = u(250_000)
    assert table.cost("claude-opus-4-6", big, inside).total_usd == pytest.approx(2.5)  # type: ignore[union-attr]
    assert table.cost("claude-opus-4-6", big, after).total_usd == pytest.approx(1.25)  # type: ignore[union-attr]


def test_speed_and_geo_multipliers() -> None:
    table = default_table()
    fast = table.cost("claude-opus-4-6", u(out=10**6, speed="fast"), T_2026_06)
    us = table.cost("claude-opus-4-6", u(out=10**6, inference_geo="us"), T_2026_06)
    old = table.cost("claude-opus-4-1", u(out=10**6, inference_geo="us"), T_2026_06)
    assert fast is not None and us is not None and old is not None
    assert fast.output_usd == pytest.approx(150)
    assert us.output_usd == pytest.approx(27.5)
    assert old.output_usd == pytest.approx(75)  # geo pricing only on 4.6+


def test_unknown_model_is_unpriced_not_free() -> None:
    assert default_table().cost("gpt-4o", u(1000), T_2026_06) is None


def test_split_mismatch_is_priced_as_5m(tmp_path: Path) -> None:
    from lines import SESSION, assistant, user, write

    from mcsim.recorded import inspect_usage

    bad_split = {
        "input_tokens": 0,
        "cache_creation_input_tokens": 100_000,
        "cache_read_input_tokens": 0,
        "output_tokens": 0,
        "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0},
    }
    write(
        tmp_path / "p" / f"{SESSION}.jsonl",
        [user("u1", None, 0), assistant("a1", "u1", 1, "m1", u=bad_split)],
    )
    report = inspect_usage([str(tmp_path)], default_table())
    assert report.split_mismatch_calls == 1
    assert report.tokens.cache_write_5m_tokens == 100_000
    assert report.cost_usd == pytest.approx(0.375)


def test_override_file_replaces_a_family(tmp_path: Path) -> None:
    override = {
        "format": "mcsim-prices/1",
        "version": "acme-2026",
        "as_of": "2026-09-01",
        "models": [
            {
                "family": "sonnet",
                "versions": ["4.5"],
                "input": 2,
                "cache_write_5m": 2.5,
                "cache_write_1h": 4,
                "cache_read": 0.2,
                "output": 10,
            }
        ],
    }
    path = tmp_path / "prices.json"
    path.write_text(json.dumps(override))
    table = load_table(path)
    assert table.version == "anthropic-list-2026-08+acme-2026"
    ours = table.cost("claude-sonnet-4-5", u(100_000), T_2026_06)
    builtin = table.cost("claude-sonnet-4", u(100_000), T_2026_06)
    assert ours is not None and builtin is not None
    assert ours.total_usd == pytest.approx(0.2)
    assert builtin.total_usd == pytest.approx(0.3)


def test_litellm_import(tmp_path: Path) -> None:
    data = {
        "sample_spec": {"input_cost_per_token": 0},
        "claude-sonnet-4-5-20250929": {
            "litellm_provider": "anthropic",
            "input_cost_per_token": 3e-6,
            "output_cost_per_token": 1.5e-5,
            "cache_creation_input_token_cost": 3.75e-6,
            "cache_read_input_token_cost": 3e-7,
            "cache_creation_input_token_cost_above_1hr": 7.5e-6,  # wrong upstream: 2x is $6
            "input_cost_per_token_above_200k_tokens": 6e-6,
            "output_cost_per_token_above_200k_tokens": 2.25e-5,
        },
        "bedrock/anthropic.claude-sonnet-4-5-20250929-v1:0": {
            "litellm_provider": "bedrock",
            "input_cost_per_token": 3.3e-6,
            "output_cost_per_token": 1.65e-5,
        },
        "gpt-4o": {"input_cost_per_token": 2.5e-6, "output_cost_per_token": 1e-5},
    }
    path = tmp_path / "model_prices.json"
    path.write_text(json.dumps(data))
    table = load_table(path)
    price = table.lookup("claude-sonnet-4-5")
    assert price is not None
    assert price.rates.input == pytest.approx(3)
    assert price.rates.cache_write_1h == pytest.approx(6)
    assert price.long_context[0].rates.input == pytest.approx(6)
    # Families the file does not mention keep the built-in prices.
    assert table.lookup("claude-opus-4-7").rates.input == 5  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not valid JSON"),
        (
            '{"format": "mcsim-prices/1", "version": "x", "as_of": "y", "models": [{}]}',
            "models[0].family",
        ),
        (
            '{"format": "mcsim-prices/1", "version": "x", "as_of": "y", "models": '
            '[{"family": "opus", "versions": ["9"], "input": "cheap"}]}',
            "models[0].input",
        ),
        ('{"some-model": {"foo": 1}}', "no Anthropic model prices"),
    ],
)
def test_bad_price_files_name_file_and_key(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(PriceTableError, match=r"bad\.json") as err:
        load_table(path)
    assert message in str(err.value)
