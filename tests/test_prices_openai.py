"""OpenAI prices: the shipped table, id matching, overrides, LiteLLM's OpenAI rows, errors."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from mcsim.accounting.prices import default_table, load_table
from mcsim.errors import PriceTableError
from mcsim.model import Usage

T_2026_12 = datetime(2026, 12, 1, tzinfo=UTC).timestamp()


def u(inp: int = 0, w5: int = 0, read: int = 0, out: int = 0) -> Usage:
    """OpenAI usage as mcsim holds it: uncached input, cache writes, cached input, output."""
    return Usage(inp, w5, 0, read, out)


def test_default_table_names_both_shipped_tables() -> None:
    assert default_table().version == "anthropic-list-2026-08+openai-list-2026-12"


def test_gpt_5_call_by_hand() -> None:
    cost = default_table().cost("gpt-5", u(1675, 0, 20_864, 10), T_2026_12)
    assert cost is not None
    # 1,675 x $1.25 + 20,864 x $0.125 + 10 x $10 per million tokens.
    assert cost.input_usd == pytest.approx(0.00209375)
    assert cost.cache_read_usd == pytest.approx(0.002608)
    assert cost.output_usd == pytest.approx(0.0001)
    assert cost.total_usd == pytest.approx(0.00480175)
    assert not cost.long_context


def test_gpt_5_6_bills_cache_writes_at_1_25_times_input() -> None:
    cost = default_table().cost("gpt-5.6-sol", u(1000, 2000, 10_000, 500), T_2026_12)
    assert cost is not None
    # 1,000 x $5 + 2,000 x $6.25 + 10,000 x $0.50 + 500 x $30 per million tokens
    # = 0.005 + 0.0125 + 0.005 + 0.015.
    assert cost.cache_write_5m_usd == pytest.approx(0.0125)
    assert cost.total_usd == pytest.approx(0.0375)


@pytest.mark.parametrize(
    ("model_id", "rates"),
    [  # input, 5m write, 1h write, cached input, output per million tokens
        ("gpt-5", (1.25, 1.25, 1.25, 0.125, 10)),
        ("gpt-5-codex", (1.25, 1.25, 1.25, 0.125, 10)),
        ("gpt-5.2-codex", (1.75, 1.75, 1.75, 0.175, 14)),
        ("gpt-5.4-mini", (0.75, 0.75, 0.75, 0.075, 4.5)),
        ("gpt-5.5", (5, 5, 5, 0.5, 30)),
        ("gpt-5.6-terra", (2, 2.5, 2.5, 0.2, 12)),
        ("gpt-6.2-sol", (2, 2.5, 5, 0.1, 10)),
        ("codex-mini-latest", (1.5, 1.5, 1.5, 0.375, 6)),
        ("o4-mini", (1.1, 1.1, 1.1, 0.275, 4.4)),
        ("gpt-4.1", (2, 2, 2, 0.5, 8)),
    ],
)
def test_openai_list_prices_per_million(model_id: str, rates: tuple[float, ...]) -> None:
    price = default_table().lookup(model_id)
    assert price is not None
    got = price.rates
    assert (got.input, got.cache_write_5m, got.cache_write_1h, got.cache_read, got.output) == (
        pytest.approx(rates)
    )


def test_no_write_premium_before_gpt_5_6() -> None:
    table = default_table()
    names = [version for family, version in table.models if family == "openai"]
    assert len(names) == 24  # 5 + 2 + 3 + 3 + 1 + 2 + 2 + 2 + 1 + 2 + 1 names by row
    for name in names:
        rates = table.models[("openai", name)].rates
        premium = 1.25 if name.startswith(("gpt-5.6", "gpt-6")) else 1.0
        assert rates.cache_write_5m == pytest.approx(premium * rates.input), name
        assert rates.cache_read < rates.input, name


def test_long_context_prices_the_whole_request() -> None:
    table = default_table()
    # 100,000 uncached + 172,000 cached = 272,000 prompt tokens: not above the threshold.
    below = table.cost("gpt-5.5", u(100_000, 0, 172_000, 1000), T_2026_12)
    # 100,000 x $5 + 172,000 x $0.50 + 1,000 x $30 per million = 0.5 + 0.086 + 0.03.
    assert below is not None and not below.long_context
    assert below.total_usd == pytest.approx(0.616)
    above = table.cost("gpt-5.5", u(100_000, 0, 200_001, 1000), T_2026_12)
    # 300,001 prompt tokens: every token at 2x input and cached, 1.5x output:
    # 100,000 x $10 + 200,001 x $1 + 1,000 x $45 per million = 1.0 + 0.200001 + 0.045.
    assert above is not None and above.long_context
    assert above.total_usd == pytest.approx(1.245001)


@pytest.mark.parametrize(
    ("model_id", "row"),
    [
        ("gpt-5", "gpt-5"),
        ("gpt-5-2025-08-07", "gpt-5"),
        ("openai/gpt-5", "gpt-5"),
        ("GPT-5", "gpt-5"),
        ("gpt-5-codex", "gpt-5-codex"),
        ("gpt-5-codex-latest", "gpt-5-codex"),  # a same-price word after a listed name
        ("gpt-5-chat-latest", "gpt-5"),
        ("gpt-5.1-codex-max", "gpt-5.1-codex-max"),
        ("gpt-5.1-codex-mini", "gpt-5.1-codex-mini"),
        ("gpt-5.5", "gpt-5.5"),
        ("gpt-5.6", "gpt-5.6"),
        ("o3-2025-04-16", "o3"),
        ("o4-mini-20250416", "o4-mini"),
        ("gpt-5-pro", None),  # dearer than gpt-5: never priced as it
        ("gpt-5-codex-mini", None),
        ("o3-mini", None),
        ("gpt-9", None),
        ("gpt-4o", None),
        ("codex-auto-review", None),
    ],
)
def test_openai_ids_match_their_own_row(model_id: str, row: str | None) -> None:
    price = default_table().lookup(model_id)
    assert (price.version if price else None) == row


def test_gpt_5_5_is_not_priced_as_gpt_5() -> None:
    table = default_table()
    # 100,000 input tokens (below 272k): x $5 for gpt-5.5, $1.25 for gpt-5, $0.25 for gpt-5-mini.
    assert table.cost("gpt-5.5", u(100_000), T_2026_12).total_usd == pytest.approx(0.5)  # type: ignore[union-attr]
    assert table.cost("gpt-5", u(100_000), T_2026_12).total_usd == pytest.approx(0.125)  # type: ignore[union-attr]
    assert table.cost("gpt-5-mini", u(100_000), T_2026_12).total_usd == pytest.approx(0.025)  # type: ignore[union-attr]
    assert table.cost("gpt-9", u(100_000), T_2026_12) is None


@pytest.mark.parametrize(
    ("model_id", "provider"),
    [
        ("claude-sonnet-4-5-20250929", "anthropic"),
        ("gpt-5-2025-08-07", "openai"),
        ("o3", "openai"),
        ("claude-opus-9", "anthropic"),  # unpriced, but named like Claude
        ("gpt-9", "openai"),  # unpriced, but named like OpenAI's
        ("codex-auto-review", "openai"),
        ("mistral-large", None),
        ("<synthetic>", None),
    ],
)
def test_provider_of_a_model(model_id: str, provider: str | None) -> None:
    assert default_table().provider(model_id) == provider


def mcsim_file(tmp_path: Path, rows: list[dict]) -> Path:
    path = tmp_path / "prices.json"
    table = {"format": "mcsim-prices/1", "version": "acme", "as_of": "2026-12-05", "models": rows}
    path.write_text(json.dumps(table))
    return path


GPT5_ROW = {
    "provider": "openai",
    "models": ["gpt-5"],
    "input": 1,
    "cache_write_5m": 1,
    "cache_write_1h": 1,
    "cache_read": 0.1,
    "output": 8,
}


def test_override_file_with_an_openai_row(tmp_path: Path) -> None:
    table = load_table(mcsim_file(tmp_path, [GPT5_ROW]))
    assert table.version == "anthropic-list-2026-08+openai-list-2026-12+acme"
    cost = table.cost("gpt-5-2025-08-07", u(1675, 0, 20_864, 10), T_2026_12)
    # 1,675 x $1 + 20,864 x $0.10 + 10 x $8 per million = 0.001675 + 0.0020864 + 0.00008.
    assert cost is not None and cost.total_usd == pytest.approx(0.0038414)
    # Models the file does not list keep the shipped prices.
    codex = table.cost("gpt-5-codex", u(10**6), T_2026_12)
    assert codex is not None and codex.total_usd == pytest.approx(1.25)
    assert table.provider("gpt-5") == "openai"


def litellm_file(tmp_path: Path, rows: dict) -> Path:
    path = tmp_path / "litellm.json"
    path.write_text(json.dumps(rows))
    return path


OPENAI_CHAT = {"litellm_provider": "openai", "mode": "chat"}


def test_litellm_openai_rows_price_calls_by_hand(tmp_path: Path) -> None:
    rows = {
        "gpt-5": {
            **OPENAI_CHAT,
            "input_cost_per_token": 1e-6,
            "cache_read_input_token_cost": 2e-7,
            "output_cost_per_token": 5e-6,
        },
        # A dated row after the undated one does not replace it.
        "gpt-5-2025-08-07": {
            **OPENAI_CHAT,
            "input_cost_per_token": 9e-6,
            "output_cost_per_token": 9e-6,
        },
        "gpt-4.1": {**OPENAI_CHAT, "input_cost_per_token": 2e-6, "output_cost_per_token": 8e-6},
        "gpt-5.4": {
            "litellm_provider": "openai",
            "mode": "responses",
            "input_cost_per_token": 2.5e-6,
            "cache_read_input_token_cost": 2.5e-7,
            "output_cost_per_token": 1.5e-5,
            "input_cost_per_token_above_272k_tokens": 5e-6,
            "output_cost_per_token_above_272k_tokens": 2.25e-5,
        },
        # Rows mcsim does not read are not checked: resellers, embeddings, fine-tunes.
        "azure/gpt-5": {"litellm_provider": "azure", "input_cost_per_token": "nan"},
        "text-embedding-3-small": {
            "litellm_provider": "openai",
            "mode": "embedding",
            "input_cost_per_token": -1,
        },
        "ft:gpt-4.1-2025-04-14": {**OPENAI_CHAT, "input_cost_per_token": -1},
    }
    table = load_table(litellm_file(tmp_path, rows))
    cost = table.cost("gpt-5-2025-08-07", u(1675, 0, 20_864, 10), T_2026_12)
    # 1,675 x $1 + 20,864 x $0.20 + 10 x $5 per million = 0.001675 + 0.0041728 + 0.00005.
    assert cost is not None and cost.total_usd == pytest.approx(0.0058978)
    # No cache write premium: a write costs the input rate, $1 per million.
    write = table.cost("gpt-5", u(w5=10**6), T_2026_12)
    assert write is not None and write.total_usd == pytest.approx(1.0)
    # gpt-4.1 has no cached price in the file: 1,000 cached tokens at the input rate, $2.
    read = table.cost("gpt-4.1", u(read=1000), T_2026_12)
    assert read is not None and read.total_usd == pytest.approx(0.002)
    # Above 272k: 100,000 x $5 + 200,000 x $0.50 (the base 10% discount) + 1,000 x $22.5.
    long = table.cost("gpt-5.4", u(100_000, 0, 200_000, 1000), T_2026_12)
    assert long is not None and long.long_context
    assert long.total_usd == pytest.approx(0.6225)
    # Models the file does not price keep the shipped prices, Claude's too.
    assert table.cost("gpt-5.5", u(100_000), T_2026_12).total_usd == pytest.approx(0.5)  # type: ignore[union-attr]
    assert table.cost("claude-haiku-4-5", u(10**6), T_2026_12).total_usd == pytest.approx(1)  # type: ignore[union-attr]


RATE = "must be a number from 0 to 10,000 (USD per million tokens)"
PER_TOKEN = "must be a number from 0 to 0.01 (USD per token)"


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({**GPT5_ROW, "input": -1}, f"key 'models[0].input' of model 'gpt-5' {RATE}, not -1"),
        (
            {**GPT5_ROW, "models": ["gpt-5", "gpt-5-codex"], "cache_read": "nan"},
            f"key 'models[0].cache_read' of model 'gpt-5, gpt-5-codex' {RATE}, not 'nan'",
        ),
        (
            {**GPT5_ROW, "long_context": [{**GPT5_ROW, "above_tokens": 272_000, "output": 20_000}]},
            f"key 'models[0].long_context[0].output' of model 'gpt-5' {RATE}, not 20000",
        ),
        (
            {**GPT5_ROW, "provider": "mistral"},
            "key 'models[0].provider' must be anthropic or openai, not 'mistral'",
        ),
        ({**GPT5_ROW, "models": []}, "key 'models[0].models' must list model names like 'gpt-5'"),
        ({**GPT5_ROW, "models": [5]}, "key 'models[0].models' must list model names like 'gpt-5'"),
        ({**GPT5_ROW, "models": "gpt-5"}, "key 'models[0].models' must be a list, not 'gpt-5'"),
        (  # a negative threshold would price every call at the long-context rates
            {**GPT5_ROW, "long_context": [{**GPT5_ROW, "above_tokens": -5}]},
            "key 'models[0].long_context[0].above_tokens' of model 'gpt-5' must be a positive "
            "integer (the prompt tokens above which the rule applies), not -5",
        ),
        (
            {**GPT5_ROW, "long_context": [{**GPT5_ROW, "above_tokens": True}]},
            "key 'models[0].long_context[0].above_tokens' of model 'gpt-5' must be a positive "
            "integer (the prompt tokens above which the rule applies), not true",
        ),
        (  # both providers' keys: the family would be ignored
            {**GPT5_ROW, "family": "sonnet"},
            "key 'models[0].family' of model 'gpt-5' is for Anthropic rows; an OpenAI row names "
            "its models in 'models' only",
        ),
        (
            {**GPT5_ROW, "versions": ["4.5"]},
            "key 'models[0].versions' of model 'gpt-5' is for Anthropic rows; an OpenAI row "
            "names its models in 'models' only",
        ),
        (
            {
                k: v
                for k, v in {**GPT5_ROW, "family": "sonnet", "versions": ["4.5"]}.items()
                if k != "provider"
            },
            'key \'models[0].models\' is for OpenAI rows ("provider": "openai"); an '
            "Anthropic row names 'family' and 'versions'",
        ),
    ],
)
def test_bad_openai_rows_are_refused_in_one_line(tmp_path: Path, row: dict, message: str) -> None:
    path = mcsim_file(tmp_path, [row])
    with pytest.raises(PriceTableError) as err:
        load_table(path)
    assert str(err.value) == f"{path}: {message}"


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (
            {**OPENAI_CHAT, "input_cost_per_token": 1.25e-6},
            f"key 'output_cost_per_token' of model 'gpt-5' is missing: it {PER_TOKEN}",
        ),
        (
            {
                **OPENAI_CHAT,
                "input_cost_per_token": 1.25e-6,
                "output_cost_per_token": 1e-5,
                "cache_read_input_token_cost": "nan",
            },
            f"key 'cache_read_input_token_cost' of model 'gpt-5' {PER_TOKEN}, not 'nan'",
        ),
    ],
)
def test_bad_litellm_openai_rows_are_refused_in_one_line(
    tmp_path: Path, row: dict, message: str
) -> None:
    path = litellm_file(tmp_path, {"gpt-5": row})
    with pytest.raises(PriceTableError) as err:
        load_table(path)
    assert str(err.value) == f"{path}: {message}"


def _rates_text(rates: dict[str, float]) -> str:
    """Rates as docs/counting.md writes them: input / cached / output, the write rate when it
    is not the input rate, the 1-hour write when it is not the 5-minute one."""
    text = f"{rates['input']:g} / {rates['cache_read']:g} / {rates['output']:g}"
    if rates["cache_write_5m"] != rates["input"]:
        text += f", write {rates['cache_write_5m']:g}"
    if rates["cache_write_1h"] != rates["cache_write_5m"]:
        text += f" (1h: {rates['cache_write_1h']:g})"
    return text


def test_the_docs_say_where_every_openai_price_comes_from() -> None:
    """docs/counting.md's table of OpenAI prices is the shipped file's, row for row, and names a
    source for each."""
    shipped = json.loads(
        (Path(__file__).parents[1] / "mcsim/accounting/prices/openai.json").read_text()
    )
    text = (Path(__file__).parents[1] / "docs/counting.md").read_text()
    section = text.split("### OpenAI prices: where each comes from", 1)[1].split("\n## ", 1)[0]
    documented: dict[str, tuple[str, str, str]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 5 and cells[0] not in ("model", "---"):
            for model in cells[0].split(", "):
                assert model not in documented, model
                documented[model] = (cells[1], cells[2], cells[3])
    expected = {}
    for row in shipped["models"]:
        long = row.get("long_context", [{}])[0]
        for model in row["models"]:
            expected[model] = (_rates_text(row), _rates_text(long) if long else "")
    assert {m: d[:2] for m, d in documented.items()} == expected
    assert all(d[2] for d in documented.values())  # every row names its source
