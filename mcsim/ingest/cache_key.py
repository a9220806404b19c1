"""The key the cache's entries are signed with, kept outside the cache (docs/cache.md).

Anyone who can write the cache folder (a shared `--cache-dir s3://...` above all) could
otherwise write an entry mcsim believes: a checksum anyone can compute proves nothing. Each
entry is signed with an HMAC whose key is `$MCSIM_CACHE_KEY` (a cluster gives every node the
same one), else the file `cache.key` in the user's config folder (platformdirs:
`~/.config/mcsim` on Linux), made on first use with 32 random bytes and readable by its owner
alone. A Ray run ships the driver's key to its tasks (`engines/ray.py`), so the workers sign
and check with it. A key that cannot be had (a key file others may read, a key too short, a
config folder that cannot be written) is a UsageError, told before any work (`load`).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path

from platformdirs import user_config_dir

from mcsim.errors import UsageError
from mcsim.ingest.loaders.jsonl import read_regular

ENV = "MCSIM_CACHE_KEY"
MIN_CHARS = 32  # 128 bits as hex: shorter is a password, not a key
_MAX_BYTES = 4096  # a key file is a line; a larger one is not read whole
_given: bytes | None = None  # a key handed to this process (a Ray task's, from its driver)
_files: dict[str, bytes] = {}  # the key files read, by path
_used: bytes | None = None  # what `load` returned last


def key_file() -> Path:
    return Path(user_config_dir("mcsim", appauthor=False)) / "cache.key"


def load() -> bytes:
    """The key this process signs and checks entries with: a given one (`give`), else
    `$MCSIM_CACHE_KEY`, else the key file (made if missing). UsageError if it cannot be had."""
    global _used
    _used = _given if _given is not None else _from_env() or _from_file(key_file())
    return _used


def loaded() -> bytes | None:
    """The key, if this process has used one (`load`), else None: what a Ray run ships to its
    tasks. A run without a cache never loads one, so it never makes a key file."""
    return None if _used is None else load()


def _from_env() -> bytes | None:
    text = os.environ.get(ENV, "").strip()
    if not text:
        return None
    if len(text) < MIN_CHARS:
        raise UsageError(
            f"{ENV}: too short for a key ({len(text)} characters; at least {MIN_CHARS}, "
            'e.g. python -c "import secrets; print(secrets.token_hex(32))")'
        )
    return text.encode()


def _from_file(path: Path) -> bytes:
    where = str(path)
    if where not in _files:
        _files[where] = _read_or_make(path)
    return _files[where]


def give(key: bytes | None) -> None:
    """Sign and check with `key` from now on, in this process (a Ray task, given its
    driver's key: every node then trusts what every other one wrote); None: this process's
    own key again."""
    global _given
    _given = key


def _read_or_make(path: Path) -> bytes:
    try:
        return _read(path)
    except FileNotFoundError:
        pass
    try:
        _make(path)
        return _read(path)
    except OSError as exc:
        raise UsageError(
            f"{path}: cannot make the cache's key ({exc.strerror or exc}); set {ENV} or use "
            "--no-cache"
        ) from None


def _read(path: Path) -> bytes:
    """The key in `path`, which must be a regular file of this user's that nobody else may
    read or write (as ssh asks of a private key): anyone who can read it can forge entries."""
    try:
        text = read_regular(path, _MAX_BYTES)
        st = path.stat()
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the cache's key ({exc.strerror or exc})") from None
    if hasattr(os, "getuid"):  # POSIX: an owner and permissions to check
        if st.st_uid != os.getuid():
            raise UsageError(f"{path}: the cache's key belongs to another user; remove it")
        if st.st_mode & 0o077:
            mode = stat.S_IMODE(st.st_mode)
            raise UsageError(
                f"{path}: the cache's key may be read or written by others (mode {mode:04o}); "
                f"chmod 600 {path}"
            )
    key = text.strip()
    if len(key) < MIN_CHARS:
        raise UsageError(f"{path}: not a cache key (at least {MIN_CHARS} characters); remove it")
    return key


def _make(path: Path) -> None:
    """Write a new key to `path` unless another process did first: written whole in a file of
    its own, then linked into place (a link fails if the name exists, a rename would replace
    the other process's key)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_hex(32) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        with contextlib.suppress(FileExistsError):
            os.link(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
