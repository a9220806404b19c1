"""Price table: family matching, each rule of docs/domain.md#prices, overrides and LiteLLM
import."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from mcsim.accounting.prices import default_table, load_table, parse_model
from mcsim.errors import PriceTableError
from mcsim.model import Usage

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
    [  # input, 5m write, 1h write, read, output (docs/domain.md#prices)
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

    from mcsim.accounting.recorded import inspect_usage

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
    assert table.version == "anthropic-list-2026-08+openai-list-2026-12+acme-2026"
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


# ---------------------------------------------------------------- hostile price files

SONNET_ROW = {
    "family": "sonnet",
    "versions": ["4.5"],
    "input": 2,
    "cache_write_5m": 2.5,
    "cache_write_1h": 4,
    "cache_read": 0.2,
    "output": 10,
    "multipliers": {"speed": {"fast": {"4.5": 2}}, "inference_geo": {"us": {"4.5": 1.5}}},
    "long_context": [
        {
            "above_tokens": 200_000,
            "input": 4,
            "cache_write_5m": 5,
            "cache_write_1h": 8,
            "cache_read": 0.4,
            "output": 15,
        }
    ],
}


def mcsim_file(tmp_path: Path, row: dict) -> Path:
    path = tmp_path / "prices.json"
    table = {"format": "mcsim-prices/1", "version": "v", "as_of": "2026-09-01", "models": [row]}
    path.write_text(json.dumps(table))
    return path


def test_override_with_multipliers_prices_a_call_by_hand(tmp_path: Path) -> None:
    table = load_table(mcsim_file(tmp_path, SONNET_ROW))
    call = u(1000, 2000, 3000, 10_000, 500, speed="fast", inference_geo="us")
    cost = table.cost("claude-sonnet-4-5-20250929", call, T_2026_06)
    assert cost is not None
    # 1000 x $2 + 2000 x $2.5 + 3000 x $4 + 10,000 x $0.2 + 500 x $10 per million tokens
    # = 0.002 + 0.005 + 0.012 + 0.002 + 0.005 = $0.026, times fast 2 and US 1.5 = $0.078.
    assert (cost.input_usd, cost.cache_write_1h_usd, cost.output_usd) == pytest.approx(
        (0.006, 0.036, 0.015)
    )
    assert cost.total_usd == pytest.approx(0.078)
    # Over 200,000 prompt tokens the whole call is at the long-context rates: 250,000 x $4.
    assert table.cost("claude-sonnet-4-5", u(250_000), T_2026_06).total_usd == pytest.approx(1.0)  # type: ignore[union-attr]


def test_the_ceilings_themselves_are_accepted(tmp_path: Path) -> None:
    row = {**SONNET_ROW, "input": 10_000, "multipliers": {"speed": {"fast": {"4.5": 100}}}}
    table = load_table(mcsim_file(tmp_path, row))
    # 100 tokens at $10,000 per million = $1; fast mode x100 = $100.
    assert table.cost("claude-sonnet-4-5", u(100), T_2026_06).total_usd == pytest.approx(1.0)  # type: ignore[union-attr]
    fast = table.cost("claude-sonnet-4-5", u(100, speed="fast"), T_2026_06)
    assert fast is not None and fast.total_usd == pytest.approx(100.0)
    free = load_table(mcsim_file(tmp_path, {**SONNET_ROW, "cache_read": 0}))
    assert free.cost("claude-sonnet-4-5", u(read=100_000), T_2026_06).total_usd == 0  # type: ignore[union-attr]


RATE = "must be a number from 0 to 10,000 (USD per million tokens)"
FACTOR = "must be a number above 0 and at most 100"


def with_speed(factor: object) -> dict:
    return {**SONNET_ROW, "multipliers": {"speed": {"fast": {"4.5": factor}}}}


@pytest.mark.parametrize(
    ("row", "key", "model", "allowed", "value"),
    [
        ({**SONNET_ROW, "input": -5}, "input", "sonnet", RATE, "-5"),
        ({**SONNET_ROW, "output": 1e300}, "output", "sonnet", RATE, "1e+300"),
        ({**SONNET_ROW, "cache_read": 10_000.5}, "cache_read", "sonnet", RATE, "10000.5"),
        ({**SONNET_ROW, "input": "3"}, "input", "sonnet", RATE, "'3'"),
        ({**SONNET_ROW, "input": True}, "input", "sonnet", RATE, "true"),
        ({**SONNET_ROW, "cache_write_1h": None}, "cache_write_1h", "sonnet", RATE, "null"),
        (
            {**SONNET_ROW, "long_context": [{**SONNET_ROW["long_context"][0], "output": -1}]},
            "long_context[0].output",
            "sonnet",
            RATE,
            "-1",
        ),
        (with_speed(-5), "multipliers.speed.fast", "sonnet 4.5", FACTOR, "-5"),
        (with_speed(0), "multipliers.speed.fast", "sonnet 4.5", FACTOR, "0"),
        (with_speed(1e308), "multipliers.speed.fast", "sonnet 4.5", FACTOR, "1e+308"),
        (with_speed(100.5), "multipliers.speed.fast", "sonnet 4.5", FACTOR, "100.5"),
        (with_speed("2"), "multipliers.speed.fast", "sonnet 4.5", FACTOR, "'2'"),
        (with_speed(None), "multipliers.speed.fast", "sonnet 4.5", FACTOR, "null"),
        (  # a version the row does not list is checked too
            {**SONNET_ROW, "multipliers": {"inference_geo": {"us": {"4.5": 1.1, "9.9": -5}}}},
            "multipliers.inference_geo.us",
            "sonnet 9.9",
            FACTOR,
            "-5",
        ),
    ],
)
def test_bad_rates_and_multipliers_are_refused_in_one_line(
    tmp_path: Path, row: dict, key: str, model: str, allowed: str, value: str
) -> None:
    path = mcsim_file(tmp_path, row)
    with pytest.raises(PriceTableError) as err:
        load_table(path)
    assert str(err.value) == (
        f"{path}: key 'models[0].{key}' of model '{model}' {allowed}, not {value}"
    )


PLAIN_SONNET = {k: v for k, v in SONNET_ROW.items() if k not in ("multipliers", "long_context")}
TABLE = {
    "format": "mcsim-prices/1",
    "version": "v",
    "as_of": "2026-09-01",
    "models": [PLAIN_SONNET],
}


def _without(table: dict, key: str) -> dict:
    return {k: v for k, v in table.items() if k != key}


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (_without(TABLE, "as_of"), "key 'as_of' is missing: it must be a string"),
        (_without(TABLE, "version"), "key 'version' is missing: it must be a string"),
        (_without(TABLE, "models"), "key 'models' is missing: it must be a list"),
        ({**TABLE, "as_of": 20260901}, "key 'as_of' must be a string, not 20260901"),
        ({**TABLE, "version": None}, "key 'version' must be a string, not null"),
        ({**TABLE, "models": {}}, "key 'models' must be a list, not a mapping"),
        ({**TABLE, "models": [5]}, "key 'models[0]' must be an object, not 5"),
        (  # without `format`, what else is wrong is said first ...
            _without({**TABLE, "models": [{**PLAIN_SONNET, "input": -5}]}, "format"),
            f"key 'models[0].input' of model 'sonnet' {RATE}, not -5",
        ),
        (  # ... and then that it is missing (it was read as LiteLLM's file, finding nothing)
            _without(TABLE, "format"),
            "key 'format' is missing: it must be 'mcsim-prices/1'",
        ),
        (
            {**TABLE, "format": "mcsim-prices/2"},
            "key 'format' must be 'mcsim-prices/1', not 'mcsim-prices/2'",
        ),
        (
            {**TABLE, "models": [_without(PLAIN_SONNET, "family")]},
            "key 'models[0].family' is missing: it must be a string",
        ),
        (
            {**TABLE, "models": [{**PLAIN_SONNET, "family": "gemini"}]},
            "key 'models[0].family' must be one of opus, sonnet, haiku, not 'gemini'",
        ),
        (
            {**TABLE, "models": [_without(PLAIN_SONNET, "versions")]},
            "key 'models[0].versions' is missing: it must be a list",
        ),
        (
            {**TABLE, "models": [{**PLAIN_SONNET, "versions": "4.5"}]},
            "key 'models[0].versions' must be a list, not '4.5'",
        ),
        (
            {**TABLE, "models": [_without(PLAIN_SONNET, "output")]},
            "key 'models[0].output' of model 'sonnet' is missing: it must be a number from 0 to "
            "10,000 (USD per million tokens)",
        ),
        (
            {**TABLE, "models": [{**PLAIN_SONNET, "multipliers": []}]},
            "key 'models[0].multipliers' must be an object, not a list",
        ),
        (
            {**TABLE, "models": [{**PLAIN_SONNET, "multipliers": {"speed": 2}}]},
            "key 'models[0].multipliers.speed' must be an object, not 2",
        ),
        (
            {**TABLE, "models": [{**PLAIN_SONNET, "long_context": {}}]},
            "key 'models[0].long_context' must be a list, not a mapping",
        ),
        (  # a rule that is not an object was passed over
            {**TABLE, "models": [{**PLAIN_SONNET, "long_context": [5]}]},
            "key 'models[0].long_context[0]' must be an object, not 5",
        ),
        (
            {**TABLE, "models": [{**SONNET_ROW, "long_context": [{**PLAIN_SONNET}]}]},
            "key 'models[0].long_context[0].above_tokens' of model 'sonnet' is missing: it must "
            "be a positive integer (the prompt tokens above which the rule applies)",
        ),
        (  # a string's characters were taken for versions: "4.5" held "4"
            {
                **TABLE,
                "models": [
                    {
                        **PLAIN_SONNET,
                        "long_context": [{**SONNET_ROW["long_context"][0], "versions": "4.5"}],
                    }
                ],
            },
            "key 'models[0].long_context[0].versions' must be a list, not '4.5'",
        ),
    ],
)
def test_missing_keys_and_wrong_types_are_told_apart(
    tmp_path: Path, table: dict, message: str
) -> None:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps(table))
    with pytest.raises(PriceTableError) as err:
        load_table(path)
    assert str(err.value) == f"{path}: {message}"


LITELLM_SONNET = {
    "litellm_provider": "anthropic",
    "input_cost_per_token": 2e-6,
    "output_cost_per_token": 1e-5,
}


def litellm_file(tmp_path: Path, rows: dict) -> Path:
    path = tmp_path / "litellm.json"
    path.write_text(json.dumps(rows))
    return path


def test_litellm_prices_a_call_by_hand(tmp_path: Path) -> None:
    rows = {
        "claude-sonnet-4-5-20250929": LITELLM_SONNET,
        # Rows mcsim does not read are not checked: other vendors' models.
        "gpt-4o": {"input_cost_per_token": "nan", "output_cost_per_token": -1},
    }
    table = load_table(litellm_file(tmp_path, rows))
    cost = table.cost("claude-sonnet-4-5", u(1000, 2000, 3000, 10_000, 500), T_2026_06)
    assert cost is not None
    # Per million tokens: input $2, output $10 from the file; a 5-minute write 1.25 x 2 = $2.5,
    # a read 0.1 x 2 = $0.2, a 1-hour write 2 x 2 = $4. 0.002 + 0.005 + 0.012 + 0.002 + 0.005.
    assert cost.total_usd == pytest.approx(0.026)
    ceiling = {**LITELLM_SONNET, "output_cost_per_token": 0.01}
    table = load_table(litellm_file(tmp_path, {"claude-sonnet-4-5": ceiling}))
    assert table.cost("claude-sonnet-4-5", u(out=100), T_2026_06).total_usd == pytest.approx(1.0)  # type: ignore[union-attr]


PER_TOKEN = "must be a number from 0 to 0.01 (USD per token)"


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        *(
            (
                {"claude-sonnet-4-5-20250929": {**LITELLM_SONNET, "input_cost_per_token": value}},
                f"key 'input_cost_per_token' of model 'claude-sonnet-4-5-20250929' {PER_TOKEN}, "
                f"not {shown}",
            )
            for value, shown in [
                ("nan", "'nan'"),
                ("inf", "'inf'"),
                ("-0.000003", "'-0.000003'"),
                ("1e300", "'1e300'"),
                (1e300, "1e+300"),
                (-3e-6, "-3e-06"),
                (0.0100001, "0.0100001"),
                (3, "3"),
                (True, "true"),
                (None, "null"),
            ]
        ),
        (
            {"claude-opus-4-6": {**LITELLM_SONNET, "cache_read_input_token_cost": "nan"}},
            f"key 'cache_read_input_token_cost' of model 'claude-opus-4-6' {PER_TOKEN}, not 'nan'",
        ),
        (
            {
                "claude-opus-4-6": {
                    **LITELLM_SONNET,
                    "output_cost_per_token_above_200k_tokens": -1,
                    "input_cost_per_token_above_200k_tokens": 4e-6,
                }
            },
            "key 'output_cost_per_token_above_200k_tokens' of model 'claude-opus-4-6' "
            f"{PER_TOKEN}, not -1",
        ),
        (
            {"claude-haiku-4-5": {"input_cost_per_token": 1e-6}},
            f"key 'output_cost_per_token' of model 'claude-haiku-4-5' is missing: it {PER_TOKEN}",
        ),
        (  # a reseller's row is read too, even beside the anthropic row that wins
            {
                "claude-sonnet-4-5": LITELLM_SONNET,
                "us.anthropic.claude-sonnet-4-5-20250929-v1:0": {
                    **LITELLM_SONNET,
                    "litellm_provider": "bedrock",
                    "output_cost_per_token": "inf",
                },
            },
            "key 'output_cost_per_token' of model "
            f"'us.anthropic.claude-sonnet-4-5-20250929-v1:0' {PER_TOKEN}, not 'inf'",
        ),
    ],
)
def test_bad_litellm_values_refuse_the_file_in_one_line(
    tmp_path: Path, rows: dict, message: str
) -> None:
    path = litellm_file(tmp_path, rows)
    with pytest.raises(PriceTableError) as err:
        load_table(path)
    assert str(err.value) == f"{path}: {message}"


def test_a_json_nan_literal_is_not_json(tmp_path: Path) -> None:
    path = tmp_path / "nan.json"
    path.write_text('{"claude-sonnet-4-5": {"input_cost_per_token": NaN}}')
    with pytest.raises(PriceTableError, match=r"nan\.json: not valid JSON"):
        load_table(path)


def test_price_files_that_are_not_regular_files_are_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)  # reading it would wait for a writer forever
    zero = tmp_path / "zero.json"
    zero.symlink_to("/dev/zero")  # reading it would never end
    expected = {fifo: "a FIFO", zero: "a character device", tmp_path: "a directory"}
    for path, what in expected.items():
        with pytest.raises(PriceTableError) as err:
            load_table(path)
        assert str(err.value) == f"{path}: {what}, not a price file"


def test_a_price_file_over_64_mib_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "huge.json"
    with path.open("wb") as file:
        file.truncate(64 * 1024 * 1024 + 1)  # sparse: no disk used
    with pytest.raises(PriceTableError) as err:
        load_table(path)
    assert str(err.value) == (
        f"{path}: too large for a price file (67_108_865 bytes; at most 67_108_864 bytes)"
    )


@pytest.mark.parametrize("command", ["inspect", "replay", "sweep"])
def test_a_bad_price_file_stops_every_command_before_any_work(tmp_path: Path, command: str) -> None:
    from click.testing import CliRunner

    from mcsim.cli import cli

    repo = Path(__file__).resolve().parents[1]
    nan = {"claude-sonnet-4-5-20250929": {**LITELLM_SONNET, "input_cost_per_token": "nan"}}
    path = litellm_file(tmp_path, nan)
    out = tmp_path / "out"
    args = [command, str(repo / "sample_transcripts"), "--prices", str(path), "--out", str(out)]
    if command != "inspect":
        args += ["--policy", str(repo / "policies" / "claude-code.yaml")]
        args += ["--fail-under-savings", "50"]
    if command == "sweep":
        args += ["--name", "claude-code", "--grid", "ttl=5m,1h"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == (
        f"Error: {path}: key 'input_cost_per_token' of model 'claude-sonnet-4-5-20250929' "
        f"{PER_TOKEN}, not 'nan'\n"
    )
    assert not out.exists()
