"""Builders for Claude Code JSONL lines, for small hand-made transcripts in tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SESSION = "11111111-2222-3333-4444-555555555555"


def ts(seconds: float) -> str:
    """An ISO timestamp `seconds` after 2026-01-01T00:00:00Z."""
    from datetime import UTC, datetime, timedelta

    t = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=seconds)
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def usage(
    inp: int = 3, write: int = 0, read: int = 0, out: int = 10, w1h: int | None = None, **extra: Any
) -> dict[str, Any]:
    u: dict[str, Any] = {
        "input_tokens": inp,
        "cache_creation_input_tokens": write,
        "cache_read_input_tokens": read,
        "output_tokens": out,
    }
    if w1h is not None:
        u["cache_creation"] = {
            "ephemeral_5m_input_tokens": write - w1h,
            "ephemeral_1h_input_tokens": w1h,
        }
    u.update(extra)
    return u


def assistant(
    uuid: str,
    parent: str | None,
    at: float,
    msg_id: str,
    req: str | None = "req_1",
    *,
    u: dict[str, Any] | None = None,
    content: list[dict[str, Any]] | None = None,
    model: str = "claude-sonnet-4-5-20250929",
    session: str = SESSION,
    **extra: Any,
) -> dict[str, Any]:
    line: dict[str, Any] = {
        "type": "assistant",
        "uuid": uuid,
        "parentUuid": parent,
        "sessionId": session,
        "timestamp": ts(at),
        "isSidechain": False,
        "message": {
            "model": model,
            "id": msg_id,
            "role": "assistant",
            "content": content if content is not None else [{"type": "text", "text": "ok"}],
            "usage": u if u is not None else usage(),
        },
    }
    if req is not None:
        line["requestId"] = req
    line.update(extra)
    return line


def user(
    uuid: str,
    parent: str | None,
    at: float,
    content: Any = "hello",
    session: str = SESSION,
    **extra: Any,
) -> dict[str, Any]:
    line = {
        "type": "user",
        "uuid": uuid,
        "parentUuid": parent,
        "sessionId": session,
        "timestamp": ts(at),
        "isSidechain": False,
        "message": {"role": "user", "content": content},
    }
    line.update(extra)
    return line


def tool_use(tool_id: str, name: str, **inp: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": name, "input": inp}


def tool_result(tool_id: str, text: str, is_error: bool = False) -> list[dict[str, Any]]:
    return [{"type": "tool_result", "tool_use_id": tool_id, "content": text, "is_error": is_error}]


def write(path: Path, lines: list[Any]) -> Path:
    """Write dicts as JSON lines; bytes and str are written as they are."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as fh:
        for line in lines:
            if isinstance(line, bytes):
                fh.write(line + b"\n")
            elif isinstance(line, str):
                fh.write(line.encode() + b"\n")
            else:
                fh.write(json.dumps(line).encode() + b"\n")
    return path
