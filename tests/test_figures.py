import json
import warnings

import numpy as np
import pytest

from ui import figures


@pytest.mark.parametrize("reduce", ["mean", "max"])
@pytest.mark.parametrize("n", [10, 385, 800, 1024])
def test_downsample_pools_like_nanmean_and_keeps_empty_blocks_empty(n, reduce):
    rng = np.random.default_rng(n)
    grid = rng.random((n, n)).astype(np.float32)
    grid[np.triu_indices(n, 1)] = np.nan  # a causal view: above the diagonal is empty
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # pooling must not warn (all-empty blocks)
        pooled, f = figures.downsample(grid, reduce)
    assert pooled.shape[0] <= figures.MAX_SIDE and f == max(1, -(-n // figures.MAX_SIDE))
    m = -(-n // f)
    padded = np.full((m * f, m * f), np.nan, dtype=np.float32)
    padded[:n, :n] = grid
    blocks = padded.reshape(m, f, m, f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        expect = np.nanmax(blocks, axis=(1, 3)) if reduce == "max" else np.nanmean(blocks, axis=(1, 3))
    if f == 1:
        expect = grid
    np.testing.assert_allclose(pooled, expect, rtol=1e-5, equal_nan=True)
    if f > 1:
        assert np.isnan(pooled[0, -1]) and not np.isnan(pooled[-1, 0])


def test_the_window_band_outline_leaves_every_cell_of_the_window_whole():
    import plotly.graph_objects as go

    n, w = 12, 3
    fig = figures.add_band(go.Figure(), n, w)
    lines = []
    for tr in fig.data:
        (x0, x1), (y0, y1) = tr.x, tr.y
        assert (y1 - y0) == pytest.approx(x1 - x0)  # a diagonal: y = x + c
        lines.append(y0 - x0)
    upper, lower = sorted(lines)
    for i in range(n):
        for j in range(n):
            corners = [(j + dx) - (i + dy) for dx in (-0.5, 0.5) for dy in (-0.5, 0.5)]  # x − y at each corner
            inside = 0 <= i - j < w
            # in the window: whole between the lines; just outside: cut or beyond, never whole inside
            whole = all(upper <= -c <= lower for c in corners)
            assert whole == inside, (i, j)


def test_an_encoders_band_outline_leaves_every_cell_of_its_window_whole_on_both_sides():
    import plotly.graph_objects as go

    n, w = 12, 3
    fig = figures.add_band(go.Figure(), n, w, causal=False)
    offsets = sorted(tr.y[0] - tr.x[0] for tr in fig.data)  # each line: y = x + c
    assert len(offsets) == 2
    upper, lower = offsets
    for i in range(n):
        for j in range(n):
            corners = [(j + dx) - (i + dy) for dx in (-0.5, 0.5) for dy in (-0.5, 0.5)]
            whole = all(upper <= -c <= lower for c in corners)
            assert whole == (abs(i - j) < w), (i, j)


def test_a_log_axis_within_one_decade_still_has_ticks():
    def y_dtick(ys):
        fig = figures.lines([{"name": "a", "x": [1, 2, 3], "y": ys}], title="t", x_title="x", y_title="y",
                            separators=".,", log_y=True)
        return fig.layout.yaxis.dtick

    assert y_dtick([0.90, 0.93, 0.95]) == "D1"  # 90 %–95 %: every digit's tick (one a decade: none)
    assert y_dtick([0.05, 0.2, 0.9]) == 1  # two decades: one tick each


def test_a_shared_figure_sends_what_the_figure_would_and_makes_its_dict_once():
    import plotly.graph_objects as go
    import plotly.io

    z = np.tril(np.random.default_rng(0).random((40, 40), dtype=np.float32))

    def build():
        return figures.attention_heatmap(z, [f"t{i}" for i in range(40)], title="w", x_title="key",
                                         y_title="query", hover="%{z}", separators=".,")[0]

    many = figures.frozen({"a": build(), "b": (build(), "not a figure")})
    one = many["a"]
    assert isinstance(one, figures.FrozenFigure) and isinstance(many["b"][0], figures.FrozenFigure)
    assert many["b"][1] == "not a figure" and figures.frozen(one) is one
    # what Streamlit sends (to_dict, then JSON) is the plain figure's, made once
    plain = build()
    assert type(plain) is go.Figure and plain.layout.template.layout.plot_bgcolor == "white"  # plotly_white
    assert plotly.io.to_json(one.to_dict(), validate=False) == plotly.io.to_json(plain.to_dict(), validate=False)
    assert one.to_dict() is one.to_dict()
    # presenter mode changes a copy; the shared one stays as it was
    copy = go.Figure(one)
    copy.update_layout(font={"size": 18})
    assert type(copy) is go.Figure and copy.to_dict()["layout"]["font"]["size"] == 18
    assert one.to_dict()["layout"]["font"].get("size") != 18
    # a room chart's ringed point: the shared figure's dict and one trace more, the shared
    # one untouched; presenter mode's copy of it (from its dict) holds every trace
    ring = go.Scatter(x=[3], y=[4], mode="markers", name="yours")
    mine = figures.with_trace(one, ring)
    sent = json.loads(plotly.io.to_json(mine, validate=False))
    assert sent["data"][:-1] == json.loads(plotly.io.to_json(plain, validate=False))["data"]
    assert sent["data"][-1]["x"] == [3] and sent["data"][-1]["name"] == "yours"
    assert len(one.to_dict()["data"]) == len(plain.data)
    assert sent["layout"] == json.loads(plotly.io.to_json(one))["layout"]
    assert len(go.Figure(mine.to_dict()).data) == len(plain.data) + 1


def test_a_bar_charts_reference_line_is_named_in_the_legend_and_its_axis_written_like_its_bars():
    """Step 6's errors: the equal-weights line is named in the legend (a label on the line
    sat on the bars' own labels), and the log axis has one tick a decade, written as the
    bars are (percentages), not as bare fractions with crowded minor ticks."""
    fig = figures.bars(["a", "b"], [0.02, 0.9], title="t", y_title="y", separators=".,", log_y=True,
                       reference=0.5, reference_name="equal weights", text=["2.0%", "90.0%"],
                       tick_text=lambda d: f"{d:.0%}")
    assert not fig.layout.annotations and fig.layout.legend.y >= 1  # above the plot, off the bar names
    named = [tr for tr in fig.data if tr.name == "equal weights"]
    assert len(named) == 1 and named[0].line.dash == "dot" and fig.layout.showlegend
    assert list(fig.layout.yaxis.tickvals) == [0.01, 0.1, 1.0]
    assert list(fig.layout.yaxis.ticktext) == ["1%", "10%", "100%"]
    assert fig.data[0].cliponaxis is False  # the tallest bar's label is drawn whole, past the axis


def test_a_routes_end_labels_run_inwards_so_the_last_is_not_cut_at_the_edge():
    fig = figures.route_diagram(10, [0, 4, 9], (4,), [f"t{i}" for i in range(10)], title="r", separators=".,",
                                token_word="token", hub_word="hub")
    ends = [tr for tr in fig.data if tr.mode == "markers+text"][0]
    assert list(ends.textposition) == ["bottom right", "bottom left"]


def test_a_long_title_breaks_at_its_separators_and_a_short_one_stays_on_one_line():
    """Plotly never wraps a title: one naming its settings was cut at the chart's edge."""
    long = "The window (w = 16) over the real weights · layer 8 · sliding window (512) · average of heads"
    assert figures.title_lines(long) == ["The window (w = 16) over the real weights · layer 8 ·",
                                         "sliding window (512) · average of heads"]
    assert figures.title_lines("Time per call") == ["Time per call"]
    ja = "実際の重みに重ねたウィンドウ（w = 16）· 層 8 · スライディングウィンドウ（512）· ヘッドの平均"
    lines = figures.title_lines(ja)  # a CJK character is two columns wide
    assert len(lines) == 2 and all(figures._width(line) <= figures.TITLE_WIDTH for line in lines)
    assert " ".join(lines) == ja and " ".join(figures.title_lines(long)) == long  # a break only where a space was
    fig = figures.bars(["a"], [1.0], title=long, y_title="y", separators=".,")
    assert fig.layout.title.text.count("<br>") == 1 and fig.layout.margin.t == 80
    # a reader's token in a title is escaped before the break is added
    assert figures.title_lines("<b>token</b>") == ["<b>token</b>"]
    assert "&lt;b&gt;" in figures.bars(["a"], [1.0], title="<b>x</b>", y_title="y", separators=".,").layout.title.text


def test_grouped_bars_on_a_log_axis_label_one_tick_a_decade():
    """Step 6's linear-attention KL bars: values of 0.05 … 3 get the ticks 0.01, 0.1, 1, 10
    and no others, so a bar at 0.05 cannot be read as "5" off an unlabelled minor tick."""
    groups = [{"name": "all layers", "values": [0.05, 3.0]}, {"name": "one layer", "values": [0.2, 0.0]}]
    fig = figures.grouped_bars(groups, ["ReLU", "ELU+1"], title="t", y_title="KL", separators=".,", log_y=True)
    axis = fig.layout.yaxis
    assert list(axis.tickvals) == [0.01, 0.1, 1.0, 10.0]
    assert list(axis.range) == [-2, 1]  # log10 units: the decades around 0.05 and 3
    one = figures.grouped_bars([{"name": "a", "values": [0.03, 0.04]}], ["x", "y"], title="t", y_title="KL",
                               separators=".,", log_y=True)
    assert list(one.layout.yaxis.tickvals) == [0.01, 0.1]  # inside one decade: both of its ends are labelled
    flat = figures.grouped_bars(groups, ["ReLU", "ELU+1"], title="t", y_title="share", separators=".,")
    assert flat.layout.yaxis.tickvals is None  # a linear axis keeps Plotly's own ticks


def test_the_tappable_strip_names_each_drawn_rows_middle_token_and_marks_the_followed_one():
    """Ten tokens pooled by 3: drawn rows 0–2, 3–5, 6–8, 9; each strip point names its
    row's middle token (1, 4, 7, 9: the last row has one), the followed token 5 marks row 1;
    a tap on another trace names none."""
    import plotly.graph_objects as go

    from ui import figures, tap_strip

    base = figures.FrozenFigure.of(go.Figure(go.Heatmap(z=[[0.0]])))
    labels = [f"t{i}" for i in range(10)]
    fig = tap_strip.added(base, labels, 3, 5, "%{customdata[0]}")
    strip = fig.data[-1]
    assert len(fig.data) == 2 and len(base.data) == 1  # the shared figure is left as it was
    assert [int(c[0]) for c in strip.customdata] == [1, 4, 7, 9] and [c[1] for c in strip.customdata] == [
        "t1", "t4", "t7", "t9"]
    assert list(strip.y) == [1.0, 4.0, 7.0, 10.0] and all(x < -0.5 for x in strip.x)  # left of column 0
    assert [c != "#BBBBBB" for c in strip.marker.color] == [False, True, False, False]
    assert [tap_strip.token_of({"curve_number": 1, "point_index": i}, 1, 10, 3) for i in range(4)] == [1, 4, 7, 9]
    assert tap_strip.token_of({"curve_number": 0, "point_index": 2}, 1, 10, 3) is None
    unpooled = tap_strip.added(base, labels[:4], 1, 0, "")
    assert [int(c[0]) for c in unpooled.data[-1].customdata] == [0, 1, 2, 3]


def test_an_estimate_far_from_the_class_is_drawn_at_the_edge_and_the_axis_follows_the_class():
    """Four estimates, one of them 1e-300: the class's median is 9 (the 3rd of 4 sorted), so
    the edge at ×1000 lies at 0.009 and 9,000; the outlier is drawn there, a triangle
    pointing out, its own number kept for its hover; the others where they are."""
    from ui import room_figures

    fig = room_figures.estimates([9, 14, 6.5, 1e-300], None, 1.5, x_title="x", separators=".,",
                                 guess_name="an estimate", value_name="measured", band_name="band", hover="%{x}",
                                 edge=1000.0,
                                 edge_name="at the edge")
    by_name = {tr.name: tr for tr in fig.data}
    assert list(by_name["an estimate"].x) == [9, 14, 6.5]
    edge = by_name["at the edge"]
    assert list(edge.x) == [9 / 1000] and list(edge.customdata) == [1e-300]
    assert list(edge.marker.symbol) == ["triangle-left"] and "%{customdata}" in edge.hovertemplate
    fig = room_figures.estimates([9, 14, 6.5, 2e7], None, 1.5, x_title="x", separators=".,", guess_name="g",
                                 value_name="m", band_name="b", hover="%{x}", edge=1000.0, edge_name="e")
    assert [list(tr.x) for tr in fig.data if tr.name == "e"] == [[14 * 1000]]  # sorted 6.5, 9, 14, 2e7: median 14
