"""Per-thread TTLs and keep-warm pings, worked by hand on a session with a 3-minute, a
20-minute and a 2-hour idle gap.

The session (one main thread, claude-sonnet-4-5, recorded under the 5-minute TTL):

| call | time    | gap    | prompt | recorded                      | output |
|------|---------|--------|--------|-------------------------------|--------|
| 1    | 0       |        | 20,000 | write 20,000                  | 500    |
| 2    | 3 min   | 3 min  | 30,000 | read 20,000, write 10,000     | 500    |
| 3    | 23 min  | 20 min | 40,000 | write 40,000 (the 5m expired) | 500    |
| 4    | 143 min | 2 h    | 50,000 | write 50,000                  | 500    |

Prices (docs/domain.md#prices, Sonnet 4.5, USD per million tokens): input 3, 5-minute write
3.75, 1-hour write 6, read 0.30, output 15. The four outputs cost 2,000 x 15 / 1e6 = $0.03
under every variant. Every dollar figure below is worked out here, from those prices, and
not by the code under test.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, cast

import polars as pl
import pytest

from mcsim.accounting.prices import default_table
from mcsim.replay.keep_warm import KeepWarm, pings_in_gap
from mcsim.replay.run import ReplayReport, run_replay
from mcsim.replay.scenario import PolicyFileError, Scenario, parse_policies

MODEL = "claude-sonnet-4-5-20250929"
T0 = 1_800_000_000
MINUTE = 60

OUTPUTS = 4 * 500 * 15 / 1e6  # $0.03

# 5m (as recorded): every gap past 5 minutes writes the whole prompt again.
FIVE_MINUTES = (
    20_000 * 3.75 / 1e6  # call 1: write 20,000             0.075
    + 20_000 * 0.30 / 1e6  # call 2: read 20,000            0.006
    + 10_000 * 3.75 / 1e6  # ... write 10,000               0.0375
    + 40_000 * 3.75 / 1e6  # call 3: write 40,000 (cold)    0.15
    + 50_000 * 3.75 / 1e6  # call 4: write 50,000 (cold)    0.1875
    + OUTPUTS
)  # $0.486
# 1h: every write at 2x input; the 20-minute gap stays warm, the 2-hour one does not.
ONE_HOUR = (
    20_000 * 6 / 1e6  # call 1: write 20,000                0.12
    + 20_000 * 0.30 / 1e6  # call 2: read 20,000            0.006
    + 10_000 * 6 / 1e6  # ... write 10,000                  0.06
    + 30_000 * 0.30 / 1e6  # call 3: read 30,000            0.009
    + 10_000 * 6 / 1e6  # ... write 10,000                  0.06
    + 50_000 * 6 / 1e6  # call 4: write 50,000 (cold)       0.30
    + OUTPUTS
)  # $0.585
# A ping reads the cached prompt and sends 10 tokens of its own for 1 token back.
PING_30K = 30_000 * 0.30 / 1e6 + 10 * 3 / 1e6 + 1 * 15 / 1e6  # 0.009045
PING_40K = 40_000 * 0.30 / 1e6 + 10 * 3 / 1e6 + 1 * 15 / 1e6  # 0.012045
# 5m + pings every 4.5 minutes up to 30: the 3-minute gap needs none; the 20-minute gap gets 4
# (at 4.5, 9, 13.5, 18; the next, 22.5, is after call 3) and call 3 finds the cache warm
# (2 minutes after the last ping); the 2-hour gap, longer than 30 minutes, gets none (the
# default reading of longer gaps, `none`) and call 4 finds the cache cold.
KEEP_WARM_PINGS = 4 * PING_30K  # 0.03618
KEEP_WARM = (
    20_000 * 3.75 / 1e6  # call 1                            0.075
    + 20_000 * 0.30 / 1e6
    + 10_000 * 3.75 / 1e6  # call 2    0.0435
    + 30_000 * 0.30 / 1e6
    + 10_000 * 3.75 / 1e6  # call 3    0.0465 (warm)
    + 50_000 * 3.75 / 1e6  # call 4                          0.1875 (cold)
    + OUTPUTS
    + KEEP_WARM_PINGS
)  # $0.41868
# The other reading (`longer_gaps: paid`, a scheduler that cannot see the user's return):
# the 2-hour gap gets 6 pings too (4.5 .. 27; 31.5 is past 30), paid, and call 4 still
# finds the cache cold (27 + 5 = 32 minutes < 120).
KEEP_WARM_PAID = KEEP_WARM + 6 * PING_40K  # 0.41868 + 0.07227 = $0.49095
# The advisor's other variants, worked the same way:
# 5m + pings up to 15 minutes: both long gaps are longer than 15 minutes: no pings, the
# recording's cost. Paid: 3 pings in each (4.5, 9, 13.5), and the cache expires at 18.5
# minutes, before call 3: both long gaps miss, and the pings are paid for nothing.
KEEP_WARM_15 = FIVE_MINUTES  # 0.486
KEEP_WARM_15_PAID = FIVE_MINUTES + 3 * PING_30K + 3 * PING_40K  # 0.54927
# 5m + pings up to 60 minutes: 4 pings in the 20-minute gap, none in the 2-hour one (as 30).
# Paid: 13 in the 2-hour one (to 58.5).
KEEP_WARM_60 = KEEP_WARM  # 0.41868
KEEP_WARM_60_PAID = KEEP_WARM + 13 * PING_40K  # 0.575265
# 1h + pings every 55 minutes up to 3 hours: the 2-hour gap gets 2 (at 55 and 110) and call 4
# reads 40,000 and writes 10,000 instead of writing 50,000.
ONE_HOUR_WARM = (
    ONE_HOUR - 50_000 * 6 / 1e6 + 40_000 * 0.30 / 1e6 + 10_000 * 6 / 1e6 + 2 * PING_40K
)  # 0.38109


def _line(line_type: str, **fields: Any) -> str:
    return json.dumps({"type": line_type, **fields})


def _call(i: int, at_s: float, read: int, write_5m: int, thread: str = "main") -> str:
    return _line(
        "call", thread=thread, id=f"{thread}-m{i}", request_id=f"{thread}-r{i}", model=MODEL,
        timestamp=at_s, sent_at=at_s, done_at=at_s,
        usage={"input_tokens": 0, "cache_read_tokens": read, "cache_write_5m_tokens": write_5m,
               "output_tokens": 500},
    )  # fmt: skip


def _result(i: int, tokens: int, thread: str = "main") -> list[str]:
    use = f"{thread}-u{i}"
    return [
        _line("item", thread=thread, kind="tool_use", tokens=50, tool_name="Read",
              tool_use_id=use),
        _line("item", thread=thread, kind="tool_result", tokens=tokens - 50, tool_name="Read",
              tool_use_id=use),
    ]  # fmt: skip


def write_session(folder: Path, session_id: str = "s1", project: str = "p") -> Path:
    """The session of the module docstring, in the interchange format."""
    at = [T0, T0 + 3 * MINUTE, T0 + 23 * MINUTE, T0 + 143 * MINUTE]
    lines = [
        _line("session", format="mcsim-interchange", version=1, session_id=session_id,
              project=project),
        _line("thread", thread="main", kind="main"),
        _line("item", thread="main", kind="user_text", tokens=20_000),
        _call(0, at[0], 0, 20_000),
        *_result(1, 10_000),
        _call(1, at[1], 20_000, 10_000),
        *_result(2, 10_000),
        _call(2, at[2], 0, 40_000),
        *_result(3, 10_000),
        _call(3, at[3], 0, 50_000),
    ]  # fmt: skip
    path = folder / project / f"{session_id}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def scenarios(policies: list[dict[str, Any]]) -> list[Scenario]:
    return parse_policies({"policies": policies}, "test")


def replay(folder: Path, policies: list[dict[str, Any]]) -> ReplayReport:
    return run_replay([str(folder)], scenarios(policies), default_table(), cache_dir=None,
                      workers=1)  # fmt: skip


NONE = {"kind": "none"}
WARM = {"interval_minutes": 4.5, "max_idle_minutes": 30}


@pytest.fixture(scope="module")
def worked(tmp_path_factory: pytest.TempPathFactory) -> ReplayReport:
    folder = tmp_path_factory.mktemp("warm")
    write_session(folder)
    return replay(folder, [
        {"name": "ttl-5m", "ttl": "5m", **NONE},
        {"name": "ttl-1h", "ttl": "1h", **NONE},
        {"name": "warm", "ttl": "5m", "keep_warm": WARM, **NONE},
        {"name": "warm-paid", "ttl": "5m", "keep_warm": {**WARM, "longer_gaps": "paid"},
         **NONE},
    ])  # fmt: skip


def test_the_hand_worked_figures_are_what_they_say() -> None:
    assert round(FIVE_MINUTES, 6) == 0.486
    assert round(ONE_HOUR, 6) == 0.585
    assert round(KEEP_WARM, 6) == 0.41868
    assert round(KEEP_WARM_PAID, 6) == 0.49095
    assert round(KEEP_WARM_15_PAID, 6) == 0.54927
    assert round(KEEP_WARM_60_PAID, 6) == 0.575265
    assert round(ONE_HOUR_WARM, 6) == 0.38109


def test_five_minutes_one_hour_and_keep_warm_cost_what_was_worked_by_hand(
    worked: ReplayReport,
) -> None:
    cost = {name: t.cost_usd for name, t in worked.policies.items()}
    assert worked.recorded.cost_usd == pytest.approx(FIVE_MINUTES, abs=1e-9)
    assert cost["baseline"] == pytest.approx(FIVE_MINUTES, abs=1e-9)
    assert cost["ttl-5m"] == pytest.approx(FIVE_MINUTES, abs=1e-9)
    assert cost["ttl-1h"] == pytest.approx(ONE_HOUR, abs=1e-9)
    assert cost["warm"] == pytest.approx(KEEP_WARM, abs=1e-9)
    assert cost["warm-paid"] == pytest.approx(KEEP_WARM_PAID, abs=1e-9)
    # to the cent: $0.486, $0.585, $0.41868 and $0.49095
    for name, dollars in (("ttl-5m", 0.486), ("ttl-1h", 0.585), ("warm", 0.41868),
                          ("warm-paid", 0.49095)):  # fmt: skip
        assert abs(cost[name] - dollars) < 0.005, name
    warm = worked.policies["warm"]
    assert warm.pings == 4
    assert worked.policies["warm-paid"].pings == 10
    assert warm.ping_cost_usd == pytest.approx(KEEP_WARM_PINGS, abs=1e-9)
    assert worked.policies["ttl-5m"].pings == 0


def test_pings_sit_in_the_gaps_that_had_them_and_are_priced_apart(worked: ReplayReport) -> None:
    from mcsim.outputs.replay_tables import calls_frame

    table = calls_frame(worked)
    calls = table.filter(~table["ping"])  # the agent's calls: the same rows in every run
    assert calls.group_by("policy").len()["len"].to_list() == [4] * (len(worked.policies) + 1)
    # Pings only where the gap was shorter than max_idle_minutes (20 < 30) and the cache warm
    warm = calls.filter(calls["policy"] == "warm").sort("call_index")
    assert warm["pings"].to_list() == [0, 0, 4, 0]
    assert warm["ping_cost_usd"].to_list() == pytest.approx([0, 0, 4 * PING_30K, 0])
    paid = calls.filter(calls["policy"] == "warm-paid").sort("call_index")
    assert paid["pings"].to_list() == [0, 0, 4, 6]
    assert paid["ping_cost_usd"].to_list() == pytest.approx([0, 0, 4 * PING_30K, 6 * PING_40K])
    # the calls' own cost leaves the pings out; with them it is the policy's cost
    own = sum(warm["cost_usd"].to_list())
    assert own + sum(warm["ping_cost_usd"].to_list()) == pytest.approx(KEEP_WARM, abs=1e-9)
    # call 3 read the prompt the pings kept warm; call 4 found it cold
    assert warm["cache_read_tokens"].to_list() == [0, 20_000, 30_000, 0]
    others = calls.filter(~calls["policy"].is_in(["warm", "warm-paid"]))
    assert set(others["pings"].to_list()) == {0}


def test_each_ping_is_a_row_of_its_own(worked: ReplayReport) -> None:
    """calls.parquet: every ping a row (`ping` true) before the call after its gap, at its
    own time, reading the cached prompt with 10 tokens of its own for 1 back."""
    from mcsim.outputs.replay_tables import calls_frame

    table = calls_frame(worked)
    warm = table.filter(table["policy"] == "warm")
    # in the table's order: calls 1 and 2, the 20-minute gap's four pings, calls 3 and 4
    assert warm["ping"].to_list() == [False, False, True, True, True, True, False, False]
    assert warm["call_index"].to_list() == [0, 1, 2, 2, 2, 2, 2, 3]
    pings = warm.filter(warm["ping"])
    # sent 4.5, 9, 13.5 and 18 minutes after call 2 (at 3 minutes)
    sent = [(t.timestamp() - T0) / MINUTE for t in pings["timestamp"].to_list()]
    assert sent == pytest.approx([7.5, 12.0, 16.5, 21.0])
    assert pings["cache_read_tokens"].to_list() == [30_000] * 4
    assert pings["input_tokens"].to_list() == [10] * 4
    assert pings["output_tokens"].to_list() == [1] * 4
    assert pings["prompt_tokens"].to_list() == [30_010] * 4
    assert pings["cache_write_5m_tokens"].to_list() == [0] * 4
    assert pings["cost_usd"].to_list() == pytest.approx([PING_30K] * 4, abs=1e-12)
    assert set(pings["model"].to_list()) == {MODEL}
    assert not any(pings["is_break"].to_list())
    # every row's own cost adds up to the policy's (the agent's calls and the pings)
    assert sum(warm["cost_usd"].to_list()) == pytest.approx(KEEP_WARM, abs=1e-9)
    # the paid reading: six more before call 4, reading its 40,000-token prompt, from 23 min
    paid = table.filter(table["policy"] == "warm-paid")
    late = paid.filter(paid["ping"] & (paid["call_index"] == 3))
    sent = [(t.timestamp() - T0) / MINUTE for t in late["timestamp"].to_list()]
    assert sent == pytest.approx([23 + 4.5 * k for k in range(1, 7)])
    assert late["cache_read_tokens"].to_list() == [40_000] * 6
    assert late["cost_usd"].to_list() == pytest.approx([PING_40K] * 6, abs=1e-12)
    assert sum(paid["cost_usd"].to_list()) == pytest.approx(KEEP_WARM_PAID, abs=1e-9)
    # no other run has a ping row
    assert set(table.filter(table["ping"])["policy"].to_list()) == {"warm", "warm-paid"}


def test_ping_rows_come_back_from_the_result_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A warm run writes the pings' rows its cold run wrote, served from the kept results."""
    import mcsim.replay.run
    from mcsim.outputs.replay_tables import calls_frame

    write_session(tmp_path / "in")
    runs = scenarios([{"name": "warm-paid", "keep_warm": {**WARM, "longer_gaps": "paid"},
                       **NONE}])  # fmt: skip

    def replayed() -> ReplayReport:
        return run_replay([str(tmp_path / "in")], runs, default_table(),
                          cache_dir=tmp_path / "cache", workers=1)  # fmt: skip

    cold = calls_frame(replayed())
    assert cold["ping"].sum() == 10

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a warm run serves its results from the cache")

    monkeypatch.setattr(mcsim.replay.run, "replay_session", refuse)
    from polars.testing import assert_frame_equal

    assert_frame_equal(calls_frame(replayed()), cold)


def test_pings_per_gap_by_hand() -> None:
    ttl_5m, every, longest = 300.0, 270.0, 1800.0
    for paid in (False, True):
        assert pings_in_gap(3 * MINUTE, ttl_5m, every, longest, paid) == 0  # the gap ends first
        assert pings_in_gap(20 * MINUTE, ttl_5m, every, longest, paid) == 4
        assert pings_in_gap(9 * MINUTE, ttl_5m, every, longest, paid) == 1  # not at the request
        # a ping that would land after the TTL ran out is not sent: the cache is already cold
        assert pings_in_gap(20 * MINUTE, ttl_5m, 6 * MINUTE, 3600.0, paid) == 0
        assert pings_in_gap(20 * MINUTE, 3600.0, 6 * MINUTE, 3600.0, paid) == 3
    # a gap of max_idle_minutes or more: none, or (paid) those of its first 30 minutes
    assert pings_in_gap(120 * MINUTE, ttl_5m, every, longest, False) == 0
    assert pings_in_gap(30 * MINUTE, ttl_5m, every, longest, False) == 0
    assert pings_in_gap(120 * MINUTE, ttl_5m, every, longest, True) == 6  # none past 30


def test_a_ping_past_the_recorded_ttl_is_not_sent(tmp_path: Path) -> None:
    """With the TTL as recorded (5m here), pings every 6 minutes would land on a cold cache:
    none is sent, and the replay is the recording's."""
    write_session(tmp_path)
    warm = {"interval_minutes": 6, "max_idle_minutes": 60}
    report = replay(tmp_path, [{"name": "late", "keep_warm": warm, **NONE}])
    assert report.policies["late"].pings == 0
    assert report.policies["late"].cost_usd == pytest.approx(FIVE_MINUTES, abs=1e-9)


def test_a_time_based_microcompact_sees_the_real_gap_under_pings(tmp_path: Path) -> None:
    """Pings are not agent turns: a 15-minute idle-gap microcompact fires on the 20-minute gap
    with or without them, and clears the same results."""
    write_session(tmp_path)
    micro = {"kind": "time_based_microcompact", "gap_threshold_minutes": 15, "keep_recent": 1}
    report = replay(tmp_path, [
        {"name": "cold", "ttl": "5m", **micro},
        {"name": "warm", "ttl": "5m", "keep_warm": WARM, **micro},
    ])  # fmt: skip
    cold, warm = report.policies["cold"], report.policies["warm"]
    assert cold.cleared_tokens > 0
    assert warm.cleared_tokens == cold.cleared_tokens
    assert warm.pings == 4
    from mcsim.outputs.replay_tables import calls_frame

    calls = calls_frame(report).filter(~pl.col("ping"))
    rows = calls.filter(calls["policy"] == "warm").sort("call_index")
    assert rows["rewrote"].to_list() == [False, False, True, True]
    assert rows["pings"].to_list() == [0, 0, 4, 0]


def test_ttl_by_thread_kind_and_keep_warm_are_validated() -> None:
    [_, policy] = scenarios([{"name": "a", "ttl": {"main": "1h", "subagent": "5m"}, **NONE}])
    assert policy.ttl_for("main") == "1h"
    assert policy.ttl_for("subagent") == "5m"
    assert policy.ttl_for("compact") == "recorded"  # not named: as the defaults (recorded)
    assert "ttl=main:1h,subagent:5m,compact:recorded" in policy.describe()
    [_, warm] = scenarios([{"name": "w", "ttl": "5m", "keep_warm": WARM, **NONE}])
    assert warm.keep_warm == KeepWarm(4.5, 30.0)
    bad = [
        ({"ttl": {"mian": "1h"}}, "key 'ttl': 'mian' is not a thread kind (allowed: main, "
                                  "subagent, compact)"),
        ({"ttl": {"main": "2h"}}, "key 'ttl.main': must be one of 5m, 1h, 24h, recorded"),
        ({"ttl": "5m", "keep_warm": {"interval_minutes": 5, "max_idle_minutes": 30}},
         "key 'keep_warm.interval_minutes': 5 is not below the TTL of main threads (5m)"),
        ({"keep_warm": {"interval_minutes": -1, "max_idle_minutes": 30}},
         "keep_warm'.interval_minutes: must be a number of minutes from 0"),
        ({"keep_warm": {"interval_minutes": 4, "max_idle_minutes": 3}},
         "no ping would ever be sent"),
        ({"keep_warm": {"interval_minutes": 4, "max_idle_minutes": 30, "every": 3}},
         "unknown key 'every' (allowed: interval_minutes, max_idle_minutes"),
        ({"keep_warm": {"interval_minutes": 4, "max_idle_minutes": 30, "threads": ["bots"]}},
         "'bots' is not a thread kind"),
        ({"keep_warm": {"interval_minutes": 4, "max_idle_minutes": 30, "input_tokens": -2}},
         "input_tokens: must be a whole number from 0"),
        ({"keep_warm": {"interval_minutes": 4, "max_idle_minutes": 30, "longer_gaps": "pay"}},
         "keep_warm'.longer_gaps: must be one of none, paid, not 'pay'"),
    ]  # fmt: skip
    for settings, message in cast(list[tuple[dict[str, Any], str]], bad):
        with pytest.raises(PolicyFileError) as err:
            scenarios([{"name": "a", **settings, **NONE}])
        assert "\n" not in str(err.value)
        assert message in str(err.value), str(err.value)


def test_ttl_and_keep_warm_change_the_result_cache_key() -> None:
    """Every field of a scenario is in the result cache's key, so two setups that differ in
    any one never share cached results."""
    import dataclasses

    from mcsim.replay.result_cache import setup_key

    base = scenarios([{"name": "a", **NONE}])
    prices = default_table()
    key = setup_key(tuple(base), prices, True)
    changed: dict[str, Any] = {
        "name": "b", "ttl": "1h", "ttl_by_kind": (("subagent", "5m"),),
        "compactable_tools": frozenset({"Read"}), "exclude_tools": frozenset({"Bash"}),
        "main_thread_only": False, "provider": "openai", "keep_warm": KeepWarm(4.5, 30.0),
        "layers": (),
    }  # fmt: skip
    fields = {f.name for f in dataclasses.fields(Scenario)}
    assert fields == set(changed), "a new Scenario field: add it here and to setup_key"
    for name, value in changed.items():
        other = [base[0], dataclasses.replace(base[1], **{name: value})]
        assert setup_key(tuple(other), prices, True) != key, name
    assert not math.isnan(KEEP_WARM)


# ---------------------------------------------------------------- the advisor

# The advisor's variants on the worked session, by hand (above): the cheapest is the 1-hour
# TTL with a ping every 55 minutes.
ADVISED = {
    "no change": FIVE_MINUTES,
    "5m": FIVE_MINUTES,
    "1h": ONE_HOUR,
    "5m+warm4.5/15": KEEP_WARM_15,
    "5m+warm4.5/30": KEEP_WARM,
    "5m+warm4.5/60": KEEP_WARM_60,
    "1h+warm55/180": ONE_HOUR_WARM,
}
# ... and each under the other reading of longer gaps (pings paid in them too)
ADVISED_PAID = {
    **ADVISED,
    "5m+warm4.5/15": KEEP_WARM_15_PAID,
    "5m+warm4.5/30": KEEP_WARM_PAID,
    "5m+warm4.5/60": KEEP_WARM_60_PAID,
}
# A sub-agent beside it: calls 1 and 3 minutes into the session, prompts 15,000 and 25,000
# (recorded: write 15,000; read 15,000 and write 10,000), 500 output tokens each. Its gap of
# 2 minutes needs no pings and no longer TTL: the 1-hour TTL only adds its write premium.
SUB_FIVE_MINUTES = (15_000 * 3.75 + 15_000 * 0.30 + 10_000 * 3.75 + 1000 * 15) / 1e6  # 0.11325
SUB_ONE_HOUR = (15_000 * 6 + 15_000 * 0.30 + 10_000 * 6 + 1000 * 15) / 1e6  # 0.1695


def write_with_subagent(folder: Path) -> Path:
    path = write_session(folder)
    at = [T0 + 1 * MINUTE, T0 + 3 * MINUTE]
    lines = [
        _line("thread", thread="sub", kind="subagent"),
        _line("item", thread="sub", kind="user_text", tokens=15_000),
        _call(0, at[0], 0, 15_000, thread="sub"),
        *_result(1, 10_000, thread="sub"),
        _call(1, at[1], 15_000, 10_000, thread="sub"),
    ]
    with path.open("a") as f:
        f.write("\n".join(lines) + "\n")
    return path


def _advice(folder: Path) -> Any:
    from mcsim.replay.advise import advise, cache_variants, variant_scenarios

    variants = cache_variants()
    report = run_replay([str(folder)], variant_scenarios(variants, False), default_table(),
                        cache_dir=None, workers=1)  # fmt: skip
    return advise(report, variants, default_table())


def test_the_advisor_picks_what_was_worked_by_hand(tmp_path: Path) -> None:
    write_session(tmp_path)
    advice = _advice(tmp_path)
    main = next(a for a in advice.overall if a.group == "main")
    assert {o.name: round(o.cost_usd, 9) for o in main.options} == {
        name: round(cost, 9) for name, cost in ADVISED.items()
    }
    assert {o.name: round(o.paid_cost_usd, 9) for o in main.options} == {
        name: round(cost, 9) for name, cost in ADVISED_PAID.items()
    }
    assert main.pick.name == "1h+warm55/180"
    assert not main.pick.paid_differs  # the 2-hour gap is under its 180 minutes
    assert main.pick.cost_usd == pytest.approx(ONE_HOUR_WARM, abs=1e-9)
    assert main.recorded_usd == pytest.approx(FIVE_MINUTES, abs=1e-9)
    assert main.saved_usd == pytest.approx(FIVE_MINUTES - ONE_HOUR_WARM, abs=1e-9)  # $0.10491
    assert main.pick.pings == 2
    assert main.reason.startswith(
        "1 idle gap between 5 and 60 minutes and 1 longer; the TTL ran out before 2 calls, "
        "which re-wrote 90k tokens as recorded; 1h+warm55/180 writes 70k fewer tokens"
    ), main.reason
    assert math.isnan(main.low_pct)  # one session: no interval
    assert main.spread is not None and main.spread.describe() == "one session: no interval"


def test_the_advisors_pick_is_the_cheapest_replay_of_the_variants_it_names(
    tmp_path: Path,
) -> None:
    """Main threads and sub-agents apart: the main thread's pick (1h + pings) and the
    sub-agent's (no change) together, as one policy, are the cheapest; replaying every
    variant the advisor names, from the policy file it prints, gives its figures."""
    import yaml

    write_with_subagent(tmp_path)
    advice = _advice(tmp_path)
    by_group = {a.group: a for a in advice.overall}
    assert by_group["main"].pick.name == "1h+warm55/180"
    assert by_group["sub-agents"].pick.name == "no change"
    sub = {o.name: o.cost_usd for o in by_group["sub-agents"].options}
    assert sub["5m"] == pytest.approx(SUB_FIVE_MINUTES, abs=1e-9)
    assert sub["1h"] == pytest.approx(SUB_ONE_HOUR, abs=1e-9)
    whole = by_group["all threads"]
    assert whole.pick.name == "main 1h+warm55/180; sub no change"
    assert whole.pick.cost_usd == pytest.approx(ONE_HOUR_WARM + SUB_FIVE_MINUTES, abs=1e-9)
    assert whole.pick.cost_usd == min(o.cost_usd for o in whole.options)
    assert whole.saved_usd == pytest.approx(
        FIVE_MINUTES + SUB_FIVE_MINUTES - ONE_HOUR_WARM - SUB_FIVE_MINUTES, abs=1e-9
    )
    # every named variant, replayed from its printed policy: the same cost
    policies = [yaml.safe_load(o.policy)["policies"][0] for o in whole.options]
    report = replay(tmp_path, policies)
    for option in whole.options:
        assert report.policies[option.name].cost_usd == pytest.approx(option.cost_usd, abs=1e-9), (
            option.name
        )
        assert report.policies[option.name].pings == option.pings
    assert advice.projects["p"] == advice.overall  # one project: the same advice


def test_pings_are_shown_apart_in_the_printed_replay_and_its_json(worked: ReplayReport) -> None:
    from mcsim.outputs.replay_tables import replay_json, replay_text, summary_frame

    text = replay_text(worked)
    assert (
        "pings: warm sent 4 keep-warm pings (every 4.5m up to 30m), ping $ 0.0362 of its "
        "cost $ (not the agent's calls)" in text
    )
    assert "pings: ttl-1h" not in text  # no keep_warm: no line
    doc = {p["name"]: p for p in replay_json(worked, None)["policies"]}
    assert doc["warm"]["pings"] == 4
    assert doc["warm"]["ping_cost_usd"] == pytest.approx(KEEP_WARM_PINGS, abs=1e-9)
    assert doc["ttl-1h"]["pings"] == 0
    summary = {r["policy"]: r for r in summary_frame(worked).iter_rows(named=True)}
    assert summary["warm"]["pings"] == 4
    assert summary["warm"]["ping_cost_usd"] == pytest.approx(KEEP_WARM_PINGS, abs=1e-9)
    assert summary["warm"]["cost_usd"] == pytest.approx(KEEP_WARM, abs=1e-9)


def test_pings_on_openais_cache_read_whole_blocks(tmp_path: Path) -> None:
    """On OpenAI's prefix cache a ping reads the cached prompt in whole 128-token blocks (all
    of 30,000 and 40,000 here: 234 and 312.5 blocks, so 39,936 read and 64 uncached) and
    writing costs nothing apart."""
    write_session(tmp_path)
    warm = {"interval_minutes": 4.5, "max_idle_minutes": 30, "longer_gaps": "paid"}
    report = replay(tmp_path, [
        {"name": "oa", "provider": "openai", "ttl": "5m", **NONE},
        {"name": "oa-warm", "provider": "openai", "ttl": "5m", "keep_warm": warm, **NONE},
    ])  # fmt: skip
    from mcsim.outputs.replay_tables import calls_frame

    calls = calls_frame(report).filter(~pl.col("ping"))
    rows = calls.filter(calls["policy"] == "oa-warm").sort("call_index")
    assert rows["pings"].to_list() == [0, 0, 4, 6]
    # the price of Sonnet 4.5 as the table has it: read 0.30, input 3, output 15 per million
    ping_30k = (29_952 * 0.30 + (48 + 10) * 3 + 15) / 1e6
    ping_40k = (39_936 * 0.30 + (64 + 10) * 3 + 15) / 1e6
    assert rows["ping_cost_usd"].to_list() == pytest.approx([0, 0, 4 * ping_30k, 6 * ping_40k])
    # call 3 reads the 30,000 the pings kept warm (in whole blocks); without pings, nothing
    assert rows["cache_read_tokens"].to_list()[2] == 29_952
    cold = calls.filter(calls["policy"] == "oa").sort("call_index")
    assert cold["cache_read_tokens"].to_list()[2] == 0


@pytest.mark.slow
def test_advise_cache_on_the_command_line_writes_the_advice_and_the_report_shows_it(
    tmp_path: Path,
) -> None:
    from click.testing import CliRunner

    from mcsim.cli import cli

    write_with_subagent(tmp_path / "in")
    out = tmp_path / "out"
    runner = CliRunner()
    result = runner.invoke(cli, ["advise", "cache", str(tmp_path / "in"), "--out", str(out),
                                 "--json", "--no-cache"])  # fmt: skip
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    whole = next(g for g in doc["overall"] if g["group"] == "all threads")
    assert whole["pick"] == "main 1h+warm55/180; sub no change"
    assert whole["cost_usd"] == pytest.approx(ONE_HOUR_WARM + SUB_FIVE_MINUTES, abs=1e-6)
    assert whole["saved_usd"] == pytest.approx(FIVE_MINUTES - ONE_HOUR_WARM, abs=1e-6)
    for name in ("advice.json", "idle_gaps.png", "summary.parquet", "run.json"):
        assert (out / name).exists(), name
    assert json.loads((out / "advice.json").read_text())["overall"] == doc["overall"]
    result = runner.invoke(cli, ["report", str(out)])
    assert result.exit_code == 0, result.output
    report = (out / "report.md").read_text()
    assert "## Cache advice: TTL and keep-warm pings" in report
    assert "main 1h+warm55/180; sub no change (pick)" in report
    assert "idle_gaps.png" in report


def write_openai_session(folder: Path) -> Path:
    """The worked session's calls as an OpenAI recording (gpt-5.1-codex: input 1.25, cached
    input 0.125, output 10 per million; docs/counting.md#cost): every prompt is sent as
    uncached input but what the prefix cache read, in whole 128-token blocks."""
    at = [T0, T0 + 3 * MINUTE, T0 + 23 * MINUTE, T0 + 143 * MINUTE]
    prompts, reads = [20_000, 30_000, 40_000, 50_000], [0, 19_968, 0, 0]
    lines = [
        _line("session", format="mcsim-interchange", version=1, session_id="o1", project="p"),
        _line("thread", thread="main", kind="main"),
    ]
    for i, (when, prompt, read) in enumerate(zip(at, prompts, reads, strict=True)):
        lines.append(_line("item", thread="main", kind="user_text",
                           tokens=prompt - (prompts[i - 1] if i else 0)))  # fmt: skip
        lines.append(_line(
            "call", thread="main", id=f"o{i}", request_id=f"q{i}", model="gpt-5.1-codex",
            provider="openai", timestamp=when, sent_at=when, done_at=when,
            usage={"input_tokens": prompt - read, "cache_read_tokens": read,
                   "cache_write_5m_tokens": 0, "output_tokens": 500},
        ))  # fmt: skip
    path = folder / "p" / "o1.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


# In micro-dollars: input 1.25, read 0.125 per token-million. Reads are whole blocks of 128:
# 19,968 of 20,000, 29,952 of 30,000, 39,936 of 40,000. Outputs: 2,000 x 10 = 20,000.
OPENAI_IN_MEMORY = (
    20_000 * 1.25  # call 1: all uncached
    + 19_968 * 0.125
    + 10_032 * 1.25  # call 2: reads the first prompt's blocks
    + 40_000 * 1.25
    + 50_000 * 1.25  # calls 3 and 4: the 5-minute retention ran out
    + 20_000
) / 1e6  # $0.172536
OPENAI_24H = (
    20_000 * 1.25
    + 19_968 * 0.125
    + 10_032 * 1.25
    + 29_952 * 0.125
    + 10_048 * 1.25  # call 3: 20 minutes is within 24 hours
    + 39_936 * 0.125
    + 10_064 * 1.25  # call 4: so is 2 hours
    + 20_000
) / 1e6  # $0.093912


def test_on_openai_recordings_the_advisor_weighs_in_memory_against_24h_retention(
    tmp_path: Path,
) -> None:
    import yaml

    from mcsim.replay.advise import advise, cache_variants, variant_scenarios

    write_openai_session(tmp_path)
    variants = cache_variants(openai_only=True)
    assert [v.name for v in variants] == [
        "no change", "5m", "24h", "5m+warm4.5/15", "5m+warm4.5/30", "5m+warm4.5/60",
    ]  # fmt: skip
    report = run_replay([str(tmp_path)], variant_scenarios(variants, True), default_table(),
                        cache_dir=None, workers=1)  # fmt: skip
    advice = advise(report, variants, default_table(), openai_only=True)
    main = next(a for a in advice.overall if a.group == "main")
    costs = {o.name: o.cost_usd for o in main.options}
    assert costs["no change"] == pytest.approx(OPENAI_IN_MEMORY, abs=1e-9)
    assert costs["5m"] == pytest.approx(OPENAI_IN_MEMORY, abs=1e-9)
    assert costs["24h"] == pytest.approx(OPENAI_24H, abs=1e-9)
    assert main.pick.name == "24h"
    assert "sends 70k fewer tokens uncached" in main.reason
    policy = yaml.safe_load(main.pick.policy)["policies"][0]
    assert policy["provider"] == "openai" and policy["ttl"] == "24h"
    replayed = replay(tmp_path, [policy])
    assert replayed.policies["24h"].cost_usd == pytest.approx(OPENAI_24H, abs=1e-9)


def test_pings_in_the_defaults_add_a_baseline_of_their_own() -> None:
    """A policy file whose defaults send pings gets the no-pruning run under them beside the
    baseline (which stays the cache as recorded), as a TTL in the defaults does."""
    runs = parse_policies(
        {"defaults": {"ttl": {"main": "1h", "subagent": "5m"}, "keep_warm": WARM},
         "policies": [{"name": "a", **NONE}]},
        "test",
    )  # fmt: skip
    assert [s.name for s in runs] == [
        "baseline",
        "baseline:ttl=main:1h,subagent:5m,compact:recorded,keep_warm=every_4.5m_up_to_30m",
        "a",
    ]
    assert runs[0].as_recorded and not runs[1].as_recorded
    assert runs[2].keep_warm == KeepWarm(4.5, 30.0) and runs[2].ttl_for("subagent") == "5m"


def test_the_report_gives_the_picks_savings_under_the_other_reading_of_longer_gaps() -> None:
    """When the pick's pings would also go out in gaps of max_idle_minutes or more, the report
    says what it saves that way, next to the advice (`if_longer_gaps_paid` in advice.json)."""
    from mcsim.outputs.report import Fields, _advice_section

    def group(paid: dict[str, Any] | None) -> dict[str, Any]:
        return {"group": "all threads", "pick": "5m+warm4.5/30", "saved_usd": 0.3968,
                "saved_pct": 16.8, "interval": "one session: no interval", "reason": "why",
                "if_longer_gaps_paid": paid, "options": []}  # fmt: skip

    paid = {"cost_usd": 2.134, "saved_usd": 0.234, "saved_pct": 9.9, "pings": 18}
    section = _advice_section(Fields({"cache_advice": {"overall": [group(paid)]}}))
    assert section.paragraphs[1].endswith(
        "why. If its pings also went out, and were paid, in gaps of max_idle_minutes or more "
        "(a scheduler that cannot see the user's return: 18 pings), it saves $0.2340 (+9.9%)."
    ), section.paragraphs[1]
    plain = _advice_section(Fields({"cache_advice": {"overall": [group(None)]}}))
    assert plain.paragraphs[1].endswith("why.")
