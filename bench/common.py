"""Shared by the benchmarks: a >= 500 MB replica of the corpus, ccusage, timed runs.

The replica copies a corpus (by default the repository's test corpus, tests/data/corpus; any
Claude projects folder with --corpus) with fresh ids per copy: every UUID gets a
copy-specific first group, every msg_/req_/toolu_ id a copy suffix, every project folder a
copy suffix, so no call de-duplicates across copies. Peak memory is summed over the whole
process tree (workers included), sampled every 20 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "tests" / "data" / "corpus" / "claude" / "projects"
CCUSAGE = ("ccusage@20.0.24", "@ccusage/ccusage-linux-x64@20.0.24")
_UUID = re.compile(rb"[0-9a-f]{8}(-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})")
_IDS = re.compile(rb"((?:msg|req|toolu)_[A-Za-z0-9]+)")


_OWN = ".mcsim-bench"  # marks a folder these scripts built, so they may remove it


def _remove_own(folder: Path) -> None:
    """Remove `folder` to rebuild it, only if these scripts built it (or it is empty): a
    --work pointed at the wrong place must not delete anything else."""
    if not folder.exists() or not any(folder.iterdir()):
        return
    if not (folder / _OWN).exists() and not any(folder.glob("complete*")):  # or built before
        raise SystemExit(
            f"{folder}: holds files this script did not build (no {_OWN} marker); "
            "not removed: choose another --work or remove it yourself"
        )
    shutil.rmtree(folder)


def replicate(target: Path, size_mb: int, corpus: Path = CORPUS, distinct: bool = False) -> Path:
    """A Claude config folder of >= size_mb MB copied from `corpus`; reused when a replica of
    the same corpus and size already exists. `distinct`: every text of a copy's messages gets
    the copy's mark (`_distinct`), so no text repeats across copies, as in real transcripts:
    a replay tokenizes each distinct text once (by content hash), and plain copies would make
    it tokenize the corpus's texts once for all the copies."""
    projects = target / "claude" / "projects"
    marker = target / f"complete-{size_mb}mb"
    source = f"from {corpus.resolve()}{' (distinct texts)' if distinct else ''}\n"
    if marker.exists() and marker.read_text().endswith(source):
        return target / "claude"
    _remove_own(target)
    (target / _OWN).parent.mkdir(parents=True, exist_ok=True)
    (target / _OWN).write_text("built by mcsim's bench/common.py; removed when rebuilt\n")
    files = sorted(corpus.rglob("*.jsonl"))
    one_copy = sum(f.stat().st_size for f in files)
    copies = -(-size_mb * 1_000_000 // one_copy)
    for k in range(copies):
        prefix = f"{k:08x}".encode()
        suffix = f"c{k}".encode()
        for f in files:
            rel = f.relative_to(corpus)
            data = f.read_bytes()
            if distinct:
                data = _distinct(data, f" ~{k}")
            data = _UUID.sub(prefix + rb"\1", data)
            data = _IDS.sub(rb"\1" + suffix, data)
            parts = list(rel.parts)
            parts[0] = f"{parts[0]}-copy{k:03d}"
            name = _UUID.sub(prefix + rb"\1", "/".join(parts).encode()).decode()
            out = projects / name
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(data)
    marker.write_text(f"{copies} copies of {one_copy} bytes\n{source}")
    return target / "claude"


def _distinct(data: bytes, mark: str) -> bytes:
    """The lines of a transcript with `mark` after every non-empty string in each message's
    content (texts, thinking, tool inputs and results); lines that are not JSON objects with
    a message are kept as they are (broken lines stay broken)."""
    import orjson

    def marked(value: object) -> object:
        if isinstance(value, str):
            return value + mark if value else value
        if isinstance(value, list):
            return [marked(v) for v in value]
        if isinstance(value, dict):
            return {k: v if k in ("type", "id", "tool_use_id", "name") else marked(v)
                    for k, v in value.items()}  # fmt: skip
        return value

    out = []
    for line in data.split(b"\n"):
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            obj = None
        message = obj.get("message") if isinstance(obj, dict) else None
        if isinstance(message, dict) and "content" in message:
            message["content"] = marked(message["content"])
            line = orjson.dumps(obj)
        out.append(line)
    return b"\n".join(out)


def ensure_ccusage(work: Path) -> Path:
    prefix = work / "npm"
    binary = prefix / "node_modules" / ".bin" / "ccusage"
    if not binary.exists():
        subprocess.run(
            ["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix", str(prefix),
             *CCUSAGE],
            check=True,
        )  # fmt: skip
    return binary


def children(pid: int) -> list[int]:
    """The processes `pid` started (every thread's), from /proc; none once it is gone."""
    out: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as fh:
                out.extend(int(c) for c in fh.read().split())
    except (FileNotFoundError, ProcessLookupError, ValueError):
        pass
    return out


def rss_kb(pid: int) -> int | None:
    """A process's resident memory in KB (0 for a zombie, None once it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        return None
    return 0  # a zombie has no VmRSS line


def _tree_rss_kb(pid: int) -> int:
    total = 0
    stack = [pid]
    while stack:
        p = stack.pop()
        total += rss_kb(p) or 0
        stack.extend(children(p))
    return total


def measure(cmd: list[str], env: dict[str, str]) -> tuple[float, float, bytes]:
    """(wall seconds, peak MB of the process tree, stdout)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    peak = 0
    chunks: list[bytes] = []
    reader = threading.Thread(target=lambda: chunks.append(proc.stdout.read()))  # type: ignore[union-attr]
    reader.start()
    while proc.poll() is None:
        peak = max(peak, _tree_rss_kb(proc.pid))
        time.sleep(0.02)
    wall = time.perf_counter() - start
    reader.join()
    if proc.returncode != 0:
        raise SystemExit(f"{cmd[0]} failed with exit code {proc.returncode}")
    return wall, peak / 1024, b"".join(chunks)


def arguments(doc: str, runs: int, **extra: Any) -> argparse.Namespace:
    """The options every benchmark takes (replica size, runs, work folder), plus `extra`
    (name -> default)."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--size-mb", type=int, default=520)
    parser.add_argument("--runs", type=int, default=runs)
    parser.add_argument("--work", type=Path, default=REPO / "bench" / ".work")
    parser.add_argument("--corpus", type=Path, default=CORPUS, help="Claude projects folder")
    for name, default in extra.items():
        parser.add_argument(f"--{name}", type=type(default), default=default)
    return parser.parse_args()


def mcsim(command: str, projects: str, *options: str, cache: Path, out: Path) -> list[str]:
    """An `mcsim replay`/`sweep` command line writing to `out`, with its cache in `cache`."""
    return [sys.executable, "-m", "mcsim", command, projects, *options,
            "--cache-dir", str(cache), "--out", str(out), "--force", "--json"]  # fmt: skip


# Real transcripts for the mixed replica: shared/ beside the repository (as CI lays it out),
# else the reference machine's /work/shared.
SHARED_CORPUS = next(
    (p for p in (REPO.parent / "shared" / "corpus" / "claude" / "projects",) if p.is_dir()),
    Path("/work/shared/corpus/claude/projects"),
)


def mixed_source(work: Path, real: Path = SHARED_CORPUS) -> Path:
    """A Claude projects folder for the mixed replica: the real transcripts in `real` (when
    that folder exists) plus generated projects with the line kinds real logs hold in bulk
    and the test corpus lacks: many sub-agents (2.1.2+ layout), call-heavy sessions (two
    lines per call, as streamed), file-history-snapshot, progress, hook (system
    stop_hook_summary, attachment hook_success) lines, compact boundaries and broken lines.
    Deterministic; rebuilt only when missing."""
    source = work / "mixed-source"
    marker = source / "complete"
    if marker.exists():
        return source / "projects"
    _remove_own(source)
    source.mkdir(parents=True, exist_ok=True)
    (source / _OWN).write_text("built by mcsim's bench/common.py; removed when rebuilt\n")
    projects = source / "projects"
    if real.is_dir():
        shutil.copytree(real, projects)
    else:
        print(f"note: {real} does not exist; the mixed replica is generated lines only")
    _generate_mixed(projects)
    marker.write_text("done\n")
    return projects


def _generate_mixed(projects: Path) -> None:
    import json
    import random
    import uuid

    rng = random.Random(14)

    def uid() -> str:
        return str(uuid.UUID(int=rng.getrandbits(128), version=4))

    def ident(prefix: str) -> str:
        return prefix + "".join(
            rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789")
            for _ in range(24)
        )

    def text(n: int) -> str:
        words = ("the", "cache", "prefix", "tool", "result", "file", "def", "return", "line")
        return " ".join(rng.choice(words) for _ in range(n // 5))

    clock = [1_767_225_600.0]  # 2026-01-01

    def stamp() -> str:
        clock[0] += rng.uniform(0.5, 40.0)
        t = time.gmtime(clock[0])
        return time.strftime("%Y-%m-%dT%H:%M:%S", t) + f".{int(clock[0] * 1000) % 1000:03d}Z"

    def session_lines(sid: str, cwd: str, calls: int, agent: str | None) -> list[str]:
        out: list[str] = []
        parent: str | None = None
        base = {
            "isSidechain": agent is not None,
            "userType": "external",
            "cwd": cwd,
            "sessionId": sid,
            "version": "2.1.114",
            "gitBranch": "main",
        }
        if agent:
            base["agentId"] = agent

        def add(obj: dict[str, object], link: bool = True) -> None:
            nonlocal parent
            if link:
                u = uid()
                obj = {"parentUuid": parent, **base, **obj, "uuid": u, "timestamp": stamp()}
                parent = u
            out.append(json.dumps(obj, separators=(",", ":")))

        if agent is None:
            msg_id = uid()
            add(
                {
                    "type": "file-history-snapshot",
                    "messageId": msg_id,
                    "isSnapshotUpdate": False,
                    "snapshot": {
                        "messageId": msg_id,
                        "timestamp": stamp(),
                        "trackedFileBackups": {
                            f"src/f{i}.py": {
                                "backupFileName": f"{uid()}@v1",
                                "version": 1,
                                "backupTime": stamp(),
                            }
                            for i in range(rng.randint(0, 12))
                        },
                    },
                },
                link=False,
            )
            add(
                {
                    "type": "progress",
                    "data": {
                        "type": "hook_progress",
                        "hookEvent": "SessionStart",
                        "hookName": "SessionStart:startup",
                        "command": "hooks/start",
                    },
                    "parentToolUseID": uid(),
                    "toolUseID": uid(),
                }
            )
            add(
                {
                    "type": "attachment",
                    "attachment": {
                        "type": "hook_success",
                        "hookName": "SessionStart:startup",
                        "hookEvent": "SessionStart",
                        "content": "",
                        "stdout": text(200),
                        "stderr": "",
                        "exitCode": 0,
                        "durationMs": 120,
                    },
                }
            )
        add({"type": "user", "message": {"role": "user", "content": text(rng.randint(50, 2000))}})
        read = 8_000
        for c in range(calls):
            mid, rid, tool = ident("msg_01"), ident("req_011"), ident("toolu_01")
            write = rng.randint(50, 4_000)
            usage = {
                "input_tokens": rng.randint(1, 9),
                "cache_creation_input_tokens": write,
                "cache_read_input_tokens": read,
                "cache_creation": {
                    "ephemeral_5m_input_tokens": 0,
                    "ephemeral_1h_input_tokens": write,
                },
                "output_tokens": rng.randint(1, 40),
                "service_tier": "standard",
            }
            read += write
            message = {
                "model": "claude-sonnet-4-5-20250929",
                "id": mid,
                "type": "message",
                "role": "assistant",
                "stop_reason": None,
                "usage": usage,
            }
            add(
                {
                    "type": "assistant",
                    "requestId": rid,
                    "message": {
                        **message,
                        "content": [
                            {
                                "type": "thinking",
                                "thinking": text(rng.randint(20, 600)),
                                "signature": "x",
                            }
                        ],
                    },
                }
            )
            usage = {**usage, "output_tokens": usage["output_tokens"] + rng.randint(10, 900)}
            add(
                {
                    "type": "assistant",
                    "requestId": rid,
                    "message": {
                        **message,
                        "usage": usage,
                        "content": [
                            {
                                "type": "tool_use",
                                "id": tool,
                                "name": "Read",
                                "input": {"file_path": f"/src/f{c}.py"},
                            }
                        ],
                    },
                }
            )
            add(
                {
                    "type": "progress",
                    "data": {
                        "type": "hook_progress",
                        "hookEvent": "PostToolUse",
                        "hookName": "PostToolUse:Read",
                        "command": "hooks/post",
                    },
                    "parentToolUseID": tool,
                    "toolUseID": tool,
                }
            )
            add(
                {
                    "type": "user",
                    "toolUseResult": {"stdout": text(rng.randint(50, 1_500))},
                    "message": {
                        "role": "user",
                        "content": [
                            {
                                "type": "tool_result",
                                "tool_use_id": tool,
                                "content": text(rng.randint(100, 5_000)),
                            }
                        ],
                    },
                }
            )
            if c % 25 == 24:
                add(
                    {
                        "type": "system",
                        "subtype": "stop_hook_summary",
                        "hookCount": 1,
                        "hookInfos": [{"command": "hooks/stop", "durationMs": 90}],
                        "hookErrors": [],
                        "preventedContinuation": False,
                        "level": "suggestion",
                    }
                )
            if c % 97 == 96:
                out.append(out[-1][: len(out[-1]) // 2])  # a line cut short: a broken line
            if agent is None and c % 150 == 149:
                add(
                    {
                        "type": "system",
                        "subtype": "compact_boundary",
                        "content": "Conversation compacted",
                        "compactMetadata": {"trigger": "auto", "preTokens": read},
                    }
                )
                read = 8_000
        return out

    for p in range(2):
        cwd = f"/home/dev/gen/project{p}"
        folder = projects / ("-home-dev-gen-project" + str(p))
        folder.mkdir(parents=True, exist_ok=True)
        for _ in range(2):
            sid = uid()
            lines = session_lines(sid, cwd, rng.randint(60, 150), None)
            (folder / f"{sid}.jsonl").write_text("\n".join(lines) + "\n")
            agents = folder / sid / "subagents"
            agents.mkdir(parents=True)
            for _ in range(rng.randint(3, 8)):
                agent = f"a{rng.getrandbits(32):08x}"
                lines = session_lines(sid, cwd, rng.randint(5, 30), agent)
                (agents / f"agent-{agent}.jsonl").write_text("\n".join(lines) + "\n")


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def alternate(
    label: str,
    config: Path,
    ccusage: Path,
    command: list[str],
    cache: Path,
    runs: int,
    targets: dict[str, float],
    describe: tuple[str, Callable[[Any], str]],
) -> None:
    """Run ccusage, mcsim cold (`cache` emptied first) and mcsim warm (`command`, filling and
    reading `cache`) alternately `runs` times on the replica `config`; print each run's wall
    time, CPU time (user + sys of the tree) and peak memory of the tree, then the medians and
    each mcsim run's ratio to ccusage against `targets` (cold, warm). `describe`: the mcsim
    run (cold or warm) whose JSON output, on the first round, gives a line to print."""
    size = sum(f.stat().st_size for f in (config / "projects").rglob("*.jsonl"))
    env = dict(os.environ, CLAUDE_CONFIG_DIR=str(config))
    tools = {"ccusage": [str(ccusage), "session", "--offline", "--json"], "cold": command,
             "warm": command}  # fmt: skip
    print(f"{label} replica: {size / 1e6:.0f} MB in {config}")
    results: dict[str, list[tuple[float, float, float]]] = {name: [] for name in tools}
    for run in range(runs):
        for name, cmd in tools.items():
            if name == "cold":
                shutil.rmtree(cache, ignore_errors=True)
            cpu = _cpu_s()
            wall, top, out = measure(cmd, env)
            cpu = _cpu_s() - cpu
            results[name].append((wall, cpu, top))
            print(f"run {run + 1} {name:8s} {wall:6.2f} s  cpu {cpu:6.2f} s  peak {top:5.0f} MB")
            if run == 0 and name == describe[0]:
                print(f"         {describe[1](json.loads(out))}")
    med = {n: statistics.median(w for w, _, _ in r) for n, r in results.items()}
    cpus = {n: statistics.median(c for _, c, _ in r) for n, r in results.items()}
    peak = {n: max(p for _, _, p in r) for n, r in results.items()}
    for name in tools:
        print(
            f"median {name:8s} {med[name]:6.2f} s  cpu {cpus[name]:6.2f} s"
            f"  max peak {peak[name]:5.0f} MB"
        )
    for name, target in targets.items():
        print(
            f"{label}: {command[3]} {name} / ccusage wall time "
            f"{med[name] / med['ccusage']:.2f}x (target <= {target}x), "
            f"cpu time {cpus[name] / cpus['ccusage']:.2f}x"
        )
    print()
