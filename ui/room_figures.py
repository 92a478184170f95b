"""Plotly builders for a class's charts — the room (every text of a class at once) and an
estimate's numbers: numbers, languages and labels in, a figure out (and the languages'
names they label by); no Streamlit, no tensor math. A text is never named on a chart:
a point says its language and its numbers. One trace a language (a class's 200 texts are
a few traces, not hundreds), and the viewer's own point, when given, ringed in black by
``ring``, added to the shared figure's dict."""

from __future__ import annotations

import plotly.graph_objects as go

from .figures import OKABE_ITO, FrozenFigure, layout, safe, with_trace
from .i18n import LANGS, Translator

RING = {"color": "rgba(0,0,0,0)", "size": 18, "line": {"color": "#000000", "width": 3}}


def language(t: Translator, lang: str) -> str:
    """A room text's language as the charts name it (another language: "other")."""
    return LANGS.get(lang) or t("room.lang_other")


def languages(t: Translator, done: list) -> dict:
    """The languages of a room's texts (each with a ``lang``), in the order they came, by name."""
    return {lang: language(t, lang) for lang in dict.fromkeys(x.lang for x in done)}


def count_by_language(t: Translator, rows: list[tuple[str, bool]]) -> str:
    """"en 3/4 · pt 2/2": how many of each language's texts hold, of how many."""
    per: dict[str, list[int]] = {}
    for lang, held in rows:
        got = per.setdefault(lang, [0, 0])
        got[0] += held
        got[1] += 1
    return t.list(f"{language(t, lang)} {t.int(a)}/{t.int(b)}" for lang, (a, b) in per.items())


def _colour(langs: list[str], lang: str) -> str:
    return OKABE_ITO[langs.index(lang) % len(OKABE_ITO)] if lang in langs else "#777777"


def _by_language(items: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for item in items:
        out.setdefault(item["lang"], []).append(item)
    return out


def ring(fig: FrozenFigure, x: float, y: float, name: str) -> FrozenFigure:
    """A shared figure with one point more, ringed: the viewer's own text (made for each
    student at each room version, so from the figure's dict, not a copy of the figure)."""
    return with_trace(fig, go.Scatter(x=[x], y=[y], mode="markers", marker=RING, name=safe(name), hoverinfo="skip"))


def prefix_lines(texts: list[dict], *, title, x_title, y_title, separators, lang_names, hover, reference_name,
                 height=460):
    """Step 2's experiment: each text's useful share on its growing prefixes (``texts``:
    ``{"lang", "x", "y", "ref"}``, ``ref`` the equal-weights reference on the same
    prefixes): one line a text, coloured by its language, its reference dotted grey."""
    fig = go.Figure()
    langs = list(lang_names)

    def joined(rows, key):
        out = []
        for r in rows:
            out += list(r[key]) + [None]  # a gap between two texts' lines
        return out

    if texts:
        fig.add_trace(go.Scatter(x=joined(texts, "x"), y=joined(texts, "ref"), mode="lines", name=safe(reference_name),
                                 line={"color": "#999999", "dash": "dot", "width": 1}, hoverinfo="skip"))
    for lang, rows in _by_language(texts).items():
        fig.add_trace(go.Scatter(x=joined(rows, "x"), y=joined(rows, "y"), mode="lines+markers",
                                 name=safe(lang_names.get(lang, lang)),
                                 line={"color": _colour(langs, lang), "width": 1.5},
                                 marker={"size": 5}, connectgaps=False,
                                 hovertemplate=hover + "<extra>" + safe(lang_names.get(lang, lang)) + "</extra>"))
    fig.update_xaxes(title=safe(x_title), type="log", exponentformat="power")
    fig.update_yaxes(title=safe(y_title), type="log", tickformat=".0%", dtick="D2")
    fig.update_layout(legend={"orientation": "h", "y": -0.22})
    return layout(fig, title, separators, height)


def points_on_curves(points: list[dict], curves: list[dict], *, title, x_title, y_title, separators, lang_names,
                     hover, height=460):
    """Every text's value against its n (``points``: ``{"lang", "x", "y", "symbol"}``) on
    the curves its kinds of layer draw (``curves``: ``{"name", "x", "y", "dash"}``)."""
    fig = go.Figure()
    for c in curves:
        fig.add_trace(go.Scatter(x=c["x"], y=c["y"], mode="lines", name=safe(c["name"]),
                                 line={"color": "#555555", "dash": c.get("dash", "solid"), "width": 1.5},
                                 hoverinfo="skip"))
    langs = list(lang_names)
    for lang, rows in _by_language(points).items():
        fig.add_trace(go.Scatter(x=[p["x"] for p in rows], y=[p["y"] for p in rows], mode="markers",
                                 name=safe(lang_names.get(lang, lang)),
                                 marker={"size": 10, "color": _colour(langs, lang),
                                         "symbol": [p.get("symbol", "circle") for p in rows]},
                                 hovertemplate=hover + "<extra>" + safe(lang_names.get(lang, lang)) + "</extra>"))
    fig.update_xaxes(title=safe(x_title), type="log", exponentformat="power")
    fig.update_yaxes(title=safe(y_title), type="log", exponentformat="power")
    fig.update_layout(legend={"orientation": "h", "y": -0.22})
    return layout(fig, title, separators, height)


def spread(j: int) -> float:
    """A dot's offset within its group (the golden ratio: no two dots of a group on one x)."""
    return ((j * 0.618033988749895) % 1.0 - 0.5) * 0.5


def strips(groups: list[str], points: list[dict], *, title, y_title, separators, lang_names, hover, log_y=False,
           y_format=None, height=440, tick_angle=0):
    """Every text's value in each group (``points``: ``{"group", "lang", "y"}``, in each
    group the order the texts came), dots spread across the group's width and coloured by
    language, the group's median a short black bar. Returns the figure and each point's
    x (for ``ring``)."""
    fig = go.Figure()
    langs = list(lang_names)
    xs = []
    for g_i, group in enumerate(groups):
        values = sorted(p["y"] for p in points if p["group"] == group)
        if values:
            m = len(values) // 2
            median = values[m] if len(values) % 2 else (values[m - 1] + values[m]) / 2
            fig.add_trace(go.Scatter(x=[g_i - 0.3, g_i + 0.3], y=[median, median], mode="lines",
                                     line={"color": "#000000", "width": 3}, showlegend=False, hoverinfo="skip"))
    seen: dict[str, int] = {}
    for p in points:
        j = seen[p["group"]] = seen.get(p["group"], -1) + 1
        xs.append(groups.index(p["group"]) + spread(j))
    for lang in dict.fromkeys(p["lang"] for p in points):
        at = [i for i, p in enumerate(points) if p["lang"] == lang]
        fig.add_trace(go.Scatter(x=[xs[i] for i in at], y=[points[i]["y"] for i in at], mode="markers",
                                 name=safe(lang_names.get(lang, lang)),
                                 marker={"size": 9, "color": _colour(langs, lang)},
                                 hovertemplate=hover + "<extra>" + safe(lang_names.get(lang, lang)) + "</extra>"))
    fig.update_xaxes(tickmode="array", tickvals=list(range(len(groups))), ticktext=[safe(g) for g in groups],
                     range=[-0.6, len(groups) - 0.4], tickangle=tick_angle, automargin=True)
    fig.update_yaxes(title=safe(y_title), type="log" if log_y else "linear", tickformat=y_format,
                     exponentformat="power", rangemode="tozero" if not log_y else None)
    fig.update_layout(legend={"orientation": "h", "y": -0.22})
    return layout(fig, title, separators, height), xs


def estimates(guesses, value, factor: float, *, x_title, separators, guess_name, value_name, band_name, hover,
              height=300, edge: float | None = None, edge_name: str = ""):
    """A class's estimates on a log axis, each a dot (spread up and down, so that equal ones
    stay apart), and once revealed (``value`` not None) the measured value as a line, with
    the band of estimates within ``factor`` of it either way. With ``edge``, an estimate
    further than that factor from the class's median is kept but drawn at the edge (a
    triangle pointing out, its own number on hover), so that the axis follows the class,
    not one outlier."""
    fig = go.Figure()
    guesses = [float(g) for g in guesses]
    spread = [((i * 7) % 11) / 10 - 0.5 for i in range(len(guesses))]  # the same places on every screen
    inside, outside = list(range(len(guesses))), []
    if edge is not None and guesses:
        middle = sorted(guesses)[len(guesses) // 2]
        lo_edge, hi_edge = middle / edge, middle * edge
        inside = [i for i, g in enumerate(guesses) if lo_edge <= g <= hi_edge]
        outside = [i for i in range(len(guesses)) if i not in inside]
    if value is not None:
        lo, hi = value / factor, value * factor
        fig.add_trace(go.Scatter(x=[lo, hi, hi, lo, lo], y=[-0.7, -0.7, 0.7, 0.7, -0.7], fill="toself", mode="lines",
                                 name=safe(band_name), line={"width": 0}, fillcolor="rgba(0, 158, 115, 0.18)",
                                 hoverinfo="skip"))
    fig.add_trace(go.Scatter(x=[guesses[i] for i in inside], y=[spread[i] for i in inside], mode="markers",
                             name=safe(guess_name), marker={"size": 12, "color": OKABE_ITO[0], "opacity": 0.75,
                                                            "line": {"width": 1, "color": "white"}},
                             hovertemplate=hover + "<extra></extra>"))
    if outside:  # at the edge, pointing out; the hover says the number itself
        fig.add_trace(go.Scatter(
            x=[lo_edge if guesses[i] < lo_edge else hi_edge for i in outside], y=[spread[i] for i in outside],
            customdata=[guesses[i] for i in outside], mode="markers", name=safe(edge_name),
            marker={"size": 14, "color": OKABE_ITO[0], "opacity": 0.9,
                    "symbol": ["triangle-left" if guesses[i] < lo_edge else "triangle-right" for i in outside]},
            hovertemplate=hover.replace("%{x}", "%{customdata}") + "<extra></extra>"))
    if value is not None:
        fig.add_trace(go.Scatter(x=[value, value], y=[-0.8, 0.8], mode="lines", name=safe(value_name),
                                 line={"color": OKABE_ITO[3], "width": 3}, hoverinfo="skip"))
    fig.update_xaxes(type="log", title=safe(x_title), exponentformat="power")
    fig.update_yaxes(visible=False, range=[-0.9, 0.9], fixedrange=True)
    fig.update_layout(legend={"orientation": "h", "y": -0.35}, showlegend=True)
    return layout(fig, "", separators, height)
