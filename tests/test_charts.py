"""The replay charts' data, worked out by hand on a tiny run, and the PNGs drawn from it."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from mcsim.outputs.charts import CHARTS, ChartData, _wrapped, add_calls, draw_all, savings_data
from mcsim.replay.rows import INT_COLUMNS, RowsTable, SessionRows
from mcsim.replay.run import PolicyTotals, ReplayReport
from mcsim.replay.scenario import parse_policies

POLICIES = ["recorded", "baseline", "p", "q"]
LONG = "time_based_microcompact+cached_microcompact+clear_tool_uses"


def session(
    sid: str, times: list[float], runs: dict[str, tuple[list[int], list[float], dict[int, str]]]
) -> SessionRows:
    """One session, one thread; per policy (prompt tokens, cost, {call: break cause})."""
    s = SessionRows(sid, "proj", [("main", "main", len(times))])
    for policy in POLICIES:
        prompts, costs, causes = runs[policy]
        s.start_run(policy)
        ints = [list(range(len(times))), prompts] + [[0] * len(times)] * (len(INT_COLUMNS) - 2)
        broke = [i in causes for i in range(len(times))]
        bools = [[False] * len(times), [False] * len(times), broke]
        s.add(ints, [times, costs], bools, ["m"] * len(times), ["5m"] * len(times),
              sorted(causes.items()))  # fmt: skip
    s.seal()
    return s


def rows() -> RowsTable:
    """Session a: calls at t = 100, 200, 300; session b: t = 150, 250 (the two overlap in
    time; a starts first). Given b first, as a worker could hand them over."""
    a_prompt, b_prompt = [10_000, 20_000, 30_000], [5_000, 6_000]
    a = session("a", [100.0, 200.0, 300.0], {
        "recorded": (a_prompt, [1.0, 1.0, 1.0], {}),
        "baseline": (a_prompt, [1.0, 1.0, 1.0], {}),
        "p": ([10_000, 20_000, 12_000], [1.0, 0.5, 0.5], {2: "policy_clearing"}),
        "q": (a_prompt, [1.0, 1.0, 1.0], {}),
    })  # fmt: skip
    b = session("b", [150.0, 250.0], {
        "recorded": (b_prompt, [2.0, 2.0], {1: "ttl_expired"}),
        "baseline": (b_prompt, [2.0, 2.0], {}),
        "p": (b_prompt, [2.0, 1.0], {1: "ttl_expired"}),
        "q": (b_prompt, [2.0, 1.0], {}),
    })  # fmt: skip
    return RowsTable([b, a], POLICIES)


def test_sessions_are_laid_end_to_end_in_start_order() -> None:
    data = ChartData(POLICIES)
    add_calls(data, rows())
    # a (starts at 100) then b (150): a's three calls are x 0-2, b's two are x 3-4.
    assert data.sessions == 2
    assert data.boundaries == [3]
    assert list(data.cumulative_cost["recorded"][1]) == [1.0, 2.0, 3.0, 5.0, 7.0]
    assert list(data.cumulative_cost["p"][1]) == [1.0, 1.5, 2.0, 4.0, 5.0]
    assert list(data.cumulative_cost["q"][1]) == [1.0, 2.0, 3.0, 5.0, 6.0]
    assert list(data.cumulative_cost["p"][0]) == [0, 1, 2, 3, 4]
    assert list(data.prompt_k["p"][1]) == [10.0, 20.0, 12.0, 5.0, 6.0]


def test_identical_lines_are_flagged() -> None:
    data = ChartData(POLICIES)
    add_calls(data, rows())
    # Costs: the baseline spends what was recorded at every call; q saves 1 at b's last call.
    assert data.same_cost == [["recorded", "baseline"]]
    # Prompts: q cleared nothing, so it sends the baseline's prompt (the recording's is not
    # drawn); p cleared 18,000 tokens before a's last call.
    assert data.same_prompt == [["baseline", "q"]]


def test_each_break_has_its_place_in_its_session() -> None:
    data = ChartData(POLICIES)
    add_calls(data, rows())
    # p's break at a's 3rd of 3 calls: session 0 + (2 + 0.5) / 3; the ttl breaks at b's 2nd of
    # 2 calls: session 1 + (1 + 0.5) / 2 = 1.75, for the recording (row 0) and p (row 2).
    xs, policy_rows = data.breaks["policy_clearing"]
    assert list(xs) == pytest.approx([2.5 / 3]) and list(policy_rows) == [2]
    xs, policy_rows = data.breaks["ttl_expired"]
    assert list(xs) == [1.75, 1.75] and list(policy_rows) == [0, 2]


def test_savings_range_from_net_to_simulated() -> None:
    scenarios = parse_policies({"policies": [{"name": "p", "kind": "keep_last_n", "n": 5}]}, "t")
    report = ReplayReport(scenarios)
    report.recorded.cost_usd = 8.0
    report.policies["baseline"] = PolicyTotals("baseline", cost_usd=10.0)
    report.policies["p"] = PolicyTotals("p", cost_usd=7.0, refetch_cost_usd=1.5)
    # vs baseline: (10 - 7) / 10 = 30%; net: (10 - 8.5) / 10 = 15%; vs recorded (8 - 7) / 8.
    assert savings_data(report).savings == [("p", 30.0, 15.0, 12.5)]


def test_long_names_wrap_whole() -> None:
    assert _wrapped(LONG) == "time_based_microcompact+\ncached_microcompact+clear_\ntool_uses"
    name = "x" * 200  # the longest name allowed: shown in full, cut every 30 characters
    assert _wrapped(name).split("\n") == ["x" * 30] * 6 + ["x" * 20]


def png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", head[16:24])
    return width, height


@pytest.mark.parametrize("empty", [False, True])
def test_the_charts_are_drawn(tmp_path: Path, empty: bool) -> None:
    names = [*POLICIES, LONG]
    data = ChartData(names, savings=[("p", 30.0, 15.0, 12.5), (LONG, -120.0, -125.0, -130.0)])
    if not empty:
        table = rows()
        add_calls(data, table)
        data.cumulative_cost[LONG] = data.cumulative_cost["q"]
        data.prompt_k[LONG] = data.prompt_k["q"]
    draw_all(data, tmp_path)
    for chart in CHARTS:
        width, height = png_size(tmp_path / chart)
        assert 600 <= width <= 2000 and 250 <= height <= 1200, (chart, width, height)
        assert 5_000 < (tmp_path / chart).stat().st_size < 1_000_000


def test_a_policy_has_one_style_on_every_chart() -> None:
    # The context-size chart has no line for the recording; the baseline and p must still
    # look as on the cost chart, where the recording's line comes first.
    from mcsim.outputs.charts import _lines, pyplot

    plt = pyplot()
    names = ["recorded", "baseline", "p"]
    series = {n: ([0, 1], [1.0, 2.0]) for n in names}
    _, (cost, context) = plt.subplots(1, 2)
    _lines(cost, series, names, [], lambda name, ys: name)
    _lines(context, {n: series[n] for n in names[1:]}, names, [], lambda name, ys: name)
    style = lambda line: (line.get_color(), line.get_linestyle(), line.get_marker())  # noqa: E731
    assert [style(line) for line in cost.lines[1:]] == [style(line) for line in context.lines]
    plt.close("all")


def chart_data() -> ChartData:
    data = ChartData(POLICIES, savings=[("p", 30.0, 15.0, 12.5), ("q", 1.0, 0.5, 0.2)])
    add_calls(data, rows())
    return data


def test_the_chart_process_draws_the_charts_of_a_request_at_once_and_the_same(
    tmp_path: Path,
) -> None:
    # Each chart of a request but the first is drawn in a child of the chart process: the
    # same bytes as drawn one after the other here.
    from mcsim.outputs.charts import ChartProcess

    (tmp_path / "apart").mkdir()
    (tmp_path / "here").mkdir()
    data = chart_data()
    charts = ChartProcess()
    try:
        charts.start(data, tmp_path / "apart")
        charts.wait()
    finally:
        charts.close()
    draw_all(data, tmp_path / "here")
    for chart in CHARTS:
        assert (tmp_path / "apart" / chart).read_bytes() == (tmp_path / "here" / chart).read_bytes()


def test_a_chart_that_fails_in_a_child_of_the_chart_process_fails_the_request(
    tmp_path: Path,
) -> None:
    from mcsim.outputs.charts import ChartProcess

    first, other = list(CHARTS)[:2]
    (tmp_path / other).mkdir()  # the second chart, drawn in a child, cannot be written
    charts = ChartProcess()
    try:
        charts.start(chart_data(), tmp_path, [first, other])
        with pytest.raises(OSError, match=r"^could not draw the charts: Is a directory$"):
            charts.wait()
    finally:
        charts.close()
    assert png_size(tmp_path / first)  # the first, drawn by the chart process itself
