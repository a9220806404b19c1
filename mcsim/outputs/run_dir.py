"""Safe run-directory writes, for every command that writes one.

Data is never lost to an output: a run directory is written into a temporary sibling and
renamed into place, and `--force` replaces only a run directory mcsim wrote: a folder holding
nothing but files mcsim writes into run directories (`RUN_FILES`), with mcsim's run.json. Never
a folder that is or holds an input, the session cache, the current directory or one of its
parents, or a home directory.
"""

from __future__ import annotations

import errno
import glob
import os
import platform
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

import orjson

from mcsim.errors import McsimError, OutputExistsError, OutputRefusedError
from mcsim.ingest.discovery import search_roots
from mcsim.ingest.loaders.jsonl import file_kind, read_regular
from mcsim.ingest.pipeline import LoadStats
from mcsim.ingest.storage import ObjectPath, filesystem, first_line, is_url
from mcsim.outputs.tables import PART_FILE, PARTITION_KEY
from mcsim.processes import STOP
from mcsim.version import __version__

RUN_FORMAT = "mcsim-run/1"  # run.json's "format": how --force knows mcsim wrote a folder
# Every name mcsim writes into a run directory: `inspect --out`, `replay` (its charts are
# mcsim.outputs.charts.CHARTS), `sweep` and `report`. --force replaces a folder only if it holds
# nothing else, so a file mcsim did not write (a transcript, a policy file) is never lost.
RUN_FILES = frozenset(
    {
        "run.json",
        "summary.parquet",
        "sessions.parquet",
        "calls.parquet",
        "breaks.parquet",
        "cumulative_cost.png",
        "context_size.png",
        "savings.png",
        "break_timeline.png",
        "sweep.parquet",
        "savings_curve.png",
        "risk_tradeoff.png",
        "report.html",
        "report.md",
    }
)
# The tables a replay writes as datasets partitioned by policy: folders holding only
# `policy_index=N/part-0.parquet` (inspect --out writes them as files).
DATASETS = frozenset({"calls.parquet", "sessions.parquet", "breaks.parquet"})
_PART = re.compile(rf"{PARTITION_KEY}=[0-9]+/{re.escape(PART_FILE)}")
_MAX_PARTS = 100_000  # a dataset folder with more entries is not mcsim's: not read through
# Far above any run.json mcsim writes (one line per input file): a bound on what is read back.
RUN_JSON_MAX_BYTES = 256 * 1024 * 1024


def run_header(paths: Sequence[str], stats: LoadStats) -> dict[str, Any]:
    """What every run.json starts with: mcsim's format marker and version, the time, and
    every input file with its size."""
    return {
        "format": RUN_FORMAT,
        "mcsim_version": __version__,
        "python": platform.python_version(),
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "paths": list(paths),
        "input_files": stats.files,
        "input_bytes": stats.bytes,
        "files": [{"path": p, "bytes": n} for p, n in stats.inputs],
    }


# Decimals a JSON number keeps, by the unit its key names (docs/output-schema.md): dollars
# to 6 (cents to 4: a Haiku call's output costs from $0.000005), percent to 4 (the precision of
# a fraction to 6), seconds to the millisecond, token means to 1; every other float is a
# fraction (ratios, risks, errors) to 6.
T = TypeVar("T")
_DECIMALS = (("_usd", 6), ("_pct", 4), ("_seconds", 3), ("_tokens", 1))
_FRACTION_DECIMALS = 6


_PLAIN = frozenset({int, str, bool, type(None)})  # values rounding leaves as they are
_DECIMALS_OF: dict[str, int] = {}  # key -> decimals, filled as keys are met


def _decimals(key: str) -> int:
    # Cached, and plain values not walked: the same few dozen keys recur in every row, and
    # a large inspect --json document has hundreds of thousands of them.
    n = _DECIMALS_OF.get(key)
    if n is None:
        n = next((n for suffix, n in _DECIMALS if key.endswith(suffix)), _FRACTION_DECIMALS)
        if len(_DECIMALS_OF) < 4096:  # keys named by the data (projects, models) are many
            _DECIMALS_OF[key] = n
    return n


def rounded(value: Any, decimals: int = _FRACTION_DECIMALS) -> Any:
    """`value` with every float rounded by the unit its key names (a list's items by the
    list's key); -0.0 becomes 0.0. What every JSON document mcsim prints or writes goes
    through, so one unit reads the same everywhere."""
    if isinstance(value, float):
        return round(value, decimals) + 0.0  # + 0.0: no -0.0
    if isinstance(value, dict):
        return {
            k: v if v.__class__ in _PLAIN else rounded(v, _decimals(str(k)))
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [rounded(v, decimals) for v in value]
    return value


def json_bytes(doc: dict[str, Any]) -> bytes:
    """A JSON document as mcsim writes it: indented, numbers `rounded`."""
    return orjson.dumps(rounded(doc), option=orjson.OPT_INDENT_2)


class Each(Generic[T]):
    """`fn` of each item of `items`, made only as it is written (`json_stream`): a document
    listing every session or break then holds them once, not three times (its dicts, their
    rounded copy, the text), which grew the driver by about 12 MB per GB, and memory must not
    grow with the corpus (docs/design.md#performance)."""

    def __init__(self, items: Sequence[T], fn: Callable[[T], Any]) -> None:
        self.items = items
        self.fn = fn

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterator[Any]:
        return map(self.fn, self.items)


def json_stream(doc: dict[str, Any]) -> Iterator[bytes]:
    """The bytes of `json_bytes(doc)`, a piece at a time: the document's dicts an entry at a
    time, a list (or an `Each`) an item at a time, anything else in one piece by orjson."""
    yield from _pieces(doc, _FRACTION_DECIMALS, b"")


def _pieces(value: Any, decimals: int, pad: bytes) -> Iterator[bytes]:
    inner = pad + b"  "
    if isinstance(value, dict) and value:
        yield b"{\n"
        for i, (key, item) in enumerate(value.items()):
            yield (b",\n" if i else b"") + inner + orjson.dumps(str(key)) + b": "
            yield from _pieces(item, _decimals(str(key)), inner)
        yield b"\n" + pad + b"}"
    elif isinstance(value, Each) and not len(value):
        yield b"[]"
    elif isinstance(value, list | Each) and len(value):
        yield b"["
        for i, item in enumerate(value):  # each item in one piece
            yield (b",\n" if i else b"\n") + inner + _piece(item, decimals, inner)
        yield b"\n" + pad + b"]"
    else:
        yield _piece(value, decimals, pad)


def _piece(value: Any, decimals: int, pad: bytes) -> bytes:
    text = orjson.dumps(rounded(value, decimals), option=orjson.OPT_INDENT_2)
    return text.replace(b"\n", b"\n" + pad) if pad and b"\n" in text else text


def write_json(path: Path, doc: dict[str, Any]) -> None:
    path.write_bytes(json_bytes(doc) + b"\n")


def is_run_dir(folder: Path) -> bool:
    """Whether `folder` has mcsim's run.json: a JSON object with mcsim's format marker (or,
    written before the marker existed, an `mcsim_version`).

    Only a mark, easy to forge: --force also requires that nothing else is there.
    """
    try:
        doc = orjson.loads(read_regular(folder / "run.json", RUN_JSON_MAX_BYTES))
    except (OSError, orjson.JSONDecodeError):
        return False
    if not isinstance(doc, dict):
        return False
    return str(doc.get("format", "")).startswith("mcsim-run/") or "mcsim_version" in doc


def _not_replaceable(folder: Path) -> str | None:
    """Why `--force` may not replace the non-empty `folder`, or None if it may: every entry is
    a regular file named in RUN_FILES, and run.json is mcsim's."""
    foreign = _foreign_entry(folder)
    if foreign is not None:
        return (
            f"holds {foreign}, not a file mcsim writes; --force replaces only a run directory "
            "mcsim wrote"
        )
    if not is_run_dir(folder):
        return (
            "not empty and not a run directory written by mcsim (no mcsim run.json); --force "
            "replaces only those"
        )
    return None


def _foreign_entry(folder: Path) -> str | None:
    """The first entry of `folder` (by name) that is not a file mcsim writes, or None.

    At most one entry more than RUN_FILES holds is listed: one of those must be foreign, and
    a folder of millions of files is not read through.
    """
    entries: list[os.DirEntry[str]] = []
    with os.scandir(folder) as listing:
        for entry in listing:
            entries.append(entry)
            if len(entries) > len(RUN_FILES):
                break
    for entry in sorted(entries, key=lambda e: e.name):
        if entry.name not in RUN_FILES:
            return entry.name
        if entry.name in DATASETS and entry.is_dir(follow_symlinks=False):
            foreign = _foreign_part(Path(entry.path))
            if foreign is not None:
                return f"{entry.name}/{foreign}"
            continue
        if not entry.is_file(follow_symlinks=False):
            if entry.is_symlink():
                return f"{entry.name} (a symbolic link)"
            return f"{entry.name} ({file_kind(entry.stat(follow_symlinks=False).st_mode)})"
    return None


def _foreign_part(dataset: Path) -> str | None:
    """The first entry of a dataset folder that is not a partition file mcsim writes (a
    regular file, `policy_index=N/part-0.parquet`), or None."""
    seen = 0
    for folder, dirs, files in os.walk(dataset):
        for name in sorted(dirs + files):
            seen += 1
            path = Path(folder, name)
            inside = path.relative_to(dataset).as_posix()
            if seen > _MAX_PARTS:
                return f"{inside} (more than {_MAX_PARTS:,} entries)"
            if path.is_symlink():
                return f"{inside} (a symbolic link)"
            if name in dirs:
                if folder != str(dataset) or not _PART.fullmatch(f"{name}/{PART_FILE}"):
                    return inside
            elif not _PART.fullmatch(inside) or not path.is_file():
                return inside
    return None


def input_paths(paths: Sequence[str]) -> list[Path]:
    """What PATHS name (globs expanded, as discovery does; an object URL as the prefix it
    searches, `input_roots`), or the default folders when there are none: the folders a run
    directory may never be or hold."""
    if not paths:
        return search_roots()
    found: list[Path] = []
    for p in paths:
        if is_url(p):
            found.append(_root(ObjectPath.from_url(p)))
        else:
            found.extend(Path(m) for m in glob.glob(str(Path(p).expanduser()), recursive=True))
    return found


_PATTERN = re.compile(r"[*?\[]")


def input_roots(paths: Sequence[str]) -> list[Path]:
    """The folders (or prefixes) PATHS search, or the default folders when there are none:
    each argument as it is, a glob cut before its first part with a pattern (`in/**/*.jsonl`
    searches `in`, `*.jsonl` the current folder). What `convert` may not write inside: a next
    run over them would read its files back."""
    if not paths:
        return search_roots()
    return [_root(ObjectPath.from_url(p) if is_url(p) else Path(p).expanduser()) for p in paths]


def _root(path: Path) -> Path:
    """PATH up to its first part with a glob pattern (all of it without one)."""
    parts = path.parts
    plain = next((i for i, part in enumerate(parts) if _PATTERN.search(part)), len(parts))
    return path if plain == len(parts) else type(path)(*parts[:plain])


def checked_out_dir(
    out_dir: Path, force: bool, paths: Sequence[str], cache: Path | None = None
) -> Path:
    """`--out` with `~` expanded, as PATHS are (a shell leaves `--out=~` and a quoted `~` as
    they are), checked before any work (`check_out_dir`)."""
    out_dir = out_dir.expanduser()
    check_out_dir(out_dir, force, input_paths(paths), cache)
    return out_dir


def cache_folder(use_cache: bool, cache_dir: Path | None) -> Path | None:
    """The cache's folder or prefix (None: no cache), checked before any work."""
    from mcsim.ingest.disk_cache import check_cache_dir, default_cache_dir

    if not use_cache:
        return None
    folder = cache_dir or default_cache_dir()
    check_cache_dir(folder)
    return folder


def check_out_dir(
    out_dir: Path,
    force: bool,
    inputs: Sequence[Path] = (),
    cache: Path | None = None,
    replaceable: Replaceable | None = None,
) -> None:
    """Refuse, before any work, an output directory the run may not write or replace.

    Without `force` an existing non-empty directory is refused; with it, only a run directory
    mcsim wrote may be replaced (`_not_replaceable`). Whatever `force` says, `out_dir` may not
    be or hold any of `inputs`, be, hold or lie in the session `cache` folder, be the current
    directory or one of its parents, or a home directory (symlinks resolved). And a folder
    must really be creatable where the run goes: a replay can take minutes, and failing after
    it would waste them (os.access answers yes to root even on a read-only mount, so a folder
    is made and removed). A path the system cannot even look at (a name too long) is refused
    with the system's reason. `replaceable` says why an output may not be replaced, for a
    command that writes other files than a run directory's (`convert`).
    """
    kind = replaceable or RUN_DIR
    if isinstance(out_dir, ObjectPath):
        why = _never_an_object_run(out_dir, inputs, cache)
        if why:
            raise OutputRefusedError(f"{out_dir}: {why}; choose another --out")
        _check_object_out(out_dir, force, kind.prefix)
        return
    not_replaceable = kind.folder
    try:
        why = _never_a_run_dir(out_dir, inputs, cache)
        if why:
            raise OutputRefusedError(f"{out_dir}: {why}; choose another --out")
        if os.path.lexists(out_dir) and not out_dir.is_dir():
            raise OutputRefusedError(f"{out_dir}: exists and is not a directory")
        if _has_entries(out_dir):
            why = not_replaceable(out_dir)
            if why:
                raise OutputRefusedError(f"{out_dir}: {why}")
            if not force:
                raise OutputExistsError(
                    f"{out_dir}: already holds a run (use --force to replace it)"
                )
    except OSError as exc:
        raise OutputRefusedError(f"{out_dir}: {exc.strerror or exc}") from exc
    _check_writable(out_dir)


def _never_a_run_dir(out_dir: Path, inputs: Sequence[Path], cache: Path | None) -> str | None:
    """Why `out_dir` may never be written as a run directory, or None."""
    cwd = _cwd()
    if cwd is None and not out_dir.is_absolute():
        return "is relative, and the current directory no longer exists"
    target = out_dir.resolve()
    if target == Path(target.anchor):
        return "is the root directory"
    if cwd is not None:  # deleted, it holds nothing to protect
        if target == cwd:
            return "is the current directory"
        if target in cwd.parents:
            return "is a parent of the current directory"
    homes = {Path.home(), Path(os.environ.get("HOME") or Path.home())}
    if target in {home.resolve() for home in homes}:
        return "is a home directory"
    return _overlaps(
        target,
        [(path, path.resolve()) for path in inputs],
        None if cache is None else (cache, cache.resolve()),
    )


def _never_an_object_run(out: ObjectPath, inputs: Sequence[Path], cache: Path | None) -> str | None:
    """`_never_a_run_dir` for a prefix in object storage: it may not be or hold an input
    prefix, nor be, hold or lie in the cache's prefix (a whole bucket: `_check_object_out`)."""
    if "/" not in out.key:
        return None
    return _overlaps(
        out,
        [(path, path) for path in inputs if isinstance(path, ObjectPath)],
        (cache, cache) if isinstance(cache, ObjectPath) else None,
    )


def _overlaps(
    target: Any, inputs: list[tuple[Any, Any]], cache: tuple[Any, Any] | None
) -> str | None:
    """Why a run directory at `target` would overwrite what the run reads: it is or holds an
    input, or is, holds or lies in the cache folder. Each is (as named, as compared): a
    local path resolved, an object path as it is."""
    for named, where in inputs:
        if target == where:
            return f"is an input ({named})"
        if target in where.parents:
            return f"holds the input {named}"
    if cache is not None:
        named, where = cache
        if target == where:
            return f"is the session cache folder ({named})"
        if target in where.parents:
            return f"holds the session cache folder {named}"
        if where in target.parents:
            return f"is inside the session cache folder {named}"
    return None


def _cwd() -> Path | None:
    try:
        return Path.cwd().resolve()
    except FileNotFoundError:  # the working directory was deleted
        return None


def _has_entries(folder: Path) -> bool:
    return folder.is_dir() and any(folder.iterdir())


def _check_writable(out_dir: Path) -> None:
    """Make and remove a folder where the run's temporary folder will be made."""
    parent = out_dir.absolute().parent
    try:
        while not parent.exists():
            parent = parent.parent
        if not parent.is_dir():
            raise OutputRefusedError(f"{out_dir}: {parent} is not a directory")
        os.rmdir(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=parent))
    except OSError as exc:
        raise OutputRefusedError(f"{out_dir}: cannot write in {parent}: {exc.strerror}") from exc


class Background(Protocol):
    """Files another process writes into the run folder while the tables are written."""

    def wait(self) -> None:
        """Return when every file asked for is written; raise if one could not be."""

    def close(self) -> None:
        """Stop at once: nothing is written into the folder after this returns."""


def write_run_dir(
    out_dir: Path,
    writers: dict[str, Callable[[Path], None]],
    force: bool,
    background: Callable[[Path], Background | None] | None = None,
) -> None:
    """Write every file into a temporary sibling directory, then swap it into place.

    A reader never sees a half-written run, and a failed or interrupted write leaves the old
    run intact and no temporary folder behind. `background(folder)` starts more writing
    elsewhere and returns it (None if it already finished); the swap waits for it, and a
    failure stops it before the temporary folder is removed, or it would write into a folder
    that no longer exists and leave it behind again. A write that fails (a full disk, a
    folder removed meanwhile) is an McsimError naming `out_dir` and the system's reason.
    """
    check_out_dir(out_dir, force)
    remote = isinstance(out_dir, ObjectPath)  # built in the system's temporary folder
    try:
        if not remote:
            out_dir.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(
            tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=None if remote else out_dir.parent)
        )
        pending: Background | None = None
        try:
            os.chmod(tmp, 0o777 & ~umask())  # mkdtemp makes it private; a run dir is not
            pending = background(tmp) if background is not None else None
            for name, write in writers.items():
                STOP.check()  # a stop polars swallowed while building a table resurfaces here
                write(tmp / name)
            if pending is not None:
                pending.wait()
            STOP.check()
            with STOP.shielded():  # half a swap would leave the old run aside
                if isinstance(out_dir, ObjectPath):
                    _upload(tmp, out_dir, force, _run_prefix)
                else:
                    _swap_in(tmp, out_dir, force)
        finally:
            with STOP.shielded():
                if pending is not None:
                    pending.close()
                if tmp.exists():
                    shutil.rmtree(tmp, ignore_errors=True)
    except Exception as exc:
        reason = _write_failure(exc)
        if reason is None:
            raise
        raise McsimError(f"{out_dir}: could not write the run ({reason})") from exc


def _write_failure(exc: Exception) -> str | None:
    """Why writing failed, if `exc` is a failure to write; None for anything else (a bug keeps
    its traceback). Polars reports the system's errors as ComputeError ("underlying IO
    error: No space left on device")."""
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    polars = sys.modules.get("polars")  # not imported: none of its errors can have happened
    if polars is not None and isinstance(exc, polars.exceptions.ComputeError):
        return (str(exc).splitlines() or ["polars could not write a table"])[0]
    return None


def replace_dir(tmp: Path, out_dir: Path, force: bool, replaceable: Replaceable) -> None:
    """Rename the finished folder `tmp` to `out_dir` (or upload it under the prefix), as a
    run directory is swapped in, for a command whose outputs `replaceable` recognises
    (`check_out_dir`)."""
    with STOP.shielded():
        if isinstance(out_dir, ObjectPath):
            _upload(tmp, out_dir, force, replaceable.prefix)
        else:
            _swap_in(tmp, out_dir, force, replaceable.folder)


def _swap_in(
    tmp: Path,
    out_dir: Path,
    force: bool,
    replaceable: Callable[[Path], str | None] | None = None,
) -> None:
    """Rename the finished run to `out_dir`, replacing what is there only with `force`.

    The run checked at the start may have been replaced meanwhile, or another run may have
    taken a new `out_dir` (two runs racing for it): with `force` the folder is checked again
    and the old run is moved aside, then removed once the new one is in place (or put back if
    that fails); without, rename itself refuses a non-empty directory.
    """
    if not (force and _has_entries(out_dir)):
        _rename(tmp, out_dir)
        return
    if (replaceable or _not_replaceable)(out_dir) is not None:
        raise OutputRefusedError(
            f"{out_dir}: no longer a run directory written by mcsim; not replaced"
        )
    old = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old.", dir=out_dir.parent))
    try:
        os.rename(out_dir, old / "run")
        _rename(tmp, out_dir)
    finally:
        if not os.path.lexists(out_dir) and os.path.lexists(old / "run"):
            os.rename(old / "run", out_dir)
        shutil.rmtree(old, ignore_errors=True)


def _rename(tmp: Path, out_dir: Path) -> None:
    try:
        os.rename(tmp, out_dir)  # onto an empty directory only, on every POSIX system
    except OSError as exc:
        if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
            raise OutputExistsError(
                f"{out_dir}: already holds a run, written while this one ran (use --force to "
                "replace it)"
            ) from exc
        raise McsimError(f"{out_dir}: could not move the run into place: {exc.strerror}") from exc


def _check_object_out(out: ObjectPath, force: bool, prefix: PrefixCheck) -> None:
    """check_out_dir for a prefix in object storage: the bucket must exist; a prefix holding
    objects is refused without `force`, and with it unless `prefix` finds what the command
    writes (for a run: only RUN_FILES, directly under it, with mcsim's run.json)."""
    try:
        fs = filesystem(out.scheme)
        bucket = out.key.split("/", 1)[0]
        if "/" not in out.key:
            raise OutputRefusedError(f"{out}: is a whole bucket; name a prefix in it")
        if not fs.exists(bucket):
            raise OutputRefusedError(f"{out}: no such bucket, or no access to it")
        entries, why = prefix(fs, out)
        if not entries:
            return
        if why:
            raise OutputRefusedError(f"{out}: {why}")
        if not force:
            raise OutputExistsError(f"{out}: already holds a run (use --force to replace it)")
    except OSError as exc:
        raise OutputRefusedError(f"{out}: {exc.strerror or exc}") from exc


def _run_prefix(fs: Any, out: ObjectPath) -> tuple[set[str], str | None]:
    """Every object under the prefix (a replay's datasets are folders), and why --force may
    not replace it as a run."""
    entries = _object_entries(fs, out)
    if not entries:
        return set(), None
    return set(_object_keys(fs, out.key)), _object_not_replaceable(fs, out, entries)


def _object_entries(fs: Any, out: ObjectPath) -> dict[str, dict[str, Any]]:
    """What is directly under the prefix, by name (a sub-prefix as a "directory")."""
    fs.invalidate_cache(out.key)
    try:
        listing = fs.ls(out.key, detail=True, refresh=True)
    except FileNotFoundError:
        return {}
    return {str(e["name"]).rstrip("/").rsplit("/", 1)[-1]: e for e in listing}


def _object_not_replaceable(
    fs: Any, out: ObjectPath, entries: dict[str, dict[str, Any]]
) -> str | None:
    """_not_replaceable for a prefix: why --force may not replace what is there, or None."""
    if any(str(e["name"]).rstrip("/") == out.key for e in entries.values()):
        return "is an object, not a prefix"
    for name in sorted(entries):
        entry = entries[name]
        foreign: str | None = name
        if name in RUN_FILES and entry["type"] != "directory":
            foreign = None
        elif name in DATASETS:
            keys = _object_keys(fs, f"{out.key}/{name}")
            foreign = next((f"{name}/{k}" for k in keys if not _PART.fullmatch(k)), None)
        if foreign is not None:
            return (
                f"holds {foreign}, not a file mcsim writes; --force replaces only a run "
                "directory mcsim wrote"
            )
    if prefix_run_json(fs, out, entries.get("run.json")) is None:
        return (
            "not empty and not a run directory written by mcsim (no mcsim run.json); --force "
            "replaces only those"
        )
    return None


def _object_keys(fs: Any, prefix: str) -> list[str]:
    """Every object under PREFIX, as a path relative to it."""
    fs.invalidate_cache(prefix)
    return sorted(str(k)[len(prefix) + 1 :] for k in fs.find(prefix, maxdepth=None))


def prefix_run_json(fs: Any, out: ObjectPath, info: dict[str, Any] | None) -> dict[str, Any] | None:
    """The run.json under the prefix (`info`: what listing said of it), if it is mcsim's."""
    try:
        if info is None or int(info.get("size") or 0) > RUN_JSON_MAX_BYTES:
            return None
        doc = orjson.loads(fs.cat_file(f"{out.key}/run.json"))
    except (OSError, ValueError):  # orjson.JSONDecodeError is a ValueError
        return None
    if not (isinstance(doc, dict) and str(doc.get("format", "")).startswith("mcsim-run/")):
        return None
    return doc


def _upload(tmp: Path, out: ObjectPath, force: bool, prefix: PrefixCheck) -> None:
    """Put the finished run under the prefix `out`, run.json last: a reader that finds
    run.json finds the whole run. With `force` the old run is checked again (by `prefix`), its
    run.json removed first and its files that the new run does not write removed before
    run.json goes up. Without, a run that appeared meanwhile is not overwritten."""
    fs = filesystem(out.scheme)
    old, why = prefix(fs, out)
    if old:
        if not force:
            raise OutputExistsError(
                f"{out}: already holds a run, written while this one ran (use --force to "
                "replace it)"
            )
        if why is not None:
            raise OutputRefusedError(f"{out}: no longer a run written by mcsim; not replaced")
    names = sorted(p.relative_to(tmp).as_posix() for p in tmp.rglob("*") if p.is_file())
    try:
        if "run.json" in old:
            fs.rm_file(f"{out.key}/run.json")
        for name in names:
            if name != "run.json":
                fs.put_file(str(tmp / name), f"{out.key}/{name}")
        for name in sorted(old - set(names)):
            fs.rm_file(f"{out.key}/{name}")
        fs.put_file(str(tmp / "run.json"), f"{out.key}/run.json")
    except OSError:
        raise
    except Exception as exc:  # the store's own errors: a failed write, as a full disk is
        raise OSError(errno.EIO, first_line(exc)) from exc


# What is under a prefix in object storage (names relative to it), and why --force may not
# replace it (None: it may).
PrefixCheck = Callable[[Any, ObjectPath], tuple[set[str], str | None]]


@dataclass(frozen=True)
class Replaceable:
    """What --force may replace, for a command's outputs: `folder` says why a local folder
    may not be replaced (None: it may), `prefix` what is under a prefix in object storage
    and why it may not."""

    folder: Callable[[Path], str | None]
    prefix: PrefixCheck


RUN_DIR = Replaceable(_not_replaceable, _run_prefix)  # what inspect, replay and sweep write


def umask() -> int:
    """The process's umask (reading it means setting it: it is put back at once)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask
