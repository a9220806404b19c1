"""Per-call rows: packed in the workers, joined policy-major in the parent."""

from __future__ import annotations

import math

from conftest import row_columns

from mcsim.replay.rows import (
    BOOL_COLUMNS,
    FLOAT_COLUMNS,
    INT_COLUMNS,
    RowColumns,
    RowsTable,
    SessionRows,
    ThreadRows,
    runs,
)


def session(name: str, threads: list[tuple[str, int]], policies: list[str]) -> SessionRows:
    """Rows whose prompt_tokens encode (policy, thread, call) as p*100 + t*10 + call."""
    rows = SessionRows(name, f"proj-{name}", [ThreadRows(t, "main", n) for t, n in threads])
    for p, policy in enumerate(policies):
        rows.start_run(policy)
        for t, (_, n) in enumerate(threads):
            cost: list[float | None] = [None if i == 1 else 0.5 for i in range(n)]
            columns = row_columns(
                n,
                prompt_tokens=[p * 100 + t * 10 + i for i in range(n)],
                timestamp=[1000.0 * (t + 1) + i for i in range(n)],
                cost_usd=cost,
                is_break=[p == 1 and i == n - 1 for i in range(n)],
                ttl=["5m"] * (n - 1) + ["1h"],
            )
            rows.add(columns, [(n - 1, "ttl_expired")] if p == 1 else [])
    rows.seal()
    return rows


def test_the_columns_by_storage_type_are_every_column_but_model_and_ttl() -> None:
    stored = [*INT_COLUMNS, *FLOAT_COLUMNS, *BOOL_COLUMNS, "model", "ttl"]
    assert sorted(stored) == sorted(RowColumns._fields) and len(set(stored)) == len(stored)


def test_runs_encode_repeats() -> None:
    assert runs([]) == []
    assert runs(["a", "a", "a"]) == [("a", 3)]
    assert runs(["a", "b", "b", "a"]) == [("a", 1), ("b", 2), ("a", 1)]


def test_rows_are_joined_policy_major_in_session_thread_call_order() -> None:
    policies = ["recorded", "baseline"]
    a = session("a", [("t0", 2), ("t1", 3)], policies)
    b = session("b", [("t0", 1)], policies)
    table = RowsTable([a, b], policies)
    assert table.calls == 6 and table.rows == 12
    assert table.string("policy").to_list() == ["recorded"] * 6 + ["baseline"] * 6
    assert table.string("session_id").to_list() == ["a"] * 5 + ["b"] + ["a"] * 5 + ["b"]
    assert table.string("thread_id").to_list() == ["t0", "t0", "t1", "t1", "t1", "t0"] * 2
    prompts = table.numbers["prompt_tokens"].tolist()
    assert prompts == [0, 1, 10, 11, 12, 0, 100, 101, 110, 111, 112, 100]
    assert table.numbers["call_index"].tolist() == [0, 1, 0, 1, 2, 0] * 2
    assert table.string("ttl").to_list() == ["5m", "1h", "5m", "5m", "1h", "1h"] * 2
    costs = table.numbers["cost_usd"].tolist()
    assert [math.isnan(c) for c in costs] == [False, True, False, True, False, False] * 2
    causes = table.string("break_cause").to_list()
    assert causes == [None] * 6 + [None, "ttl_expired", None, None, "ttl_expired", "ttl_expired"]
    assert table.numbers["is_break"].tolist() == [c is not None for c in causes]
    # Time order within a policy: by timestamp (thread t0 at 1000 s, t1 at 2000 s), then
    # session, thread and call.
    order = table.time_order().tolist()
    assert order == [0, 5, 1, 2, 3, 4]
