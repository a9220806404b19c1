"""Cache entries are signed with a key kept outside the cache: a forged entry (its checksum
right, as anyone can compute one) is refused, counted and rebuilt, never believed; the key
comes from $MCSIM_CACHE_KEY or a key file of the user's alone, made once; a key that cannot
be had is one line before any work."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner
from conftest import CORPUS, keep_loaded_calls

from mcsim.accounting.prices import default_table
from mcsim.accounting.recorded import _ANALYSED, ANALYSED_VERSION, analysis_key
from mcsim.cli import cli
from mcsim.ingest import cache_key
from mcsim.ingest.calls_cache import CALLS_FORMAT
from mcsim.ingest.discovery import discover
from mcsim.ingest.disk_cache import (
    BAD_SIGNATURE,
    UNSIGNED,
    check_cache_dir,
    read_payload,
    signature,
    unit_keys,
)
from mcsim.ingest.loaders import plan_units

MAGIC = b"\x89mcsim\r\n"
HEAD = len(MAGIC) + 32  # the magic, then the signature
PROJECT = "-home-dev-app"
# Each kind of inspect's entries (the format its name hashes): its loaded calls, and its
# analysed sessions (what `inspect --json` reads first)
FORMATS = {
    "calls": CALLS_FORMAT,
    "analysed": f"mcsim-analysed/{ANALYSED_VERSION}/{analysis_key(default_table(), False)}",
}


def inspect(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(cli, ["inspect", *args, "--json"])
    assert result.exit_code == 0, result.output
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def rebuilt(doc: dict[str, Any]) -> list[tuple[str, str]]:
    skipped = doc["skipped"]
    found = [(e["file"], e["detail"]) for e in skipped["examples"]]
    assert skipped["notes_by_reason"].get("cache_entry_rebuilt", 0) == len(found)
    return found


def a_project(folder: Path, digit: bytes | None = None) -> Path:
    """One project of the corpus under FOLDER; with DIGIT, one of its usage figures (a cache
    read worth 10,000 tokens) written as that digit: the same size, other figures."""
    source = sorted(CORPUS.glob("*/*.jsonl"))[0]
    target = folder / PROJECT / source.name
    target.parent.mkdir(parents=True)
    text = source.read_bytes()
    if digit is not None:
        at = text.index(b'"cache_read_input_tokens":') + len(b'"cache_read_input_tokens":')
        at += len(text[at:]) - len(text[at:].lstrip(b" "))
        end = at + len(text[at:]) - len(text[at:].lstrip(b"0123456789"))
        assert end - at >= 5
        text = text[: end - 5] + digit + text[end - 4 :]
    target.write_bytes(text)
    return folder


def forge(fake_entry: Path, real: Path, cache: Path, sign: Any) -> Path:
    """The entry made from the fake copy, passed off as the real project's: its key (name and
    stamp: anyone can compute them, from the paths and a stat) and its files rewritten for the
    real unit, then `sign`ed (a plain sha256, as entries carried; or the key's signature)."""
    (unit,) = plan_units(discover([str(real)], None).files)
    kind = fake_entry.suffix[1:]
    name, stamp = unit_keys(unit, FORMATS[kind])
    data = fake_entry.read_bytes()
    kind_version, payload = data[HEAD : HEAD + 3], data[HEAD + 11 :]
    doc = orjson.loads(payload[8:])  # (after the JSON part's size)
    doc[0], doc[1] = [name, stamp], [str(f) for f in unit.files]
    payload = orjson.dumps(doc)
    payload = len(payload).to_bytes(8, "little") + payload
    body = kind_version + len(payload).to_bytes(8, "little") + payload
    entry = cache / f"{name}.{kind}"
    entry.write_bytes(MAGIC + sign(entry.name, body) + body)
    return entry


def read_only(cache: Path, kind: str) -> None:
    """Leave in CACHE only the entries of KIND, so that the next run reads those (a warm run
    reads the analysed sessions first, and the loaded calls where they are not kept)."""
    for entry in cache.iterdir():
        if entry.suffix != f".{kind}":
            entry.unlink()


@pytest.mark.parametrize("kind", FORMATS)
def test_a_forged_entry_is_refused_counted_and_rebuilt(tmp_path: Path, kind: str) -> None:
    """The attack: the figures of other content (a copy with one figure changed), under the
    real project's name and stamp, with the checksum entries used to carry. Refused as
    unsigned; signed with the key, the same entry would be believed (the test can fail)."""
    real = a_project(tmp_path / "real")
    fake = a_project(tmp_path / "fake", digit=b"9")
    truth = inspect(str(real), "--no-cache")
    lie = inspect(str(fake), "--cache-dir", str(tmp_path / "fake-cache"))
    assert lie["totals"]["cache_read_tokens"] != truth["totals"]["cache_read_tokens"]
    keep_loaded_calls(tmp_path / "fake-cache", fake)  # (a first run keeps the analysis alone)
    (fake_entry,) = (tmp_path / "fake-cache").glob(f"*.{kind}")
    cache = tmp_path / "cache"
    cache.mkdir()

    entry = forge(fake_entry, real, cache, lambda name, body: hashlib.sha256(body).digest())
    doc = inspect(str(real), "--cache-dir", str(cache))
    assert doc["totals"] == truth["totals"]
    assert rebuilt(doc) == [(str(entry), UNSIGNED)]
    assert inspect(str(real), "--cache-dir", str(cache))["totals"] == truth["totals"]
    assert rebuilt(inspect(str(real), "--cache-dir", str(cache))) == []  # rebuilt, signed

    forge(fake_entry, real, cache, signature)  # what only a holder of the key can write
    read_only(cache, kind)
    assert inspect(str(real), "--cache-dir", str(cache))["totals"] == lie["totals"]


def test_an_entry_signed_with_another_key_is_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another machine's key (a cluster whose nodes do not share theirs): each entry is
    refused and written again with this key, and the figures stay."""
    project = a_project(tmp_path / "in")
    cache = tmp_path / "cache"
    first = inspect(str(project), "--cache-dir", str(cache))
    (analysed,) = cache.glob("*.analysed")
    (entry,) = keep_loaded_calls(cache, project)
    monkeypatch.setenv("MCSIM_CACHE_KEY", "another-machine-" + "k" * 40)
    doc = inspect(str(project), "--cache-dir", str(cache))
    assert doc["totals"] == first["totals"]
    # the analysed sessions refused, so the loaded calls read (and refused) in their place
    assert rebuilt(doc) == [(str(entry), BAD_SIGNATURE), (str(analysed), BAD_SIGNATURE)]
    assert rebuilt(inspect(str(project), "--cache-dir", str(cache))) == []


@pytest.fixture()
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No $MCSIM_CACHE_KEY, and a config folder of the test's own: where the key file goes."""
    if not sys.platform.startswith("linux"):
        pytest.skip("the config folder is moved with XDG_CONFIG_HOME (Linux)")
    monkeypatch.delenv("MCSIM_CACHE_KEY")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return tmp_path / "config" / "mcsim" / "cache.key"


def test_the_key_file_is_made_once_and_is_the_users_alone(config: Path, tmp_path: Path) -> None:
    assert cache_key.key_file() == config and not config.exists()
    inspect(str(CORPUS), "--no-cache")
    assert not config.exists()  # a run without a cache needs no key
    project = a_project(tmp_path / "in")
    cache = tmp_path / "cache"
    first = inspect(str(project), "--cache-dir", str(cache))
    text = config.read_text()
    assert len(text) == 65 and text.endswith("\n") and int(text, 16) >= 0  # 32 bytes, hex
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert stat.S_IMODE(config.parent.stat().st_mode) == 0o700
    assert sorted(p.name for p in config.parent.iterdir()) == ["cache.key"]
    assert cache_key.load() == text.strip().encode()
    (entry,) = cache.glob("*.analysed")
    assert read_payload(entry, _ANALYSED) is not None  # signed with the file's key
    second = inspect(str(project), "--cache-dir", str(cache))
    assert second == first and config.read_text() == text  # read, not made again


MAKE_KEY = """
import sys
from mcsim.ingest import cache_key
from mcsim.ingest.calls_cache import _CALLS, CALLS_FORMAT
sys.stdin.readline()  # every process started: they race for the file
print(cache_key.load().decode())
"""


def test_processes_racing_to_make_the_key_file_share_one_key(config: Path) -> None:
    env = {**os.environ}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", MAKE_KEY],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
        )
        for _ in range(6)
    ]
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    keys = {proc.communicate(timeout=60)[0].strip() for proc in procs}
    assert keys == {config.read_text().strip()}
    assert sorted(p.name for p in config.parent.iterdir()) == ["cache.key"]


def refused(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 2, result.output
    (line,) = result.output.splitlines()
    return line


def test_a_key_others_may_read_is_refused_before_any_work(config: Path, tmp_path: Path) -> None:
    config.parent.mkdir(parents=True)
    config.write_text("a" * 64 + "\n")
    config.chmod(0o644)
    out = tmp_path / "run"
    args = ["inspect", str(CORPUS), "--cache-dir", str(tmp_path / "cache"), "--out", str(out)]
    assert refused(*args) == (
        f"Error: {config}: the cache's key may be read or written by others (mode 0644); "
        f"chmod 600 {config}"
    )
    assert not out.exists() and not (tmp_path / "cache").exists()
    config.chmod(0o600)
    config.write_text("short\n")
    assert refused(*args) == f"Error: {config}: not a cache key (at least 32 characters); remove it"
    config.unlink()
    os.mkfifo(config)  # never waited on
    assert refused(*args) == (
        f"Error: {config}: cannot read the cache's key (a FIFO, not a regular file)"
    )
    assert inspect(str(CORPUS), "--no-cache")["totals"]["calls"] > 0  # no cache: no key needed


def test_a_key_that_cannot_be_made_or_is_too_short_is_one_line(
    config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config.parent.parent.write_text("a file where the config folder goes")
    out = tmp_path / "run"
    args = ["replay", str(CORPUS), "--policy", "claude-code", "--out", str(out)]
    assert refused(*args) == (f"Error: {config}: cannot read the cache's key (Not a directory)")
    config.parent.parent.unlink()
    config.parent.parent.mkdir()
    (config.parent).write_text("a file where mcsim's config folder goes")
    assert refused(*args) == f"Error: {config}: cannot read the cache's key (Not a directory)"
    monkeypatch.setenv("MCSIM_CACHE_KEY", "too short")
    assert refused(*args) == (
        "Error: MCSIM_CACHE_KEY: too short for a key (9 characters; at least 32, e.g. "
        'python -c "import secrets; print(secrets.token_hex(32))")'
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config"]  # no run, no cache


def test_check_cache_dir_loads_the_key(config: Path, tmp_path: Path) -> None:
    """What the command line does before any work, and a library caller can."""
    check_cache_dir(tmp_path / "cache")
    assert config.is_file() and cache_key.loaded() == config.read_text().strip().encode()
