"""Cache entries a process writes many at a time go into pack files (mcsim.ingest.cache_packs):
read back as their own files would be, the newest copy first, a forged or broken pack never
believed, packs counted, capped and cleared like files, and the local engine's workers
publish theirs before the run ends."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
from click.testing import CliRunner

from mcsim.cli import cli
from mcsim.ingest import cache_packs, disk_cache
from mcsim.ingest.cache_packs import batched
from mcsim.ingest.disk_cache import Damaged, Kind, read_payload, write_entry
from mcsim.ingest.engines.local import LocalEngine
from mcsim.ingest.loaders import LoadUnit

KIND = Kind(3, 1)
MANY = 40  # past cache_packs._MIN_ENTRIES


def _name(i: int) -> str:
    return f"{i:064x}.calls"


def _write(folder: Path, n: int, tag: bytes = b"") -> None:
    for i in range(n):
        write_entry(folder / _name(i), KIND, b"payload %d" % i + tag)


def _listed(folder: Path) -> list[str]:
    return sorted(p.suffix for p in folder.iterdir())


def test_many_entries_make_one_pack_read_back_as_files(tmp_path: Path) -> None:
    with batched():
        _write(tmp_path, MANY)
        assert not tmp_path.exists() or not any(
            p.suffix == ".pack" for p in tmp_path.iterdir()
        )  # published when the block ends
    assert _listed(tmp_path) == [".pack"]
    for i in range(MANY):
        assert read_payload(tmp_path / _name(i), KIND) == b"payload %d" % i
    assert read_payload(tmp_path / _name(MANY), KIND) is None
    with pytest.raises(Damaged, match=r"another kind .* \(in [0-9a-f]{64}\.pack\)"):
        read_payload(tmp_path / _name(0), Kind(4, 1))


def test_few_entries_are_files_of_their_own_written_when_the_block_ends(tmp_path: Path) -> None:
    tmp_path.mkdir(exist_ok=True)
    with batched():
        _write(tmp_path, 3)
        assert list(tmp_path.iterdir()) == []
    assert _listed(tmp_path) == [".calls"] * 3
    assert read_payload(tmp_path / _name(2), KIND) == b"payload 2"


def test_outside_a_block_each_entry_is_written_at_once(tmp_path: Path) -> None:
    _write(tmp_path, MANY)
    assert _listed(tmp_path) == [".calls"] * MANY


def test_an_error_in_the_block_leaves_nothing(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), batched():
        _write(tmp_path, MANY)
        raise RuntimeError("stop")
    assert list(tmp_path.iterdir()) == []  # no pack, no temporary file


def test_large_packs_are_published_as_they_fill(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cache_packs, "_MAX_BYTES", 400)
    with batched():
        _write(tmp_path, MANY)
    packs = [p for p in tmp_path.iterdir() if p.suffix == ".pack"]
    assert len(packs) > 2
    assert sum(len(t[1]) for p in packs if (t := cache_packs.read_table(p))) == MANY
    for i in range(MANY):
        assert read_payload(tmp_path / _name(i), KIND) == b"payload %d" % i


def test_a_pack_holds_at_most_max_rows_entries_and_a_larger_table_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cache_packs, "_MAX_ROWS", 16)
    with batched():
        _write(tmp_path, MANY)  # 40 entries: packs of 16, 16 and 8
    tables = [cache_packs.read_table(p) for p in tmp_path.iterdir()]
    assert sorted(len(t[1]) for t in tables if t is not None) == [8, 16, 16]
    for i in range(MANY):
        assert read_payload(tmp_path / _name(i), KIND) == b"payload %d" % i
    # A table longer than _MAX_ROWS rows of the longest name can be is not read at all.
    (pack,) = (p for p in tmp_path.iterdir() if (t := cache_packs.read_table(p)) and len(t[1]) == 8)
    monkeypatch.setattr(cache_packs, "_MAX_TABLE_BYTES", 8 * (18 + 69) - 1)
    assert cache_packs.read_table(pack) is None


def test_a_pack_left_by_a_killed_writer_is_swept_by_the_next_run(tmp_path: Path) -> None:
    gone = os.fork()
    if gone == 0:
        os._exit(0)
    os.waitpid(gone, 0)  # a process id that no longer exists
    host = cache_packs._host()
    names = {
        "gone": f"{cache_packs.TMP_PREFIX}pack-{host}-{gone}-abc",
        "alive": f"{cache_packs.TMP_PREFIX}pack-{host}-{os.getppid()}-abc",
        "another machine": f"{cache_packs.TMP_PREFIX}pack-{'0' * 16}-{gone}-abc",
        "another temporary file": f"{cache_packs.TMP_PREFIX}{gone}",
        # planted: past any process id (os.kill would overflow), in Arabic-Indic digits
        "a pid past any": f"{cache_packs.TMP_PREFIX}pack-{host}-{2**31}-abc",
        "a pid in other digits": f"{cache_packs.TMP_PREFIX}pack-{host}-\u0662\u0661-abc",
    }
    for name in names.values():
        (tmp_path / name).write_bytes(b"half a pack")
    cache_packs._SWEPT.discard(tmp_path)
    with batched():
        _write(tmp_path, MANY)  # the first pack of a run sweeps the folder
    left = {p.name for p in tmp_path.iterdir() if p.suffix != ".pack"}
    assert left == set(names.values()) - {names["gone"]}
    # (an hour on, any temporary file goes: tests/test_session_cache.py)


def test_a_run_that_writes_nothing_sweeps_too(tmp_path: Path) -> None:
    gone = os.fork()
    if gone == 0:
        os._exit(0)
    os.waitpid(gone, 0)
    write_entry(tmp_path / _name(0), KIND, b"an entry")
    left = tmp_path / f"{cache_packs.TMP_PREFIX}pack-{cache_packs._host()}-{gone}-abc"
    left.write_bytes(b"half a pack")
    info = CliRunner().invoke(cli, ["cache", "info", "--cache-dir", str(tmp_path)])
    assert "entries: 1\n" in info.output  # a file being written is no entry yet
    assert "  unfinished writes: 1, 11 bytes\n" in info.output
    cache_packs._SWEPT.discard(tmp_path)
    disk_cache.enforce_cap(tmp_path, 10**9)  # what every run does last, a warm one too
    assert not left.exists()
    assert read_payload(tmp_path / _name(0), KIND) == b"an entry"


def test_the_newest_copy_is_read(tmp_path: Path) -> None:
    _write(tmp_path, 2, b" file")  # files of their own
    with batched():
        _write(tmp_path, MANY, b" packed")
    # publishing the pack removed the older files it replaces
    assert _listed(tmp_path) == [".pack"]
    assert read_payload(tmp_path / _name(1), KIND) == b"payload 1 packed"
    write_entry(tmp_path / _name(1), KIND, b"payload 1 later")  # a file written after it
    assert read_payload(tmp_path / _name(1), KIND) == b"payload 1 later"
    os.utime(tmp_path, ns=(0, 0))  # (the folder's time is how a process sees a new pack)
    with batched():
        _write(tmp_path, MANY, b" again")
    assert read_payload(tmp_path / _name(1), KIND) == b"payload 1 again"
    assert read_payload(tmp_path / _name(5), KIND) == b"payload 5 again"


def _pack(folder: Path) -> Path:
    (pack,) = (p for p in folder.iterdir() if p.suffix == ".pack")
    return pack


def test_a_forged_entry_in_a_pack_is_damage_and_its_pack_is_removed(tmp_path: Path) -> None:
    with batched():
        _write(tmp_path, MANY)
    pack = _pack(tmp_path)
    data = bytearray(pack.read_bytes())
    at = data.index(b"payload 7")
    data[at : at + 9] = b"PAYLOAD 7"  # same size: only the signature tells
    pack.write_bytes(bytes(data))
    os.utime(tmp_path, ns=(1, 1))
    assert read_payload(tmp_path / _name(6), KIND) == b"payload 6"
    with pytest.raises(Damaged, match="signature mismatch"):
        read_payload(tmp_path / _name(7), KIND)
    disk_cache.remove_entry(tmp_path / _name(7))
    assert list(tmp_path.iterdir()) == []
    assert read_payload(tmp_path / _name(6), KIND) is None  # (its units are loaded again)


def test_an_entry_moved_under_another_name_is_not_believed(tmp_path: Path) -> None:
    with batched():
        _write(tmp_path, MANY)
    pack = _pack(tmp_path)
    data = pack.read_bytes().replace(_name(3).encode(), _name(99).encode())
    pack.write_bytes(data)
    os.utime(tmp_path, ns=(1, 1))
    with pytest.raises(Damaged, match="signature mismatch"):
        read_payload(tmp_path / _name(99), KIND)


@pytest.mark.parametrize(
    "garble",
    [
        lambda b: b[:-1],  # truncated: no footer
        lambda b: b[: len(b) // 2],
        lambda b: b"x" + b[1:],  # not a pack's magic
        lambda b: b[:-45] + struct.pack("<QQI", 0, 2**40, 1) + b[-25:],  # table past the end
        lambda b: b"",
    ],
)
def test_a_broken_pack_is_passed_over(tmp_path: Path, garble: object) -> None:
    with batched():
        _write(tmp_path, MANY)
    pack = _pack(tmp_path)
    pack.write_bytes(garble(pack.read_bytes()))  # type: ignore[operator]
    os.utime(tmp_path, ns=(1, 1))
    assert read_payload(tmp_path / _name(0), KIND) is None


def test_a_fifo_named_like_a_pack_is_not_waited_on(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / f"{'a' * 64}.pack")
    assert read_payload(tmp_path / _name(0), KIND) is None


def test_packs_are_counted_capped_and_cleared_like_files(tmp_path: Path) -> None:
    with batched():
        _write(tmp_path, MANY)
    pack = _pack(tmp_path)
    write_entry(tmp_path / _name(100), KIND, b"own file")
    (tmp_path / f"{'b' * 64}.pack").write_bytes(b"not mcsim's")
    listed = disk_cache.cache_files(tmp_path)
    assert sorted(f.path.name for f in listed) == sorted([pack.name, _name(100)])
    os.utime(pack, (1, 1))  # least recently used
    removed = disk_cache.enforce_cap(tmp_path, pack.stat().st_size)
    assert [f.path for f in removed] == [pack]
    assert disk_cache.clear_cache(tmp_path)[0].path.name == _name(100)
    assert [p.name for p in tmp_path.iterdir()] == [f"{'b' * 64}.pack"]


def test_a_packed_entrys_size_and_staleness(tmp_path: Path) -> None:
    transcript = tmp_path / "t.jsonl"
    transcript.write_text("{}\n")
    unit = LoadUnit("claude-code", str(tmp_path), (transcript,), 3)
    cache = tmp_path / "cache"
    with batched():
        _write(cache, MANY)
    pack = _pack(cache)
    member = cache_packs.find(cache / _name(4))
    assert member is not None and member.pack == pack
    assert disk_cache.entry_size(cache / _name(4), unit) == member.size
    os.utime(pack, (2, 2))  # the transcript changed after the pack was last used
    assert disk_cache.entry_size(cache / _name(4), unit) is None


def _write_one(job: tuple[Path, int]) -> int:
    folder, i = job
    write_entry(folder / _name(i), KIND, b"payload %d" % i)
    return i


def test_forked_workers_publish_their_packs_before_the_run_ends(tmp_path: Path) -> None:
    jobs = [(tmp_path, i) for i in range(200)]
    done = list(LocalEngine(2).map_units(jobs, _write_one, total_bytes=1 << 30))
    assert done == list(range(200))
    packs = [p for p in tmp_path.iterdir() if p.suffix == ".pack"]
    assert 1 <= len(packs) <= 2
    assert all(p.suffix in (".pack", ".calls") for p in tmp_path.iterdir())  # no temporary file
    for i in range(200):
        assert read_payload(tmp_path / _name(i), KIND) == b"payload %d" % i


def test_cache_info_and_clear_count_the_entries_in_packs(tmp_path: Path) -> None:
    with batched():
        _write(tmp_path, MANY)
    write_entry(tmp_path / f"{1:064x}.results", KIND, b"own file")
    info = CliRunner().invoke(cli, ["cache", "info", "--cache-dir", str(tmp_path)])
    assert info.exit_code == 0, info.output
    assert f"entries: {MANY + 1} (1 pack file holds some)\n" in info.output
    assert f"  loaded calls (inspect): {MANY}, " in info.output
    # (a file's size: magic 8, signature 32, kind, version and size 11, then the payload)
    assert f"  replayed results: 1, {8 + 32 + 11 + len(b'own file')} bytes\n" in info.output
    cleared = CliRunner().invoke(cli, ["cache", "clear", "--cache-dir", str(tmp_path)])
    assert cleared.output.startswith(f"removed {MANY + 1} entries from"), cleared.output
    assert list(tmp_path.iterdir()) == []


def test_cache_info_counts_an_entry_written_again_once(tmp_path: Path) -> None:
    with batched():
        _write(tmp_path, MANY)
    os.utime(tmp_path, ns=(0, 0))
    with batched():
        _write(tmp_path, MANY, b" again")
        write_entry(tmp_path / f"{7:064x}.someday", KIND, b"a kind this mcsim does not know")
    info = CliRunner().invoke(cli, ["cache", "info", "--cache-dir", str(tmp_path)])
    assert info.exit_code == 0, info.output
    assert f"entries: {MANY + 1} (2 pack files hold some, and {MANY} older copies)\n" in info.output
    size = sum(2 * (8 + 32 + 11 + len(b"payload %d" % i)) + len(b" again") for i in range(MANY))
    assert f"  loaded calls (inspect): {MANY}, {size:,} bytes\n" in info.output
    assert "  other: 1, " in info.output
    assert "unfinished" not in info.output
    cleared = CliRunner().invoke(cli, ["cache", "clear", "--cache-dir", str(tmp_path)])
    assert cleared.output.startswith(f"removed {MANY + 1} entries from"), cleared.output
