"""Hostile policy files and --grid values: each ends in one line `Error: ...` and exit 2, before
any session is loaded or any output written, with bounded work and memory."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from conftest import REPO, SAMPLES
from hypothesis import given, settings
from hypothesis import strategies as st

from mcsim.cli import cli
from mcsim.replay.policies import REGISTRY
from mcsim.replay.scenario import PolicyFileError, baseline, load_policy_file, parse_policies
from mcsim.replay.sweep import MAX_VARIANTS, GridError, build_variants, parse_axis

CLAUDE_CODE = REPO / "policies" / "claude-code.yaml"
KINDS = (
    "cached_microcompact, clear_thinking, clear_tool_uses, keep_last_n, none, "
    "time_based_microcompact"
)
N_RANGE = "must be a whole number from 1 to 1_000_000_000"
# keep_recent takes 0 (it acts as 1, as in Claude Code)
KEEP_RANGE = "must be a whole number from 0 to 1_000_000_000"
DEPTH = "nested deeper than 20 levels, aliases expanded (a policy file needs 7)"


def refused(result: Result, out: Path) -> str:
    """The one line a refused command printed (without `Error: `); nothing was written."""
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    line = result.stderr.removesuffix("\n")
    assert "\n" not in line and line.startswith("Error: ")
    assert not out.exists()
    return line.removeprefix("Error: ")


def replay(tmp_path: Path, policy: Path) -> str:
    out = tmp_path / "out"
    args = ["replay", str(SAMPLES), "--policy", str(policy), "--out", str(out)]
    return refused(CliRunner().invoke(cli, args), out)


def replay_text(tmp_path: Path, text: str | bytes) -> str:
    """The message for a policy file holding `text`, without its `<file>: ` prefix."""
    path = tmp_path / "policy.yaml"
    if isinstance(text, str):
        text = text.encode()
    path.write_bytes(text)
    line = replay(tmp_path, path)
    assert line.startswith(f"{path}: ")
    return line.removeprefix(f"{path}: ")


def sweep(tmp_path: Path, *grids: str) -> str:
    out = tmp_path / "out"
    args = ["sweep", str(SAMPLES), "--policy", str(CLAUDE_CODE), "--name", "claude-code"]
    args += [a for g in grids for a in ("--grid", g)] + ["--out", str(out)]
    return refused(CliRunner().invoke(cli, args), out)


def policy(**params: str) -> str:
    keys = "".join(f", {k}: {v}" for k, v in params.items())
    return f"policies: [{{name: a{keys}}}]"


LAUGHS = (  # the billion laughs: nine times nine times ... "lol" from a few hundred bytes
    "policies:\n"
    "  - name: x\n"
    "    kind: none\n"
    "    ttl:\n"
    "      - &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
    + "".join(
        f"      - &{b} [{', '.join([f'*{a}'] * 9)}]\n"
        for a, b in zip("abcdefgh", "bcdefghi", strict=True)
    )
)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # numbers YAML reads as nan, infinities, or numbers too large to be a parameter
        (policy(kind="keep_last_n", n=".nan"), f"policy 'a': key 'n': {N_RANGE}, not nan"),
        (policy(kind="keep_last_n", n="-.inf"), f"policy 'a': key 'n': {N_RANGE}, not -inf"),
        (policy(kind="keep_last_n", n="1.0e+400"), f"policy 'a': key 'n': {N_RANGE}, not inf"),
        (
            policy(kind="time_based_microcompact", gap_threshold_minutes=".inf"),
            "policy 'a': key 'gap_threshold_minutes': must be a number from 0 to "
            "1_000_000_000, not inf",
        ),
        (
            policy(kind="keep_last_n", n="1" + "0" * 30),
            f"policy 'a': key 'n': {N_RANGE}, not {10**30}",
        ),
        (
            policy(kind="keep_last_n", n="0x" + "f" * 38),  # 40 characters, 46 digits
            f"policy 'a': key 'n': {N_RANGE}, not a number of more than 40 digits",
        ),
        (
            policy(kind="clear_tool_uses", keep="1" + "0" * 5000),  # 10**5000
            "line 1: a number 5_001 characters long (at most 40)",
        ),
        (
            policy(kind="clear_tool_uses", keep="0x" + "f" * 5000),
            "line 1: a number 5_002 characters long (at most 40)",
        ),
        (
            policy(kind="keep_last_n", n="1" + ":59" * 10000),  # base 60: slow to convert
            "line 1: a number 30_001 characters long (at most 40)",
        ),
        (policy(kind="keep_last_n", n="true"), f"policy 'a': key 'n': {N_RANGE}, not true"),
        (
            policy(kind="keep_last_n", polling="1_000_000_001"),
            f"policy 'a': key 'polling': {N_RANGE}, not 1000000001",
        ),
        # lists and mappings where a name is expected (unhashable: once a TypeError)
        (policy(kind="[1, 2]"), f"policy 'a': key 'kind': must be one of {KINDS}, not a list"),
        (policy(kind="{x: 1}"), f"policy 'a': key 'kind': must be one of {KINDS}, not a mapping"),
        (policy(kind="!!set {x}"), f"policy 'a': key 'kind': must be one of {KINDS}, not a list"),
        ("policies: [{kind: none}]", "policies[0]: key 'name': a non-empty string is required"),
        (
            "policies: [{name: [a], kind: none}]",
            "policies[0]: key 'name': a non-empty string is required",
        ),
        (
            "policies: [{name: {a: 1}, kind: none}]",
            "policies[0]: key 'name': a non-empty string is required",
        ),
        (
            policy(kind="none", ttl="[5m]"),
            "policy 'a': key 'ttl': must be one of 5m, 1h, 24h, recorded or a mapping by thread "
            "kind ({main: 1h, subagent: 5m}), not a list",
        ),
        (
            policy(kind="none", ttl="{5m: 1}"),
            "policy 'a': key 'ttl': '5m' is not a thread kind (allowed: main, subagent, compact)",
        ),
        (
            policy(stack="[[kind, none]]"),
            "policy 'a': stack[0]: a mapping with a 'kind' is required",
        ),
        (
            policy(stack="[{kind: [none]}]"),
            f"policy 'a': stack[0]: key 'kind': must be one of {KINDS}, not a list",
        ),
        ("defaults: [1]\n" + policy(kind="none"), "defaults: must be a mapping"),
        ("defaults: []\n" + policy(kind="none"), "defaults: must be a mapping"),
        ("defaults: {ttl: {a: 1}}\n" + policy(kind="none"), "defaults: key 'ttl': 'a' is not a"),
        (
            "defaults: {ttl: {main: 1}}\n" + policy(kind="none"),
            "defaults: key 'ttl.main': must be one",
        ),
        # keys that are not names (mixed types once broke sorting the unknown ones)
        ("{1: a, name: b}", "key 1: keys must be names (text)"),
        ("{null: 1}", "key null: keys must be names (text)"),
        ("{policies: [], 2.5: x}", "key 2.5: keys must be names (text)"),
        ("defaults: {true: 1}\n" + policy(kind="none"), "defaults: key true: keys must be"),
        (
            "policies: [{1: a, name: b, kind: none}]",
            "policies[0]: key 1: keys must be names (text)",
        ),
        (
            policy(kind="keep_last_n", n="3") + "\nzebra: 1\ncolour: red",
            "unknown top-level key 'zebra' (allowed: defaults, policies)",  # the first in the file
        ),
        (
            "{[1, 2]: x}",
            "line 1: not valid YAML (while constructing a mapping: found unhashable key)",
        ),
        # deep nesting, literal or through aliases
        ("[" * 20_000 + "]" * 20_000, f"line 1: {DEPTH}"),
        ("{a: " * 9_000 + "}" * 9_000, f"line 1: {DEPTH}"),
        (
            "policies:\n  - name: a\n    kind: clear_tool_uses\n"
            "    exclude_tools: " + "[" * 30 + "Read" + "]" * 30,
            f"line 4: {DEPTH}",
        ),
        (
            "x: &a " + "[" * 15 + "]" * 15 + "\ny: &b [[[[[[*a]]]]]]",
            f"line 2: {DEPTH}",
        ),
        # too many values to be a policy file: parsing stops there, so a 50 kB file is quick
        (
            "policies: [" + ", ".join(["1"] * 6000) + "]",
            "line 1: more than 5_000 values (a policy file has a few hundred)",
        ),
        # aliases that multiply instead of share, or point into themselves
        (
            LAUGHS,
            "line 8: aliases repeat more than 10_000 values and characters "
            "(share a list or mapping, do not multiply one)",
        ),
        ("policies: &p [*p]", "line 1: alias *p is inside its own anchor"),
        ("policies: [*nope]", "line 1: not valid YAML (found undefined alias 'nope')"),
        # not a policy file at all
        ("", "empty; a policy file is a mapping with a 'policies' list"),
        ("# only a comment\n", "empty; a policy file is a mapping with a 'policies' list"),
        ("hello", "a policy file is a mapping with a 'policies' list"),
        ("[1, 2]", "a policy file is a mapping with a 'policies' list"),
        ("policies: [unclosed", "line 1: not valid YAML (while parsing a flow sequence: "),
        (b"policies: [{name: a\x00}]", "line 1: not valid YAML (character U+0000 is not allowed)"),
        (policy(kind="none", ttl="2001-13-45"), "line 1: not valid YAML (not a valid timestamp"),
        (policy(kind="keep_last_n", n="!!int ''"), "line 1: not valid YAML (not a valid int"),
        (policy(kind="keep_last_n", keep_first="!!bool maybe"), "line 1: not valid YAML (not a"),
        # bytes that are not UTF-8
        ("policies: [{name: café}]".encode("latin-1"), "not UTF-8 text (byte 0xe9 at offset 21)"),
        ("policies: []".encode("utf-16"), "not UTF-8 text (byte 0xff at offset 0)"),
    ],
)
def test_hostile_policy_files_get_one_line(tmp_path: Path, text: str | bytes, message: str) -> None:
    assert replay_text(tmp_path, text).startswith(message)


@pytest.mark.parametrize(
    ("keep", "message"),
    [
        # The API spells "all" {type: all} (or plain all); a count's mapping holds a number.
        (
            "{type: thinking_turns, value: all}",
            "a mapping must be {type: thinking_turns, value: N} or {type: all}",
        ),
        (
            "{type: thinking_turns, value: '3'}",
            "must be a whole number from 1 to 1_000_000_000 or 'all' or "
            "{type: thinking_turns, value: N}, not '3'",
        ),
    ],
)
def test_an_api_count_mapping_holds_a_count(tmp_path: Path, keep: str, message: str) -> None:
    text = policy(kind="clear_thinking", keep=keep)
    assert replay_text(tmp_path, text) == f"policy 'a': key 'keep': {message}"


def test_values_from_the_file_are_shortened_and_escaped(tmp_path: Path) -> None:
    name = "\\e[31mred\\u202e" + "x" * 180  # YAML escapes: ESC and a right-to-left override
    line = replay_text(tmp_path, f'policies: [{{name: "{name}", kind: none, n: 3}}]')
    assert line == (
        "policy '\\x1b[31mred\\u202exxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...': "
        "key 'n': not a parameter of none (allowed: none)"
    )
    line = replay_text(tmp_path, f'policies: [{{name: "{name + "x" * 5000}", kind: none}}]')
    assert line == (
        "policies[0]: key 'name': '\\x1b[31mred\\u202exxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...' "
        "is longer than 200 characters"
    )
    key = "\\a" * 100  # BEL
    line = replay_text(tmp_path, f'policies: [{{name: a, kind: none, "{key}": 3}}]')
    assert line.startswith("policy 'a': key '" + "\\x07" * 40 + "...': not a parameter")


def test_a_huge_file_is_refused_by_its_size(tmp_path: Path) -> None:
    path = tmp_path / "huge.yaml"
    with path.open("wb") as file:
        file.truncate(100 * 2**20)  # sparse: 100 MiB that take no disk
    assert replay(tmp_path, path) == (
        f"{path}: too large for a policy file (104_857_600 bytes; at most 50_000 bytes)"
    )


def test_a_directory_a_missing_and_an_unreadable_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "dir.yaml"
    folder.mkdir()
    assert replay(tmp_path, folder) == f"{folder}: a directory, not a policy file"
    if hasattr(os, "mkfifo"):  # a FIFO with no writer would block a plain open forever
        fifo = tmp_path / "fifo.yaml"
        os.mkfifo(fifo)
        assert replay(tmp_path, fifo) == f"{fifo}: a FIFO, not a policy file"
    missing = tmp_path / "nope.yaml"
    assert replay(tmp_path, missing) == (
        f"{missing}: cannot read policy file (No such file or directory)"
    )
    locked = tmp_path / "locked.yaml"
    locked.write_text("policies: [{name: a, kind: none}]")
    real_open = os.open

    def open_denied(path: Any, *args: Any, **kwargs: Any) -> Any:
        if Path(path) == locked:  # chmod does not stop root, who may run the tests
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", open_denied)
    assert replay(tmp_path, locked) == f"{locked}: cannot read policy file (Permission denied)"


def test_shared_anchors_and_a_bom_still_load(tmp_path: Path) -> None:
    path = tmp_path / "anchors.yaml"
    path.write_bytes(
        b"\xef\xbb\xbf"  # a UTF-8 byte order mark, as some editors write
        b"defaults:\n"
        b"  compactable_tools: &tools [Read, Bash, Grep]\n"
        b"policies:\n"
        b"  - {name: a, kind: keep_last_n, n: 3, exclude_tools: *tools}\n"
        b"  - &api {name: b, kind: clear_tool_uses, exclude_tools: *tools}\n"
        b"  - {<<: *api, name: c, keep: 5}\n"
    )
    base, a, b, c = load_policy_file(path)
    assert base == baseline()  # no pruning, the cache as recorded, whatever the defaults
    assert a.compactable_tools == b.compactable_tools == {"Read", "Bash", "Grep"}
    assert dict(a.layers[0].values)["n"] == 3
    assert a.exclude_tools == b.exclude_tools == c.exclude_tools == {"Read", "Bash", "Grep"}
    assert [layer.kind for layer in c.layers] == ["clear_tool_uses"]  # merged from b
    assert dict(c.layers[0].values)["keep"] == 5


@pytest.mark.parametrize(
    ("grids", "message"),
    [
        (["cached_microcompact.keep_recent=nan"], f"key 'keep_recent': {KEEP_RANGE}, not nan"),
        (["cached_microcompact.keep_recent=inf"], f"key 'keep_recent': {KEEP_RANGE}, not inf"),
        (["cached_microcompact.keep_recent=1e400"], f"key 'keep_recent': {KEEP_RANGE}, not inf"),
        (["cached_microcompact.keep_recent=-5..-1"], f"key 'keep_recent': {KEEP_RANGE}, not -5"),
        (["cached_microcompact.keep_recent=2.5"], f"key 'keep_recent': {KEEP_RANGE}, not 2.5"),
        (["cached_microcompact.keep_recent=true"], f"key 'keep_recent': {KEEP_RANGE}, not true"),
        (["cached_microcompact.keep_recent=all"], f"key 'keep_recent': {KEEP_RANGE}, not 'all'"),
        (
            ["time_based_microcompact.gap_threshold_minutes=-.5"],
            "key 'gap_threshold_minutes': must be a number from 0 to 1_000_000_000, not -0.5",
        ),
        (
            ["cached_microcompact.keep_recent=1..1000000000"],
            "1_000_000_000 values; a sweep runs at most 1_000 variants",
        ),
        (
            ["cached_microcompact.keep_recent=5..1"],
            "a range goes up (lo..hi) with a step of at least 1, not '5..1'",
        ),
        (
            ["cached_microcompact.keep_recent=1..10:0"],
            "a range goes up (lo..hi) with a step of at least 1, not '1..10:0'",
        ),
        (
            ["cached_microcompact.keep_recent=1" + "0" * 5000],
            "value '1" + "0" * 39 + "...' is too long to be a parameter value",
        ),
        (
            ["cached_microcompact.keep_recent=1,2,01"],
            "value 1 is given twice",
        ),
        # Equal once validated: two identical variants.
        (["cached_microcompact.keep_recent=1,1.0"], "value 1 is given twice"),
        (["cached_microcompact.keep_recent=10,1e1"], "value 10 is given twice"),
        (["time_based_microcompact.gap_threshold_minutes=60,60.0"], "value 60.0 is given twice"),
    ],
)
def test_hostile_grid_values_get_one_line(tmp_path: Path, grids: list[str], message: str) -> None:
    key = grids[0].partition("=")[0]
    assert sweep(tmp_path, *grids) == f"--grid {key}: {message}"


@pytest.mark.parametrize(
    ("grids", "message"),
    [
        (["k="], "--grid k=: expected KEY=VALUES, e.g. keep_recent=1..20"),
        (["=5"], "--grid =5: expected KEY=VALUES, e.g. keep_recent=1..20"),
        (["ttl"], "--grid ttl: expected KEY=VALUES, e.g. keep_recent=1..20"),
        (["k=,,,"], "--grid k: no values (write them separated by commas, or a range 1..20)"),
        (["ttl=5m", "ttl=1h"], "--grid ttl: the key is given twice"),
        (["ttl=7m"], "--grid ttl: '7m' is not one of 5m, 1h, 24h, recorded"),
        (["ttl=5"], "--grid ttl: 5 is not one of 5m, 1h, 24h, recorded"),
        (
            ["nope=1"],
            "--grid nope: not a parameter of policy 'claude-code' (known: ttl, "
            "cached_microcompact.keep_recent, cached_microcompact.trigger_threshold, "
            "clear_thinking.after_gap_minutes, clear_thinking.keep, clear_thinking.latched, "
            "time_based_microcompact.gap_threshold_minutes, time_based_microcompact.keep_recent)",
        ),
        (["\x1b[2Jk=1"], "--grid \\x1b[2Jk: not a parameter of policy 'claude-code' (known: "),
        (
            ["cached_microcompact.keep_recent=1..100", "time_based_microcompact.keep_recent=1..11"],
            "--grid: 100 x 11 = 1_100 variants; a sweep runs at most 1_000",
        ),
        (
            ["trigger_threshold=8", "cached_microcompact.trigger_threshold=12"],
            "--grid trigger_threshold and --grid cached_microcompact.trigger_threshold name the "
            "same parameter (cached_microcompact.trigger_threshold): give it once",
        ),
    ],
)
def test_malformed_grids_get_one_line(tmp_path: Path, grids: list[str], message: str) -> None:
    assert sweep(tmp_path, *grids).startswith(message)


def test_the_largest_grid_allowed_builds_its_variants() -> None:
    (_, stack, *_) = load_policy_file(CLAUDE_CODE)
    axes = [
        parse_axis("cached_microcompact.keep_recent=1..100"),
        parse_axis("time_based_microcompact.keep_recent=1..10"),
    ]
    assert len(build_variants(stack, axes)) == MAX_VARIANTS


# ---------------------------------------------------------------- properties

TOKENS = (
    ".nan", ".inf", "-.inf", "1.0e+400", "1" + "0" * 5000, "0x" + "f" * 60, "-7", "0", "3",
    "2.5", "1_000_000_001", "~", "null", "yes", "off", "''", "all", "5m", "1h", "recorded",
    "Read", "2001-13-45", "!!int x", "!!binary x", "!!set {a}", "!!python/name:os.system",
    "*a", "&a [x, x]", "&a x", "*a", '"\\e[2J"', '"\\u202e"', "'" + "x" * 300 + "'",
)  # fmt: skip
KEYS = (
    "policies", "defaults", "name", "kind", "stack", "ttl", "n", "keep", "keep_recent",
    "keep_turns", "exclude_tools", "compactable_tools", "main_thread_only", "1", "null",
    "true", "2.5", "'<<'", "<<", "? [a]", '"\\a"',
)  # fmt: skip
KIND_NAMES = (*KINDS.split(", "), "magic")
PARAMS = (
    "n", "min_messages", "polling", "keep_first", "keep_turns", "keep", "keep_recent",
    "trigger_threshold", "trigger_input_tokens", "trigger_tool_uses", "clear_at_least",
    "gap_threshold_minutes", "exclude_tools", "clear_tool_inputs", "ttl", "1",
)  # fmt: skip

yaml_scalars = st.sampled_from(TOKENS) | st.integers().map(str) | st.sampled_from(KIND_NAMES)
yaml_values = st.recursive(
    yaml_scalars,
    lambda inner: (
        st.lists(inner, max_size=4).map(lambda xs: "[" + ", ".join(xs) + "]")
        | st.lists(st.tuples(st.sampled_from(KEYS), inner), max_size=4).map(
            lambda kvs: "{" + ", ".join(f"{k}: {v}" for k, v in kvs) + "}"
        )
    ),
    max_leaves=25,
)
# Documents shaped like policy files reach the per-key checks; free-form ones the rest.
policy_documents = st.builds(
    lambda kind, extras: (
        "policies: [{name: p, kind: " + kind + "".join(f", {k}: {v}" for k, v in extras) + "}]"
    ),
    st.sampled_from(KIND_NAMES),
    st.lists(st.tuples(st.sampled_from(PARAMS), yaml_values), max_size=2),
)
documents = (
    policy_documents
    | yaml_values
    | st.builds(lambda d, p: f"defaults: {d}\n{p}", yaml_values, policy_documents)
)


def loads_or_refuses(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    try:
        scenarios = load_policy_file(path)
    except PolicyFileError as exc:
        assert "\n" not in str(exc) and str(exc).startswith(str(path))
    else:
        assert scenarios[0].name == "baseline"


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=300))
def test_random_bytes_load_or_are_refused(
    tmp_path_factory: pytest.TempPathFactory, data: bytes
) -> None:
    loads_or_refuses(tmp_path_factory.getbasetemp() / "bytes.yaml", data)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(text=documents)
def test_random_documents_load_or_are_refused(
    tmp_path_factory: pytest.TempPathFactory, text: str
) -> None:
    loads_or_refuses(tmp_path_factory.getbasetemp() / "doc.yaml", text.encode())


python_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.sampled_from([5000, -400]).map(lambda e: 10 ** abs(e) * (1 if e > 0 else -1))
    | st.sampled_from([math.nan, math.inf, b"\xff", "\x1b[2J", "x" * 999])
    | st.floats()
    | st.sampled_from(KIND_NAMES)
    | st.text(max_size=8)
)
python_keys = st.sampled_from(KEYS) | st.integers() | st.none() | st.floats() | st.booleans()
python_values = st.recursive(
    python_scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(python_keys, inner, max_size=4)
        | st.frozensets(python_scalars, max_size=3).map(set)
    ),
    max_leaves=25,
)


# A layer of a real kind with any of its parameters set to anything, or a kind that is not one.
python_layers = st.sampled_from(sorted(REGISTRY)).flatmap(
    lambda kind: st.fixed_dictionaries(
        {"kind": st.just(kind)}, optional={p.name: python_values for p in REGISTRY[kind].params}
    )
) | st.dictionaries(python_keys, python_values, max_size=3)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(layer=python_layers, defaults=python_values)
def test_any_loaded_structure_gives_scenarios_or_one_line(
    layer: dict[Any, Any], defaults: Any
) -> None:
    """What YAML could hand over (mixed keys, sets, nan, 5000-digit numbers) after the loader's
    own bounds: parse_policies refuses it in one line or accepts it, nothing else."""
    for data in ({"policies": [{"name": "p", **layer}]}, {"defaults": defaults, "policies": []}):
        try:
            parse_policies(data, "f.yaml")
        except PolicyFileError as exc:
            assert "\n" not in str(exc) and len(str(exc)) < 400


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(
    specs=st.lists(
        st.builds(
            lambda key, value: f"{key}={value}",
            st.sampled_from(
                [
                    "ttl",
                    "cached_microcompact.keep_recent",
                    "time_based_microcompact.keep_recent",
                    "time_based_microcompact.gap_threshold_minutes",
                    "keep_recent",
                    "x",
                    "",
                ]
            ),
            st.text(alphabet="0123456789.,:-+eEinfatmhlsu \x1b", max_size=24),
        )
        | st.text(max_size=30),
        min_size=1,
        max_size=3,
    )
)
def test_random_grids_build_variants_or_are_refused(specs: list[str]) -> None:
    (_, stack, *_) = load_policy_file(CLAUDE_CODE)
    try:
        variants = build_variants(stack, [parse_axis(spec) for spec in specs])
    except GridError as exc:
        assert "\n" not in str(exc) and "\x1b" not in str(exc)
    else:
        assert 1 <= len(variants) <= MAX_VARIANTS


RESERVED = (
    "is reserved (the recording is 'recorded'; names starting with _ or baseline: are mcsim's)"
)


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("recorded", RESERVED),
        ("_fidelity", RESERVED),
        ("baseline:ttl=1h", RESERVED),  # the baseline under a file's own cache settings
        ("x" * 201, "is longer than 200 characters"),
        ("\\ud800", "is not valid Unicode text"),  # YAML's escape: a lone surrogate
    ],
)
def test_reserved_and_unusable_policy_names_are_refused(
    tmp_path: Path, name: str, why: str
) -> None:
    message = replay_text(tmp_path, f'policies: [{{name: "{name}", kind: keep_last_n, n: 6}}]')
    assert message.startswith("policies[0]: key 'name': '")
    assert message.endswith(f"' {why}")
