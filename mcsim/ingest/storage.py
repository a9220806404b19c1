"""Transcripts and run directories in object storage (`s3://`, `gs://`), through fsspec.

An object URL travels through mcsim as an `ObjectPath`: a path whose first part is the scheme
(`/s3:/bucket/key`) and whose text is the URL again, so units, names, parents and the
session cache's keys work as they do for files, and a worker process (or a Ray worker) that
receives one opens the object itself. fsspec and the filesystem of the scheme (s3fs, gcsfs)
are imported on first use only: a run on local files never pays for them. Credentials and
the endpoint come from the environment, as the filesystem reads them (for S3: AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL or FSSPEC_S3_ENDPOINT_URL).
"""

from __future__ import annotations

import errno
import hashlib
import math
import os
import stat
from datetime import datetime
from pathlib import PosixPath
from typing import Any, BinaryIO

from mcsim.errors import UsageError

SCHEMES = ("s3", "gs")
_EXTRA = {"s3": "s3", "gs": "gcs"}
# What listing found about each object (size, time), so discovery, unit planning and the
# session cache's key ask the store once per object, not once per question.
_INFO: dict[str, dict[str, Any]] = {}


def is_url(text: str) -> bool:
    return any(text.startswith(f"{scheme}://") for scheme in SCHEMES)


class ObjectPath(PosixPath):
    """An object URL as a path: `ObjectPath.from_url("s3://b/k")`, shown as the URL."""

    @classmethod
    def from_url(cls, url: str) -> ObjectPath:
        """The URL as a path; a UsageError for a `..` in it: a store takes it as part of a
        key, not a step up (`s3://b/runs/../x` would write under `runs/../x/`)."""
        scheme, rest = url.split("://", 1)
        if ".." in rest.split("/"):
            raise UsageError(f"{url}: '..' in an object URL is part of the key, not a step up")
        return cls("/", f"{scheme}:", rest.strip("/"))

    @property
    def scheme(self) -> str:
        return self.parts[1][:-1]

    @property
    def key(self) -> str:
        """The path within the store, `bucket/key`, as fsspec names it."""
        return "/".join(self.parts[2:])

    def __str__(self) -> str:
        return f"{self.scheme}://{self.key}"

    def resolve(self, strict: bool = False) -> ObjectPath:
        return self  # no links to follow

    def stat(self, *, follow_symlinks: bool = True) -> os.stat_result:
        """The object's size and time as a regular file's: an object has no inode, so a
        number from its URL stands in for one (discovery tells files apart by inode)."""
        info = object_info(self)
        kind = stat.S_IFDIR if info.get("type") == "directory" else stat.S_IFREG
        mode = kind | 0o444
        seconds = _mtime(info)
        whole = int(seconds) if math.isfinite(seconds) else 0
        number = int.from_bytes(hashlib.sha256(str(self).encode()).digest()[:7], "big")
        return os.stat_result(
            (mode, number, 0, 1, 0, 0, int(info.get("size") or 0), 0, whole, 0),
            {
                "st_atime": seconds,
                "st_mtime": seconds,
                "st_ctime": seconds,
                "st_mtime_ns": int(seconds * 1e9) if whole else 0,
            },
        )


def filesystem(scheme: str) -> Any:
    """The fsspec filesystem of `scheme`; a one-line McsimError when it is not installed."""
    try:
        import fsspec

        return fsspec.filesystem(scheme)
    except ImportError as exc:
        raise UsageError(
            f"{scheme}:// needs fsspec and its {scheme} filesystem: "
            f"pip install 'mcsim[{_EXTRA.get(scheme, scheme)}]' ({exc})"
        ) from None


def object_info(path: ObjectPath) -> dict[str, Any]:
    """What the store says about `path` (cached from listing); FileNotFoundError if absent."""
    url = str(path)
    if url not in _INFO:
        _INFO[url] = filesystem(path.scheme).info(path.key)
    return _INFO[url]


# What tells an object's content (S3: its ETag; GCS: generation, etag, md5Hash, crc32c): any
# new upload changes it, where the size and the time need not (S3's LastModified is in whole
# seconds). Only what a listing and a HEAD both report: the stamps a Ray worker makes (from a
# HEAD) are then those of the driver's listing. S3's VersionId is not: a listing lacks it.
_CONTENT_KEYS = ("ETag", "etag", "generation", "md5Hash", "crc32c")


def content_tag(path: ObjectPath) -> str | None:
    """What identifies the object's content as the store reported it (when listed), or None
    if the store reports nothing of the kind."""
    info = object_info(path)
    tags = [f"{key}={info[key]}" for key in _CONTENT_KEYS if info.get(key)]
    return "\0".join(tags) or None


def find(url: str) -> list[ObjectPath]:
    """The `*.jsonl` objects a URL names: one object, every one under a prefix, or what a
    glob matches (prefixes it matches searched in turn). An OSError says why none could be
    listed (FileNotFoundError when nothing is there)."""
    path = ObjectPath.from_url(url)
    fs = filesystem(path.scheme)
    fs.invalidate_cache()  # a listing fsspec kept from an earlier run in this process is old
    try:
        if any(c in path.key for c in "*?["):
            matches: dict[str, Any] = fs.glob(path.key, detail=True)
        else:
            matches = {path.key: fs.info(path.key)}
        found: dict[str, Any] = {}
        for name, info in matches.items():
            if info.get("type") == "directory":
                found.update(fs.find(name, detail=True))
            else:
                found[name] = info
    except OSError:
        raise
    except Exception as exc:  # the store's own errors (a refused request, a bad bucket name)
        raise OSError(errno.EIO, first_line(exc)) from exc
    objects = []
    for name, info in sorted(found.items()):
        if info.get("type") != "directory" and (name == path.key or name.endswith(".jsonl")):
            objects.append(ObjectPath("/", f"{path.scheme}:", name))
            _INFO[str(objects[-1])] = info
    if not objects:
        raise FileNotFoundError(errno.ENOENT, "no object there")
    return objects


def open_object(path: ObjectPath) -> BinaryIO:
    """Open an object for reading; the store's errors become OSErrors with a reason."""
    fs = filesystem(path.scheme)
    try:
        fh: BinaryIO = fs.open(path.key, "rb")
    except OSError:
        raise
    except Exception as exc:
        raise OSError(errno.EIO, first_line(exc), str(path)) from exc
    return fh


def first_line(exc: BaseException) -> str:
    """An error of a store or library as one line: its first, else its type's name."""
    return (str(exc).splitlines() or [type(exc).__name__])[0]


def _mtime(info: dict[str, Any]) -> float:
    """The object's last change as seconds since the epoch (S3's LastModified, GCS's
    updated); unknown is +inf, so --since never passes over an object it cannot date."""
    value = info.get("LastModified") or info.get("updated") or info.get("mtime")
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return float("inf")
    if isinstance(value, int | float):
        return float(value)
    return float("inf")
