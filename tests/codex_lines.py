"""Builders for Codex CLI rollout lines, for small hand-made rollouts in tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lines import ts

CWD = "/home/me/src/app"
PROJECT = "-home-me-src-app"


def line(t: float, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"timestamp": ts(t), "type": kind, "payload": payload}


def meta(t: float, sid: str, cwd: str = CWD, **extra: Any) -> dict[str, Any]:
    return line(t, "session_meta", {"id": sid, "timestamp": ts(t), "cwd": cwd, **extra})


def turn(t: float, model: str) -> dict[str, Any]:
    return line(t, "turn_context", {"cwd": CWD, "model": model})


def message(t: float, role: str, text: str) -> dict[str, Any]:
    block = "output_text" if role == "assistant" else "input_text"
    return line(
        t,
        "response_item",
        {"type": "message", "role": role, "content": [{"type": block, "text": text}]},
    )


def reasoning(t: float, summary: str) -> dict[str, Any]:
    payload = {
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": summary}],
        "encrypted_content": "gAAAA" * 20,
    }
    return line(t, "response_item", payload)


def tool_call(t: float, name: str, call_id: str, arguments: str) -> dict[str, Any]:
    payload = {"type": "function_call", "name": name, "arguments": arguments, "call_id": call_id}
    return line(t, "response_item", payload)


def tool_output(t: float, call_id: str, output: str) -> dict[str, Any]:
    payload = {"type": "function_call_output", "call_id": call_id, "output": output}
    return line(t, "response_item", payload)


def counts(inp: int, cached: int, out: int, reasoning: int = 0) -> dict[str, int]:
    return {
        "input_tokens": inp,
        "cached_input_tokens": cached,
        "output_tokens": out,
        "reasoning_output_tokens": reasoning,
        "total_tokens": inp + out,
    }


def token_count(
    t: float, total: dict[str, Any] | None, last: dict[str, Any] | None = None
) -> dict[str, Any]:
    info = (
        None if total is None else {"total_token_usage": total, "last_token_usage": last or total}
    )
    return line(t, "event_msg", {"type": "token_count", "info": info, "rate_limits": None})


def event(t: float, etype: str, **extra: Any) -> dict[str, Any]:
    return line(t, "event_msg", {"type": etype, **extra})


def write(path: Path, lines: list[dict[str, Any] | str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines)
    path.write_text(text)
    return path
