"""Independent per-call usage totals of Codex rollouts (does not import mcsim).

Written from the format notes (tests/data/codex/README.md), not from the loader: a call is
an `event_msg` `token_count` with an `info` object whose `total_token_usage` differs from the
previous token_count's in the file and whose `last_token_usage` has input or output; a fork
copies its source's session_meta and token_count lines, so a call seen before with the same
latest session id, totals and last usage (files in name order) is not counted again. Per
call: uncached input = input - cached - cache writes, cache read = cached, output = output.

    python tests/golden/codex_reference.py FOLDER
"""

import json
import os
import sys

FIELDS = ("input_tokens", "cached_input_tokens", "output_tokens", "cache_write_input_tokens")


def totals(folder: str) -> dict[str, int]:
    paths = []
    for root, _dirs, names in os.walk(folder):
        paths += [os.path.join(root, n) for n in names if n.endswith(".jsonl")]
    paths.sort(key=lambda p: (os.path.basename(p), p))
    sums = {"calls": 0, "input_tokens": 0, "cache_read_tokens": 0, "cache_write_5m_tokens": 0}
    sums["output_tokens"] = 0
    seen = set()
    for path in paths:
        session = None
        before = None
        with open(path, encoding="utf-8") as fh:
            for text in fh:
                try:
                    row = json.loads(text)
                except ValueError:
                    continue
                payload = row.get("payload")
                if not isinstance(payload, dict):
                    continue
                if row.get("type") == "session_meta":
                    session = payload.get("id") or payload.get("session_id")
                    continue
                if row.get("type") != "event_msg" or payload.get("type") != "token_count":
                    continue
                info = payload.get("info")
                if not isinstance(info, dict):
                    continue
                total, last = info.get("total_token_usage"), info.get("last_token_usage")
                try:
                    now = tuple(int(total.get(f) or 0) for f in FIELDS) if total else None
                    inp, cached, out, written = (int(last.get(f) or 0) for f in FIELDS)
                except (AttributeError, TypeError, ValueError):
                    continue
                repeat = now is not None and now == before
                before = now
                if repeat or (inp == 0 and out == 0):
                    continue
                key = (session, now, (inp, cached, out, written))
                if key in seen:
                    continue
                seen.add(key)
                sums["calls"] += 1
                sums["input_tokens"] += inp - cached - written
                sums["cache_read_tokens"] += cached
                sums["cache_write_5m_tokens"] += written
                sums["output_tokens"] += out
    return sums


if __name__ == "__main__":
    print(json.dumps(totals(sys.argv[1]), indent=2))
