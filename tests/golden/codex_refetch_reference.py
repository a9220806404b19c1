"""Independent re-fetch figures of keep-the-last-n masking on the bundled multi-call Codex
rollout (does not import mcsim).

Written from the rules in mcsim/replay/refetch.py's docstring and the rollout itself, for
this one file's commands, not from the code: a call is a token_count with info (all 66 are
distinct here); a tool call written before call k's token_count is part of call k+1's
prompt, and so is an output written after it; results are masked, oldest first, once more
than n are in the prompt (every result counts, keep_last_n's rule); a masked result is a
hazard when a later call's prompt holds a tool call touching what it touched:

* a file printed by sed, cat or nl (here the commands' last word of each `&&` part), or
  named by apply_patch's `*** Update File:`;
* any other command: the command as written (no other command here repeats a search);
* a write_stdin poll's output: what the exec_command whose output named its session touched
  (the poll itself touches nothing new);
* update_plan: nothing (its results are not assessed).

    python tests/golden/codex_refetch_reference.py ROLLOUT N
"""

import json
import re
import sys

READERS = ("sed ", "cat ", "nl ")


def command_keys(cmd: str) -> list[str]:
    keys, plain = [], True
    for part in cmd.split("&&"):
        first = part.split("|")[0].strip()
        if first.startswith(READERS):
            keys.append("file:" + first.split()[-1].strip("'\""))
        else:
            plain = False
    return keys if plain else [*keys, "cmd:" + cmd.strip()]


def masking(path: str, n: int) -> dict[str, int]:
    calls = 0
    uses: list[tuple[int, list[str]]] = []  # (call index, keys)
    results: list[tuple[int, list[str]]] = []  # (call index, keys), in order
    by_call_id: dict[str, list[str]] = {}
    sessions: dict[str, list[str]] = {}
    with open(path, encoding="utf-8") as fh:
        for text in fh:
            row = json.loads(text)
            p = row.get("payload") or {}
            kind = p.get("type")
            if kind == "token_count" and p.get("info"):
                calls += 1
            elif kind in ("function_call", "custom_tool_call"):
                name = p["name"]
                if name == "apply_patch":
                    keys = [
                        "file:" + f for f in re.findall(r"\*\*\* Update File: (.+)", p["input"])
                    ]
                elif name == "exec_command":
                    keys = command_keys(json.loads(p["arguments"])["cmd"])
                elif name == "write_stdin":
                    keys = sessions.get(str(json.loads(p["arguments"])["session_id"]), [])
                    by_call_id[p["call_id"]] = keys
                    continue  # a poll: no new use
                else:
                    keys = []
                by_call_id[p["call_id"]] = keys
                uses.append((calls + 1, keys))
            elif kind in ("function_call_output", "custom_tool_call_output"):
                keys = by_call_id[p["call_id"]]
                found = re.search(r"session ID (\d+)", str(p["output"]))
                if found:
                    sessions[found.group(1)] = keys
                results.append((calls, keys))
    cleared = unassessed = hazards = 0
    for position, (_added, keys) in enumerate(results):
        # masked before the first call whose prompt holds more than n results after it
        when = next((j for j in range(calls) if sum(a <= j for a, _ in results) - n > position),
                    None)  # fmt: skip
        if when is None:
            continue
        cleared += 1
        if not keys:
            unassessed += 1
        elif any(j > when and set(keys) & set(k) for j, k in uses):
            hazards += 1
    return {"calls": calls, "results": len(results), "cleared": cleared,
            "unassessed": unassessed, "hazards": hazards}  # fmt: skip


if __name__ == "__main__":
    print(json.dumps(masking(sys.argv[1], int(sys.argv[2])), indent=2))
