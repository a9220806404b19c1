"""Write the generated Claude Code 1.0.90-style session of the test corpus, deterministically.

    python tests/data/generate_legacy.py [DIR]   # default: tests/data/corpus/claude/projects

The real 1.0.90 transcript the shared corpus holds has no licence, so it stays out of the
repository; this session covers what it covered, in the same line shapes: sub-agents as
*inline* sidechain lines in the main file (`isSidechain: true`, a root with
`parentUuid: null`, no `agentId`), a compaction recorded only as an `isCompactSummary` user
line (1.0.x wrote no `compact_boundary`), a `<synthetic>` API-error line with all-zero usage,
and two models (Opus 4.1 on the main thread, Sonnet 4 in the sidechains). An idle gap past the
5-minute TTL adds a cache expiry.

The recorded usage comes from the sample generator's own cache model
(sample_transcripts/generate.py), not from mcsim.
"""

from __future__ import annotations

import importlib.util
import json
import random
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent
ROOT = HERE / "corpus" / "claude" / "projects"
PROJECT = "-home-dev-legacy-cli"
VERSION = "1.0.90"
MAIN_MODEL = "claude-opus-4-1-20250805"
SIDECHAIN_MODEL = "claude-sonnet-4-20250514"


def _sample_generator() -> ModuleType:
    path = HERE.parents[1] / "sample_transcripts" / "generate.py"
    spec = importlib.util.spec_from_file_location("sample_generate", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["sample_generate"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


gen = _sample_generator()


class LegacyWriter(gen.Writer):  # type: ignore[misc,name-defined]
    """A thread written the 1.0.x way: sidechains inline, marked only by `isSidechain`."""

    sidechain: bool = False

    def envelope(self, kind: str, **extra: object) -> dict:
        line = {
            "parentUuid": self.parent,
            "isSidechain": self.sidechain,
            "userType": "external",
            "cwd": self.cwd,
            "sessionId": self.session_id,
            "version": VERSION,
            "gitBranch": "main",
        }
        line.update(type=kind, uuid=self.uid(), timestamp=self.stamp(), **extra)
        self.parent = line["uuid"]
        self.lines.append(line)
        return line

    def api_error(self) -> None:
        """What 1.0.x writes when a request fails: a `<synthetic>` line that is not a call."""
        zero = {
            "input_tokens": 0,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": 0,
            "server_tool_use": {"web_search_requests": 0},
            "service_tier": None,
        }
        self.envelope(
            "assistant",
            message={
                "id": str(uuid.UUID(int=self.rng.getrandbits(128), version=4)),
                "model": "<synthetic>",
                "role": "assistant",
                "stop_reason": "stop_sequence",
                "stop_sequence": "",
                "type": "message",
                "usage": zero,
                "content": [{"type": "text", "text": "API Error: 502 Bad Gateway"}],
            },
            isApiErrorMessage=True,
        )

    def compact_summary(self, summary: str) -> None:
        """1.0.x: only the summary line, starting a new chain; the next call reads the head."""
        self.parent = None
        self.envelope("user", message={"role": "user", "content": summary}, isCompactSummary=True)
        self.context_tokens = gen.tokens(summary)
        self.cache.compacted = True


def _sidechain(main: LegacyWriter, prompt: str, tools: list[str], paths: list[str]) -> str:
    """A Task sub-agent written inline; returns its final answer."""
    sub = LegacyWriter(
        main.rng, main.session_id, main.cwd, SIDECHAIN_MODEL, gen.Cache("5m", 11_500), now=main.now
    )
    sub.sidechain = True
    sub.user(prompt)
    for tool in tools:
        gen.agent_step(sub, tool, sub.rng.choice(paths))
    answer = gen.prose(sub.rng, 90)
    sub.call([{"type": "text", "text": answer}])
    main.lines.extend(sub.lines)
    main.now = sub.now
    return answer


def _task(main: LegacyWriter, prompt: str, tools: list[str], paths: list[str]) -> None:
    task_id = "toolu_01" + gen.ident(main.rng, 22)
    main.call(
        [
            {
                "type": "tool_use",
                "id": task_id,
                "name": "Task",
                "input": {"description": "Survey", "prompt": prompt},
            }
        ]
    )
    answer = _sidechain(main, prompt, tools, paths)
    main.wait(1)
    main.tool_result(task_id, answer, {"status": "completed"})


def session_legacy(root: Path) -> None:
    rng = random.Random(20250825)
    sid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    cwd = "/home/dev/legacy-cli"
    main = LegacyWriter(
        rng,
        sid,
        cwd,
        MAIN_MODEL,
        gen.Cache("5m", 24_000),
        now=datetime(2025, 8, 25, 15, 30, tzinfo=UTC),
    )
    paths = [f"{cwd}/src/{n}.rs" for n in ("main", "args", "config", "render", "io")]
    gen.turn(main, "Why does --verbose print nothing?", ["Grep", "Read", "Read", "Bash"], paths)
    main.user("Survey how the config file is loaded, in parallel with the render code.")
    main.wait(1)
    _task(main, "Trace where the config file is read and parsed.", ["Grep", "Read", "Read"], paths)
    _task(main, "List every caller of render().", ["Grep", "Read"], paths)
    main.call([{"type": "text", "text": gen.prose(rng, 60)}])
    main.wait(40)
    main.user("Fix it and run the tests.")
    main.wait(2)
    main.api_error()
    main.wait(15)
    for tool in ["Edit", "Bash", "Read", "Edit", "Bash"]:
        gen.agent_step(main, tool, rng.choice(paths), thinking=rng.random() < 0.3)
    main.call([{"type": "text", "text": gen.prose(rng, 40)}])
    main.wait(12 * 60)  # past the 5-minute TTL
    gen.turn(main, "Also check the --quiet flag.", ["Grep", "Read", "Edit", "Bash"], paths)
    main.compact_summary(
        "This session is being continued from a previous conversation that ran out of "
        "context. Summary: " + gen.prose(rng, 350)
    )
    gen.turn(main, "Continue with the release notes.", ["Read", "Edit", "Bash"], paths)
    project = root / PROJECT
    project.mkdir(parents=True, exist_ok=True)
    with (project / f"{sid}.jsonl").open("w") as fh:
        for line in main.lines:
            fh.write(json.dumps(line, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    session_legacy(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT)
