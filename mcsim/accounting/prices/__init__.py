"""Price tables: dated list-price tables shipped with mcsim, overrides, and call pricing.

Rates are USD per million tokens. Two providers share one format. Anthropic ids are matched
by family and version, whatever the spelling (`claude-sonnet-4-5-20250929`, `claude-3-5-haiku-
latest`, `us.anthropic.claude-3-7-sonnet-20250219-v1:0`, `sonnet-4.5`, `claude-opus-4-7[1m]`),
so dated ids and gateway labels need no table rows of their own. OpenAI rows list model names
(`gpt-5`, `gpt-5.1-codex-max`); an id is matched after dropping a gateway prefix (`openai/`)
and a date suffix (`-2025-08-07`), exactly, or else by its longest listed prefix followed only
by words that do not change OpenAI's price (`-codex`, `-latest`, `-chat`, `-preview`): so
`gpt-5-codex-latest` is gpt-5, but `gpt-5-mini`, `gpt-5-pro` and `gpt-5.5` are never gpt-5.
A model that matches no row is *unpriced*: callers count it and warn; it is never priced at $0.

OpenAI's billing maps onto the same five rates: `input` is uncached input, `cache_read` cached
input, `output` output with reasoning; a cache write costs the input rate before GPT-5.6 (no
write premium) and 1.25 times it from GPT-5.6 on.

A price file is checked before any work: every rate a finite number from 0 to `MAX_RATE`,
every multiplier above 0 and at most `MAX_MULTIPLIER`. A NaN or infinite price would make
every cost and saving NaN, which fails every comparison, so a CI gate would pass; a negative
one would be a "saving". Anything else is refused in one line naming file, model and key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any, Protocol, TypeGuard

import orjson

from mcsim.errors import PriceTableError
from mcsim.frozen import quick_init
from mcsim.ingest.loaders.jsonl import read_input_file
from mcsim.model import Tokens
from mcsim.text import escaped, shown

FORMAT = "mcsim-prices/1"
# The dearest list price is $75 per million tokens (Opus 4.1 output, docs/domain.md#prices),
# the dearest Claude row of LiteLLM's file $82.50 (measured on v1.110.2). A ceiling over 100
# times that holds any real price, yet refuses what is a slip and not a price: a per-million
# price typed into LiteLLM's per-token field (3 for 3e-6) is $3,000,000 per million tokens.
MAX_RATE = 10_000.0  # USD per million tokens
# Fast mode (6x) is the largest multiplier Anthropic lists, the US region 1.1x. With this
# bound, a rate times both multipliers stays finite: at most 1e8 USD per million tokens.
MAX_MULTIPLIER = 100.0
# LiteLLM's file, which prices every provider's models, is 3.4 MB (v1.110.2); a file far
# larger is not a price table, and is refused before it fills memory.
MAX_FILE_BYTES = 64 * 1024 * 1024
_RATE_KEYS = ("input", "cache_write_5m", "cache_write_1h", "cache_read", "output")
_TIERS = frozenset({"opus", "sonnet", "haiku"})
_SPLIT = re.compile(r"[^a-z0-9]+")
ANTHROPIC = "anthropic"
OPENAI = "openai"
_PROVIDERS = (ANTHROPIC, OPENAI)
_DATE_SUFFIX = re.compile(r"-(?:\d{4}-\d{2}-\d{2}|\d{8})$")
# Qualifiers OpenAI prices as the model they follow (gpt-5-codex and gpt-5-chat-latest at
# gpt-5's rates); mini, nano, pro, max and the like name other models, with other prices.
_SAME_PRICE_WORDS = frozenset({"codex", "latest", "chat", "preview"})
_OPENAI_SHAPE = re.compile(r"^(?:gpt-|o\d|codex-)")
# A file with any of these keys is meant as an mcsim table (LiteLLM's keys are model ids):
# one without `format` is told so, and what else is wrong, not that it holds no LiteLLM rows.
_MCSIM_KEYS = frozenset({"format", "version", "as_of", "models"})
_KINDS: dict[type, str] = {str: "a string", list: "a list", dict: "an object"}


class _Missing:
    """The value of a key a file does not have (a null is a value, and is shown as one)."""


MISSING: Any = _Missing()


class BilledUsage(Protocol):
    """What pricing reads of a call: its tokens, its prompt (for long-context rules) and the
    recorded speed and region. A loaded call's `Usage` has them, and so has a calibrated call
    (mcsim.replay.calibrate.CalCall), so inspect and the replay price calls alike."""

    @property
    def tokens(self) -> Tokens: ...
    @property
    def prompt_tokens(self) -> int: ...
    @property
    def speed(self) -> str | None: ...
    @property
    def inference_geo(self) -> str | None: ...


@dataclass(frozen=True, slots=True)
class Rates:
    """USD per million tokens for each kind of token."""

    input: float
    cache_write_5m: float
    cache_write_1h: float
    cache_read: float
    output: float

    def scaled(self, factor: float) -> Rates:
        return Rates(*(getattr(self, k) * factor for k in _RATE_KEYS))

    def usd_by_kind(self, tokens: Tokens) -> tuple[float, float, float, float, float]:
        """What each kind of a call's tokens costs at these rates, in `Tokens` order."""
        return self.counts_usd(*tokens)

    def counts_usd(
        self, input_tokens: int, cache_write_5m_tokens: int, cache_write_1h_tokens: int,
        cache_read_tokens: int, output_tokens: int,
    ) -> tuple[float, float, float, float, float]:  # fmt: skip
        """`usd_by_kind` of the counts, in `Tokens` order: the one pricing formula (inspect,
        replay, sweep and re-fetches all use it)."""
        per = 1e-6
        return (
            input_tokens * self.input * per,
            cache_write_5m_tokens * self.cache_write_5m * per,
            cache_write_1h_tokens * self.cache_write_1h * per,
            cache_read_tokens * self.cache_read * per,
            output_tokens * self.output * per,
        )

    def usd(self, tokens: Tokens) -> float:
        """What a call's tokens cost at these rates: `usd_by_kind` summed, in its order."""
        return self.usd_of(*tokens)

    def usd_of(
        self, input_tokens: int, cache_write_5m_tokens: int = 0, cache_write_1h_tokens: int = 0,
        cache_read_tokens: int = 0, output_tokens: int = 0,
    ) -> float:  # fmt: skip
        """`usd` of the counts, in `Tokens` order (the replay prices every call it serves
        without making a `Tokens` of each)."""
        input_usd, write_5m, write_1h, read, output = self.counts_usd(
            input_tokens, cache_write_5m_tokens, cache_write_1h_tokens, cache_read_tokens,
            output_tokens,
        )  # fmt: skip
        return input_usd + write_5m + write_1h + read + output


@dataclass(frozen=True, slots=True)
class LongContextRule:
    """Whole-request pricing once the prompt exceeds `above_tokens` (not just the excess)."""

    rates: Rates
    above_tokens: int
    from_s: float | None = None
    until_s: float | None = None

    def applies(self, prompt_tokens: int, timestamp_s: float) -> bool:
        if prompt_tokens <= self.above_tokens:
            return False
        if self.from_s is not None and timestamp_s < self.from_s:
            return False
        return self.until_s is None or timestamp_s < self.until_s


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """One model's prices. Anthropic: family and version ('sonnet', '4.5'); OpenAI: family
    'openai' and the model name as version ('openai', 'gpt-5'), its key in a table."""

    family: str
    version: str
    rates: Rates
    long_context: tuple[LongContextRule, ...] = ()
    speed: dict[str, float] = field(default_factory=dict)  # recorded usage.speed -> factor
    inference_geo: dict[str, float] = field(default_factory=dict)

    @property
    def provider(self) -> str:
        return OPENAI if self.family == OPENAI else ANTHROPIC


@quick_init
@dataclass(frozen=True, slots=True)
class CallCost:
    """The price of one call, by kind of token."""

    input_usd: float
    cache_write_5m_usd: float
    cache_write_1h_usd: float
    cache_read_usd: float
    output_usd: float
    long_context: bool = False

    @property
    def total_usd(self) -> float:
        return (
            self.input_usd
            + self.cache_write_5m_usd
            + self.cache_write_1h_usd
            + self.cache_read_usd
            + self.output_usd
        )


def parse_model(model_id: str) -> tuple[str, str] | None:
    """(family, version) of an Anthropic model id, e.g. ('sonnet', '4.5'); None if unknown."""
    tokens = _SPLIT.split(model_id.lower())
    for i, token in enumerate(tokens):
        if token not in _TIERS:
            continue
        after = _small_numbers(tokens[i + 1 :])
        before = _small_numbers(tokens[:i][::-1])[::-1]
        numbers = after or before
        if not numbers:
            return None
        if len(numbers) > 1 and numbers[1] == "0":
            numbers = numbers[:1]  # claude-opus-4-0 is Opus 4
        return token, ".".join(numbers[:2])
    return None


def openai_name(model_id: str) -> str:
    """An OpenAI id without gateway prefix or date suffix: 'openai/gpt-5-2025-08-07' -> 'gpt-5'."""
    name = model_id.strip().lower().rsplit("/", 1)[-1]
    return _DATE_SUFFIX.sub("", name)


def _openai_key(model_id: str, models: dict[tuple[str, str], ModelPrice]) -> tuple[str, str]:
    """The table key an OpenAI id is priced by: its own name, else its longest listed prefix
    followed only by same-price words; its own name (absent) when neither is listed."""
    words = openai_name(model_id).split("-")
    for end in range(len(words), 0, -1):
        key = (OPENAI, "-".join(words[:end]))
        if key in models:
            return key
        if words[end - 1] not in _SAME_PRICE_WORDS:
            break
    return (OPENAI, "-".join(words))


def _small_numbers(tokens: list[str]) -> list[str]:
    out = []
    for token in tokens:
        if not (token.isdigit() and len(token) <= 2):
            break
        out.append(str(int(token)))
    return out[:2]


@dataclass(frozen=True)
class PriceTable:
    """Prices by (family, version) or ('openai', model name), with the table's version
    (one name per merged file, e.g. 'anthropic-list-2026-08+openai-list-2026-12')."""

    version: str
    as_of: str
    models: dict[tuple[str, str], ModelPrice]
    _by_id: dict[str, ModelPrice | None] = field(default_factory=dict, compare=False, repr=False)

    def lookup(self, model_id: str) -> ModelPrice | None:
        if model_id not in self._by_id:  # parsing ids is slow next to pricing a call
            parsed = parse_model(model_id)
            key = parsed or _openai_key(model_id, self.models)
            self._by_id[model_id] = self.models.get(key)
        return self._by_id[model_id]

    def provider(self, model_id: str) -> str | None:
        """'anthropic' or 'openai': the provider of the row that prices `model_id`, else the
        one its id's shape names (claude-..., gpt-..., o3, codex-...); None if neither."""
        price = self.lookup(model_id)
        if price is not None:
            return price.provider
        if parse_model(model_id):
            return ANTHROPIC
        return OPENAI if _OPENAI_SHAPE.match(openai_name(model_id)) else None

    def cost(self, model_id: str, usage: BilledUsage, timestamp_s: float) -> CallCost | None:
        """Price one call's usage; None when the model is not in the table."""
        price = self.lookup(model_id)
        if price is None:
            return None
        return price_usage(price, usage, timestamp_s)

    def merged(self, override: PriceTable) -> PriceTable:
        return PriceTable(
            f"{self.version}+{override.version}",
            max(self.as_of, override.as_of),
            {**self.models, **override.models},
        )


def base_rates_up_to(price: ModelPrice) -> float:
    """The prompt size up to which no long-context rule applies: there, with no speed or
    region multiplier, `rates_for` gives `price.rates` (the replay's fast path)."""
    return min((rule.above_tokens for rule in price.long_context), default=float("inf"))


def rates_for(
    price: ModelPrice,
    prompt_tokens: int,
    timestamp_s: float,
    speed: str | None = None,
    inference_geo: str | None = None,
) -> tuple[Rates, bool]:
    """The rates that apply to one call, and whether the long-context rule applied."""
    rates = price.rates
    long_context = False
    for rule in price.long_context:
        if rule.applies(prompt_tokens, timestamp_s):
            rates, long_context = rule.rates, True
            break
    factor = 1.0
    if speed is not None:
        factor *= price.speed.get(speed, 1.0)
    if inference_geo is not None:
        factor *= price.inference_geo.get(inference_geo, 1.0)
    if factor != 1.0:
        rates = rates.scaled(factor)
    return rates, long_context


def price_usage(price: ModelPrice, usage: BilledUsage, timestamp_s: float) -> CallCost:
    rates, long_context = rates_for(
        price, usage.prompt_tokens, timestamp_s, usage.speed, usage.inference_geo
    )
    return CallCost(*rates.usd_by_kind(usage.tokens), long_context=long_context)


# ---------------------------------------------------------------- reading tables


SHIPPED_TABLES = ("anthropic.json", "openai.json")


def default_table() -> PriceTable:
    """The list-price tables shipped with this version of mcsim, one per provider, merged."""
    folder = resources.files("mcsim.accounting.prices")
    tables = [parse_table(orjson.loads(folder.joinpath(n).read_bytes()), n) for n in SHIPPED_TABLES]
    table = tables[0]
    for other in tables[1:]:
        table = table.merged(other)
    return table


def load_table(path: Path | None) -> PriceTable:
    """The default table, with `path` (mcsim format or LiteLLM's JSON) laid over it."""
    table = default_table()
    if path is None:
        return table
    raw = read_input_file(path, MAX_FILE_BYTES, "price file", PriceTableError)
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise PriceTableError(f"{path}: not valid JSON ({exc})") from None
    if isinstance(data, dict) and not _MCSIM_KEYS.isdisjoint(data):
        override = parse_table(data, str(path))
    else:
        from mcsim.accounting.prices.litellm import import_litellm

        override = import_litellm(data, str(path))
    return table.merged(override)


def parse_table(data: Any, source: str) -> PriceTable:
    """Validate and read a table in mcsim's format; errors name the file and the key."""
    if not isinstance(data, dict):
        raise PriceTableError(f"{source}: a price table is a JSON object")
    if "format" in data and data["format"] != FORMAT:
        raise PriceTableError(
            f"{source}: key 'format' must be {FORMAT!r}, not {shown(data['format'])}"
        )
    version = _req(data, "version", str, source)
    as_of = _req(data, "as_of", str, source)
    rows = _req(data, "models", list, source)
    models: dict[tuple[str, str], ModelPrice] = {}
    for i, row in enumerate(rows):
        where = f"models[{i}]"
        if not isinstance(row, dict):
            raise PriceTableError(f"{source}: key '{where}' must be an object, not {shown(row)}")
        family, versions, label = _row_models(row, source, where)
        rates = _rates(row, label, source, where)
        mult = _opt(row, "multipliers", dict, source, where) or {}
        rules = _opt(row, "long_context", list, source, where) or []
        # Checked once per row, whichever versions they apply to.
        checked_rules = [
            _long_context(rule, label, versions, source, f"{where}.long_context[{j}]")
            for j, rule in enumerate(rules)
        ]
        factor_family = "" if family == OPENAI else family
        speed = _factors(mult.get("speed"), factor_family, source, f"{where}.multipliers.speed")
        geo = _factors(
            mult.get("inference_geo"), factor_family, source, f"{where}.multipliers.inference_geo"
        )
        for model_version in versions:
            models[(family, model_version)] = ModelPrice(
                family,
                model_version,
                rates,
                tuple(rule for applies, rule in checked_rules if model_version in applies),
                {label: f[model_version] for label, f in speed.items() if model_version in f},
                {label: f[model_version] for label, f in geo.items() if model_version in f},
            )
    if "format" not in data:  # said last: what else is wrong matters more
        raise PriceTableError(f"{source}: key 'format' is missing: it must be {FORMAT!r}")
    return PriceTable(version, as_of, models)


def _row_models(row: dict[str, Any], source: str, where: str) -> tuple[str, list[str], str]:
    """A row's family ('openai' for OpenAI rows), the versions or model names it prices, and
    the model label its errors give."""
    provider = row.get("provider", ANTHROPIC)
    if provider not in _PROVIDERS:
        raise PriceTableError(
            f"{source}: key '{where}.provider' must be anthropic or openai, not {shown(provider)}"
        )
    if provider == OPENAI:
        names = _req(row, "models", list, source, where)
        if not names or not all(isinstance(n, str) and openai_name(n) for n in names):
            raise PriceTableError(
                f"{source}: key '{where}.models' must list model names like 'gpt-5'"
            )
        label = ", ".join(names)
        for key in ("family", "versions"):  # an Anthropic row's keys: which would it price?
            if key in row:
                raise PriceTableError(
                    f"{source}: key '{where}.{key}' of model '{escaped(label, 80)}' is for "
                    "Anthropic rows; an OpenAI row names its models in 'models' only"
                )
        return OPENAI, [openai_name(n) for n in names], label
    if "models" in row:
        raise PriceTableError(
            f'{source}: key \'{where}.models\' is for OpenAI rows ("provider": "openai"); '
            "an Anthropic row names 'family' and 'versions'"
        )
    family = _req(row, "family", str, source, where)
    if family not in _TIERS:
        raise PriceTableError(
            f"{source}: key '{where}.family' must be one of opus, sonnet, haiku, "
            f"not {shown(family)}"
        )
    versions = _req(row, "versions", list, source, where)
    if not all(isinstance(v, str) for v in versions):
        raise PriceTableError(f"{source}: key '{where}.versions' must list strings like '4.5'")
    return family, versions, family


def _req(obj: dict[str, Any], key: str, kind: type, source: str, where: str = "") -> Any:
    """`obj[key]`, which must be of `kind`: the error says whether it is missing or what it is."""
    name = f"{where}.{key}" if where else key
    if key not in obj:
        raise PriceTableError(f"{source}: key '{name}' is missing: it must be {_KINDS[kind]}")
    value = obj[key]
    if not isinstance(value, kind):
        raise PriceTableError(f"{source}: key '{name}' must be {_KINDS[kind]}, not {shown(value)}")
    return value


def _opt(obj: dict[str, Any], key: str, kind: type, source: str, where: str) -> Any:
    """`obj[key]` if the key is there and not null (else None), which must be of `kind`."""
    return None if obj.get(key) is None else _req(obj, key, kind, source, where)


def is_rate(value: object, per_tokens: float = 1e6) -> TypeGuard[float]:
    """Whether `value`, in USD per `per_tokens` tokens, is a price: a number from 0 to
    `MAX_RATE` per million tokens. The range test also refuses NaN and the infinities."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return 0 <= value <= MAX_RATE * per_tokens / 1e6


def value_error(source: str, key: str, model: str, value: Any, allowed: str) -> PriceTableError:
    """The one-line error for a price or multiplier mcsim refuses: file, key, model, value
    (`MISSING`: the key is not there)."""
    # A model id whole: LiteLLM's Bedrock ones run to 63 characters.
    named = f"{source}: key '{key}' of model '{escaped(model, 80)}'"
    if value is MISSING:
        return PriceTableError(f"{named} is missing: it must be {allowed}")
    return PriceTableError(f"{named} must be {allowed}, not {shown(value)}")


def _rates(obj: dict[str, Any], family: str, source: str, where: str) -> Rates:
    values = []
    for key in _RATE_KEYS:
        value = obj.get(key, MISSING)
        if not is_rate(value):
            allowed = f"a number from 0 to {MAX_RATE:,g} (USD per million tokens)"
            raise value_error(source, f"{where}.{key}", family, value, allowed)
        values.append(float(value))
    return Rates(*values)


def _long_context(
    rule: Any, family: str, versions: list[str], source: str, where: str
) -> tuple[list[str], LongContextRule]:
    """A row's long-context rule and the versions (or model names) it applies to: those it
    lists, else all the row's `versions`."""
    if not isinstance(rule, dict):
        raise PriceTableError(f"{source}: key '{where}' must be an object, not {shown(rule)}")
    above = rule.get("above_tokens", MISSING)
    if isinstance(above, bool) or not isinstance(above, int) or above < 1:
        allowed = "a positive integer (the prompt tokens above which the rule applies)"
        raise value_error(source, f"{where}.above_tokens", family, above, allowed)
    own = _opt(rule, "versions", list, source, where) or _opt(rule, "models", list, source, where)
    return own or versions, LongContextRule(
        _rates(rule, family, source, where),
        above,
        _date(rule.get("from"), source, f"{where}.from"),
        _date(rule.get("until"), source, f"{where}.until"),
    )


def _date(value: Any, source: str, where: str) -> float | None:
    if value is None:
        return None
    try:
        return datetime.fromisoformat(str(value)).replace(tzinfo=UTC).timestamp()
    except ValueError:
        raise PriceTableError(f"{source}: key '{where}' must be a date YYYY-MM-DD") from None


def _factors(value: Any, family: str, source: str, where: str) -> dict[str, dict[str, float]]:
    """{recorded value: {model version: factor}}, every factor checked."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise PriceTableError(f"{source}: key '{where}' must be an object, not {shown(value)}")
    out = {}
    for label, per_version in value.items():
        if not isinstance(per_version, dict):
            raise PriceTableError(
                f"{source}: key '{where}.{label}' must map versions to factors, "
                f"not {shown(per_version)}"
            )
        for version, factor in per_version.items():
            number = isinstance(factor, int | float) and not isinstance(factor, bool)
            if not (number and 0 < factor <= MAX_MULTIPLIER):  # also refuses NaN, infinities
                allowed = f"a number above 0 and at most {MAX_MULTIPLIER:g}"
                model = f"{family} {version}".lstrip()
                raise value_error(source, f"{where}.{label}", model, factor, allowed)
        out[str(label)] = {str(version): float(f) for version, f in per_version.items()}
    return out
