"""PATHS and `--out` as `s3://` URLs, against a real S3 API: moto's server on the loopback
address, started for this module, with the corpus and the Codex rollouts uploaded to it.
Reading from the bucket gives what reading the files gives; a run written to the bucket is
the run written locally; refusals and skips are as for local folders."""

from __future__ import annotations

import io
import json
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner, Result
from conftest import CORPUS, REPO
from polars.testing import assert_frame_equal

from mcsim.cli import cli
from mcsim.ingest import storage
from mcsim.ingest.loaders.fields import read_objects
from mcsim.model import SkipReport

s3fs = pytest.importorskip("s3fs")  # in the test extra: skipped only outside the README's setup
moto_server = pytest.importorskip("moto.server")

CODEX = REPO / "tests" / "data" / "codex"
BUCKET = "mcsim-test"
POLICIES = str(REPO / "policies" / "all.yaml")


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    """moto's S3 on 127.0.0.1 (a free port), credentials and endpoint in the environment as a
    user would set them, and the bucket filled: claude/projects/... and codex/..."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    url = f"http://127.0.0.1:{port}"
    with pytest.MonkeyPatch.context() as env:
        env.setenv("AWS_ACCESS_KEY_ID", "testing")
        env.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        env.setenv("AWS_DEFAULT_REGION", "us-east-1")
        env.setenv("AWS_ENDPOINT_URL", url)
        env.setenv("NO_PROXY", "127.0.0.1")
        fs = store()
        fs.mkdir(BUCKET)
        fs.put(str(CORPUS), f"{BUCKET}/claude/projects", recursive=True)
        for rollout in CODEX.glob("*.jsonl"):
            fs.put_file(str(rollout), f"{BUCKET}/codex/{rollout.name}")
        yield url
    server.stop()


def store() -> Any:
    return s3fs.S3FileSystem(skip_instance_cache=True)  # sees every write of mcsim's


def mcsim(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def ok(*args: str) -> dict[str, Any]:
    result = mcsim(*args, "--json")
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def refused(*args: str) -> str:
    result = mcsim(*args)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    return lines[0]


LOCAL = [str(CORPUS), str(CODEX)]
REMOTE = [f"s3://{BUCKET}/claude/projects", f"s3://{BUCKET}/codex"]


@pytest.mark.slow
def test_inspect_reads_the_bucket_as_it_reads_the_files(endpoint: str, tmp_path: Path) -> None:
    local = ok("inspect", *LOCAL)
    remote = ok("inspect", *REMOTE)
    assert remote["totals"] == local["totals"]
    assert remote["totals"]["calls"] > 0
    assert remote["input"]["files"] == local["input"]["files"] == 13
    # a glob over the bucket finds the same Claude Code files as the folder
    globbed = ok("inspect", f"s3://{BUCKET}/claude/projects/**/*.jsonl")
    assert globbed["totals"] == ok("inspect", str(CORPUS))["totals"]


@pytest.mark.slow
def test_replay_with_ray_reads_the_bucket_in_its_workers(endpoint: str, tmp_path: Path) -> None:
    """Each Ray task opens its objects itself, with the endpoint and keys of the environment."""
    args = ["--policy", POLICIES, "--no-cache"]
    remote = ok("replay", *REMOTE, *args, "--engine", "ray", "--out", str(tmp_path / "ray"))
    local = ok("replay", *LOCAL, *args, "--out", str(tmp_path / "local"))
    for block in ("policies", "recorded", "fidelity"):
        assert remote[block] == local[block], block
    assert remote["recorded"]["cost_usd"] > 0
    # the same skips, each example naming the object where the local run names the file
    named = json.dumps(local["skipped"]).replace(str(CORPUS), REMOTE[0])
    assert remote["skipped"] == json.loads(named.replace(str(CODEX), REMOTE[1]))
    assert remote["skipped"]["examples"]


@pytest.mark.slow
def test_replay_from_and_to_the_bucket_is_the_local_run(endpoint: str, tmp_path: Path) -> None:
    out = f"s3://{BUCKET}/runs/r1"
    common = ["--policy", POLICIES, "--cache-dir", str(tmp_path / "cache")]
    local = ok("replay", *LOCAL, *common, "--out", str(tmp_path / "local"))
    remote = ok("replay", *REMOTE, *common, "--out", out)
    assert remote["out_dir"] == out
    for block in ("policies", "recorded", "fidelity", "notes"):
        assert remote[block] == local[block], block
    assert len(remote["policies"]) == 8

    fs = store()
    written = sorted(p.rsplit("/", 1)[-1] for p in fs.ls(f"{BUCKET}/runs/r1"))
    assert written == sorted(p.name for p in (tmp_path / "local").iterdir())
    options = {"aws_endpoint_url": endpoint, "aws_region": "us-east-1", "aws_allow_http": "true"}
    summary = pl.read_parquet(f"{out}/summary.parquet", storage_options=options)
    assert_frame_equal(summary, pl.read_parquet(tmp_path / "local" / "summary.parquet"))
    run = json.loads(fs.cat_file(f"{BUCKET}/runs/r1/run.json"))
    assert run["format"] == "mcsim-run/1"
    rollouts = {f"{REMOTE[1]}/{p.name}" for p in CODEX.glob("*.jsonl")}
    assert {f["path"] for f in run["files"]} >= rollouts

    # the replay's tables are datasets partitioned by policy, uploaded whole
    keys = sorted(k.removeprefix(f"{BUCKET}/runs/r1/") for k in fs.find(f"{BUCKET}/runs/r1"))
    local_files = (tmp_path / "local").rglob("*")
    assert keys == sorted(p.relative_to(tmp_path / "local").as_posix() for p in local_files
                          if p.is_file())  # fmt: skip
    assert "calls.parquet/policy_index=8/part-0.parquet" in keys
    calls = pl.read_parquet(
        f"{out}/calls.parquet/**/*.parquet", hive_partitioning=True, storage_options=options
    )
    assert_frame_equal(calls, pl.read_parquet(tmp_path / "local" / "calls.parquet"))

    # the run is there: refused without --force, replaced with it
    assert refused("replay", *REMOTE, *common, "--out", out) == (
        f"Error: {out}: already holds a run (use --force to replace it)"
    )
    fs.pipe_file(f"{BUCKET}/runs/r1/report.md", b"an old report")  # a file mcsim writes
    again = ok("replay", *REMOTE, *common, "--out", out, "--force")
    assert again["policies"] == local["policies"]
    assert sorted(p.rsplit("/", 1)[-1] for p in fs.ls(f"{BUCKET}/runs/r1", refresh=True)) == written
    parquet = pl.read_parquet(io.BytesIO(fs.cat_file(f"{BUCKET}/runs/r1/summary.parquet")))
    assert_frame_equal(parquet, summary)

    # replaced by a run of fewer policies: the old run's other partitions are gone
    fewer = ["--policy", str(REPO / "policies" / "ttl-1h.yaml"), *common[2:]]
    ok("replay", *REMOTE, *fewer, "--out", out, "--force")
    parts = fs.find(f"{BUCKET}/runs/r1/calls.parquet", refresh=True)
    assert [p.rsplit("/", 2)[-2] for p in parts] == [
        f"policy_index={i}" for i in range(5)
    ]  # 2 policies, baseline:ttl=1h, baseline, recorded

    # a file mcsim does not write inside a table's dataset: --force refuses too
    fs.pipe_file(f"{BUCKET}/runs/r1/calls.parquet/policy_index=0/notes.txt", b"mine")
    assert refused("replay", *REMOTE, *common, "--out", out, "--force") == (
        f"Error: {out}: holds calls.parquet/policy_index=0/notes.txt, not a file mcsim writes; "
        "--force replaces only a run directory mcsim wrote"
    )
    fs.rm_file(f"{BUCKET}/runs/r1/calls.parquet/policy_index=0/notes.txt")

    # anything mcsim does not write makes the prefix no run of mcsim's, --force or not
    fs.pipe_file(f"{BUCKET}/runs/r1/notes.txt", b"mine")
    assert refused("replay", *REMOTE, *common, "--out", out, "--force") == (
        f"Error: {out}: holds notes.txt, not a file mcsim writes; --force replaces only a run "
        "directory mcsim wrote"
    )
    assert fs.cat_file(f"{BUCKET}/runs/r1/notes.txt") == b"mine"


def test_what_is_not_there_or_not_supported_is_one_line(endpoint: str, tmp_path: Path) -> None:
    assert refused("inspect", "s3://no-such-bucket/projects") == (
        "Error: s3://no-such-bucket/projects: no such object or prefix"
    )
    assert refused("inspect", f"s3://{BUCKET}/nothing/here") == (
        f"Error: s3://{BUCKET}/nothing/here: no such object or prefix"
    )
    assert refused("inspect", f"s3://{BUCKET}/claude/**/*.none") == (
        f"Error: s3://{BUCKET}/claude/**/*.none: no such object or prefix"
    )
    line = refused("inspect", str(CORPUS), "--out", "s3://no-such-bucket/runs/r1")
    assert line == "Error: s3://no-such-bucket/runs/r1: no such bucket, or no access to it"
    assert refused("inspect", REMOTE[1], "--out", f"s3://{BUCKET}") == (
        f"Error: s3://{BUCKET}: is a whole bucket; name a prefix in it"
    )
    assert refused("convert", REMOTE[1], "--to", "interchange", "--out", f"s3://{BUCKET}") == (
        f"Error: s3://{BUCKET}: is a whole bucket; name a prefix in it"
    )
    # the converted files would be read back by the next run over the input prefix
    assert refused("convert", REMOTE[1], "--to", "interchange", "--out", f"{REMOTE[1]}/c") == (
        f"Error: {REMOTE[1]}/c: is inside the input {REMOTE[1]}; choose another --out"
    )
    assert refused("report", f"s3://{BUCKET}/nothing/here") == (
        f"Error: s3://{BUCKET}/nothing/here: not a run directory (no run.json)"
    )


@pytest.mark.slow
def test_convert_to_the_bucket_is_the_local_conversion(endpoint: str, tmp_path: Path) -> None:
    out = f"s3://{BUCKET}/converted/c1"
    key = f"{BUCKET}/converted/c1"
    args = ["convert", *LOCAL, "--to", "interchange"]
    local = ok(*args, "--out", str(tmp_path / "local"))
    remote = ok(*args, "--out", out)
    assert remote.pop("out") == out
    assert local.pop("out") == str(tmp_path / "local")
    assert remote == local
    assert remote["sessions"] > 0

    def written() -> dict[str, bytes]:
        fs = store()
        return {p[len(key) + 1 :]: fs.cat_file(p) for p in fs.find(key)}

    files = written()
    here = {
        p.relative_to(tmp_path / "local").as_posix(): p.read_bytes()
        for p in (tmp_path / "local").rglob("*")
        if p.is_file()
    }
    assert sorted(files) == sorted(here)
    assert len(files) == remote["files_written"] + 1  # and run.json
    for name in files:
        if name != "run.json":
            assert files[name] == here[name], name
    run = json.loads(files["run.json"])
    assert run["command"] == "convert"
    assert run["written"] == json.loads(here["run.json"])["written"]
    # the converted sessions read back from the bucket as the local ones do
    assert ok("inspect", out)["totals"] == ok("inspect", str(tmp_path / "local"))["totals"]

    # there: refused without --force, replaced with it
    assert refused(*args, "--out", out) == (
        f"Error: {out}: already holds a run (use --force to replace it)"
    )
    assert ok(*args, "--out", out, "--force")["sessions"] == remote["sessions"]
    assert sorted(written()) == sorted(here)
    # a file convert did not write is never replaced
    store().pipe_file(f"{key}/notes.txt", b"mine")
    assert refused(*args, "--out", out, "--force") == (
        f"Error: {out}: holds notes.txt, not a file mcsim convert wrote"
    )
    assert store().cat_file(f"{key}/notes.txt") == b"mine"


@pytest.mark.slow
def test_report_on_a_run_in_the_bucket_is_the_local_report(endpoint: str, tmp_path: Path) -> None:
    """`mcsim report s3://...` writes report.html and report.md beside the run, with the
    figures of the report on the same run written locally."""
    out = f"s3://{BUCKET}/runs/reported"
    common = ["--policy", "claude-code", "--no-cache"]
    ok("replay", REMOTE[0], *common, "--out", out)
    ok("replay", str(CORPUS), *common, "--out", str(tmp_path / "local"))
    assert ok("report", out) == {"html": f"{out}/report.html", "markdown": f"{out}/report.md"}
    ok("report", str(tmp_path / "local"))
    fs = store()
    remote = fs.cat_file(f"{BUCKET}/runs/reported/report.md").decode()
    local = (tmp_path / "local" / "report.md").read_text()

    def rows(text: str) -> list[str]:  # the tables: policies, savings, breaks
        return [line for line in text.splitlines() if line.startswith("|")]

    assert rows(remote) == rows(local) and len(rows(local)) > 8
    html = fs.cat_file(f"{BUCKET}/runs/reported/report.html")
    assert html.count(b"data:image/png;base64,") == 4  # the charts came from the bucket
    # the report's files are mcsim's: the run can still be replaced
    again = ok("replay", REMOTE[0], *common, "--out", out, "--force")
    assert again["out_dir"] == out


@pytest.mark.slow
def test_a_broken_object_is_a_counted_skip_naming_its_url(endpoint: str) -> None:
    fs = store()
    project = f"{BUCKET}/broken/projects/-home-dev-app"
    fs.put_file(str(sorted(CORPUS.glob("*/*.jsonl"))[0]), f"{project}/good.jsonl")
    fs.pipe_file(f"{project}/broken.jsonl", b'\x00\xff garbage\n{"type":"assistant","message":\n')
    data = ok("inspect", f"s3://{BUCKET}/broken/projects")
    files = {(e["file"], e["reason"]) for e in data["skipped"]["examples"]}
    assert (f"s3://{project}/broken.jsonl", "invalid_json") in files
    assert data["skipped"]["by_reason"]["invalid_json"] == 2
    assert data["totals"]["calls"] > 0


def test_local_runs_do_not_import_fsspec() -> None:
    code = (
        "import sys; from mcsim.cli import cli; import mcsim.ingest.pipeline, "
        "mcsim.outputs.run_dir; print('fsspec' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_an_object_gone_before_it_is_read_is_a_counted_skip(endpoint: str) -> None:
    fs = store()
    key = f"{BUCKET}/gone/projects/-home-dev-app/session.jsonl"
    fs.put_file(str(sorted(CORPUS.glob("*/*.jsonl"))[0]), key)
    (path,) = storage.find(f"s3://{BUCKET}/gone/projects")
    assert str(path) == f"s3://{key}" and path.stat().st_size > 0
    fs.rm_file(key)
    skips = SkipReport()
    assert list(read_objects(path, str(path), skips)) == []
    assert [(e.file, e.reason) for e in skips.examples] == [(f"s3://{key}", "unreadable_file")]


def _pngs(run: Path) -> dict[str, bytes]:
    return {png.name: png.read_bytes() for png in sorted(run.glob("*.png"))}


@pytest.mark.slow
def test_the_session_cache_in_the_bucket_is_used_by_every_machine_and_kept_small(
    endpoint: str, tmp_path: Path
) -> None:
    """--cache-dir s3://...: entries are objects (what the machines of a cluster without one
    filesystem use in common); a warm run reads them, a damaged one is rebuilt and noted,
    `mcsim cache` lists and clears them, and the cap holds."""
    cache = f"s3://{BUCKET}/cache"
    args = [*REMOTE, "--policy", "claude-code", "--cache-dir", cache]
    cold = ok("replay", *args, "--out", str(tmp_path / "cold"))
    fs = store()
    names = sorted(p.rsplit("/", 1)[-1] for p in fs.ls(f"{BUCKET}/cache", refresh=True))
    assert names and all(n.endswith((".sessions", ".tokens", ".results", ".chart")) for n in names)
    # 7 project folders and 2 rollouts: their calibrated sessions, and their replayed results;
    # and the run's four charts
    assert len([n for n in names if n.endswith(".sessions")]) == 9
    assert len([n for n in names if n.endswith(".results")]) == 9
    assert len([n for n in names if n.endswith(".chart")]) == 4
    warm = ok("replay", *args, "--out", str(tmp_path / "warm"))
    assert warm["policies"] == cold["policies"] and warm["fidelity"] == cold["fidelity"]
    assert "cache_entry_rebuilt" not in warm["skipped"]["notes_by_reason"]
    assert _pngs(tmp_path / "warm") == _pngs(tmp_path / "cold")  # copied from the bucket

    damaged = next(n for n in names if n.endswith(".results"))  # what a warm run reads
    fs.pipe_file(f"{BUCKET}/cache/{damaged}", b"\x89mcsim\r\n" + b"\0" * 40)
    chart = next(n for n in names if n.endswith(".chart"))
    fs.pipe_file(f"{BUCKET}/cache/{chart}", b"\x89mcsim\r\n" + b"\0" * 40)
    again = ok("replay", *args, "--out", str(tmp_path / "again"))
    assert again["policies"] == cold["policies"]
    assert again["skipped"]["notes_by_reason"]["cache_entry_rebuilt"] == 1
    assert fs.cat_file(f"{BUCKET}/cache/{damaged}") != b"\x89mcsim\r\n" + b"\0" * 40  # rewritten
    assert _pngs(tmp_path / "again") == _pngs(tmp_path / "cold")  # that chart drawn again
    assert fs.cat_file(f"{BUCKET}/cache/{chart}") != b"\x89mcsim\r\n" + b"\0" * 40  # kept again

    fs.pipe_file(f"{BUCKET}/cache/notes.txt", b"mine")  # not mcsim's: never touched
    info = mcsim("cache", "info", "--cache-dir", cache)
    assert info.exit_code == 0 and f"entries: {len(names)}" in info.output, info.output
    cleared = mcsim("cache", "clear", "--cache-dir", cache)
    assert f"removed {len(names)} entries from {cache}" in cleared.output, cleared.output
    assert [p.rsplit("/", 1)[-1] for p in fs.ls(f"{BUCKET}/cache", refresh=True)] == ["notes.txt"]

    with pytest.MonkeyPatch.context() as env:  # a cap below one entry: the run leaves none
        env.setenv("MCSIM_CACHE_MAX_SIZE", "10")
        ok("replay", *args, "--out", str(tmp_path / "capped"))
    assert [p.rsplit("/", 1)[-1] for p in fs.ls(f"{BUCKET}/cache", refresh=True)] == ["notes.txt"]


def test_an_object_rewritten_in_the_same_second_is_read_again(
    endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An object rewritten with the same size within the same second (S3's LastModified is in
    whole seconds) is another object for the cache: its ETag changed, and the run reads it
    again rather than serving the figures of the old content."""
    fs = store()
    key = f"{BUCKET}/rewritten/projects/-home-dev-app/session.jsonl"
    text = sorted(CORPUS.glob("*/*.jsonl"))[0].read_bytes()
    found = re.search(rb'"cache_read_input_tokens":\s*\d*?([0-8])\d{4}\b', text)
    assert found is not None
    at = found.start(1)  # a digit worth 10,000 tokens, raised by one: the same size
    changed = text[:at] + bytes([text[at] + 1]) + text[at + 1 :]
    assert len(changed) == len(text)
    url = f"s3://{BUCKET}/rewritten/projects"
    cache = ["--cache-dir", str(tmp_path / "cache")]
    fs.pipe_file(key, text)
    first = ok("inspect", url, *cache)["totals"]
    when = storage._INFO[f"s3://{key}"]["LastModified"]
    fs.pipe_file(key, changed)
    find = storage.find

    def same_second(url: str) -> list[storage.ObjectPath]:
        objects = find(url)
        for path in objects:
            storage._INFO[str(path)]["LastModified"] = when  # as if written that second
        return objects

    monkeypatch.setattr(storage, "find", same_second)
    second = ok("inspect", url, *cache)["totals"]
    assert storage._INFO[f"s3://{key}"]["LastModified"] == when
    assert second["cache_read_tokens"] == first["cache_read_tokens"] + 10_000
    assert second == ok("inspect", url, "--no-cache")["totals"]


def test_an_out_prefix_follows_replays_rules(endpoint: str, tmp_path: Path) -> None:
    """A `..` in a URL is part of the key, not a step up: refused before anything is written,
    for every command; an --out prefix may not be the cache's prefix, lie in it or hold it,
    nor be or hold an input prefix."""
    sneaky = f"s3://{BUCKET}/runs/../x"
    line = f"Error: {sneaky}: '..' in an object URL is part of the key, not a step up"
    assert refused("convert", REMOTE[1], "--to", "interchange", "--out", sneaky) == line
    assert refused("replay", REMOTE[1], "--policy", "claude-code", "--out", sneaky) == line
    assert refused("inspect", f"s3://{BUCKET}/codex/../codex") == (
        f"Error: s3://{BUCKET}/codex/../codex: '..' in an object URL is part of the key, "
        "not a step up"
    )
    assert [k for k in store().find(BUCKET) if ".." in k.split("/")] == []  # nothing written
    cache = f"s3://{BUCKET}/team/cache"
    refusals = {
        f"{cache}/run": f"is inside the session cache folder {cache}",
        cache: f"is the session cache folder ({cache})",
        f"s3://{BUCKET}/team": f"holds the session cache folder {cache}",
    }
    with pytest.MonkeyPatch.context() as env:
        env.setenv("MCSIM_CACHE_DIR", cache)  # convert has no --cache-dir: the one set up
        for out, why in refusals.items():
            for command in (["convert", "--to", "interchange"], ["replay", "--policy", "all"]):
                args = [command[0], REMOTE[1], *command[1:], "--out", out]
                assert refused(*args) == f"Error: {out}: {why}; choose another --out", args
    args = ["--policy", "claude-code", "--out", REMOTE[1]]
    assert refused("replay", f"{REMOTE[1]}/sub", *args) == (
        f"Error: {REMOTE[1]}: holds the input {REMOTE[1]}/sub; choose another --out"
    )
    assert refused("replay", f"{REMOTE[1]}/**/*.jsonl", *args) == (
        f"Error: {REMOTE[1]}: is an input ({REMOTE[1]}); choose another --out"
    )
