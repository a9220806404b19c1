"""Find transcript files from PATHS arguments or the default locations (Claude Code, Codex)."""

from __future__ import annotations

import glob
import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from mcsim.errors import InputNotFoundError
from mcsim.ingest import storage
from mcsim.ingest.loaders.jsonl import file_kind

_GLOB_CHARS = frozenset("*?[")


@dataclass(frozen=True, slots=True)
class Discovery:
    """The files to read, and what was passed over before reading."""

    files: tuple[Path, ...]
    roots: tuple[str, ...]  # what was searched, for messages and run records
    skipped_by_date: int  # files last modified before --since
    # FIFOs, devices, sockets named like transcripts, with what they are: never opened (a FIFO
    # blocks a reader, a link to /dev/zero never ends), reported as skipped.
    not_regular: tuple[tuple[Path, str], ...] = ()


def default_roots(environ: dict[str, str] | None = None) -> list[Path]:
    """Claude Code's transcript folders: $CLAUDE_CONFIG_DIR (a comma-separated list), then
    ~/.claude/projects and ~/.config/claude/projects."""
    env = os.environ if environ is None else environ
    roots = []
    config = env.get("CLAUDE_CONFIG_DIR", "")
    for part in config.split(","):
        if part.strip():
            roots.append(Path(part.strip()).expanduser() / "projects")
    home = Path(env.get("HOME") or Path.home())
    roots += [home / ".claude" / "projects", home / ".config" / "claude" / "projects"]
    return roots


def codex_root(environ: dict[str, str] | None = None) -> Path:
    """Where Codex CLI writes its rollouts: $CODEX_HOME/sessions, else ~/.codex/sessions."""
    env = os.environ if environ is None else environ
    home = env.get("CODEX_HOME", "").strip()
    if home:
        return Path(home).expanduser() / "sessions"
    return Path(env.get("HOME") or Path.home()) / ".codex" / "sessions"


def search_roots(environ: dict[str, str] | None = None) -> list[Path]:
    """Every folder searched when no PATHS are given: Claude Code's, then Codex's."""
    return [*default_roots(environ), codex_root(environ)]


def discover(
    paths: Sequence[str], since_s: float | None = None, environ: dict[str, str] | None = None
) -> Discovery:
    """Expand PATHS (files, folders searched recursively, globs) into transcript files.

    With no PATHS the default locations that exist are searched; if none exists, or a PATH
    matches nothing, InputNotFoundError names it. Files last modified before `since_s` cannot
    hold a session that starts after it and are passed over without being opened.
    """
    if paths:
        found = [f for p in paths for f in _expand(p)]
        roots = tuple(paths)
    else:
        candidates = search_roots(environ)
        existing = [r for r in candidates if r.is_dir()]
        if not existing:
            tried = ", ".join(str(r) for r in candidates)
            raise InputNotFoundError(
                f"no Claude Code transcripts found, nor Codex rollouts (looked in {tried})"
            )
        found = [f for r in existing for f in _walk(r)]
        roots = tuple(str(r) for r in existing)
    regular, odd = [], []
    seen: set[tuple[int, int]] = set()  # (device, inode): one file reached by two spellings
    for path in sorted(set(found)):
        try:
            info = path.stat()
        except OSError:
            regular.append(path)  # let the loader report why it cannot be read
            continue
        if not stat.S_ISREG(info.st_mode):
            odd.append((path, file_kind(info.st_mode)))
        elif (info.st_dev, info.st_ino) not in seen:
            seen.add((info.st_dev, info.st_ino))
            regular.append(path)
    kept = regular if since_s is None else [f for f in regular if _mtime(f) >= since_s]
    return Discovery(tuple(kept), roots, len(regular) - len(kept), tuple(odd))


def _expand(arg: str) -> list[Path]:
    if storage.is_url(arg):
        try:
            return list(storage.find(arg))
        except FileNotFoundError:
            raise InputNotFoundError(f"{arg}: no such object or prefix") from None
        except OSError as exc:
            raise InputNotFoundError(f"{arg}: cannot list ({exc.strerror or exc})") from None
    path = Path(arg).expanduser()
    if _GLOB_CHARS & set(arg):
        matches = [Path(m) for m in sorted(glob.glob(str(path), recursive=True))]
        if not matches:
            raise InputNotFoundError(f"{arg}: no file matches this pattern")
        return [f for m in matches for f in (_walk(m) if m.is_dir() else [m])]
    if path.is_dir():
        if not os.access(path, os.R_OK | os.X_OK):
            raise InputNotFoundError(f"{arg}: folder is not readable")
        return list(_walk(path))
    if path.is_file():
        if not os.access(path, os.R_OK):
            raise InputNotFoundError(f"{arg}: file is not readable")
        return [path]
    if path.exists():  # a FIFO or a device: reported as skipped, never opened
        return [path]
    raise InputNotFoundError(f"{arg}: no such file or folder")


def _walk(folder: Path) -> Iterable[Path]:
    """Every `*.jsonl` below `folder` that is not a folder, without following linked folders.

    A loop, not os.walk: Python 3.11's os.walk recurses, and a tree 1,000 folders deep (any
    disk can hold one) raised RecursionError. Unreadable folders are passed over, as os.walk
    does."""
    stack = [str(folder)]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            try:
                is_dir = entry.is_dir()
            except OSError:
                is_dir = False
            if is_dir:
                if not entry.is_symlink():
                    stack.append(entry.path)
            elif entry.name.endswith(".jsonl"):
                yield Path(entry.path)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return float("inf")  # let the loader report it
