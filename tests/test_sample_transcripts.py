"""The bundled samples: reproducible from their generator, covering what
docs/sample-transcripts.md claims, and with recorded usage a real cache would produce."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from conftest import SAMPLES

from mcsim.ingest.loaders import Detail
from mcsim.ingest.pipeline import load_sessions
from mcsim.model import ItemKind


def _generator():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("generate", SAMPLES / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["generate"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_generator_reproduces_the_committed_files(tmp_path: Path) -> None:
    _generator().main(tmp_path / "projects")
    committed = SAMPLES / "claude" / "projects"
    fresh = sorted(
        p.relative_to(tmp_path / "projects") for p in (tmp_path / "projects").rglob("*.jsonl")
    )
    assert fresh == sorted(p.relative_to(committed) for p in committed.rglob("*.jsonl"))
    for rel in fresh:
        assert (tmp_path / "projects" / rel).read_bytes() == (committed / rel).read_bytes(), rel


def test_samples_cover_the_mechanisms() -> None:
    sessions, stats = load_sessions([str(SAMPLES)], detail=Detail.TEXT)
    assert stats.skips.total == 0
    assert len(sessions) == 2
    calls = [c for s in sessions for c in s.calls]
    ttls = {
        ("1h" if c.usage.cache_write_1h_tokens else "5m")
        for c in calls
        if c.usage.cache_write_tokens
    }
    assert ttls == {"5m", "1h"}
    assert any(c.compaction is not None for c in calls)
    assert any("subagents" in f for s in sessions for f in s.files)
    results = [i for c in calls for i in c.items if i.kind is ItemKind.TOOL_RESULT]
    tools = {i.tool_name for i in results}
    assert {"Read", "Bash", "Grep", "Glob", "Edit", "WebFetch"} <= tools
    assert "mcp__github__get_issue" in tools
    sizes = sorted(i.chars for i in results)
    assert len(results) >= 50 and sizes[0] < 1_000 and sizes[-1] > 20_000
    gaps = [
        b.timestamp_s - a.timestamp_s
        for s in sessions
        for t in s.threads
        for a, b in zip(t.calls, t.calls[1:], strict=False)
    ]
    assert any(120 <= g < 300 for g in gaps)
    assert any(300 < g < 3600 for g in gaps)
    assert any(g > 3600 for g in gaps)


def test_recorded_usage_is_what_a_cache_would_produce() -> None:
    sessions, _ = load_sessions([str(SAMPLES)])
    for session in sessions:
        for thread in session.threads:
            ttl = 3600 if thread.calls[0].usage.cache_write_1h_tokens else 300
            for prev, cur in zip(thread.calls, thread.calls[1:], strict=False):
                read = cur.usage.cache_read_tokens
                gap = cur.timestamp_s - prev.timestamp_s
                if gap >= ttl:
                    assert read == 0
                elif cur.compaction is not None:
                    assert 0 < read < prev.usage.prompt_tokens  # the stable head only
                else:
                    assert read == prev.usage.prompt_tokens  # the whole previous prompt
                    growth = cur.usage.prompt_tokens - prev.usage.prompt_tokens
                    assert growth >= prev.usage.output_tokens
