"""The replay charts' data, worked out by hand on a tiny run, and the PNGs drawn from it."""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import row_columns
from matplotlib.colors import to_rgb

from mcsim.accounting.breaks import BreakCause
from mcsim.outputs import charts
from mcsim.outputs.charts import (
    CAUSE_LOOKS,
    CHARTS,
    ChartData,
    _wrapped,
    add_calls,
    break_timeline,
    context_size,
    cumulative_cost,
    draw_all,
    savings_data,
)
from mcsim.replay.results import PolicyTotals
from mcsim.replay.rows import RowsTable, SessionRows, ThreadRows
from mcsim.replay.run import ReplayReport
from mcsim.replay.scenario import parse_policies

POLICIES = ["recorded", "baseline", "p", "q"]
LONG = "time_based_microcompact+cached_microcompact+clear_tool_uses"


def session(
    sid: str, times: list[float], runs: dict[str, tuple[list[int], list[float], dict[int, str]]]
) -> SessionRows:
    """One session, one thread; per policy (prompt tokens, cost, {call: break cause})."""
    s = SessionRows(sid, "proj", [ThreadRows("main", "main", len(times))])
    for policy in POLICIES:
        s.start_run(policy)
        add_thread(s, times, *runs[policy])
    s.seal()
    return s


def add_thread(
    s: SessionRows, times: list[float], prompts: list[int], costs: list[float],
    causes: dict[int, str],
) -> None:  # fmt: skip
    """One thread's calls of the current run."""
    columns = row_columns(
        len(times), prompt_tokens=prompts, timestamp=times, cost_usd=costs,
        is_break=[i in causes for i in range(len(times))],
    )  # fmt: skip
    s.add(columns, sorted(causes.items()))


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


@pytest.mark.slow
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


@pytest.mark.slow
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


def figure(monkeypatch: pytest.MonkeyPatch, draw: Callable[[ChartData, Path], None],
           data: ChartData) -> Any:  # fmt: skip
    """The figure a chart drew, caught before it is saved and closed."""
    caught = []
    monkeypatch.setattr(charts, "save", lambda plt, fig, path, tight=True: caught.append(fig))
    draw(data, Path("unused.png"))
    (fig,) = caught
    return fig


def test_every_break_cause_has_a_look_of_its_own() -> None:
    assert list(CAUSE_LOOKS) == list(BreakCause)
    assert len({look.colour for look in CAUSE_LOOKS.values()}) == len(BreakCause)
    assert len({look.marker for look in CAUSE_LOOKS.values()}) == len(BreakCause)


def cause_looks(monkeypatch: pytest.MonkeyPatch, causes: list[str]) -> dict[str, Any]:
    """The break timeline of a run with a break of each of CAUSES: the legend's entries, and
    each cause's colour and marker (its path's vertices) as drawn."""
    data = ChartData(["recorded", "p"], sessions=1)
    data.breaks = {cause: (np.array([0.5]), np.array([1])) for cause in causes}
    ax = figure(monkeypatch, break_timeline, data).axes[0]
    looks: dict[str, Any] = {}
    for dots in ax.collections:
        cause = dots.get_label().split(" ")[0]
        looks[cause] = (to_rgb(dots.get_facecolor()[0]), dots.get_paths()[0].vertices.tolist())
    looks["legend"] = [t.get_text() for t in ax.get_legend().get_texts()]
    return looks


def test_a_break_cause_has_the_same_look_in_every_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Colours handed out in order of appearance made ttl_expired the second colour in a run
    with a policy_clearing break and the fourth in one with three other causes before it."""
    one = cause_looks(monkeypatch, ["ttl_expired", "policy_clearing"])
    other = cause_looks(
        monkeypatch, ["unknown", "prefix_changed", "compaction", "ttl_expired", "model_switch"]
    )
    assert one["ttl_expired"] == other["ttl_expired"]
    assert one["ttl_expired"][0] == to_rgb(CAUSE_LOOKS[BreakCause.TTL_EXPIRED].colour)
    assert one["policy_clearing"][0] == to_rgb(CAUSE_LOOKS[BreakCause.POLICY_CLEARING].colour)
    colours = {cause: look[0] for cause, look in other.items() if cause != "legend"}
    assert len(set(colours.values())) == 5
    markers = {str(look[1]) for cause, look in other.items() if cause != "legend"}
    assert len(markers) == 5
    # Only the causes present, in one fixed order.
    assert one["legend"] == ["ttl_expired (1)", "policy_clearing (1)"]
    assert other["legend"] == ["ttl_expired (1)", "compaction (1)", "model_switch (1)",
                               "prefix_changed (1)", "unknown (1)"]  # fmt: skip


def test_a_break_cause_the_code_does_not_know_fails_rather_than_vanishes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(ValueError, match="gremlins"):
        cause_looks(monkeypatch, ["ttl_expired", "gremlins"])


def with_subagent(cleared: bool = True) -> RowsTable:
    """One session: the main thread's calls at t = 100, 200, 400 (100k, 110k, 120k tokens), a
    sub-agent's at t = 250, 300 (13k, 14k); q's sub-agent sends 5k and 6k (unless not
    `cleared`)."""
    s = SessionRows(
        "s", "proj", [ThreadRows("main", "main", 3), ThreadRows("agent-a", "subagent", 2)]
    )
    for policy in POLICIES:
        s.start_run(policy)
        add_thread(s, [100.0, 200.0, 400.0], [100_000, 110_000, 120_000], [1.0] * 3, {})
        sub = [5_000, 6_000] if policy == "q" and cleared else [13_000, 14_000]
        add_thread(s, [250.0, 300.0], sub, [0.1, 0.1], {})
    s.seal()
    return RowsTable([s], POLICIES)


def test_the_context_line_holds_only_main_thread_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    data = ChartData(POLICIES)
    add_calls(data, with_subagent())
    # In time order: main, main, sub-agent, sub-agent, main: x 0-4. The cost counts them all.
    assert list(data.cumulative_cost["q"][0]) == [0, 1, 2, 3, 4]
    for name in POLICIES:
        xs, ys = data.prompt_k[name]
        assert list(xs) == [0, 1, 4] and list(ys) == [100.0, 110.0, 120.0]
    assert [list(v) for v in data.apart_prompt_k["p"]] == [[2, 3], [13.0, 14.0]]
    assert [list(v) for v in data.apart_prompt_k["q"]] == [[2, 3], [5.0, 6.0]]
    top, below = figure(monkeypatch, context_size, data).axes
    assert [list(line.get_xdata()) for line in top.lines] == [[0, 1, 4]] * 3  # not recorded
    assert all(min(line.get_ydata()) == 100.0 for line in top.lines)  # no zigzag down to 13k
    # Below, apart: the sub-agent's calls as dots, each policy in its look of the line above.
    assert [line.get_linestyle() for line in below.lines] == ["None"] * 3
    assert [list(line.get_ydata()) for line in below.lines] == [[13.0, 14.0]] * 2 + [[5.0, 6.0]]
    looks = [(line.get_color(), line.get_marker()) for line in top.lines]
    assert [(line.get_color(), line.get_marker()) for line in below.lines] == looks
    assert below.get_title().endswith("each policy in its look above")


def test_sub_agent_calls_the_same_under_every_policy_are_drawn_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Drawn per policy, only the last policy's dots would show, as if the others had none.
    data = ChartData(POLICIES)
    add_calls(data, with_subagent(cleared=False))
    below = figure(monkeypatch, context_size, data).axes[1]
    assert [list(line.get_xdata()) for line in below.lines] == [[2, 3]]
    assert below.lines[0].get_color() == "dimgrey"
    assert below.get_title().endswith("the same under every policy")


def test_a_thinned_context_line_keeps_the_thread_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(charts, "_MAX_POINTS", 2)  # 5 calls: every 2nd, x 0, 2, 4
    data = ChartData(POLICIES)
    add_calls(data, with_subagent())
    assert [list(v) for v in data.prompt_k["q"]] == [[0, 4], [100.0, 120.0]]
    assert [list(v) for v in data.apart_prompt_k["q"]] == [[2], [5.0]]
    assert list(data.cumulative_cost["q"][0]) == [0, 2, 4]


def test_a_run_without_sub_agents_has_one_context_panel(monkeypatch: pytest.MonkeyPatch) -> None:
    data = ChartData(POLICIES)
    add_calls(data, rows())
    assert len(figure(monkeypatch, context_size, data).axes) == 1


@pytest.mark.parametrize("draw", [cumulative_cost, context_size, break_timeline])
@pytest.mark.parametrize("sessions", [1, 45])
def test_calls_and_sessions_are_counted_on_whole_numbers(
    monkeypatch: pytest.MonkeyPatch, draw: Callable[[ChartData, Path], None], sessions: int
) -> None:
    """matplotlib's own ticks put 5 calls at 0.0, 0.5, 1.0, ... (a Codex run's 2 calls at 0.2,
    0.4, ...); more than 40 sessions are not numbered one by one on the break timeline."""
    data = ChartData(POLICIES)
    add_calls(data, with_subagent())
    data.sessions = sessions
    fig = figure(monkeypatch, draw, data)
    fig.canvas.draw()
    bottom = fig.axes[-1]  # the context chart's two panels share their x axis and its ticks
    assert all(list(ax.get_xticks()) == list(bottom.get_xticks()) for ax in fig.axes)
    low, high = bottom.get_xlim()
    labels = [t.get_text() for t in bottom.get_xticklabels() if low <= t.get_position()[0] <= high]
    assert labels and all(label.isdigit() for label in labels), labels
