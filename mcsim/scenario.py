"""Policy files: YAML in, validated scenarios out (a policy stack plus cache TTL and tool lists).

    defaults:                 # optional; every policy inherits and may override these
      ttl: recorded           # 5m | 1h | recorded
      compactable_tools: [Read, Bash, Grep, Glob, WebSearch, WebFetch, Edit, Write]
      exclude_tools: []
      main_thread_only: true
    policies:
      - {name: claude-code, stack: [{kind: time_based_microcompact}, {kind: cached_microcompact}]}
      - {name: api, kind: clear_tool_uses, trigger_input_tokens: 100000, keep: 3}

Every error names the file, the policy and the key, and is raised before anything runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from mcsim.errors import UsageError
from mcsim.policies import REGISTRY, Param, Policy, can_clear

BASELINE = "baseline"
TTLS = ("5m", "1h", "recorded")
DEFAULT_COMPACTABLE = ("Read", "Bash", "Grep", "Glob", "WebSearch", "WebFetch", "Edit", "Write")
_SCENARIO_KEYS = ("ttl", "compactable_tools", "exclude_tools", "main_thread_only")


class PolicyFileError(UsageError):
    """A policy file that cannot be used; the message names file, policy and key."""


@dataclass(frozen=True)
class Layer:
    kind: str
    values: tuple[tuple[str, Any], ...]  # validated parameter values, defaults filled in

    def build(self) -> Policy:
        return REGISTRY[self.kind](**dict(self.values))

    def describe(self) -> str:
        args = ", ".join(f"{k}={_show(v)}" for k, v in self.values)
        return f"{self.kind}({args})"


@dataclass(frozen=True)
class Scenario:
    """One named policy (a stack of layers) with the cache TTL and tool lists it runs under."""

    name: str
    layers: tuple[Layer, ...]
    ttl: str = "recorded"
    compactable_tools: frozenset[str] = frozenset(DEFAULT_COMPACTABLE)
    exclude_tools: frozenset[str] = frozenset()
    main_thread_only: bool = True

    @property
    def prunes(self) -> bool:
        """Whether any layer can clear anything."""
        return any(can_clear(REGISTRY[layer.kind]) for layer in self.layers)

    def build(self) -> list[Policy]:
        return [layer.build() for layer in self.layers]

    def describe(self) -> str:
        return " + ".join(layer.describe() for layer in self.layers) + f" @ttl={self.ttl}"


def baseline(defaults: Scenario | None = None, ttl: str | None = None) -> Scenario:
    """The no-pruning scenario, under the file's defaults."""
    base = defaults or Scenario(BASELINE, ())
    return Scenario(
        BASELINE,
        (Layer("none", ()),),
        ttl or base.ttl,
        base.compactable_tools,
        base.exclude_tools,
        base.main_thread_only,
    )


def _show(value: Any) -> str:
    if isinstance(value, list | tuple):
        return "[" + ",".join(map(str, value)) + "]"
    return str(value)


def load_policy_file(path: Path) -> list[Scenario]:
    """Scenarios from a policy file; the baseline first (added when the file does not name it)."""
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise PolicyFileError(f"{path}: cannot read policy file ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise PolicyFileError(f"{path}:{where} not valid YAML") from None
    return parse_policies(data, str(path))


def parse_policies(data: Any, source: str) -> list[Scenario]:
    if not isinstance(data, dict):
        raise PolicyFileError(f"{source}: a policy file is a mapping with a 'policies' list")
    unknown = set(data) - {"defaults", "policies"}
    if unknown:
        raise PolicyFileError(
            f"{source}: unknown top-level key '{sorted(unknown)[0]}' (allowed: defaults, policies)"
        )
    defaults_raw = data.get("defaults") or {}
    if not isinstance(defaults_raw, dict):
        raise PolicyFileError(f"{source}: 'defaults' must be a mapping")
    for key in defaults_raw:
        if key not in _SCENARIO_KEYS:
            raise PolicyFileError(
                f"{source}: defaults: unknown key '{key}' (allowed: {', '.join(_SCENARIO_KEYS)})"
            )
    defaults = _scenario_settings(defaults_raw, Scenario(BASELINE, ()), f"{source}: defaults")
    policies = data.get("policies")
    if not isinstance(policies, list) or not policies:
        raise PolicyFileError(f"{source}: 'policies' must be a non-empty list")
    scenarios = [baseline(defaults)]
    names = {BASELINE}
    for i, raw in enumerate(policies):
        scenario = _policy(raw, defaults, f"{source}: policies[{i}]")
        if scenario.name == BASELINE:
            if scenario.prunes:
                raise PolicyFileError(
                    f"{source}: policy 'baseline': the name is reserved for kind none"
                )
            scenarios[0] = scenario
            continue
        if scenario.name in names:
            raise PolicyFileError(f"{source}: policy '{scenario.name}': name used twice")
        names.add(scenario.name)
        scenarios.append(scenario)
    return scenarios


def _policy(raw: Any, defaults: Scenario, where: str) -> Scenario:
    if not isinstance(raw, dict):
        raise PolicyFileError(f"{where}: each policy is a mapping with a name and a kind or stack")
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise PolicyFileError(f"{where}: key 'name': a non-empty string is required")
    where = f"{where.split(': ')[0]}: policy '{name}'"
    if ("kind" in raw) == ("stack" in raw):
        raise PolicyFileError(f"{where}: give exactly one of 'kind' or 'stack'")
    settings = {k: v for k, v in raw.items() if k in _SCENARIO_KEYS}
    scenario = _scenario_settings(settings, defaults, where)
    if "stack" in raw:
        stack = raw["stack"]
        extra = set(raw) - {"name", "stack", *_SCENARIO_KEYS}
        if extra:
            raise PolicyFileError(f"{where}: unknown key '{sorted(extra)[0]}' beside a stack")
        if not isinstance(stack, list) or not stack:
            raise PolicyFileError(f"{where}: key 'stack': a non-empty list of kinds is required")
        layers = []
        for j, layer in enumerate(stack):
            if not isinstance(layer, dict):
                raise PolicyFileError(f"{where}: stack[{j}]: a mapping with a 'kind' is required")
            layers.append(_layer(layer, f"{where}: stack[{j}]"))
    else:
        layer_raw = {k: v for k, v in raw.items() if k not in ("name", *_SCENARIO_KEYS)}
        layers = [_layer(layer_raw, where)]
    return Scenario(
        name,
        tuple(layers),
        scenario.ttl,
        scenario.compactable_tools,
        scenario.exclude_tools,
        scenario.main_thread_only,
    )


def _layer(raw: dict[str, Any], where: str) -> Layer:
    kind = raw.get("kind")
    if kind not in REGISTRY:
        allowed = ", ".join(sorted(REGISTRY))
        raise PolicyFileError(f"{where}: key 'kind': unknown kind {kind!r} (allowed: {allowed})")
    cls = REGISTRY[kind]
    spec = {p.name: p for p in cls.params}
    for key in raw:
        if key != "kind" and key not in spec:
            allowed = ", ".join(spec) or "none"
            raise PolicyFileError(
                f"{where}: key '{key}': not a parameter of {kind} (allowed: {allowed})"
            )
    values = tuple((p.name, check_value(p, raw.get(p.name, p.default), where)) for p in cls.params)
    return Layer(kind, values)


def check_value(param: Param, value: Any, where: str) -> Any:
    """A parameter value validated against its declaration; errors name `where` and the key."""
    bad = f"{where}: key '{param.name}': "
    if value is None:
        if param.optional or param.default is None:
            return None
        raise PolicyFileError(bad + "a value is required")
    if value in param.choices:
        return value
    kind = param.kind
    if kind is bool:
        if not isinstance(value, bool):
            raise PolicyFileError(bad + f"must be true or false, not {value!r}")
        return value
    if kind is list:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise PolicyFileError(bad + "must be a list of tool names")
        return tuple(value)
    if kind in (int, float):
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        if not ok or (kind is int and value != int(value)):
            allowed = "a whole number" if kind is int else "a number"
            if param.choices:
                allowed += " or " + " or ".join(map(repr, param.choices))
            raise PolicyFileError(bad + f"must be {allowed}, not {value!r}")
        if param.minimum is not None and value < param.minimum:
            raise PolicyFileError(bad + f"must be at least {param.minimum:g}, not {value!r}")
        return kind(value)
    raise PolicyFileError(bad + f"unsupported value {value!r}")


def _scenario_settings(raw: dict[str, Any], base: Scenario, where: str) -> Scenario:
    ttl = raw.get("ttl", base.ttl)
    if ttl not in TTLS:
        raise PolicyFileError(f"{where}: key 'ttl': must be one of 5m, 1h, recorded, not {ttl!r}")
    tools = {}
    for key in ("compactable_tools", "exclude_tools"):
        value = raw.get(key, getattr(base, key))
        if not isinstance(value, list | frozenset) or not all(isinstance(v, str) for v in value):
            raise PolicyFileError(f"{where}: key '{key}': must be a list of tool names")
        tools[key] = frozenset(value)
    main_only = raw.get("main_thread_only", base.main_thread_only)
    if not isinstance(main_only, bool):
        raise PolicyFileError(f"{where}: key 'main_thread_only': must be true or false")
    return Scenario(
        base.name,
        base.layers,
        ttl,
        tools["compactable_tools"],
        tools["exclude_tools"],
        main_only,
    )
