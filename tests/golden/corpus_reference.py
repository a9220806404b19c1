"""Independent computation of the corpus reference figures (does not import mcsim).

Run once; its output is committed as corpus_sessions.json and the tests compare mcsim with
it. Rules, straight from docs/domain.md#assistant-lines-and-api-calls,
docs/domain.md#the-cache-break-detector and tests/data/corpus/README.md: one call per
(message.id, requestId) across all files, `<synthetic>` lines skipped, input/cache fields from
the first line, output = max over the call's lines, a call belongs to the sessionId written on
its first line, 5-minute writes = cache_creation_input_tokens - the 1-hour split, list prices.
Cache breaks: per thread (the main conversation, each agent file or agentId, each inline
sidechain chain), calls in file order; a read more than 5% and 2,000 tokens below the previous
call's is a drop, caused by a compaction line in between, else a model change, else a gap
of at least the previous call's TTL (1h when it wrote 1-hour cache, else 5m), else a
`prefix_changed` when something was read, else `unknown`. Every drop is a break but the one
after a compaction: Claude Code's detector is told of a compaction and resets its baseline.
The gap runs from request to request: a call's request time is that of the last user,
assistant, system or attachment line of its thread written before its first line (its own
first line if there is none).

    python tests/golden/corpus_reference.py tests/data/corpus/claude/projects \\
        > tests/golden/corpus_sessions.json
"""

import glob
import json
import os
import sys
from datetime import datetime

PRICES = {  # USD per Mtok: input, 5m write, 1h write, read, output
    "claude-sonnet-4-20250514": (3, 3.75, 6, 0.30, 15),
    "claude-sonnet-4-5-20250929": (3, 3.75, 6, 0.30, 15),
    "claude-opus-4-1-20250805": (15, 18.75, 30, 1.50, 75),
    "claude-opus-4-5-20251101": (5, 6.25, 10, 0.50, 25),
    "claude-opus-4-7": (5, 6.25, 10, 0.50, 25),
    "claude-haiku-4-5-20251001": (1, 1.25, 2, 0.10, 5),
}


def thread_of(path: str, line: dict, root_of: dict) -> str:
    """The conversation a line belongs to (docs/domain.md#where-transcripts-live)."""
    if line.get("agentId"):
        return "agent-" + line["agentId"]
    name = os.path.basename(path)
    if name.startswith("agent-"):
        return name[: -len(".jsonl")]
    if line.get("isSidechain"):
        uuid, parent = line.get("uuid"), line.get("parentUuid")
        root_of[uuid] = root_of.get(parent, uuid) if parent else uuid
        return "sidechain-" + root_of[uuid]
    return "main"


def main(root: str) -> None:
    calls: dict = {}
    threads: dict = {}  # (session, thread) -> [call key or "compaction", ...] in file order
    last_time: dict = {}  # (session, thread) -> the time of its last line so far
    for path in sorted(glob.glob(f"{root}/**/*.jsonl", recursive=True)):
        with open(path, "rb") as fh:
            lines = [json.loads(raw) for raw in fh]
        root_of: dict = {}
        for line in lines:
            where = (line.get("sessionId"), thread_of(path, line, root_of))
            before = last_time.get(where)
            kind = line.get("type")
            if kind in ("user", "assistant", "system", "attachment") and line.get("timestamp"):
                last_time[where] = datetime.fromisoformat(line["timestamp"]).timestamp()
            if line.get("isCompactSummary") or line.get("subtype") == "compact_boundary":
                threads.setdefault(where, []).append("compaction")
            if line.get("type") != "assistant" or line["message"].get("model") == "<synthetic>":
                continue
            msg, usage = line["message"], line["message"]["usage"]
            key = (msg["id"], line.get("requestId"))
            if key not in calls:
                split = usage.get("cache_creation") or {}
                w1h = split.get("ephemeral_1h_input_tokens") or 0
                calls[key] = {
                    "session": line["sessionId"],
                    "model": msg["model"],
                    "time": datetime.fromisoformat(line["timestamp"]).timestamp()
                    if before is None
                    else before,
                    "input": usage.get("input_tokens", 0),
                    "w5m": usage.get("cache_creation_input_tokens", 0) - w1h,
                    "w1h": w1h,
                    "read": usage.get("cache_read_input_tokens", 0),
                    "output": 0,
                }
                threads.setdefault(where, []).append(key)
            calls[key]["output"] = max(calls[key]["output"], usage.get("output_tokens", 0))
    sessions: dict = {}
    for c in calls.values():
        s = sessions.setdefault(
            c["session"],
            {
                "calls": 0,
                "input_tokens": 0,
                "cache_write_5m_tokens": 0,
                "cache_write_1h_tokens": 0,
                "cache_read_tokens": 0,
                "output_tokens": 0,
                "cost_usd": 0.0,
                "cache_breaks": 0,
                "cache_drops": 0,
            },
        )
        p = PRICES[c["model"]]
        s["calls"] += 1
        s["input_tokens"] += c["input"]
        s["cache_write_5m_tokens"] += c["w5m"]
        s["cache_write_1h_tokens"] += c["w1h"]
        s["cache_read_tokens"] += c["read"]
        s["output_tokens"] += c["output"]
        s["cost_usd"] += (
            c["input"] * p[0]
            + c["w5m"] * p[1]
            + c["w1h"] * p[2]
            + c["read"] * p[3]
            + c["output"] * p[4]
        ) / 1e6
    causes: dict = {}  # the breaks'
    drop_causes: dict = {}  # every drop's
    for (session, _thread), events in threads.items():
        prev, compacted = None, False
        for event in events:
            if event == "compaction":
                compacted = True
                continue
            cur = calls[event]
            if prev is not None and cur["session"] == session:
                drop = prev["read"] - cur["read"]
                if drop > 2000 and drop > 0.05 * prev["read"]:
                    ttl = 3600 if prev["w1h"] > 0 else 300
                    if compacted:
                        cause = "compaction"
                    elif cur["model"] != prev["model"]:
                        cause = "model_switch"
                    elif cur["time"] - prev["time"] >= ttl:
                        cause = "ttl_expired"
                    elif cur["read"] > 0:
                        cause = "prefix_changed"
                    else:
                        cause = "unknown"
                    drop_causes[cause] = drop_causes.get(cause, 0) + 1
                    sessions[session]["cache_drops"] += 1
                    if not compacted:
                        causes[cause] = causes.get(cause, 0) + 1
                        sessions[session]["cache_breaks"] += 1
            if cur["session"] == session:
                prev, compacted = cur, False
    for s in sessions.values():
        s["cost_usd"] = round(s["cost_usd"], 6)
    totals = {k: sum(s[k] for s in sessions.values()) for k in next(iter(sessions.values()))}
    totals["cost_usd"] = round(totals["cost_usd"], 4)
    doc = {
        "totals": totals,
        "breaks_by_cause": dict(sorted(causes.items())),
        "drops_by_cause": dict(sorted(drop_causes.items())),
        "sessions": dict(sorted(sessions.items())),
    }
    json.dump(doc, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main(sys.argv[1])
