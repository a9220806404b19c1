"""Write the bundled sample transcripts: realistic Claude Code 2.1.x sessions, deterministically.

    python sample_transcripts/generate.py [DIR]   # default: sample_transcripts/claude/projects

The recorded usage is produced by a small prompt-cache model of its own (not mcsim's code):
each call's prompt is the previous prompt plus the previous output and the new items; while
the cache is alive a call reads the previous prompt and writes the new tail; after an idle gap
longer than the TTL it reads nothing; after a compaction it reads only the stable head
(system prompt + tools). Content sizes become tokens at 4 characters a token. Together the
sessions cover: many compactable tool results of varied sizes, idle gaps under 5 minutes,
between 5 and 60 minutes and over an hour, 1-hour and 5-minute TTLs, a sub-agent in
`subagents/`, a compaction, and a non-compactable MCP tool.
"""

from __future__ import annotations

import json
import random
import shutil
import sys
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent / "claude" / "projects"
VERSION = "2.1.20"
CHARS_PER_TOKEN = 4
TTL_S = {"5m": 300, "1h": 3600}
WORDS = [
    "def",
    "return",
    "self",
    "value",
    "config",
    "parse",
    "cache",
    "token",
    "prompt",
    "session",
    "call",
    "result",
    "file",
    "path",
    "import",
    "class",
    "test",
    "assert",
    "error",
    "retry",
    "budget",
    "policy",
    "window",
    "usage",
    "model",
    "thread",
    "agent",
    "read",
    "write",
    "index",
    "merge",
    "batch",
    "stream",
    "buffer",
    "offset",
    "limit",
    "request",
    "response",
    "handler",
]


def ident(rng: random.Random, n: int) -> str:
    return "".join(rng.choices("ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijk23456789", k=n))


def tokens(text: str) -> int:
    return max(1, (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN)


@dataclass
class Cache:
    """The generator's own prompt-cache model for one thread."""

    ttl: str
    head_tokens: int
    prompt_tokens: int = 0  # previous call's prompt
    expires_at: float = 0.0
    compacted: bool = False

    def call(self, now: float, prompt: int) -> dict[str, int]:
        uncached = 3
        if now >= self.expires_at or self.prompt_tokens == 0:
            read = 0
        elif self.compacted:
            read = self.head_tokens  # the prefix changed after the head
        else:
            read = self.prompt_tokens
        self.compacted = False
        write = prompt - read - uncached
        self.prompt_tokens = prompt
        self.expires_at = now + TTL_S[self.ttl]
        return {"input": uncached, "read": read, "write": write}


@dataclass
class Writer:
    """Emits the JSONL lines of one thread and tracks its prompt."""

    rng: random.Random
    session_id: str
    cwd: str
    model: str
    cache: Cache
    agent_id: str | None = None
    lines: list[dict] = field(default_factory=list)
    parent: str | None = None
    context_tokens: int = 0  # tokens of everything after the head
    now: datetime = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)

    def uid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def stamp(self) -> str:
        return self.now.isoformat(timespec="milliseconds").replace("+00:00", "Z")

    def envelope(self, kind: str, **extra: object) -> dict:
        line = {
            "parentUuid": self.parent,
            "isSidechain": self.agent_id is not None,
            "userType": "external",
            "cwd": self.cwd,
            "sessionId": self.session_id,
            "version": VERSION,
            "gitBranch": "main",
        }
        if self.agent_id:
            line["agentId"] = self.agent_id
        line.update(type=kind, uuid=self.uid(), timestamp=self.stamp(), **extra)
        self.parent = line["uuid"]
        self.lines.append(line)
        return line

    def wait(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)

    def user(self, text: str) -> None:
        self.envelope("user", message={"role": "user", "content": text})
        self.context_tokens += tokens(text)

    def call(self, blocks: list[dict]) -> None:
        """One API call whose response is `blocks`, one line per block as Claude Code writes."""
        usage_model = self.cache.call(
            self.now.timestamp(), self.cache.head_tokens + self.context_tokens
        )
        out = sum(tokens(json.dumps(b)) for b in blocks)
        split = {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0}
        split[f"ephemeral_{self.cache.ttl}_input_tokens"] = usage_model["write"]
        msg_id = "msg_01" + ident(self.rng, 22)
        req_id = "req_011C" + ident(self.rng, 20)
        for i, block in enumerate(blocks):
            last = i == len(blocks) - 1
            usage = {
                "input_tokens": usage_model["input"],
                "cache_creation_input_tokens": usage_model["write"],
                "cache_read_input_tokens": usage_model["read"],
                "cache_creation": split,
                "output_tokens": out if last else max(1, out // 4),
                "service_tier": "standard",
            }
            self.envelope(
                "assistant",
                message={
                    "model": self.model,
                    "id": msg_id,
                    "type": "message",
                    "role": "assistant",
                    "content": [block],
                    "stop_reason": ("tool_use" if block["type"] == "tool_use" else "end_turn")
                    if last
                    else None,
                    "stop_sequence": None,
                    "usage": usage,
                },
                requestId=req_id,
            )
            self.wait(self.rng.uniform(0.3, 2.0))
        self.context_tokens += out

    def tool_result(self, tool_id: str, content: str, structured: dict) -> None:
        self.envelope(
            "user",
            message={
                "role": "user",
                "content": [{"tool_use_id": tool_id, "type": "tool_result", "content": content}],
            },
            toolUseResult=structured,
        )
        self.context_tokens += tokens(content)

    def compact(self, summary: str) -> None:
        pre = self.cache.head_tokens + self.context_tokens
        self.parent = None
        self.envelope(
            "system",
            subtype="compact_boundary",
            content="Conversation compacted",
            level="info",
            compactMetadata={"trigger": "auto", "preTokens": pre},
        )
        self.envelope("user", message={"role": "user", "content": summary}, isCompactSummary=True)
        self.context_tokens = tokens(summary)
        self.cache.compacted = True


def prose(rng: random.Random, n_words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n_words)).capitalize() + "."


def code(rng: random.Random, n_lines: int) -> str:
    out = []
    for i in range(n_lines):
        indent = "    " * rng.randint(0, 3)
        out.append(
            f"{i + 1:>5}\t{indent}{' '.join(rng.choice(WORDS) for _ in range(rng.randint(2, 9)))}"
        )
    return "\n".join(out)


TOOLS = {
    "Read": lambda rng, path: ({"file_path": path}, code(rng, rng.choice([40, 120, 300, 700]))),
    "Grep": lambda rng, path: (
        {"pattern": rng.choice(WORDS), "path": str(Path(path).parent)},
        "\n".join(
            f"{path}:{rng.randint(1, 500)}: {prose(rng, 6)}" for _ in range(rng.randint(3, 60))
        ),
    ),
    "Glob": lambda rng, path: (
        {"pattern": "**/*.py"},
        "\n".join(
            f"src/{rng.choice(WORDS)}/{rng.choice(WORDS)}.py" for _ in range(rng.randint(5, 80))
        ),
    ),
    "Bash": lambda rng, path: (
        {"command": rng.choice(["pytest -q", "make lint", "git status", "ls -la src"])},
        "\n".join(prose(rng, rng.randint(4, 14)) for _ in range(rng.randint(5, 250))),
    ),
    "Edit": lambda rng, path: (
        {"file_path": path, "old_string": prose(rng, 5), "new_string": prose(rng, 7)},
        f"The file {path} has been updated. Result of `cat -n`:\n{code(rng, 12)}",
    ),
    "WebFetch": lambda rng, path: (
        {"url": "https://docs.example.org/guide", "prompt": "summarise the caching section"},
        "\n\n".join(prose(rng, 60) for _ in range(rng.randint(2, 8))),
    ),
    "mcp__github__get_issue": lambda rng, path: (
        {"owner": "acme", "repo": "shop", "issue_number": rng.randint(10, 400)},
        json.dumps(
            {"title": prose(rng, 8), "body": prose(rng, rng.randint(80, 300)), "labels": ["bug"]}
        ),
    ),
}


def agent_step(w: Writer, tool: str, path: str, thinking: bool = False) -> None:
    """One call that uses one tool, followed by the tool's result."""
    rng = w.rng
    tool_id = "toolu_01" + ident(rng, 22)
    args, result = TOOLS[tool](rng, path)
    blocks = []
    if thinking:
        blocks.append(
            {"type": "thinking", "thinking": prose(rng, rng.randint(20, 120)), "signature": "c2ln"}
        )
    blocks.append({"type": "text", "text": prose(rng, rng.randint(5, 25))})
    blocks.append({"type": "tool_use", "id": tool_id, "name": tool, "input": args})
    w.call(blocks)
    w.wait(rng.uniform(0.5, 20))
    w.tool_result(tool_id, result, {"stdout": result[:200]} if tool == "Bash" else {"type": "text"})
    w.wait(rng.uniform(0.2, 3))


def turn(w: Writer, prompt: str, tools: list[str], paths: list[str]) -> None:
    w.user(prompt)
    w.wait(1)
    for tool in tools:
        agent_step(w, tool, w.rng.choice(paths), thinking=w.rng.random() < 0.3)
    w.call([{"type": "text", "text": prose(w.rng, w.rng.randint(20, 80))}])


def session_shop(root: Path) -> None:
    """1-hour TTL main thread (subscription), a Haiku sub-agent with 5-minute TTL, an MCP tool,
    and idle gaps of 3 minutes, 20 minutes and 75 minutes."""
    rng = random.Random(20260302)
    sid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    cwd = "/home/dev/shop-api"
    main = Writer(rng, sid, cwd, "claude-opus-4-6", Cache("1h", 21_000))
    paths = [f"{cwd}/src/{n}.py" for n in ("cart", "checkout", "pricing", "models", "api")]
    turn(
        main,
        "Find why the cart total is wrong for discounted items.",
        ["Grep", "Read", "Read", "Bash"],
        paths,
    )
    main.wait(180)  # under 5 minutes
    turn(
        main,
        "Check issue 212 on GitHub and compare it with the pricing module.",
        ["mcp__github__get_issue", "Read", "Grep"],
        paths,
    )
    # The main thread hands a survey to a sub-agent.
    task_id = "toolu_01TaskSurvey000000000000"
    main.call(
        [
            {
                "type": "tool_use",
                "id": task_id,
                "name": "Task",
                "input": {
                    "description": "Survey tests",
                    "prompt": "List the tests touching pricing and what they cover.",
                    "subagent_type": "general-purpose",
                },
            }
        ]
    )
    agent_id = "a" + "".join(rng.choices("0123456789abcdef", k=16))
    sub = Writer(
        rng,
        sid,
        cwd,
        "claude-haiku-4-5-20251001",
        Cache("5m", 9_000),
        agent_id=agent_id,
        now=main.now,
    )
    sub.user("List the tests touching pricing and what they cover.")
    for tool in ["Glob", "Grep", "Read", "Read", "Grep", "Read"]:
        agent_step(
            sub, tool, rng.choice([f"{cwd}/tests/test_{n}.py" for n in ("cart", "pricing", "api")])
        )
    sub.call([{"type": "text", "text": prose(rng, 120)}])
    main.now = sub.now + timedelta(seconds=2)
    main.tool_result(task_id, prose(rng, 150), {"status": "completed", "agentId": agent_id})
    turn(
        main,
        "Fix the discount rounding and run the tests.",
        ["Edit", "Bash", "Read", "Edit", "Bash"],
        paths,
    )
    main.wait(20 * 60)  # between 5 and 60 minutes: the 1-hour cache survives
    turn(
        main,
        "Now look at checkout: same rounding problem?",
        ["Read", "Grep", "Read", "Edit", "Bash"],
        paths,
    )
    main.wait(75 * 60)  # over an hour: even the 1-hour cache is gone
    turn(
        main,
        "Back. Summarise what changed and run the full suite.",
        ["Bash", "Read", "Bash"],
        paths,
    )
    _write(root / "-home-dev-shop-api", sid, main, [sub])


def session_pipeline(root: Path) -> None:
    """5-minute TTL (API key), many tool results, a compaction, idle gaps of 2 minutes,
    10 minutes and 2 hours."""
    rng = random.Random(20260305)
    sid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    cwd = "/home/dev/data-pipeline"
    w = Writer(
        rng,
        sid,
        cwd,
        "claude-sonnet-4-5-20250929",
        Cache("5m", 17_500),
        now=datetime(2026, 3, 5, 14, 0, tzinfo=UTC),
    )
    paths = [f"{cwd}/etl/{n}.py" for n in ("extract", "transform", "load", "schema", "jobs")]
    turn(
        w,
        "The nightly job is slow. Profile it.",
        ["Bash", "Read", "Read", "Grep", "Bash", "Read"],
        paths,
    )
    w.wait(120)
    turn(w, "Try batching the inserts.", ["Read", "Edit", "Bash", "Bash", "Read"], paths)
    w.wait(10 * 60)  # the 5-minute cache expires
    turn(
        w,
        "Read the upstream docs on bulk loading first.",
        ["WebFetch", "WebFetch", "Read", "Edit", "Bash"],
        paths,
    )
    turn(
        w,
        "Apply the same to the transform step.",
        ["Read", "Read", "Grep", "Edit", "Bash", "Read", "Bash"],
        paths,
    )
    w.compact(
        "This session is being continued from a previous conversation. Summary: " + prose(rng, 400)
    )
    turn(
        w,
        "Continue: check the load step for the same issue.",
        ["Read", "Grep", "Edit", "Bash"],
        paths,
    )
    w.wait(2 * 3600)
    turn(w, "Good morning. Re-run the benchmark and report.", ["Bash", "Read", "Bash"], paths)
    _write(root / "-home-dev-data-pipeline", sid, w, [])


def _write(project: Path, sid: str, main: Writer, subs: list[Writer]) -> None:
    project.mkdir(parents=True, exist_ok=True)
    _dump(project / f"{sid}.jsonl", main.lines)
    for sub in subs:
        _dump(project / sid / "subagents" / f"agent-{sub.agent_id}.jsonl", sub.lines)


def _dump(path: Path, lines: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as fh:
        for line in lines:
            fh.write(json.dumps(line, separators=(",", ":")) + "\n")


def main(root: Path = ROOT) -> None:
    if root.exists():
        shutil.rmtree(root)
    session_shop(root)
    session_pipeline(root)
    print(f"wrote {sum(1 for _ in root.rglob('*.jsonl'))} files under {root}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT)
