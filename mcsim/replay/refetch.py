"""Re-fetch risk: did the recorded agent later need what a policy cleared?

Clearing a tool result is only free if the agent never needed it again. The recording says
what the agent did next: if, after a result was cleared, it read, edited or wrote the same
file again, or repeated the same command, search, glob or fetch, the cleared content was
probably needed; with the result cleared, the agent would have had to fetch it again. Each
such cleared result is a *hazard*. (Whether the agent would really have re-fetched is not
knowable from the recording; a hazard is the observable proxy. Content referred to later
without a repeated tool call is not detected.)

A hazard's estimated cost is one extra call: the result's tokens written to the cache again
plus the prompt at that point read from the cache, at the model's list prices.
"""

from __future__ import annotations

from typing import Any

import orjson

# The highest re-fetch risk a recommendation (sweep.recommend) or the replay's verdict may
# have: at most half of what a policy clears may be needed again. Re-fetches are priced into
# the net savings already, so the limit guards what they do not price (latency, lost context).
DEFAULT_MAX_RISK = 0.50

_FILE_TOOLS = frozenset({"Read", "Edit", "Write", "MultiEdit", "NotebookEdit", "NotebookRead"})


def resource_of(tool_name: str | None, input_json: str | None) -> str | None:
    """What a tool call touched, as a key two calls share when they touch the same thing:
    `file:<path>` for file tools (so a Read and a later Edit of one file match), the command
    for Bash, pattern and path for Grep/Glob, the URL or query for web tools."""
    if not tool_name or not input_json:
        return None
    try:
        args = orjson.loads(input_json)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(args, dict):
        return None
    if tool_name in _FILE_TOOLS:
        path = args.get("file_path") or args.get("notebook_path") or args.get("path")
        return f"file:{path}" if isinstance(path, str) and path else None
    if tool_name.startswith("Bash"):
        return _key("cmd", args.get("command"))
    if tool_name in ("Grep", "Glob"):
        pattern = args.get("pattern")
        where = args.get("path") or ""
        return _key(tool_name.lower(), f"{pattern}|{where}" if isinstance(pattern, str) else None)
    if tool_name == "WebFetch":
        return _key("url", args.get("url"))
    if tool_name == "WebSearch":
        return _key("search", args.get("query"))
    return None


def _key(prefix: str, value: Any) -> str | None:
    return f"{prefix}:{value.strip()}" if isinstance(value, str) and value.strip() else None
