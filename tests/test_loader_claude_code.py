"""The Claude Code loader: layouts, ordering, de-duplication and compaction events."""

from __future__ import annotations

from pathlib import Path

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
