"""The recording's own figures are one account (accounting.recorded.account_thread): what
`inspect` shows of a call and what the replay writes as its `recorded` run must be equal."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from conftest import REPO

from mcsim.accounting.prices import default_table
from mcsim.accounting.recorded import inspect_usage
from mcsim.replay.run import run_replay
from mcsim.replay.scenario import RECORDED, baseline

CODEX = REPO / "tests" / "data" / "codex-multi-call"


@pytest.mark.parametrize("which", ["corpus", "codex"])
def test_inspect_and_the_replay_account_the_recording_alike(corpus: Path, which: str) -> None:
    paths = [str(corpus if which == "corpus" else CODEX)]
    prices = default_table()
    inspected = inspect_usage(paths, prices, workers=1)
    replayed = run_replay(paths, [baseline()], prices, cache_dir=None, workers=1)
    recorded = replayed.recorded

    assert recorded.cost_usd == inspected.cost_usd  # the same floats, not merely close
    assert recorded.unpriced_calls == inspected.unpriced_calls
    assert recorded.calls == inspected.call_count
    assert recorded.tokens == inspected.tokens
    assert recorded.cache_breaks == len(inspected.breaks)
    assert dict(recorded.breaks_by_cause) == inspected.breaks_by_cause
    assert sum(recorded.drops_by_cause.values()) == sum(s.cache_drops for s in inspected.sessions)
    assert recorded.cache_edit_drops == sum(s.cache_edit_drops for s in inspected.sessions)

    rows = replayed.call_rows()
    assert rows.policies[0] == RECORDED
    part = rows.policy_slice(0)
    sessions = rows.string("session_id")[part].to_list()
    threads = rows.string("thread_id")[part].to_list()
    causes = rows.string("break_cause")[part].to_list()
    index = rows.numbers["call_index"][part].tolist()
    costs = rows.numbers["cost_usd"][part].tolist()
    broke = rows.numbers["is_break"][part].tolist()
    by_call = {
        (s, t, i): (cost, cause if is_break else None)
        for s, t, i, cost, cause, is_break in zip(
            sessions, threads, index, costs, causes, broke, strict=True
        )
    }
    assert len(by_call) == len(inspected.calls) == recorded.calls
    breaks_seen = 0
    for r in inspected.calls:
        cost, cause = by_call[(r.session_id, r.thread_id, r.call_index)]
        if r.cost is None:
            assert math.isnan(cost)
        else:
            assert cost == r.cost.total_usd
        assert cause == (None if r.cache_break is None else r.cache_break.cause.value)
        breaks_seen += r.cache_break is not None
    assert breaks_seen == recorded.cache_breaks
    if which == "corpus":  # the corpus holds breaks of several causes: a real comparison
        assert len(recorded.breaks_by_cause) >= 2


@pytest.mark.parametrize("which", ["corpus", "codex"])
def test_a_session_summary_adds_its_calls_up_one_by_one(corpus: Path, which: str) -> None:
    """analyse_session sums each model's tokens once, from its calls' LoadedCall tokens, and
    takes the start and end by comparison: the same figures as adding every call's usage and
    cost to its group in call order (UsageGroup.add_call) and min/max over its times."""
    from mcsim.accounting.recorded import UsageGroup, analyse_session
    from mcsim.ingest.pipeline import load_sessions
    from mcsim.model import Tokens

    prices = default_table()
    sessions, _ = load_sessions([str(corpus if which == "corpus" else CODEX)], workers=1)
    assert sessions
    models_seen = set()
    for session in sessions:
        summary = analyse_session(session, prices, keep_calls=False).summary
        groups: dict[str, UsageGroup] = {}
        cost = 0.0
        calls = [c for t in session.threads for c in t.calls]
        for call in calls:
            price = prices.cost(call.model, call.usage, call.timestamp_s)
            groups.setdefault(call.model, UsageGroup(call.model, sessions=1)).add_call(
                call.usage, price
            )
            if price is not None:
                cost += price.total_usd
        assert summary.by_model == tuple(groups[m] for m in sorted(groups))
        assert summary.tokens == Tokens.total(c.usage for c in calls)
        assert summary.cost_usd == cost
        assert summary.start_s == min(c.timestamp_s for c in calls)
        assert summary.end_s == max(c.timestamp_s for c in calls)
        models_seen.update(groups)
    assert len(models_seen) >= (2 if which == "corpus" else 1)
