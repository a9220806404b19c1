"""Policy files: YAML in, validated scenarios out (a policy stack plus cache TTL and tool lists).

    defaults:                 # optional; every policy inherits and may override these
      ttl: recorded           # 5m | 1h | 24h | recorded, or {main: 1h, subagent: 5m}
      keep_warm: null         # or {interval_minutes: 4.5, max_idle_minutes: 30} (keep_warm.py)
      compactable_tools: [class:read, class:search, class:shell, class:web, class:edit]
      exclude_tools: []       # tool names, or classes of tools (class:<class>)
      main_thread_only: true
    policies:
      - {name: claude-code, stack: [{kind: time_based_microcompact}, {kind: cached_microcompact}]}
      - {name: api, kind: clear_tool_uses, trigger_input_tokens: 100000, keep: 3}

Every error names the file, the policy and the key, and is raised before anything runs.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import Node, ScalarNode

from mcsim.accounting.recorded import TTL_SECONDS
from mcsim.errors import UsageError
from mcsim.ingest.loaders.jsonl import read_input_file
from mcsim.model import ToolClass
from mcsim.replay.keep_warm import THREAD_KINDS, KeepWarm, parse_keep_warm
from mcsim.replay.policies import CLASS_PREFIX, REGISTRY, Param, Policy, can_clear
from mcsim.replay.providers import PROVIDERS, rules_for
from mcsim.text import escaped, shown

BASELINE = "baseline"
BASELINE_PREFIX = "baseline:"  # the baseline under a policy file's own cache settings
RECORDED = "recorded"  # the recording's rows in every table: no policy may take the name
NAME_MAX_CHARS = 200
TTLS = ("5m", "1h", "24h", "recorded")
PROVIDER_CHOICES = ("recorded", *PROVIDERS)
# Claude Code's list (docs/domain.md#what-can-be-cleared: Read, Bash, Grep, Glob, WebSearch,
# WebFetch, Edit, Write) by class, so every harness's tools of those kinds are in it: results
# that can be obtained again. Claude Code's own tools of those classes that its list leaves
# out are CLAUDE_CODE_LEFT_OUT (the presets that mirror Claude Code exclude them by name).
DEFAULT_COMPACTABLE = ("class:read", "class:search", "class:shell", "class:web", "class:edit")
CLAUDE_CODE_LEFT_OUT = (
    "NotebookRead", "LS", "MultiEdit", "NotebookEdit",
    "BashOutput", "KillShell", "KillBash", "TaskOutput", "TaskStop",
)  # fmt: skip
_SCENARIO_KEYS = (
    "ttl", "provider", "compactable_tools", "exclude_tools", "main_thread_only", "keep_warm",
)  # fmt: skip

# A policy file is a few hundred bytes; these bounds make a hostile one cheap to refuse.
MAX_FILE_BYTES = 50_000  # 40 times all.yaml; pure-Python YAML parses 80 kB a second
MAX_DEPTH = 20  # a policy file nests 7 levels: file, policies, policy, stack, layer, list, name
MAX_NODES = 5_000  # all.yaml has 113; parsing stops here, so a small hostile file stays quick
MAX_ALIAS_EXPANSION = 10_000  # values and characters that aliases may repeat, in all
MAX_NUMBER_CHARS = 40  # parameters stay under Param.maximum; longer digits are an attack


class PolicyFileError(UsageError):
    """A policy file that cannot be used; the message names file, policy and key."""


@dataclass(frozen=True)
class Layer:
    kind: str
    values: tuple[tuple[str, Any], ...]  # validated parameter values, defaults filled in

    def build(self) -> Policy:
        return REGISTRY[self.kind](**dict(self.values))

    def __repr__(self) -> str:
        # The dataclass's own text (the scenario's keys are made of it: Scenario.fields_key),
        # without its guard against a layer holding itself, which none can.
        return f"Layer(kind={self.kind!r}, values={self.values!r})"

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
    provider: str = "recorded"  # whose prompt cache: as recorded, or a providers/ name
    # The TTL of the thread kinds whose TTL is not `ttl` (`ttl: {main: 1h, subagent: 5m}`),
    # sorted by kind; `ttl` is the main thread's and every kind's not listed here
    ttl_by_kind: tuple[tuple[str, str], ...] = ()
    keep_warm: KeepWarm | None = None  # pings in idle gaps (keep_warm.py)

    def ttl_for(self, kind: str) -> str:
        """The TTL the threads of `kind` (a ThreadKind value) replay under."""
        for listed, ttl in self.ttl_by_kind:
            if listed == kind:
                return ttl
        return self.ttl

    def keep_warm_for(self, kind: str) -> KeepWarm | None:
        """The pings the threads of `kind` get (None: none)."""
        warm = self.keep_warm
        return warm if warm is not None and warm.applies(kind) else None

    def serving(self, kind: str) -> tuple[str, str, KeepWarm | None]:
        """What the cache that serves a thread of `kind` depends on: its TTL, the provider and
        its pings. Two scenarios equal here replay that thread's unpruned calls alike."""
        return self.ttl_for(kind), self.provider, self.keep_warm_for(kind)

    @property
    def ttl_text(self) -> str:
        """`1h`, or per thread kind `main:1h,subagent:5m`."""
        if not self.ttl_by_kind:
            return self.ttl
        return ",".join(f"{k}:{self.ttl_for(k)}" for k in THREAD_KINDS)

    @property
    def as_recorded(self) -> bool:
        """Whether the cache is the recording's: TTL and provider as recorded, no pings."""
        return (
            self.ttl == RECORDED
            and not self.ttl_by_kind
            and self.provider == RECORDED
            and self.keep_warm is None
        )

    @cached_property  # asked for every thread of every session: worked out once
    def prunes(self) -> bool:
        """Whether any layer can clear anything."""
        return any(can_clear(REGISTRY[layer.kind]) for layer in self.layers)

    @cached_property
    def fields_key(self) -> tuple[tuple[str, str], ...]:
        """Every field of the scenario by name, each value as stable text (a set sorted; a
        parameter may be a list, unhashable): what a replay under it depends on. Read from the
        dataclass's own fields, so a field added to Scenario is in every key at once."""
        return tuple((f.name, _stable(getattr(self, f.name))) for f in dataclasses.fields(self))

    @cached_property
    def decision_key(self) -> tuple[tuple[str, str], ...]:
        """What the policies' decisions on a thread depend on: all of the scenario but its
        name and TTL (policies never see the cache; the provider says whether cache edits
        exist). simulate.py shares decisions by it."""
        # TTLs and keep-warm pings are left out on purpose: policies never see the cache, and
        # they decide on the recorded gaps, which pings do not shorten (keep_warm.py).
        return tuple(kv for kv in self.fields_key if kv[0] not in _NOT_DECISIONS)

    def build(self) -> list[Policy]:
        return [layer.build() for layer in self.layers]

    def describe(self) -> str:
        text = " + ".join(layer.describe() for layer in self.layers) + f" @ttl={self.ttl_text}"
        if self.provider != "recorded":
            text += f" @provider={self.provider}"
        if self.keep_warm is not None:
            text += f" @keep_warm={self.keep_warm.describe()}"
        return text


_NOT_DECISIONS = ("name", "ttl", "ttl_by_kind", "keep_warm")


def _stable(value: Any) -> str:
    """A value as text that is the same in every process (a set's order is not)."""
    if isinstance(value, frozenset | set):
        return repr(sorted(value, key=repr))
    return repr(value)


def baseline(defaults: Scenario | None = None, ttl: str | None = None) -> Scenario:
    """The no-pruning scenario under `defaults`' cache settings (with no argument: the cache
    as recorded, the baseline every "vs baseline" figure is against)."""
    base = defaults or Scenario(BASELINE, ())
    plain = replace(base, name=BASELINE, layers=(Layer("none", ()),))
    return plain if ttl is None else replace(plain, ttl=ttl, ttl_by_kind=())


def is_baseline(name: str) -> bool:
    """Whether a run's name is one of the no-pruning baselines: `baseline` (the cache as
    recorded) or `baseline:...` (the cache a policy file's defaults set)."""
    return name == BASELINE or name.startswith(BASELINE_PREFIX)


def cache_settings(scenario: Scenario) -> str:
    """The cache a scenario runs under, in words: 'cache as recorded', 'TTL 1h', 'TTL 5m on
    openai's cache'. Every "vs baseline" figure names its baseline's with this."""
    recorded_ttl = scenario.ttl == RECORDED and not scenario.ttl_by_kind
    ttl = "TTL as recorded" if recorded_ttl else f"TTL {scenario.ttl_text}"
    warm = "" if scenario.keep_warm is None else f", pings {scenario.keep_warm.describe()}"
    if scenario.provider != RECORDED:
        return f"{ttl} on {scenario.provider}'s cache{warm}"
    return ("cache as recorded" if recorded_ttl else ttl) + warm


def _file_baseline(base: Scenario) -> Scenario | None:
    """The no-pruning run under the cache a policy file's defaults (or its own `baseline`
    policy) set, when that is not the recorded one: `baseline:ttl=1h`. Shown beside the
    baseline so what the TTL alone changes is seen apart from what pruning saves; the
    baseline itself stays the cache as recorded, so a policy's "vs baseline" figures are the
    same in any file, in a sweep and in a report."""
    pairs = (("ttl", base.ttl_text), ("provider", base.provider))
    changed = [(k, v) for k, v in pairs if v != RECORDED]
    if base.keep_warm is not None:
        changed.append(("keep_warm", base.keep_warm.describe().replace(" ", "_")))
    if not changed:
        return None
    name = BASELINE_PREFIX + ",".join(f"{k}={v}" for k, v in changed)
    return replace(base, name=name)


def _show(value: Any) -> str:
    if isinstance(value, list | tuple):
        return "[" + ",".join(map(str, value)) + "]"
    return str(value)


def load_policy_file(path: Path) -> list[Scenario]:
    """Scenarios from a policy file; the baseline first (added when the file does not name it)."""
    raw = read_input_file(path, MAX_FILE_BYTES, "policy file", PolicyFileError)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PolicyFileError(
            f"{path}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start})"
        ) from None
    try:
        data = yaml.load(text, Loader=_BoundedLoader)
    except yaml.YAMLError as exc:
        raise PolicyFileError(f"{path}: {_yaml_problem(exc, text)}") from None
    if data is None:
        raise PolicyFileError(f"{path}: empty; a policy file is a mapping with a 'policies' list")
    return parse_policies(data, str(path))


class _LimitError(yaml.YAMLError):
    """A bound of the loader that the file goes past, at a line."""

    def __init__(self, event: yaml.Event | Node, problem: str) -> None:
        super().__init__(problem)
        mark = event.start_mark
        self.line = mark.line + 1 if mark is not None else None
        self.problem = problem


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader, bounded: values, nesting depth and alias expansion are counted as
    the document is composed, so a billion-laughs file or 20,000 brackets stop at the first
    node past a limit instead of exhausting memory, the stack or seconds of parsing, and
    numbers too long to be a parameter are refused before Python converts them.

    Depth and size count aliases expanded (an alias stands for its anchor's whole subtree),
    since that is what the policy code walks; an alias to a scalar or a short list is cheap.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.nodes = 0  # composed so far, aliases counted once
        self.depth = 0  # of the node being composed
        self.deepest = 0  # the deepest level reached so far, aliases expanded
        self.weight = 0  # nodes and scalar characters composed so far, aliases expanded
        self.repeated = 0  # the part of `weight` that aliases added
        self.extent: dict[str, tuple[int, int]] = {}  # anchor -> (weight, levels below it)

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        self.check_event()  # parses the next event into current_event (peek_event is untyped)
        event: yaml.Event = self.current_event
        self.nodes += 1
        if isinstance(event, yaml.AliasEvent):
            name = event.anchor or ""
            if name in self.anchors and name not in self.extent:
                raise _LimitError(event, f"alias *{escaped(name)} is inside its own anchor")
            weight, height = self.extent.get(name, (0, 0))
            self.weight += weight
            self.repeated += weight
            self.deepest = max(self.deepest, self.depth + 1 + height)
            self._check(event)
            return super().compose_node(parent, index)
        self.depth += 1
        start_weight, outer_deepest = self.weight, self.deepest
        self.deepest = self.depth
        self.weight += 1 + len(event.value if isinstance(event, yaml.ScalarEvent) else "")
        self._check(event)
        node = super().compose_node(parent, index)
        anchor = getattr(event, "anchor", None)
        if anchor is not None:
            self.extent[anchor] = (self.weight - start_weight, self.deepest - self.depth)
        self.depth -= 1
        self.deepest = max(outer_deepest, self.deepest)
        return node

    def _check(self, event: yaml.Event) -> None:
        if self.nodes > MAX_NODES:
            problem = f"more than {MAX_NODES:_} values (a policy file has a few hundred)"
            raise _LimitError(event, problem)
        if self.deepest > MAX_DEPTH:
            problem = (
                f"nested deeper than {MAX_DEPTH} levels, aliases expanded (a policy file needs 7)"
            )
            raise _LimitError(event, problem)
        if self.repeated > MAX_ALIAS_EXPANSION:
            problem = (
                f"aliases repeat more than {MAX_ALIAS_EXPANSION:_} values and characters "
                "(share a list or mapping, do not multiply one)"
            )
            raise _LimitError(event, problem)

    def construct_object(self, node: Node, deep: bool = False) -> Any:
        # PyYAML's scalar constructors raise plain Python errors on values their tag cannot
        # hold (`!!int x`, `!!bool x`, a 13th month); they are the file's fault, so say where.
        try:
            return super().construct_object(node, deep)
        except (ValueError, LookupError, AttributeError) as exc:
            problem = f"not a valid {node.tag.rpartition(':')[2]} ({exc})"
            raise yaml.constructor.ConstructorError(None, None, problem, node.start_mark) from None

    def construct_yaml_int(self, node: ScalarNode) -> int:
        if len(node.value) > MAX_NUMBER_CHARS:
            problem = f"a number {len(node.value):_} characters long (at most {MAX_NUMBER_CHARS})"
            raise _LimitError(node, problem)
        return super().construct_yaml_int(node)


_BoundedLoader.add_constructor("tag:yaml.org,2002:int", _BoundedLoader.construct_yaml_int)


def _yaml_problem(exc: yaml.YAMLError, text: str) -> str:
    """Where and what, in one line, for an error PyYAML or the loader's bounds raised."""
    if isinstance(exc, yaml.reader.ReaderError):
        line = text.count("\n", 0, exc.position) + 1
        return f"line {line}: not valid YAML (character U+{exc.character:04X} is not allowed)"
    if isinstance(exc, _LimitError):
        return f"line {exc.line}: {exc.problem}"
    mark = getattr(exc, "problem_mark", None)
    where = f"line {mark.line + 1}: " if mark is not None else ""
    problem = str(getattr(exc, "problem", None) or "")
    context = getattr(exc, "context", None)
    detail = f"{context}: {problem}" if context else problem
    return f"{where}not valid YAML ({escaped(detail, 100)})"


def _number(value: float) -> str:
    return f"{int(value):_}" if float(value).is_integer() else f"{value:g}"


def parse_policies(data: Any, source: str) -> list[Scenario]:
    """Scenarios from a loaded policy file (`source` names it in errors)."""
    data = _mapping(data, source, "a policy file is a mapping with a 'policies' list")
    _known_keys(data, ("defaults", "policies"), source, "unknown top-level key")
    defaults_raw = data.get("defaults")
    if defaults_raw is None:  # absent, or `defaults:` with nothing under it
        defaults_raw = {}
    defaults_raw = _mapping(defaults_raw, f"{source}: defaults", "must be a mapping")
    _known_keys(defaults_raw, _SCENARIO_KEYS, f"{source}: defaults", "unknown key")
    defaults = _scenario_settings(defaults_raw, Scenario(BASELINE, ()), f"{source}: defaults")
    policies = data.get("policies")
    if not isinstance(policies, list) or not policies:
        raise PolicyFileError(f"{source}: 'policies' must be a non-empty list")
    file_base = baseline(defaults)
    scenarios: list[Scenario] = []
    names = {BASELINE}
    for i, raw in enumerate(policies):
        scenario = _policy(raw, defaults, source, f"{source}: policies[{i}]")
        if scenario.name == BASELINE:
            if scenario.prunes:
                raise PolicyFileError(
                    f"{source}: policy 'baseline': the name is reserved for kind none"
                )
            file_base = scenario
            continue
        if scenario.name in names:
            raise PolicyFileError(f"{source}: policy {shown(scenario.name)}: name used twice")
        names.add(scenario.name)
        scenarios.append(scenario)
    own = _file_baseline(file_base)
    return [baseline(), *([own] if own is not None else []), *scenarios]


def _mapping(raw: Any, where: str, expected: str) -> dict[str, Any]:
    """`raw` if it is a mapping whose keys are all names; YAML also allows numbers, null
    and booleans as keys, which no policy file means."""
    if not isinstance(raw, dict):
        raise PolicyFileError(f"{where}: {expected}")
    for key in raw:
        if not isinstance(key, str):
            raise PolicyFileError(f"{where}: key {shown(key)}: keys must be names (text)")
    return raw


def _known_keys(raw: dict[str, Any], allowed: tuple[str, ...], where: str, what: str) -> None:
    unknown = [key for key in raw if key not in allowed]
    if unknown:
        raise PolicyFileError(
            f"{where}: {what} {shown(unknown[0])} (allowed: {', '.join(allowed)})"
        )


def _bad_name(name: str) -> str | None:
    """Why a policy may not have this name, or None. Names label rows of every table, columns
    of charts and lines of the report."""
    if name == RECORDED or name.startswith(("_", BASELINE_PREFIX)):
        return (
            f"is reserved (the recording is '{RECORDED}'; names starting with _ or "
            f"{BASELINE_PREFIX} are mcsim's)"
        )
    if len(name) > NAME_MAX_CHARS:
        return f"is longer than {NAME_MAX_CHARS} characters"
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return "is not valid Unicode text"
    return None


def _policy(raw: Any, defaults: Scenario, source: str, where: str) -> Scenario:
    raw = _mapping(raw, where, "each policy is a mapping with a name and a kind or stack")
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise PolicyFileError(f"{where}: key 'name': a non-empty string is required")
    why = _bad_name(name)
    if why:
        raise PolicyFileError(f"{where}: key 'name': {shown(name)} {why}")
    where = f"{source}: policy {shown(name)}"
    if ("kind" in raw) == ("stack" in raw):
        raise PolicyFileError(f"{where}: give exactly one of 'kind' or 'stack'")
    settings = {k: v for k, v in raw.items() if k in _SCENARIO_KEYS}
    scenario = _scenario_settings(settings, defaults, where)
    if "stack" in raw:
        stack = raw["stack"]
        extra = [key for key in raw if key not in ("name", "stack", *_SCENARIO_KEYS)]
        if extra:
            raise PolicyFileError(f"{where}: unknown key {shown(extra[0])} beside a stack")
        if not isinstance(stack, list) or not stack:
            raise PolicyFileError(f"{where}: key 'stack': a non-empty list of kinds is required")
        layers = []
        for j, layer in enumerate(stack):
            layer = _mapping(layer, f"{where}: stack[{j}]", "a mapping with a 'kind' is required")
            layers.append(_layer(layer, f"{where}: stack[{j}]"))
    else:
        layer_raw = {k: v for k, v in raw.items() if k not in ("name", *_SCENARIO_KEYS)}
        layers = [_layer(layer_raw, where)]
    return replace(scenario, name=name, layers=tuple(layers))


def _layer(raw: dict[str, Any], where: str) -> Layer:
    kind = raw.get("kind")
    if not isinstance(kind, str) or kind not in REGISTRY:
        allowed = ", ".join(sorted(REGISTRY))
        raise PolicyFileError(f"{where}: key 'kind': must be one of {allowed}, not {shown(kind)}")
    cls = REGISTRY[kind]
    spec = {p.name: p for p in cls.params}
    for key in raw:
        if key in cls.renamed:
            raise PolicyFileError(f"{where}: key {shown(key)}: {cls.renamed[key]}")
        if key != "kind" and key not in spec:
            allowed = ", ".join(spec) or "none"
            raise PolicyFileError(
                f"{where}: key {shown(key)}: not a parameter of {kind} (allowed: {allowed})"
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
    if param.api_type is not None and isinstance(value, dict):
        value = _api_count(param, value, bad)
    if value in param.choices:
        return value
    kind = param.kind
    if kind is str:  # a word among the choices
        choices = " or ".join(map(repr, param.choices))
        raise PolicyFileError(bad + f"must be {choices}, not {shown(value)}")
    if isinstance(kind, tuple) or kind in (bool, list):
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if bool in kinds and isinstance(value, bool):
            return value
        if list in kinds and isinstance(value, list) and all(isinstance(v, str) for v in value):
            check_classes(value, bad.removesuffix(": "))
            return tuple(value)
        words = [w for k in kinds for w in _SHAPES[k]]
        allowed = ", ".join(words[:-1]) + " or " + words[-1] if len(words) > 1 else words[0]
        got = shown(value)
        if list in kinds and isinstance(value, list):  # "not a list" would read as no list
            got += " holding " + shown(next(v for v in value if not isinstance(v, str)))
        raise PolicyFileError(bad + f"must be {allowed}, not {got}")
    if kind in (int, float):
        low = -math.inf if param.minimum is None else param.minimum
        number = isinstance(value, int | float) and not isinstance(value, bool)
        # The range test comes first: it also refuses nan and infinities, which int() cannot
        # take and which would pass a bare `minimum` test.
        if not number or not low <= value <= param.maximum or value != kind(value):
            allowed = "a whole number" if kind is int else "a number"
            if param.minimum is None:
                allowed += f" up to {_number(param.maximum)}"
            else:
                allowed += f" from {_number(param.minimum)} to {_number(param.maximum)}"
            if param.choices:
                allowed += " or " + " or ".join(map(repr, param.choices))
            if param.api_type is not None:
                allowed += f" or {{type: {param.api_type}, value: N}}"
            raise PolicyFileError(bad + f"must be {allowed}, not {shown(value)}")
        return kind(value)
    raise PolicyFileError(bad + f"unsupported value {shown(value)}")


# How check_value names the values a bool or tool-list parameter takes, in its errors.
# (A tool list may name classes, `class:<class>`; check_classes checks them.)
_SHAPES: dict[type, tuple[str, ...]] = {bool: ("true", "false"), list: ("a list of tool names",)}
CLASS_NAMES = tuple(CLASS_PREFIX + c.value for c in ToolClass)


def check_classes(tools: Iterable[str], where: str) -> None:
    """Refuse a tool list entry that names a class mcsim does not know (`class:shel`)."""
    for tool in tools:
        if tool.startswith(CLASS_PREFIX) and tool not in CLASS_NAMES:
            raise PolicyFileError(
                f"{where}: {shown(tool)} is not a tool class (classes: {', '.join(CLASS_NAMES)})"
            )


def _api_count(param: Param, value: dict[Any, Any], bad: str) -> Any:
    """N from the API's `{type: <api_type>, value: N}`, or "all" from `{type: all}` where
    "all" is allowed; the plain value is then checked as usual."""
    kind = value.get("type")
    if kind == "all" and "all" in param.choices and len(value) == 1:
        return "all"
    # A word ("all") has a form of its own, {type: all}: `value` holds a count.
    count = value.get("value")
    if kind == param.api_type and set(value) == {"type", "value"} and count not in param.choices:
        return count
    forms = f"{{type: {param.api_type}, value: N}}"
    if "all" in param.choices:
        forms += " or {type: all}"
    raise PolicyFileError(bad + f"a mapping must be {forms}")


def _scenario_settings(raw: dict[str, Any], base: Scenario, where: str) -> Scenario:
    provider = raw.get("provider", base.provider)
    if provider not in PROVIDER_CHOICES:
        raise PolicyFileError(
            f"{where}: key 'provider': must be one of {', '.join(PROVIDER_CHOICES)}, "
            f"not {shown(provider)}"
        )
    ttl, by_kind = _ttls(raw["ttl"], base, where) if "ttl" in raw else (base.ttl, base.ttl_by_kind)
    for value in {ttl, *(v for _, v in by_kind)}:
        check_retention(value, provider, f"{where}: key 'ttl'")
    keep_warm = base.keep_warm
    if "keep_warm" in raw:
        keep_warm = parse_keep_warm(raw["keep_warm"], where, PolicyFileError)
    tools = {}
    for key in ("compactable_tools", "exclude_tools"):
        value = raw.get(key, getattr(base, key))
        if not isinstance(value, list | frozenset) or not all(isinstance(v, str) for v in value):
            raise PolicyFileError(f"{where}: key '{key}': must be a list of tool names")
        check_classes(value, f"{where}: key '{key}'")
        tools[key] = frozenset(value)
    main_only = raw.get("main_thread_only", base.main_thread_only)
    if not isinstance(main_only, bool):
        raise PolicyFileError(f"{where}: key 'main_thread_only': must be true or false")
    scenario = replace(
        base,
        ttl=ttl,
        ttl_by_kind=by_kind,
        compactable_tools=tools["compactable_tools"],
        exclude_tools=tools["exclude_tools"],
        main_thread_only=main_only,
        provider=provider,
        keep_warm=keep_warm,
    )
    check_keep_warm(scenario, where)
    return scenario


def _ttls(raw: Any, base: Scenario, where: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    """`ttl:` as (the main thread's TTL, the other kinds' that differ from it): one value for
    every thread, or a mapping by thread kind whose kinds not named keep `base`'s."""
    if isinstance(raw, dict):
        for kind in raw:
            if kind not in THREAD_KINDS:
                raise PolicyFileError(
                    f"{where}: key 'ttl': {shown(kind)} is not a thread kind (allowed: "
                    f"{', '.join(THREAD_KINDS)})"
                )
        if not raw:
            raise PolicyFileError(f"{where}: key 'ttl': an empty mapping names no thread kind")
        chosen = {kind: raw.get(kind, base.ttl_for(kind)) for kind in THREAD_KINDS}
        for kind, value in chosen.items():
            if value not in TTLS:
                raise PolicyFileError(
                    f"{where}: key 'ttl.{kind}': must be one of {', '.join(TTLS)}, "
                    f"not {shown(value)}"
                )
        main = chosen["main"]
        return main, tuple(sorted((k, v) for k, v in chosen.items() if v != main))
    if raw not in TTLS:
        raise PolicyFileError(
            f"{where}: key 'ttl': must be one of {', '.join(TTLS)} or a mapping by thread kind "
            f"({{main: 1h, subagent: 5m}}), not {shown(raw)}"
        )
    return raw, ()


def check_keep_warm(scenario: Scenario, where: str) -> None:
    """Refuse pings that could never keep a cache warm: an interval at or past the TTL of a
    thread kind they are sent on (with `recorded`, each call's own TTL decides, and a ping
    that would land after it ran out is not sent)."""
    warm = scenario.keep_warm
    if warm is None:
        return
    for kind in warm.threads:
        ttl = scenario.ttl_for(kind)
        if ttl != RECORDED and warm.interval_s >= TTL_SECONDS[ttl]:
            raise PolicyFileError(
                f"{where}: key 'keep_warm.interval_minutes': {warm.interval_minutes:g} is not "
                f"below the TTL of {kind} threads ({ttl}); a ping must land before the entry "
                "expires (set threads: to the kinds it can keep warm)"
            )


def check_retention(ttl: str, provider: str, where: str) -> None:
    """Refuse a TTL the provider does not offer; 24h, OpenAI's extended retention, needs
    `provider: openai` (with `recorded`, the threads of other providers could not use it)."""
    offered = ("5m", "1h") if provider == "recorded" else rules_for(provider).retentions
    if ttl != "recorded" and ttl not in offered:
        whose = "every provider" if provider == "recorded" else provider
        hint = " (OpenAI's extended retention: set provider: openai)" if ttl == "24h" else ""
        raise PolicyFileError(
            f"{where}: {ttl} is not a retention {whose} offers ({', '.join(offered)}){hint}"
        )
