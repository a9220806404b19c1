"""Which models can use a server-side mechanism: API context editing, cache edits.

The lists, with their sources and the date they were read, are one data file shipped with
the package (`model_support.json`); docs/domain.md#model-support says what is known. A layer
whose mechanism the call's model cannot use does not apply on that call, and the run's
notes name the models (mcsim.replay.run.ReplayReport.layer_notes).

A model is judged by family and version, whatever the spelling (`claude-sonnet-4-5-20250929`,
`us.anthropic.claude-opus-4-1-20250805-v1:0`, `claude-opus-4-7[1m]`), as prices are. Only
models mcsim can name as Anthropic's are judged: another provider's model replayed on
Anthropic's cache (`provider: anthropic`, a what-if) is taken to be one that supports it.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

import orjson

from mcsim.accounting.prices import parse_model

FORMAT = "mcsim-model-support/1"
CONTEXT_EDITING = "context_editing"
CACHE_EDITING = "cache_editing"


@dataclass(frozen=True)
class Feature:
    """One mechanism's supported models, and where the list comes from."""

    name: str
    what: str
    kinds: tuple[str, ...]
    as_of: str
    sources: tuple[str, ...]  # URLs
    models: tuple[str, ...]  # as the sources spell them
    assumed: str | None = None  # when the list is not public: what is taken instead
    # (family, version) of each listed model mcsim can parse; the others by name
    parsed: frozenset[tuple[str, str]] = frozenset()
    names: frozenset[str] = frozenset()

    def supports(self, model: str) -> bool:
        parsed = parse_model(model)
        if parsed is not None:
            return parsed in self.parsed
        name = model.strip().lower()
        return any(_is_named(name, listed) for listed in self.names) or not name.startswith(
            "claude-"
        )

    def listed(self) -> str:
        """The supported models in words, for a note: 'Opus 4, 4.1, ...; Sonnet 4, ...'."""
        by_family: dict[str, list[str]] = {}
        for family, version in sorted(self.parsed, key=_order):
            by_family.setdefault(family, []).append(version)
        words = [f"{f.capitalize()} {', '.join(v)}" for f, v in by_family.items()]
        return "; ".join(words + sorted(self.names))


# What may follow a listed name in the same model's id: a date, or a variant (`[1m]`, a
# gateway's `@date` or `:0`, Bedrock's `-v1`); not more of a version (`-1`, `0`).
_AFTER_NAME = re.compile(r"-\d{8}(?!\d)|[\[@:]|-v\d")


def _is_named(name: str, listed: str) -> bool:
    """Whether `name` is the model `listed` names: the name itself, or it with a date or a
    variant after it (claude-fable-5-20260301), not a later version (claude-fable-5-1)."""
    if not name.startswith(listed):
        return False
    rest = name[len(listed) :]
    return not rest or _AFTER_NAME.match(rest) is not None


def _order(key: tuple[str, str]) -> tuple[str, tuple[int, ...]]:
    family, version = key
    return family, tuple(int(x) for x in version.split("."))


def _feature(name: str, raw: dict[str, Any]) -> Feature:
    models = tuple(raw["models"])
    parsed = {parse_model(m) for m in models}
    names = frozenset(m.lower() for m in models if parse_model(m) is None)
    return Feature(
        name,
        raw["what"],
        tuple(raw["kinds"]),
        raw["as_of"],
        tuple(s["url"] for s in raw["sources"]),
        models,
        raw.get("assumed"),
        frozenset(p for p in parsed if p is not None),
        names,
    )


@functools.cache
def features() -> dict[str, Feature]:
    """The shipped lists, by feature name."""
    data = orjson.loads(resources.files("mcsim.replay").joinpath("model_support.json").read_bytes())
    if data.get("format") != FORMAT:
        raise ValueError(f"model_support.json: not {FORMAT}")
    return {name: _feature(name, raw) for name, raw in data["features"].items()}


@functools.lru_cache(maxsize=1024)
def supports(feature: str, model: str) -> bool:
    """Whether `model` can use `feature` (a key of `features()`)."""
    return features()[feature].supports(model)
