"""Fuzzing: mutated real transcript lines and policy files through inspect, replay and report.

Hypothesis builds small projects from lines of the real test corpus, damaged the ways real
files and attackers damage them (cut, bytes flipped, fields nulled, retyped, made huge or
negative, ids reused, sidechain flags flipped, lines repeated or reordered, a byte-order mark,
blank lines, CRLF), and mutated copies of the example policy files. Whatever it builds, no
exception escapes a command (exit 0, 1 or 2 with a one-line error, never a traceback), and
every non-blank input line is read and either used or counted as skipped.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from click.testing import CliRunner, Result
from conftest import CORPUS, REPO
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcsim.cli import cli
from mcsim.replay.scenario import PolicyFileError, load_policy_file

SESSION_FILES = sorted(CORPUS.rglob("*.jsonl"))
# Lines small enough to mutate quickly, from every file of the corpus (keeps each layout).
SOURCE: list[bytes] = [
    line for f in SESSION_FILES for line in f.read_bytes().splitlines() if 0 < len(line) < 60_000
]
POLICY_FILES = sorted((REPO / "policies").glob("*.yaml"))
HOSTILE_VALUES: list[Any] = [
    None, -1, 0, 1.5, 2**62, 2**63, 2**64 + 1, 10**18, 1e300, "", "x" * 300, "\x1b[2J", [],
    {}, True, "2026-13-45T99:99:99Z", "<script>", "../../etc/passwd",
]  # fmt: skip
SETTINGS = settings(
    max_examples=15,
    deadline=None,
    derandomize=True,  # the same examples on every run: a red CI run can be re-run
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key path into a parsed line (dicts and lists), depth-first."""
    out = [prefix] if prefix else []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:8]):
            out += _paths(v, (*prefix, i))
    return out


def _set(obj: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(obj, dict):
        return {**obj, head: _set(obj[head], rest, value)}
    copy = list(obj)
    copy[head] = _set(obj[head], rest, value)
    return copy


@st.composite
def mutated_line(draw: st.DrawFn, pool: list[dict[str, Any]]) -> bytes:
    raw = draw(st.sampled_from(SOURCE))
    kind = draw(st.integers(0, 9))
    if kind == 0:  # cut anywhere
        return raw[: draw(st.integers(1, max(1, len(raw) - 1)))]
    if kind == 1:  # bytes flipped, possibly invalid UTF-8
        data = bytearray(raw)
        for _ in range(draw(st.integers(1, 4))):
            data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
        return bytes(data).replace(b"\n", b" ")
    obj = orjson.loads(raw)
    if kind in (2, 3, 4) and isinstance(obj, dict):  # a field nulled, retyped, huge, negative
        paths = _paths(obj)
        if paths:
            path = draw(st.sampled_from(paths))
            obj = _set(obj, path, draw(st.sampled_from(HOSTILE_VALUES)))
    elif kind == 5 and isinstance(obj, dict) and pool:  # a uuid or ids of another line
        other = draw(st.sampled_from(pool))
        for key in draw(st.lists(st.sampled_from(["uuid", "parentUuid", "sessionId"]))):
            if key in other:
                obj[key] = other[key]
        message, theirs = obj.get("message"), other.get("message")
        same_call = draw(st.booleans())
        if same_call and isinstance(message, dict) and isinstance(theirs, dict) and "id" in theirs:
            message["id"] = theirs["id"]
    elif kind == 6 and isinstance(obj, dict):  # a sidechain replay of a call
        obj["isSidechain"] = not obj.get("isSidechain", False)
        obj["requestId"] = draw(st.sampled_from(["req_replay", "req_other", None]))
    elif kind == 7 and isinstance(obj, dict):  # the type removed or changed
        obj["type"] = draw(st.sampled_from([None, "weird", 7, "assistant", "progress"]))
        if obj["type"] is None:
            del obj["type"]
    pool.append(obj)
    line = json.dumps(obj, separators=(",", ":")).encode()  # ints past 64 bits too
    if kind == 8:
        line += b"\r"  # CRLF
    return line


@st.composite
def project(draw: st.DrawFn) -> list[bytes]:
    """The files of one project: each a list of lines, with blank lines and BOMs here and
    there, some lines repeated."""
    pool: list[dict[str, Any]] = []
    files = []
    for _ in range(draw(st.integers(1, 3))):
        lines = draw(st.lists(mutated_line(pool), min_size=1, max_size=40))
        if draw(st.booleans()) and lines:  # a resumed copy: lines repeated, maybe reordered
            lines += draw(st.permutations(lines))[: draw(st.integers(0, len(lines)))]
        if draw(st.booleans()):
            lines.insert(draw(st.integers(0, len(lines))), b"")
        data = b"\n".join(lines) + draw(st.sampled_from([b"\n", b""]))
        if draw(st.booleans()):
            data = b"\xef\xbb\xbf" + data
        files.append(data)
    return files


def _no_traceback(result: Result, allowed: set[int]) -> None:
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        result.output,
        result.exception,
    )
    assert result.exit_code in allowed, result.output
    if result.exit_code:
        errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
        assert len(errors) == 1, result.stderr


def _nonblank_lines(data: bytes) -> int:
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    return sum(1 for line in data.split(b"\n") if line.strip())


@pytest.mark.slow
@SETTINGS
@given(files=project())
def test_fuzzed_transcripts_through_inspect_replay_and_report(
    files: list[bytes], tmp_path_factory: pytest.TempPathFactory
) -> None:
    root = tmp_path_factory.mktemp("fuzz")
    folder = root / "projects" / "-fuzz"
    folder.mkdir(parents=True)
    for i, data in enumerate(files):
        (folder / f"0000000{i}-aaaa-bbbb-cccc-dddddddddddd.jsonl").write_bytes(data)
    runner = CliRunner()

    result = runner.invoke(cli, ["inspect", str(root / "projects"), "--json"])
    _no_traceback(result, {0, 1})
    doc = json.loads(result.stdout)
    skipped = doc["skipped"]
    # Every non-blank line was read; each one is either used or counted as skipped.
    assert skipped["lines_read"] == sum(map(_nonblank_lines, files))
    assert skipped["total"] <= skipped["lines_read"]
    assert result.exit_code == (0 if doc["totals"]["calls"] else 1)

    out = root / "run"
    args = ["replay", str(root / "projects"), "--policy", str(REPO / "policies" / "all.yaml")]
    result = runner.invoke(cli, [*args, "--out", str(out), "--no-cache", "--json"])
    _no_traceback(result, {0, 1})
    if result.exit_code == 0:
        replayed = json.loads(result.stdout)
        assert replayed["recorded"]["calls"] == doc["totals"]["calls"]
        result = runner.invoke(cli, ["report", str(out)])
        _no_traceback(result, {0})
        assert (out / "report.html").stat().st_size > 0
        assert (out / "report.md").stat().st_size > 0
    else:
        assert not out.exists()


@st.composite
def mutated_policy(draw: st.DrawFn) -> bytes:
    text = draw(st.sampled_from(POLICY_FILES)).read_bytes()
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(text)))
        edit = draw(st.integers(0, 3))
        if edit == 0:  # delete a span
            text = text[:at] + text[at + draw(st.integers(1, 40)) :]
        elif edit == 1:  # insert YAML-significant bytes or a hostile value
            piece = draw(
                st.sampled_from(
                    [b": ", b"- ", b"[", b"{", b"&a ", b"*a", b"!!python/object ", b".nan",
                     b"1e400", b"99999999999999999999999", b"\t", b"\x00", b"\xff", b"'",
                     b"\n  - {kind: ", b"<<: *a"]
                )
            )  # fmt: skip
            text = text[:at] + piece + text[at:]
        elif edit == 2:  # duplicate a span
            span = text[at : at + draw(st.integers(1, 200))]
            text = text[:at] + span * draw(st.integers(2, 30)) + text[at:]
        else:  # random bytes
            text = text[:at] + draw(st.binary(min_size=1, max_size=8)) + text[at:]
    return text


# The policies (their repr: a parameter may be a list) of each fuzzed file that `replay` ran
# through to exit 0, in this process.
REPLAYED_POLICIES: set[str] = set()


@pytest.mark.slow
@settings(max_examples=60, deadline=None, derandomize=True)
@given(policy=mutated_policy())
def test_fuzzed_policy_files_never_crash(
    policy: bytes, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Every mutated file through `replay`: refused in one line (exit 2) or replayed (exit 0).

    Most mutations that still load leave the policies as they were (a comment cut, a key
    repeated): of these 60 examples, 16 load and 9 of them hold policies an earlier example
    already replayed. `replay` reads nothing of the file but those policies (`load_policy_file`) and
    its text, which it writes to run.json decoded with replacement, so such a file's replay is
    the earlier one again, by the same code on the same data: it is not run a second time
    (each replay of the samples draws the charts: seconds). A file whose policies are new is
    replayed, as is every file the loader refuses (the command must say so in one line)."""
    root = tmp_path_factory.mktemp("policy")
    path = root / "fuzzed.yaml"
    path.write_bytes(policy)
    try:
        policies = repr(load_policy_file(path))
    except PolicyFileError:
        policies = None  # the command must refuse it: exit 2, one line
    if policies is not None and policies in REPLAYED_POLICIES:
        return
    args = ["replay", str(REPO / "sample_transcripts"), "--policy", str(path), "--no-cache"]
    result = CliRunner().invoke(cli, [*args, "--out", str(root / "run"), "--json"])
    _no_traceback(result, {0, 2})
    assert result.exit_code == (2 if policies is None else 0), result.output
    if policies is not None:
        REPLAYED_POLICIES.add(policies)
