"""Plotly figure builders: numbers and labels in, a figure out. No tensor math
beyond reshaping for the screen (downsampling large grids), no Streamlit.

Token labels are the reader's text: they are escaped before they reach Plotly,
whose labels understand a few HTML tags.
"""

from __future__ import annotations

import html
import importlib
import math
import re
import unicodedata

import numpy as np
import plotly.colors as pc
import plotly.graph_objects as go
import plotly.io as pio

# Plotly looks pandas up in sys.modules without taking the import lock: if another
# thread (the FlexAttention warm-up, a reader's page) is importing pandas at that
# moment, validation fails with "partially initialized module 'pandas'". Importing
# it here, before any figure is built, closes that window.
importlib.import_module("pandas")

# Every figure here is drawn on Plotly's white template. As the default, a new figure
# takes it unvalidated (≈ 1 ms); named in each figure's layout, it was validated and
# copied each time (≈ 25 ms a figure, a third of building a small chart).
pio.templates.default = "plotly_white"

# colour-blind-safe choices: Cividis for weights, Okabe–Ito for categories. Attention
# weights span orders of magnitude (a sink takes most of a row, the rest share
# crumbs), so the Cividis colours are spread over weights unevenly: small weights
# stay visible while z (and the hover) keeps the real weight.
_WEIGHT_STOPS = [0.0, 0.002, 0.01, 0.03, 0.1, 0.3, 1.0]
WEIGHTS = [[w, c] for w, c in zip(_WEIGHT_STOPS, pc.sample_colorscale("Cividis", [i / 6 for i in range(7)]))]
OKABE_ITO = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"]
MAX_SIDE = 384  # at most this many rows/columns of cells are sent to the browser
PATTERN = [[0.0, "#F2F2F2"], [1.0, "#0072B2"]]  # a pattern's cells: skipped (light) to computed (blue)
FONT = "system-ui, -apple-system, 'Segoe UI', 'Noto Sans', 'Noto Sans CJK JP', 'IPAGothic', sans-serif"


class FrozenFigure(go.Figure):
    """A figure built once and shown to every reader. Streamlit turns the figure it is
    given into a dict for each reader (``to_dict``: a deep copy, every array walked to
    encode it): a third of a warm page view on the steps with several charts. This one
    hands out the dict it made once, so it is read-only (``go.Figure(shared)`` gives a
    copy to change, as presenter mode does)."""

    _as_dict: dict | None = None

    @classmethod
    def of(cls, fig: go.Figure) -> FrozenFigure:
        """``fig`` itself, now shared: its dict made here, the figure not copied."""
        as_dict = fig.to_dict()
        fig.__class__, fig._as_dict = cls, as_dict
        return fig

    @classmethod
    def of_dict(cls, as_dict: dict) -> FrozenFigure:
        """A figure that hands out ``as_dict`` as it is (read-only; neither copied nor validated)."""
        (out := cls())._as_dict = as_dict
        return out

    def to_dict(self) -> dict:
        return self._as_dict


def with_trace(fig: FrozenFigure, trace: go.Scatter) -> FrozenFigure:
    """A shared figure and one trace more, made from its dict: the figure's own traces are
    neither copied nor validated again (docs/performance.md). Read-only, its traces a dict
    only: ``go.Figure(fig.to_dict())`` gives one to change."""
    base = fig.to_dict()
    return FrozenFigure.of_dict({**base, "data": [*base["data"], trace.to_plotly_json()]})


def frozen(built):
    """``built`` with each of its figures (it, or those in a list, tuple or dict) made
    a ``FrozenFigure``; anything else as it is."""
    if isinstance(built, FrozenFigure) or not isinstance(built, (go.Figure, list, tuple, dict)):
        return built
    if isinstance(built, go.Figure):
        return FrozenFigure.of(built)
    if isinstance(built, dict):
        return {k: frozen(v) for k, v in built.items()}
    return type(built)(frozen(x) for x in built)


def safe(label: str) -> str:
    """A token label as Plotly text: every character shown as itself."""
    return html.escape(str(label), quote=False)


TITLE_WIDTH = 70  # a title line's width, in half-width characters (a CJK character counts two)


def _width(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def title_lines(title: str, width: int = TITLE_WIDTH) -> list[str]:
    """A chart's title in lines of at most ``width``, broken after its "·" separators
    (Plotly never wraps a title: a long one, with the settings it names, would be cut at
    the chart's edge, in presenter mode's narrower main column first). A part longer than a
    line stays whole on its own line."""
    pieces = re.split(r"(\s*·\s*)", str(title))  # parts, each separator kept as it is written
    lines = [pieces[0]]
    for sep, part in zip(pieces[1::2], pieces[2::2]):
        if _width(lines[-1] + sep + part) <= width:
            lines[-1] += sep + part
        else:
            lines[-1] += sep.rstrip()  # the line ends with its separator: the title goes on below
            lines.append(part)
    return lines


def layout(fig: go.Figure, title: str, separators: str, height: int = 520) -> go.Figure:
    """A chart's title (wrapped, as plain text), number separators, height and font, as every chart has them."""
    lines = title_lines(title)
    fig.update_layout(
        title={"text": "<br>".join(safe(line) for line in lines), "x": 0.0, "xanchor": "left", "font": {"size": 16}},
        separators=separators,
        height=height,
        margin={"l": 60, "r": 20, "t": 40 + 20 * len(lines), "b": 50},
        font={"family": FONT},
    )
    return fig


def _pair_labels(labels: list[str]) -> np.ndarray:
    """customdata[i][j] = (label of query i, label of key j); an object array, which
    Plotly checks far faster than nested lists."""
    return np.dstack(np.meshgrid(labels, labels)[::-1]).astype(object)


def pool_factor(n: int) -> int:
    """Tokens per drawn cell of an n×n grid (1: unpooled)."""
    return max(1, math.ceil(n / MAX_SIDE))


def pool_rows(rows: np.ndarray, f: int, reduce: str = "mean") -> np.ndarray:
    """Pool a block of whole rows ``(r, n)`` (r a multiple of f, or the grid's last rows)
    into ``(⌈r/f⌉, ⌈n/f⌉)`` cells of f×f, each its block's mean or largest weight
    (``reduce``); a block with no drawn cell (NaN) stays empty."""
    rows = np.asarray(rows, dtype=np.float32)
    if f == 1:
        return rows
    r, n = rows.shape
    mr, m = math.ceil(r / f), math.ceil(n / f)
    padded = np.full((mr * f, m * f), np.nan, dtype=np.float32)
    padded[:r, :n] = rows
    blocks = padded.reshape(mr, f, m, f)
    # all-empty blocks stay empty (NaN). Computed by hand, not with nanmean/nanmax:
    # their "empty slice" warning can only be silenced through warnings.catch_warnings,
    # which is process-wide and not thread-safe under a server's threads.
    filled = ~np.isnan(blocks)
    count = filled.sum(axis=(1, 3))
    if reduce == "max":
        pooled = np.where(filled, blocks, -np.inf).max(axis=(1, 3))
    else:
        pooled = np.where(filled, blocks, 0.0).sum(axis=(1, 3)) / np.maximum(count, 1)
    return np.where(count > 0, pooled, np.nan).astype(np.float32)


def downsample(grid: np.ndarray, reduce: str = "mean") -> tuple[np.ndarray, int]:
    """Pool an (n, n) grid into at most MAX_SIDE² cells; returns (grid, factor)."""
    f = pool_factor(grid.shape[0])
    return pool_rows(grid, f, reduce), f


def _names(labels: list[str], start: int = 0) -> list[str]:
    """Category names for token axes: "i “token”" (unique, and what the hover shows);
    ``start`` is the text's position of the first label (a span drawn from further in)."""
    return [f"{start + i} “{safe(s)}”" for i, s in enumerate(labels)]


def _category_axes(fig, labels, x_title, y_title, max_labels: int, start: int = 0):
    """Token axes as categories: every token named up to ``max_labels``, else every
    tenth position of the text numbered."""
    n = len(labels)
    every = 1 if n <= max_labels else 10
    names = _names(labels, start)
    first = -start % every  # the first label at a position of the text that is a multiple of ten
    shown = {"tickmode": "array", "tickvals": names[first::every],
             "ticktext": [safe(s) for s in labels] if every == 1 else [str(start + i) for i in range(first, n, every)]}
    fig.update_xaxes(title=safe(x_title), side="bottom", type="category", **shown)
    fig.update_yaxes(title=safe(y_title), autorange="reversed", type="category", **shown)
    if every == 1:
        fig.update_xaxes(tickangle=-60, tickfont={"size": 10})
        fig.update_yaxes(tickfont={"size": 10})


def _token_axes(fig, labels, n, factor, x_title, y_title, max_labels: int = 64):
    if factor == 1 and n <= max_labels:
        ticks = {"tickmode": "array", "tickvals": list(range(n)), "ticktext": [safe(s) for s in labels]}
    else:
        ticks = {}
    fig.update_xaxes(title=safe(x_title), side="bottom", **ticks)
    fig.update_yaxes(title=safe(y_title), autorange="reversed", **ticks)
    if factor == 1 and n <= max_labels:
        fig.update_xaxes(tickangle=-60, tickfont={"size": 10})
        fig.update_yaxes(tickfont={"size": 10})


def attention_heatmap(grid, labels, *, title, x_title, y_title, hover, separators, colorbar="",
                      zmax=1.0, colorscale=WEIGHTS, reduce="mean", height=560, named_axes=False):
    """Heat map of an (n, n) grid of weights; rows are queries, columns keys. A grid
    already pooled to screen resolution (fewer rows than ``labels``: the analysis' grids,
    ui.measures) is drawn as it is, at its factor ``pool_factor(n)``.

    ``hover`` is a Plotly hovertemplate using %{y} (query), %{x} (key), %{z} and,
    when tokens are shown, %{customdata[0]} / %{customdata[1]} (their labels).
    ``named_axes=True`` (unpooled grids only) puts the tokens on category axes instead,
    so %{x} and %{y} name them: n labels per axis rather than n² pair labels, which are
    most of what each reader is sent (no numeric overlay such as ``add_band`` then)."""
    grid, n = np.asarray(grid, dtype=np.float32), len(labels)
    z, f = (grid, pool_factor(n)) if grid.shape[0] < n else downsample(grid, reduce)  # pooled already, or now
    m = z.shape[0]
    coords = np.arange(m) * f + (f - 1) / 2 if f > 1 else np.arange(m)
    named = named_axes and f == 1
    kwargs = {}
    if named:
        kwargs["x"] = kwargs["y"] = _names(labels)
    else:
        kwargs["x"] = kwargs["y"] = coords.astype(np.float32)
        if f == 1 and n <= 128:
            kwargs["customdata"] = _pair_labels([safe(s) for s in labels])
    # numpy arrays travel to the browser as compact typed arrays (base64), not JSON lists
    z = np.round(z, 5).astype(np.float32)
    fig = go.Figure(go.Heatmap(
        z=z, colorscale=colorscale, zmin=0, zmax=zmax, hovertemplate=hover + "<extra></extra>",
        colorbar={"title": {"text": safe(colorbar)}}, hoverongaps=False, **kwargs,
    ))
    if colorscale is WEIGHTS:
        fig.update_traces(colorbar={"tickvals": [0, 0.1, 0.3, 0.5, 1.0], "ticks": "outside"})
    if named:
        _category_axes(fig, labels, x_title, y_title, max_labels=24)
    else:
        _token_axes(fig, labels, n, f, x_title, y_title)
    fig.update_yaxes(scaleanchor="x", constrain="domain")
    fig.update_xaxes(constrain="domain")
    return layout(fig, title, separators, height), f


def add_band(fig, n: int, window: int, colour: str = "#D55E00", name: str = "", causal: bool = True):
    """Outline the causal window 0 ≤ i − j < w on a heat map (two diagonal lines), or
    with ``causal`` False the window both ways, |i − j| < w.

    Cell (i, j) is drawn centred on (x = j, y = i), one unit wide. Each line runs through
    the outer corners of the band's edge cells (y = x − 1 beside the diagonal, y = x + w
    on the far side, y = x − w on the far side of an encoder's band), so every cell
    inside the window is whole inside the outline."""
    if causal:
        fig.add_trace(go.Scatter(x=[0.5, n - 0.5], y=[-0.5, n - 1.5], mode="lines",
                                 line={"color": colour, "width": 2}, name=safe(name), hoverinfo="skip",
                                 showlegend=bool(name)))
    elif window < n:
        fig.add_trace(go.Scatter(x=[window - 0.5, n - 0.5], y=[-0.5, n - window - 0.5], mode="lines",
                                 line={"color": colour, "width": 2, "dash": "dash"}, name=safe(name),
                                 hoverinfo="skip", showlegend=bool(name)))
    if window < n:
        fig.add_trace(go.Scatter(x=[-0.5, n - window - 0.5], y=[window - 0.5, n - 0.5], mode="lines",
                                 line={"color": colour, "width": 2, "dash": "dash"}, hoverinfo="skip",
                                 showlegend=False))
    fig.update_layout(legend={"orientation": "h", "y": -0.12})
    return fig


def row_bars(weights, labels, *, title, x_title, y_title, hover, separators, highlight=None, height=320):
    """One query's row: how its weight spreads over the keys it may look at."""
    w = np.asarray(weights, dtype=np.float32)
    idx = np.arange(len(w))
    colours = [OKABE_ITO[0]] * len(w)
    if highlight is not None:
        for j in highlight:
            if 0 <= j < len(w):
                colours[j] = OKABE_ITO[1]
    fig = go.Figure(go.Bar(x=idx, y=np.round(w, 5), marker_color=colours,
                           customdata=[safe(s) for s in labels], hovertemplate=hover + "<extra></extra>"))
    fig.update_xaxes(title=safe(x_title))
    fig.update_yaxes(title=safe(y_title), rangemode="tozero")
    return layout(fig, title, separators, height)


def lines(series: list[dict], *, title, x_title, y_title, separators, log_x=False, log_y=False,
          height=420, y_format=None, x_format=None, x_ticks=None):
    """Several named lines: each ``{"name", "x", "y", "dash"?, "hover"?}``."""
    fig = go.Figure()
    for i, s in enumerate(series):
        fig.add_trace(go.Scatter(
            x=list(s["x"]), y=list(s["y"]), name=safe(s["name"]), mode=s.get("mode", "lines+markers"),
            line={"color": s.get("colour", OKABE_ITO[i % len(OKABE_ITO)]), "dash": s.get("dash", "solid"),
                  "width": 2},
            hovertemplate=s.get("hover", "%{x}: %{y}") + "<extra>" + safe(s["name"]) + "</extra>",
        ))
    fig.update_xaxes(title=safe(x_title), type="log" if log_x else "linear", tickformat=x_format,
                     exponentformat="power")
    if x_ticks:  # (values, texts): numbers written in the reader's language
        fig.update_xaxes(tickmode="array", tickvals=list(x_ticks[0]), ticktext=[safe(s) for s in x_ticks[1]])
    # a log axis: a tick a decade, or every digit's where the lines stay within one decade
    # (90 % to 95 % had no tick at all)
    ys = [y for s in series for y in s["y"] if y is not None and y > 0]
    narrow = bool(ys) and math.floor(math.log10(min(ys))) == math.floor(math.log10(max(ys)))
    fig.update_yaxes(title=safe(y_title), type="log" if log_y else "linear", tickformat=y_format,
                     exponentformat="power", dtick=("D1" if narrow else 1) if log_y else None)
    fig.update_layout(legend={"orientation": "h", "y": -0.22})
    return layout(fig, title, separators, height)


def bars(names, values, *, title, y_title, separators, log_y=False, colours=None, hover="%{x}: %{y}",
         reference=None, reference_name="", height=420, text=None, tick_text=None):
    """Bars, each labelled above (``text``, drawn whole past the axis). A ``reference`` is a dotted line named in the
    legend above the plot (a label on the line sat on the bars' own; a legend below sat
    on the rotated bar names). ``tick_text(value)`` writes a log axis's ticks — one a
    decade over the values and the reference — as the bars are labelled."""
    fig = go.Figure(go.Bar(
        x=[safe(n) for n in names], y=list(values), showlegend=False,
        marker_color=colours or [OKABE_ITO[i % len(OKABE_ITO)] for i in range(len(names))],
        hovertemplate=hover + "<extra></extra>", text=text, textposition="outside",
        cliponaxis=False,  # a label above the tallest bar stays whole (the axis would cut it)
    ))
    if reference is not None:
        fig.add_hline(y=reference, line_dash="dot", line_color="#555")
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", name=safe(reference_name),
                                 line={"dash": "dot", "color": "#555"}, hoverinfo="skip"))
        fig.update_layout(legend={"orientation": "h", "y": 1.0, "yanchor": "bottom", "x": 1, "xanchor": "right"},
                          showlegend=True)
    fig.update_yaxes(title=safe(y_title), type="log" if log_y else "linear", exponentformat="power")
    if log_y and tick_text is not None:
        shown = [v for v in list(values) + ([reference] if reference is not None else []) if v > 0]
        decades = [10.0 ** e for e in range(math.floor(math.log10(min(shown))), math.ceil(math.log10(max(shown))) + 1)]
        fig.update_yaxes(tickvals=decades, ticktext=[safe(tick_text(d)) for d in decades])
    return layout(fig, title, separators, height)


def grouped_bars(groups: list[dict], categories, *, title, y_title, separators, log_y=False, height=420,
                 hover="%{x}: %{y}"):
    """Bars side by side: each group ``{"name", "values"}`` over the same categories."""
    fig = go.Figure()
    for i, g in enumerate(groups):
        fig.add_trace(go.Bar(x=[safe(c) for c in categories], y=list(g["values"]), name=safe(g["name"]),
                             marker_color=OKABE_ITO[i % len(OKABE_ITO)],
                             hovertemplate=hover + "<extra>" + safe(g["name"]) + "</extra>"))
    fig.update_layout(barmode="group", legend={"orientation": "h", "y": -0.2})
    fig.update_yaxes(title=safe(y_title), type="log" if log_y else "linear", exponentformat="power")
    shown = [v for g in groups for v in g["values"] if v is not None and v > 0 and math.isfinite(v)]
    if log_y and shown:  # one labelled tick a decade: Plotly's own "2 … 9" minor labels read 0.05 as "5"
        lo, hi = math.floor(math.log10(min(shown))), math.ceil(math.log10(max(shown)))
        hi = max(hi, lo + 1)  # a span of at least one decade, so that two ticks are labelled
        fig.update_yaxes(range=[lo, hi], tickvals=[10.0 ** e for e in range(lo, hi + 1)])
    return layout(fig, title, separators, height)


def integer_grid(grid, labels, *, title, x_title, y_title, hover, separators, colorbar="", height=460,
                 missing_label="", start=0):
    """Heat map of small integers (hop counts); −1 (never) shows as an empty cell.

    The axes are categories named "i “token”", so ``hover``'s %{x} and %{y} name both
    tokens: n labels per axis instead of n² pair labels in every reader's chart. ``start``:
    the text's position of the first label, so that a span from further in is read by the
    text's own positions."""
    g = np.asarray(grid, dtype=np.float32)
    g = np.where(g < 0, np.nan, g)
    zmax = float(np.nanmax(g)) if np.isfinite(g).any() else 1.0
    names = _names(labels, start)
    fig = go.Figure(go.Heatmap(
        z=g, x=names, y=names, colorscale="Viridis", zmin=0, zmax=max(1.0, zmax), hoverongaps=False,
        hovertemplate=hover + "<extra></extra>", colorbar={"title": {"text": safe(colorbar)}, "dtick": 1},
    ))
    _category_axes(fig, labels, x_title, y_title, max_labels=24, start=start)
    fig.update_yaxes(scaleanchor="x", constrain="domain")
    fig.update_xaxes(constrain="domain")
    if missing_label:
        fig.add_annotation(text=safe(missing_label), xref="paper", yref="paper", x=1.0, y=1.06,
                           showarrow=False, font={"size": 11, "color": "#555"})
    return layout(fig, title, separators, height)


def reach_animation(frames: list[np.ndarray], *, title, x_title, y_title, separators, layer_word,
                    play, pause, hover, height=520):
    """Reach grids after 0, 1, … L layers, with a slider and a play button."""
    n = frames[0].shape[0]

    def trace(g):
        return go.Heatmap(z=np.asarray(g, dtype=np.int8), colorscale=[[0, "#F2F2F2"], [1, OKABE_ITO[0]]],
                          zmin=0, zmax=1, showscale=False, hovertemplate=hover + "<extra></extra>")

    fig = go.Figure(data=[trace(frames[-1])],
                    frames=[go.Frame(data=[trace(g)], name=str(i)) for i, g in enumerate(frames)])
    steps = [{"method": "animate", "label": str(i),
              "args": [[str(i)], {"mode": "immediate", "frame": {"duration": 0, "redraw": True},
                                  "transition": {"duration": 0}}]} for i in range(len(frames))]
    fig.update_layout(
        sliders=[{"active": len(frames) - 1, "steps": steps, "currentvalue": {"prefix": safe(layer_word) + " "},
                  "pad": {"t": 50}, "x": 0, "len": 1}],
        # the buttons in the empty corner right of the square grid: beside the slider, they
        # covered its label when the chart was narrow (presenter mode) or the words long
        updatemenus=[{"type": "buttons", "showactive": False, "x": 1, "y": 1, "xanchor": "right",
                      "yanchor": "top", "direction": "down",
                      "buttons": [
                          {"label": safe(play), "method": "animate",
                           "args": [None, {"frame": {"duration": 600, "redraw": True}, "fromcurrent": False,
                                           "transition": {"duration": 0}}]},
                          {"label": safe(pause), "method": "animate",
                           "args": [[None], {"mode": "immediate", "frame": {"duration": 0, "redraw": False}}]},
                      ]}],
    )
    fig.update_xaxes(title=safe(x_title), range=[-0.5, n - 0.5], constrain="domain")
    fig.update_yaxes(title=safe(y_title), autorange="reversed", scaleanchor="x", constrain="domain")
    return layout(fig, title, separators, height)


def route_diagram(n: int, path: list[int], hubs, labels, *, title, separators, token_word, hub_word,
                  height=260):
    """Tokens on a line; arcs along one route j → … → i; hubs marked."""
    fig = go.Figure()
    xs = list(range(n))
    fig.add_trace(go.Scatter(x=xs, y=[0] * n, mode="markers", marker={"color": "#BBBBBB", "size": 6},
                             customdata=[safe(s) for s in labels], name=safe(token_word),
                             hovertemplate="%{x}: %{customdata}<extra></extra>"))
    if hubs:
        fig.add_trace(go.Scatter(x=list(hubs), y=[0] * len(hubs), mode="markers", name=safe(hub_word),
                                 marker={"color": OKABE_ITO[1], "size": 14, "symbol": "star"},
                                 customdata=[safe(labels[h]) for h in hubs],
                                 hovertemplate="%{x}: %{customdata}<extra></extra>"))
    for a, b in zip(path, path[1:]):
        mid, span = (a + b) / 2, abs(b - a) / 2
        theta = np.linspace(0, math.pi, 40)
        fig.add_trace(go.Scatter(x=(mid - span * np.cos(theta)).tolist(), y=(span * np.sin(theta)).tolist(),
                                 mode="lines", line={"color": OKABE_ITO[0], "width": 3}, showlegend=False,
                                 hoverinfo="skip"))
    if path:
        fig.add_trace(go.Scatter(x=[path[0], path[-1]], y=[0, 0], mode="markers+text",
                                 text=[safe(labels[path[0]]), safe(labels[path[-1]])],
                                 # each end's word runs inwards: the last token's was cut at the right edge
                                 textposition=["bottom right" if path[0] <= path[-1] else "bottom left",
                                               "bottom left" if path[0] <= path[-1] else "bottom right"],
                                 marker={"color": OKABE_ITO[2], "size": 12}, showlegend=False,
                                 hoverinfo="skip"))
    fig.update_yaxes(visible=False, range=[-0.2 * n / 2, n / 2 + 1])
    fig.update_xaxes(range=[-1, n])
    fig.update_layout(legend={"orientation": "h", "y": 1.15})
    return layout(fig, title, separators, height)


def payload_bytes(fig: go.Figure) -> int:
    """Size of the figure as sent to the browser (JSON)."""
    return len(fig.to_json())

