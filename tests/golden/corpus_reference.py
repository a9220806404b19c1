"""Independent computation of the corpus reference figures (does not import mcsim).

Run once; its output is committed as corpus_sessions.json and the tests compare mcsim with
it. Rules, straight from DOMAIN.md §4.3 and the corpus README: one call per
(message.id, requestId) across all files, `<synthetic>` lines skipped, input/cache fields from
the first line, output = max over the call's lines, a call belongs to the sessionId written on
its first line, 5-minute writes = cache_creation_input_tokens - the 1-hour split, list prices.

    python tests/golden/corpus_reference.py ../shared/corpus/claude/projects > corpus_sessions.json
"""

import glob
import json
import sys

PRICES = {  # USD per Mtok: input, 5m write, 1h write, read, output
    "claude-sonnet-4-20250514": (3, 3.75, 6, 0.30, 15),
    "claude-sonnet-4-5-20250929": (3, 3.75, 6, 0.30, 15),
    "claude-opus-4-1-20250805": (15, 18.75, 30, 1.50, 75),
    "claude-opus-4-5-20251101": (5, 6.25, 10, 0.50, 25),
    "claude-opus-4-7": (5, 6.25, 10, 0.50, 25),
    "claude-haiku-4-5-20251001": (1, 1.25, 2, 0.10, 5),
}


def main(root: str) -> None:
    calls: dict = {}
    for path in sorted(glob.glob(f"{root}/**/*.jsonl", recursive=True)):
        with open(path, "rb") as fh:
            lines = [json.loads(raw) for raw in fh]
        for line in lines:
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
                    "input": usage.get("input_tokens", 0),
                    "w5m": usage.get("cache_creation_input_tokens", 0) - w1h,
                    "w1h": w1h,
                    "read": usage.get("cache_read_input_tokens", 0),
                    "output": 0,
                }
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
    for s in sessions.values():
        s["cost_usd"] = round(s["cost_usd"], 6)
    json.dump(dict(sorted(sessions.items())), sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main(sys.argv[1])
