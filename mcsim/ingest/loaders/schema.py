"""A JSON Schema checker for the keywords mcsim's own schemas use, compiled once into functions.

The interchange format's JSON Schema (interchange.schema.json) is the single source of its
rules: the loader checks every line with this module, so what the schema accepts the loader
reads and what it refuses the loader skips, counted, with the path of the field at fault. No
schema library is needed at run time; the tests check this checker against the reference one
(the `jsonschema` package) on documents generated from the schema.

Supported (draft 2020-12 semantics): `$ref` to `#/$defs/...`, `type`, `const`, `enum`,
`required`, `properties`, `items`, `anyOf`, `oneOf`, `not`, `minimum`, `maximum`,
`exclusiveMaximum`, `minLength` and `pattern`; `title` (used in messages), `description`,
`$schema`, `$id` and `$defs` are annotations. Any other keyword is refused when the schema is
compiled, so the schema cannot say more than the loader checks. JSON's data model holds: 1.0
is an integer and equals 1, true is no number, and `pattern` is searched, not anchored.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from mcsim.ingest.loaders.fields import BadField

Check = Callable[[Any, str], None]  # raises BadField(path, why)

_ANNOTATIONS = frozenset({"title", "description", "$schema", "$id", "$defs", "$comment"})
_KEYWORDS = frozenset(
    {"$ref", "type", "const", "enum", "required", "properties", "items", "anyOf", "oneOf", "not",
     "minimum", "maximum", "exclusiveMaximum", "minLength", "pattern"}
)  # fmt: skip
_TYPE_WORDS = {
    "string": "a string",
    "integer": "a whole number",
    "number": "a number",
    "boolean": "true or false",
    "object": "an object",
    "array": "a list",
    "null": "null",
}


class SchemaCompileError(Exception):
    """The schema uses what this checker does not support (a bug in mcsim, found by tests)."""


def json_type(value: Any) -> str:
    """The JSON type of a decoded value, `integer` for whole numbers (1.0 included)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def json_equal(a: Any, b: Any) -> bool:
    """Equality as JSON Schema has it: 1 equals 1.0, but true is not 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(json_equal, a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return bool(a == b) and (a is None) == (b is None)


def shown(value: Any) -> str:
    """A value in a message, short (never the whole of a long text)."""
    text = f"{value:g}" if isinstance(value, float) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _join(parent: str, key: str) -> str:
    return f"{parent}.{key}" if parent else key


def compile_schema(schema: Mapping[str, Any]) -> Check:
    """The checker of a whole schema: call it with a decoded document and "" as its path."""
    defs = schema.get("$defs", {})
    compiled: dict[str, Check] = {}

    def ref(name: str) -> Check:
        def check(value: Any, path: str) -> None:
            compiled[name](value, path)

        return check

    def node(spec: Mapping[str, Any]) -> Check:
        unknown = set(spec) - _KEYWORDS - _ANNOTATIONS
        if unknown:
            raise SchemaCompileError(f"unsupported keywords {sorted(unknown)}")
        checks: list[Check] = []
        if "$ref" in spec:
            target = spec["$ref"]
            if not target.startswith("#/$defs/") or target[8:] not in defs:
                raise SchemaCompileError(f"unsupported $ref {target}")
            checks.append(ref(target[8:]))
        if "type" in spec:
            checks.append(_type(spec))
        if "const" in spec:
            checks.append(_const(spec["const"]))
        if "enum" in spec:
            checks.append(_enum(spec["enum"]))
        checks += _numbers(spec)
        if "minLength" in spec or "pattern" in spec:
            checks.append(_string(spec))
        if "required" in spec or "properties" in spec:
            properties = {k: node(v) for k, v in spec.get("properties", {}).items()}
            checks.append(_object(tuple(spec.get("required", ())), properties))
        if "items" in spec:
            checks.append(_items(node(spec["items"])))
        if "anyOf" in spec:
            checks.append(_any_of(spec, [node(s) for s in spec["anyOf"]], defs))
        if "oneOf" in spec:
            checks.append(_one_of(spec["oneOf"], [node(s) for s in spec["oneOf"]], defs))
        if "not" in spec:
            checks.append(_not(node(spec["not"])))
        return _all(checks)

    for name, spec in defs.items():
        compiled[name] = node(spec)
    return node(schema)


def _all(checks: list[Check]) -> Check:
    if len(checks) == 1:
        return checks[0]

    def check(value: Any, path: str) -> None:
        for one in checks:
            one(value, path)

    return check


def _type(spec: Mapping[str, Any]) -> Check:
    allowed = spec["type"] if isinstance(spec["type"], list) else [spec["type"]]
    if not set(allowed) <= set(_TYPE_WORDS):
        raise SchemaCompileError(f"unsupported type {allowed}")
    accepted = set(allowed) | ({"integer"} if "number" in allowed else set())
    words = " or ".join(_TYPE_WORDS[t] for t in allowed)
    numeric = bool({"integer", "number"} & set(allowed))

    def check(value: Any, path: str) -> None:
        found = json_type(value)
        if found in accepted:
            return
        if numeric and found == "number":
            raise BadField(path, f"not a whole number ({shown(value)})")
        if numeric and found not in ("integer", "number"):
            raise BadField(path, f"not a number ({type(value).__name__})")
        raise BadField(path, f"not {words} ({'null' if value is None else type(value).__name__})")

    return check


def _const(expected: Any) -> Check:
    def check(value: Any, path: str) -> None:
        if not json_equal(value, expected):
            raise BadField(path, f"{shown(value)} is not {shown(expected)}")

    return check


def _enum(options: list[Any]) -> Check:
    listed = ", ".join(str(o) for o in options)

    def check(value: Any, path: str) -> None:
        if not any(json_equal(value, o) for o in options):
            what = "null" if value is None else f"unknown value {shown(value)}"
            raise BadField(path, f"{what} (one of {listed})")

    return check


def _numbers(spec: Mapping[str, Any]) -> list[Check]:
    checks: list[Check] = []
    low, high, below = spec.get("minimum"), spec.get("maximum"), spec.get("exclusiveMaximum")
    title = spec.get("title")

    def number(value: Any) -> bool:
        return isinstance(value, int | float) and not isinstance(value, bool)

    if low is not None:

        def check_low(value: Any, path: str) -> None:
            if number(value) and value < low:
                why = "not a non-negative integer" if low == 0 else f"below {low}"
                raise BadField(path, title or f"{why} ({shown(value)})")

        checks.append(check_low)
    if high is not None:

        def check_high(value: Any, path: str) -> None:
            if number(value) and value > high:
                raise BadField(path, f"{shown(value)} is not a real count (limit {high:,})")

        checks.append(check_high)
    if below is not None:

        def check_below(value: Any, path: str) -> None:
            if number(value) and value >= below:
                raise BadField(path, title or f"not below {below} ({shown(value)})")

        checks.append(check_below)
    return checks


def _string(spec: Mapping[str, Any]) -> Check:
    least = spec.get("minLength", 0)
    pattern = re.compile(spec["pattern"]) if "pattern" in spec else None
    title = spec.get("title", "a string of the expected form")

    def check(value: Any, path: str) -> None:
        if not isinstance(value, str):
            return
        if len(value) < least:
            raise BadField(path, "empty" if least == 1 else f"shorter than {least} characters")
        if pattern is not None and not pattern.search(value):
            raise BadField(path, f"not {title} ({shown(value)})")

    return check


def _object(required: tuple[str, ...], properties: dict[str, Check]) -> Check:
    def check(value: Any, path: str) -> None:
        if not isinstance(value, dict):
            return
        for key in required:
            if key not in value:
                raise BadField(_join(path, key), "missing")
        for key, sub in properties.items():
            if key in value:
                sub(value[key], _join(path, key))

    return check


def _items(sub: Check) -> Check:
    def check(value: Any, path: str) -> None:
        if isinstance(value, list):
            for i, item in enumerate(value):
                sub(item, f"{path}[{i}]")

    return check


def _any_of(spec: Mapping[str, Any], subs: list[Check], defs: Mapping[str, Any]) -> Check:
    """Valid if one branch is; else the error of the branch made for the value's type (a
    nullable field's non-null branch, a time's string or number branch)."""
    types = [_branch_types(s, defs) for s in spec["anyOf"]]
    title = spec.get("title")

    def check(value: Any, path: str) -> None:
        errors: list[BadField] = []
        for sub in subs:
            try:
                sub(value, path)
            except BadField as exc:
                errors.append(exc)
            else:
                return
        found = json_type(value)
        for branch, error in zip(types, errors, strict=True):
            if found in branch or (found == "integer" and "number" in branch):
                raise error
        if title:
            kind = "null" if value is None else type(value).__name__
            raise BadField(path, f"not {title} ({kind})")
        raise errors[0]

    return check


def _branch_types(spec: Mapping[str, Any], defs: Mapping[str, Any]) -> set[str]:
    """The JSON types a branch is for (all of them when it does not say)."""
    if "$ref" in spec:
        return _branch_types(defs[spec["$ref"][8:]], defs)
    if "type" in spec:
        return set(spec["type"] if isinstance(spec["type"], list) else [spec["type"]])
    if "anyOf" in spec:
        return set().union(*(_branch_types(s, defs) for s in spec["anyOf"]))
    return set(_TYPE_WORDS)


def _one_of(branches: list[Any], subs: list[Check], defs: Mapping[str, Any]) -> Check:
    """Exactly one branch valid. Branches told apart by a `type` property's const (and one
    branch for every other `type` string) are checked by that property alone: only that
    branch can be valid, and its error is the one worth reporting."""
    by_type: dict[str, Check] = {}
    others: Check | None = None
    for spec, sub in zip(branches, subs, strict=True):
        resolved = defs[spec["$ref"][8:]] if "$ref" in spec else spec
        kind = resolved.get("properties", {}).get("type", {})
        if "const" in kind and isinstance(kind["const"], str):
            by_type[kind["const"]] = sub
        elif kind.get("type") == "string" and set(kind.get("not", {}).get("enum", ())) == set(
            by_type
        ):
            others = sub
        else:
            return _generic_one_of(subs)
    if others is None:
        return _generic_one_of(subs)
    fallback = others

    def check(value: Any, path: str) -> None:
        kind = value.get("type") if isinstance(value, dict) else None
        if not isinstance(value, dict):
            raise BadField(path or "line", "not an object")
        if "type" not in value:
            raise BadField(_join(path, "type"), "missing")
        if not isinstance(kind, str):
            raise BadField(_join(path, "type"), f"not a string ({type(kind).__name__})")
        by_type.get(kind, fallback)(value, path)

    return check


def _generic_one_of(subs: list[Check]) -> Check:
    def check(value: Any, path: str) -> None:
        valid, errors = 0, []
        for sub in subs:
            try:
                sub(value, path)
                valid += 1
            except BadField as exc:
                errors.append(exc)
        if valid != 1:
            raise errors[0] if not valid else BadField(path, "matches more than one form")

    return check


def _not(sub: Check) -> Check:
    def check(value: Any, path: str) -> None:
        try:
            sub(value, path)
        except BadField:
            return
        raise BadField(path, f"{shown(value)} is not allowed here")

    return check
