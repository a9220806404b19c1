"""Policy files: the documented format loads; every mistake is one line naming file, policy
and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcsim.replay.scenario import PolicyFileError, load_policy_file

GOOD = """
defaults:
  ttl: recorded
  compactable_tools: [Read, Bash]
policies:
  - name: baseline
    kind: none
  - name: claude-code
    stack:
      - {kind: time_based_microcompact, gap_threshold_minutes: 60, keep_recent: 5}
      - {kind: cached_microcompact, trigger_threshold: 12, keep_recent: 5}
  - name: api
    kind: clear_tool_uses
    trigger_input_tokens: 100000
    keep: 3
    ttl: 1h
  - name: thinking
    kind: clear_thinking
    keep: all
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text(text)
    return path


def test_the_documented_format(tmp_path: Path) -> None:
    scenarios = load_policy_file(write(tmp_path, GOOD))
    assert [s.name for s in scenarios] == ["baseline", "claude-code", "api", "thinking"]
    cc = scenarios[1]
    assert [layer.kind for layer in cc.layers] == ["time_based_microcompact", "cached_microcompact"]
    assert cc.compactable_tools == {"Read", "Bash"}  # inherited from defaults
    assert scenarios[2].ttl == "1h" and cc.ttl == "recorded"
    api = dict(scenarios[2].layers[0].values)
    assert api == {
        "trigger_input_tokens": 100_000,
        "trigger_tool_uses": None,
        "keep": 3,
        "clear_at_least": None,
        "exclude_tools": (),
        "clear_tool_inputs": False,
        "cleared_set": "in_steps",
        "keep_counts_excluded": True,
    }
    assert dict(scenarios[3].layers[0].values) == {
        "keep": "all",
        "after_gap_minutes": None,
        "latched": False,
    }


def test_a_layers_text_is_the_dataclass_one(tmp_path: Path) -> None:
    """Layer writes its own repr (the scenarios' keys are made of it, Scenario.fields_key):
    it must stay the text the dataclass would give, or kept results would no longer match."""
    import dataclasses

    from mcsim.replay.scenario import Layer

    generated = dataclasses._repr_fn(dataclasses.fields(Layer), {})  # type: ignore[attr-defined]
    layers = [layer for s in load_policy_file(write(tmp_path, GOOD)) for layer in s.layers]
    assert len(layers) == 5
    assert all(repr(layer) == generated(layer) for layer in layers)


def test_api_spellings_and_tool_lists(tmp_path: Path) -> None:
    """The API's `{type, value}` counts are taken as they are, and clear_tool_inputs is true,
    false or a list of tool names."""
    text = """
policies:
  - name: api
    kind: clear_tool_uses
    keep: {type: tool_uses, value: 5}
    clear_at_least: {type: input_tokens, value: 5000}
    clear_tool_inputs: [Bash, Read]
  - name: all-inputs
    kind: clear_tool_uses
    clear_tool_inputs: true
  - name: two
    kind: clear_thinking
    keep: {type: thinking_turns, value: 2}
  - name: every
    kind: clear_thinking
    keep: {type: all}
"""
    _, api, all_inputs, two, every = load_policy_file(write(tmp_path, text))
    values = dict(api.layers[0].values)
    assert (values["keep"], values["clear_at_least"]) == (5, 5_000)
    assert values["clear_tool_inputs"] == ("Bash", "Read")
    assert dict(all_inputs.layers[0].values)["clear_tool_inputs"] is True
    assert dict(two.layers[0].values) == {"keep": 2, "after_gap_minutes": None, "latched": False}
    assert dict(every.layers[0].values) == {
        "keep": "all",
        "after_gap_minutes": None,
        "latched": False,
    }


def test_baseline_is_added_when_not_named(tmp_path: Path) -> None:
    scenarios = load_policy_file(write(tmp_path, "policies:\n  - {name: a, kind: keep_last_n}\n"))
    assert [s.name for s in scenarios] == ["baseline", "a"]
    assert dict(scenarios[1].layers[0].values)["n"] == 5  # SWE-agent's default


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "policies: [{name: a, kind: magic}]",
            "policy 'a': key 'kind': must be one of cached_microcompact, clear_thinking, "
            "clear_tool_uses, keep_last_n, none, time_based_microcompact, not 'magic'",
        ),
        (
            "policies: [{name: a, kind: keep_last_n, m: 3}]",
            "policy 'a': key 'm': not a parameter of keep_last_n (allowed: n, min_messages,",
        ),
        (
            "policies: [{name: a, kind: keep_last_n, n: six}]",
            "policy 'a': key 'n': must be a whole number from 1 to 1_000_000_000, not 'six'",
        ),
        (
            "policies: [{name: a, kind: keep_last_n, n: 0}]",
            "policy 'a': key 'n': must be a whole number from 1 to 1_000_000_000, not 0",
        ),
        (
            "policies: [{name: a, kind: keep_last_n, n: 2.5}]",
            "policy 'a': key 'n': must be a whole number from 1 to 1_000_000_000, not 2.5",
        ),
        (
            "policies: [{name: a, kind: keep_last_n, keep_first: 'yes'}]",
            "policy 'a': key 'keep_first': must be true or false",
        ),
        (
            "policies: [{name: a, kind: clear_thinking, keep: some}]",
            "policy 'a': key 'keep': must be a whole number from 1 to 1_000_000_000 "
            "or 'all' or {type: thinking_turns, value: N}, not 'some'",
        ),
        (  # the API refuses keep 0 too: "N must be > 0"
            "policies: [{name: a, kind: clear_thinking, keep: 0}]",
            "policy 'a': key 'keep': must be a whole number from 1 to 1_000_000_000 "
            "or 'all' or {type: thinking_turns, value: N}, not 0",
        ),
        (
            "policies: [{name: a, kind: clear_thinking, keep: {type: thinking_turns, value: 0}}]",
            "policy 'a': key 'keep': must be a whole number from 1 to 1_000_000_000",
        ),
        (
            "policies: [{name: a, kind: clear_thinking, keep: {type: tool_uses, value: 2}}]",
            "policy 'a': key 'keep': a mapping must be {type: thinking_turns, value: N} "
            "or {type: all}",
        ),
        (
            "policies: [{name: a, kind: clear_thinking, keep_turns: 1}]",
            "policy 'a': key 'keep_turns': now 'keep', as in the API: it counts assistant "
            "turns that carry thinking",
        ),
        (
            "policies: [{name: a, kind: clear_tool_uses, keep: {type: all}}]",
            "policy 'a': key 'keep': a mapping must be {type: tool_uses, value: N}",
        ),
        (
            "policies: [{name: a, kind: clear_tool_uses, clear_tool_inputs: Read}]",
            "policy 'a': key 'clear_tool_inputs': must be true, false or a list of tool "
            "names, not 'Read'",
        ),
        (
            "policies: [{name: a, kind: clear_tool_uses, clear_tool_inputs: [Read, 3]}]",
            "policy 'a': key 'clear_tool_inputs': must be true, false or a list of tool "
            "names, not a list holding 3",
        ),
        (
            "policies: [{name: a, kind: clear_tool_uses, clear_tool_inputs: 1}]",
            "key 'clear_tool_inputs': must be true, false or a list of tool names, not 1",
        ),
        (
            "policies: [{name: a, stack: [{kind: clear_tool_uses, exclude_tools: Edit}]}]",
            "policy 'a': stack[0]: key 'exclude_tools': must be a list of tool names, not 'Edit'",
        ),
        (
            "policies: [{name: a, kind: none, ttl: 2h}]",
            "policy 'a': key 'ttl': must be one of 5m, 1h, 24h, recorded or a mapping by thread "
            "kind ({main: 1h, subagent: 5m}), not '2h'",
        ),
        (
            "policies: [{name: a, stack: [{kind: none}], n: 3}]",
            "policy 'a': unknown key 'n' beside a stack",
        ),
        (
            "policies: [{name: a, stack: [{kind: cached_microcompact, keep: 1}]}]",
            "policy 'a': stack[0]: key 'keep': not a parameter of cached_microcompact",
        ),
        ("policies: [{name: a, kind: none, stack: []}]", "give exactly one of 'kind' or 'stack'"),
        ("policies: [{name: a, kind: none}, {name: a, kind: none}]", "policy 'a': name used twice"),
        ("policies: [{name: baseline, kind: keep_last_n}]", "the name is reserved for kind none"),
        ("policies: [{kind: none}]", "policies[0]: key 'name'"),
        (
            "defaults: {ttl: 5m, colour: red}\npolicies: [{name: a, kind: none}]",
            "defaults: unknown key 'colour'",
        ),
        ("policy: []", "unknown top-level key 'policy'"),
        ("policies: []", "'policies' must be a non-empty list"),
        ("policies: [unclosed", "not valid YAML"),
    ],
)
def test_mistakes_name_file_policy_and_key(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(PolicyFileError) as err:
        load_policy_file(path)
    line = str(err.value)
    assert "\n" not in line
    assert line.startswith(str(path))
    assert message in line


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(PolicyFileError, match="cannot read policy file"):
        load_policy_file(tmp_path / "nope.yaml")
