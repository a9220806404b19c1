"""The Claude Code loader: layouts, ordering, de-duplication and compaction events."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from lines import SESSION, assistant, tool_result, tool_use, usage, user, write

from mcsim.ingest.loaders import Detail
from mcsim.ingest.pipeline import load_sessions
from mcsim.model import CompactionKind, ItemKind, ThreadKind


def by_id(sessions: list) -> dict:
    return {s.session_id: s for s in sessions}


def test_corpus_layouts_become_threads(corpus: Path) -> None:
    sessions, stats = load_sessions([str(corpus)])
    s = by_id(sessions)
    # 1.0.90 inline sidechains (the generated legacy session): two sidechain roots, each its
    # own thread. The generator's script: 23 main calls, sub-agents of 3 tools + an answer and
    # of 2 tools + an answer.
    legacy = s["aca1c40a-be75-4f50-9b4a-60b92b68d702"]
    kinds = sorted((t.kind.value, len(t.calls)) for t in legacy.threads)
    assert kinds == [("main", 23), ("subagent", 3), ("subagent", 4)]
    assert {t.thread_id[:10] for t in legacy.threads if t.kind is ThreadKind.SUBAGENT} == {
        "sidechain-"
    }
    assert {c.model for t in legacy.threads for c in t.calls} == {
        "claude-opus-4-1-20250805",
        "claude-sonnet-4-20250514",
    }
    # 2.0.x agent file beside the session, 2.1.x subagents/ folder.
    assert {t.thread_id for t in s["cb2e607c-c758-415a-8b45-c49e4631906a"].threads} == {
        "main",
        "agent-ea02459f",
    }
    assert {
        t.thread_id: len(t.calls) for t in s["29ccd257-68b1-427f-ae5f-6524b7cb6f20"].threads
    } == {
        "main": 2,
        "agent-a2271d1": 10,
    }
    # Resumed pair: the 18 copied calls are counted once, in the original session.
    assert len(s["f225835b-3612-4093-903f-bd4538fb7cb9"].calls) == 18
    assert len(s["ff33b5b0-cc51-4271-a3eb-545a85882e5f"].calls) == 6
    assert stats.files == 11


def test_corpus_compaction_summary_is_an_event(corpus: Path) -> None:
    sessions, _ = load_sessions([str(corpus / "-home-dev-legacy-cli")])
    main = next(t for t in sessions[0].threads if t.kind is ThreadKind.MAIN)
    compacted = [i for i, c in enumerate(main.calls) if c.compaction is not None]
    assert len(compacted) == 1
    call = main.calls[compacted[0]]
    assert call.compaction is not None
    assert call.compaction.kind is CompactionKind.SUMMARY
    # After a compaction only the summary and what follows is new context.
    assert call.items[0].kind is ItemKind.USER_TEXT
    assert call.items[0].chars > 1000


def test_order_follows_parent_chain_not_timestamps(tmp_path: Path) -> None:
    # File order and timestamps disagree with the chain: u1 -> a1 -> u2 -> a2 where a2's
    # line comes first in the file and has the earliest timestamp.
    write(
        tmp_path / "p" / f"{SESSION}.jsonl",
        [
            assistant("a2", "u2", 5, "m2", "r2", content=[{"type": "text", "text": "second"}]),
            user("u1", None, 50, "first question"),
            assistant("a1", "u1", 60, "m1", "r1", content=[tool_use("t1", "Read", file_path="x")]),
            user("u2", "a1", 70, tool_result("t1", "file body")),
        ],
    )
    (session,), _ = load_sessions([str(tmp_path)])
    calls = session.threads[0].calls
    assert [c.message_id for c in calls] == ["m1", "m2"]
    assert [i.kind for i in calls[0].items] == [ItemKind.USER_TEXT]
    second = calls[1].items
    assert [i.kind for i in second] == [ItemKind.TOOL_USE, ItemKind.TOOL_RESULT]
    assert second[1].tool_name == "Read"
    assert second[1].tool_use_id == "t1"
    assert second[1].chars == len("file body")


def test_one_call_per_message_and_request_output_is_max(tmp_path: Path) -> None:
    write(
        tmp_path / "p" / f"{SESSION}.jsonl",
        [
            user("u1", None, 0),
            assistant("a1", "u1", 1, "m1", "r1", u=usage(5, 100, 0, out=2)),
            assistant("a2", "a1", 2, "m1", "r1", u=usage(5, 100, 0, out=350)),
            assistant("a3", "a2", 3, "m1", "r1", u=usage(5, 100, 0, out=1)),
            # No requestId (gateway): still one call per message id.
            assistant("a4", "a3", 4, "m2", None, u=usage(1, 0, 100, out=7)),
            assistant("a5", "a4", 5, "m2", None, u=usage(1, 0, 100, out=9)),
            assistant("a6", "a5", 6, "m3", "r3", model="<synthetic>", u=usage(0, 0, 0, out=0)),
        ],
    )
    (session,), stats = load_sessions([str(tmp_path)])
    calls = session.calls
    assert [(c.message_id, c.usage.output_tokens) for c in calls] == [("m1", 350), ("m2", 9)]
    assert calls[0].usage.cache_write_5m_tokens == 100
    assert stats.skips.counts == {"synthetic": 1}


def test_duplicate_calls_across_files_count_once(tmp_path: Path) -> None:
    first = [user("u1", None, 0), assistant("a1", "u1", 1, "m1", "r1", u=usage(out=5))]
    write(tmp_path / "p" / "s1.jsonl", [dict(line, sessionId="s1") for line in first])
    # A resumed copy that keeps the original session id, then a new call of its own.
    copy = [dict(line, sessionId="s1") for line in first]
    copy[1]["message"] = dict(copy[1]["message"], usage=usage(out=40))
    new = [user("u2", "a1", 10, session="s2"), assistant("a2", "u2", 11, "m2", "r2", session="s2")]
    write(tmp_path / "p" / "s2.jsonl", copy + new)
    sessions, _ = load_sessions([str(tmp_path)])
    s = by_id(sessions)
    assert [c.message_id for c in s["s1"].calls] == ["m1"]
    assert s["s1"].calls[0].usage.output_tokens == 40  # max over every copy of the call
    assert [c.message_id for c in s["s2"].calls] == ["m2"]


def test_subagent_folder_and_2_1_compaction_boundary(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    write(
        project / f"{SESSION}.jsonl",
        [
            user("u1", None, 0),
            assistant("a1", "u1", 1, "m1", "r1", u=usage(3, 20_000, 0)),
            {
                "type": "system",
                "subtype": "compact_boundary",
                "uuid": "b1",
                "parentUuid": None,
                "sessionId": SESSION,
                "timestamp": "2026-01-01T00:01:00Z",
                "compactMetadata": {"trigger": "auto", "preTokens": 150_000},
            },
            user("u2", "b1", 61, "summary text", isCompactSummary=True),
            assistant("a2", "u2", 62, "m2", "r2"),
        ],
    )
    sub = [
        dict(user("s1", None, 2, "task"), isSidechain=True, agentId="abc"),
        dict(
            assistant("s2", "s1", 3, "m9", "r9", model="claude-haiku-4-5"),
            isSidechain=True,
            agentId="abc",
        ),
    ]
    write(project / SESSION / "subagents" / "agent-abc.jsonl", sub)
    (session,), _ = load_sessions([str(tmp_path)])
    threads = {t.thread_id: t for t in session.threads}
    assert set(threads) == {"main", "agent-abc"}
    assert threads["agent-abc"].kind is ThreadKind.SUBAGENT
    second = threads["main"].calls[1]
    assert second.compaction is not None
    assert second.compaction.kind is CompactionKind.BOUNDARY
    assert second.compaction.trigger == "auto"
    assert second.compaction.pre_tokens == 150_000
    assert [i.kind for i in second.items] == [ItemKind.USER_TEXT]  # the summary only


def test_text_is_kept_only_on_request(tmp_path: Path) -> None:
    write(
        tmp_path / "p" / f"{SESSION}.jsonl",
        [user("u1", None, 0, "abc"), assistant("a1", "u1", 1, "m1")],
    )
    (lean,), _ = load_sessions([str(tmp_path)])
    (full,), _ = load_sessions([str(tmp_path)], detail=Detail.TEXT)
    assert lean.calls[0].items[0].text is None
    assert full.calls[0].items[0].text == "abc"
    assert lean.calls[0].items[0].chars == full.calls[0].items[0].chars == 3


# ------------------------- fast paths: inspect as fast as ccusage (docs/design.md#performance)


def _general_walk(thread: Any) -> list[int]:
    """_depth_first's order with the chain shortcut ruled out (a reused uuid forces the walk)."""
    from mcsim.ingest.loaders.claude_code import _depth_first, _ThreadAcc

    forced = _ThreadAcc(thread.nodes, thread.first, {"not-a-uuid-of-the-thread": []})
    return [id(n) for n in _depth_first(forced)]


@pytest.mark.parametrize(
    "parents",
    [
        [None, "a", "b", "c"],  # a plain chain
        [None, "a", None, "c"],  # a new root in the middle (a compaction)
        ["elsewhere", "a", "b", "zz"],  # parents held in another thread or file
        ["a", "a", "b", "c"],  # a line naming itself
        [None, "a", "a", "c"],  # a branch: the chain shortcut must not apply
        ["d", "a", "b", "c"],  # a parent written later
        [None, "c", "b", "a"],  # children before parents
        ["b", "a", None, None],  # a cycle
    ],
)
def test_chain_shortcut_walks_as_the_tree_walk(parents: list[str | None]) -> None:
    from mcsim.ingest.loaders.claude_code import _depth_first, _is_chain, _Node, _ThreadAcc

    thread = _ThreadAcc()
    for uuid, parent in zip("abcd", parents, strict=True):
        node = _Node(uuid, parent, [], "user", None)
        thread.nodes.append(node)
        thread.first[uuid] = node
    order = [id(n) for n in _depth_first(thread)]
    assert order == _general_walk(thread)
    if _is_chain(thread.nodes, thread.first):
        assert order == [id(n) for n in thread.nodes]


def test_chain_shortcut_on_the_corpus_threads(corpus: Path) -> None:
    """Every thread of the bundled corpus, chain or not, walks as the general walk does."""
    from mcsim.ingest.loaders.claude_code import _depth_first, _is_chain, _LineReader
    from mcsim.model import SkipReport

    chains = 0
    for project in sorted(p for p in corpus.iterdir() if p.is_dir()):
        reader = _LineReader(project.name, Detail.CALLS, SkipReport())
        for path in sorted(project.rglob("*.jsonl")):
            reader.read_file(path)
        for session in reader.sessions.values():
            for thread in session.threads.values():
                chains += not thread.reused and _is_chain(thread.nodes, thread.first)
                assert [id(n) for n in _depth_first(thread)] == _general_walk(thread)
    assert chains > 0  # the shortcut is exercised


def test_usage_with_another_output_count_is_dataclass_replace() -> None:
    from mcsim.ingest.loaders.claude_code import _with_output
    from mcsim.model import Usage

    usage = Usage(1, 2, 3, 4, 5, True, True, "fast", "us", 6)
    assert [getattr(usage, f.name) for f in dataclasses.fields(Usage)] == [
        1,
        2,
        3,
        4,
        5,
        True,
        True,
        "fast",
        "us",
        6,
    ]  # fmt: skip  (every field set apart from its default: a new field fails here)
    assert _with_output(usage, 999) == dataclasses.replace(usage, output_tokens=999)


def test_calls_detail_reads_as_the_fuller_details(tmp_path: Path) -> None:
    """Detail.CALLS skips the content walk: its calls, times and skip report are those of the
    detailed loads, on the bundled corpus and the sample transcripts."""
    from mcsim.ingest.loaders import plan_units
    from mcsim.ingest.loaders.claude_code import ClaudeCodeLoader

    repo = Path(__file__).resolve().parents[1]
    folders = [repo / "tests" / "data" / "corpus", repo / "sample_transcripts"]
    files = sorted(f for folder in folders for f in folder.rglob("*.jsonl"))
    loader = ClaudeCodeLoader()
    for unit in plan_units(files):
        if unit.loader != loader.name:
            continue
        results = [loader.load(unit, d) for d in (Detail.CALLS, Detail.SIZES)]
        calls = [
            [
                (t.thread_id, [dataclasses.replace(c, items=()) for c in t.calls])
                for s in r.sessions
                for t in s.threads
            ]
            for r in results
        ]
        assert calls[0] == calls[1], unit.key
        assert results[0].skips.lines_read == results[1].skips.lines_read
        assert results[0].skips.counts == results[1].skips.counts


def test_a_count_just_past_the_limit_is_shown_as_written(tmp_path: Path) -> None:
    """100,000,001 tokens shown to 3 significant digits read '1e+08 tokens is not a real
    count (limit 100,000,000)': the limit itself. The count is shown as written."""
    write(
        tmp_path / "p" / f"{SESSION}.jsonl",
        [
            user("u1", None, 0),
            assistant("a1", "u1", 1, "m1", "r1", u=usage(100_000_001)),
            assistant("a2", "a1", 2, "m2", "r2", u=usage(3, out=250_000_000.0)),
            assistant("a3", "a2", 3, "m3", "r3", u=usage(3)),
        ],
    )
    _, stats = load_sessions([str(tmp_path)])
    assert [s.detail for s in stats.skips.examples] == [
        "message.usage.input_tokens: 100000001 tokens is not a real count (limit 100,000,000)",
        "message.usage.output_tokens: 250000000.0 tokens is not a real count (limit 100,000,000)",
    ]
