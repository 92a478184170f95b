"""The room on a step's page: when the teacher shows it, every text the class sent is one
point (or one line) of the step's claim, tested on all of them at once — the viewer's own
ringed — with what the room's numbers say beneath. Redrawn in a fragment of its own each
ROOM_REFRESH seconds from the room's own version (a text sent never redraws a following
student's page); each chart is built once per room version, step, setting and language in
a process, whoever views it. A text's words are never on it: numbers and languages only.
Steps 5 and 7 measure nothing on a text (the algebra, the device's timing): no room."""

from __future__ import annotations

import math

import streamlit as st

from attn import methods, patterns
from attn import room_numbers

from .. import keys, session, room_figures, widgets
from ..i18n import Translator
from ..steps import page_of
from .handle import Unreadable
from .membership import current, member
from .room import lang_label, room_now

ROOM_REFRESH = 2.0
RINGED = 1024  # charts with a student's own point ringed, kept (a class of 200 on five steps, a few versions)


def shown() -> bool:
    found = current()
    return found is not None and not isinstance(found, Unreadable) and found.room


def section(t: Translator, step: int, **settings) -> None:
    """The room's part of a step's page (``settings``: the page's own, e.g. its layer or
    window, which the room follows where it measured them)."""
    if not page_of(step).room or member() is None or not shown():
        return
    st.subheader(t("room.heading"), divider="gray")
    live(step, tuple(sorted(settings.items())))


@st.fragment(run_every=ROOM_REFRESH)
def live(step: int, settings: tuple) -> None:
    t, code = session.tr(), member()
    if code is None:
        return
    now = room_now(code)
    if now is None:
        return
    version, texts = now
    done = [x for x in texts if x.state == "done" and x.numbers]
    waiting = sum(1 for x in texts if x.state in ("waiting", "working"))
    st.caption(t("room.status", n=t.int(len(done)), waiting=t.int(waiting)))
    if not done:
        st.info(t("room.none_yet"), icon=":material/hourglass_top:")
        return
    cfg = dict(settings)
    built = widgets.figure_once(f"room_s{step}", (code, version, settings),
                           lambda: BUILDERS[page_of(step).room](t, done, cfg))
    fig, where, said = built
    me = st.session_state.get(keys.STUDENT)
    if me in where:  # their own point ringed: a figure of its own, built once per version and student
        fig = ringed(t.lang, step, code, version, settings, me, fig, where[me], t("room.yours"))
    widgets.show_figure(fig, key=f"room_chart_{step}")
    for line in said:
        st.caption(line)


@st.cache_resource(max_entries=RINGED, show_spinner=False)
def ringed(lang: str, step: int, code: str, version: int, settings: tuple, me: str, _fig, _at, _name: str):
    """A shared room chart with one student's own point ringed: made once per room version
    and student (made on each redraw, every 2 s for every phone, it was most of the room's
    cost on the server; made from the figure's dict, 0.1 ms rather than 18)."""
    return room_figures.ring(_fig, *_at, _name)


def _langs(t: Translator, done: list) -> dict:
    return {lang: lang_label(t, lang) for lang in dict.fromkeys(x.lang for x in done)}


def _count_by_lang(t: Translator, rows: list[tuple[str, bool]]) -> str:
    """"en 3/4 · pt 2/2": how many of each language's texts hold, of how many."""
    per: dict[str, list[int]] = {}
    for lang, held in rows:
        got = per.setdefault(lang, [0, 0])
        got[0] += held
        got[1] += 1
    return t.list(f"{lang_label(t, lang)} {t.int(a)}/{t.int(b)}" for lang, (a, b) in per.items())


def cells(t: Translator, done: list, cfg: dict):
    """Step 1: each text's cells against its n, on each kind of layer's curve."""
    points, where = [], {}
    window = done[0].numbers["window"]
    kinds = sorted({k for x in done for k in x.numbers["layer_types"]})
    for x in done:
        n = x.numbers["n"]
        for kind in kinds:
            y = patterns.cells(n, window if kind == "sliding" else None)
            points.append({"lang": x.lang, "x": n, "y": y, "symbol": "square" if kind == "sliding" else "circle"})
        where[x.owner] = (n, patterns.cells(n, None))
    hi = max(2 * x.numbers["n"] for x in done)
    xs = sorted({max(1, round(10 ** (e / 20))) for e in range(0, int(20 * math.log10(hi)) + 1)})
    curves = [{"name": t("room.curve_full"), "x": xs, "y": [patterns.cells(m, None) for m in xs]}]
    if "sliding" in kinds:
        curves.append({"name": t("room.curve_sliding", w=t.int(window)), "x": xs,
                       "y": [patterns.cells(m, window) for m in xs], "dash": "dash"})
    fig = room_figures.points_on_curves(points, curves, title=t("room.cells_title"), x_title=t("common.n_axis"),
                                        y_title=t("room.cells_axis"), separators=t.separators,
                                        lang_names=_langs(t, done), hover=t("room.hover_cells"))
    return fig, where, [t("room.cells_caption", n=t.int(len(done)))]


def useful(t: Translator, done: list, cfg: dict):
    """Step 2, the experiment: each text's useful share on its growing prefixes, in the
    page's layer; in how many texts it fell, and in how many layers."""
    layer = cfg.get("layer", 0)
    rows, where, fell = [], {}, []
    for x in done:
        nums = x.numbers
        ly = min(layer, nums["layers"] - 1)
        pts = nums["useful"][ly]
        rows.append({"lang": x.lang, "x": [p[0] for p in pts], "y": [p[2] for p in pts], "ref": [p[3] for p in pts]})
        where[x.owner] = (pts[-1][0], pts[-1][2])
        f = room_numbers.share_fell(nums, ly)
        if f is not None:
            fell.append((x.lang, f))
    fig = room_figures.prefix_lines(rows, title=t("room.useful_title", p=t.pct(room_numbers.ROOM_P, 0), layer=layer),
                                    x_title=t("common.n_axis"), y_title=t("step2.share_axis"),
                                    separators=t.separators, lang_names=_langs(t, done),
                                    hover=t("room.hover_useful"), reference_name=t("step2.series_uniform"))
    verdict = room_numbers.verdicts([(x.lang, x.numbers) for x in done])["shrinks"]
    said = [t("room.useful_layer", fell=t.int(sum(f for _, f in fell)), n=t.int(len(fell)), layer=layer,
              langs=_count_by_lang(t, fell)),
            t("room.useful_all", held=t.int(verdict["held"]), n=t.int(verdict["of"]))]
    return fig, where, said


def nearest_window(asked) -> int:
    """The room's measured window nearest the page's (a log scale: 20 is nearer 16 than 64)."""
    if not isinstance(asked, int) or asked < 1:
        return room_numbers.ROOM_WINDOWS[1]
    return min(room_numbers.ROOM_WINDOWS, key=lambda w: abs(math.log(w) - math.log(asked)))


def window(t: Translator, done: list, cfg: dict):
    """Step 3: the share of weight a window keeps, every text, by language."""
    w = nearest_window(cfg.get("window"))
    groups = list(_langs(t, done).values())
    points = [{"group": lang_label(t, x.lang), "lang": x.lang, "y": x.numbers["kept"][str(w)]["mean"]} for x in done]
    fig, xs = room_figures.strips(groups, points, title=t("room.window_title", w=t.int(w)), y_title=t("room.kept_axis"),
                                  separators=t.separators, lang_names=_langs(t, done), hover=t("room.hover_share"),
                                  y_format=".0%")
    where = {x.owner: (xs[i], points[i]["y"]) for i, x in enumerate(done)}
    said = [t("room.window_measured", ws=t.list(t.int(v) for v in room_numbers.ROOM_WINDOWS), w=t.int(w))]
    if cfg.get("window") not in (None, w):
        said.append(t("room.window_nearest", asked=t.int(cfg["window"]), w=t.int(w)))
    shorter = sum(1 for x in done if x.numbers["n"] <= w)
    if shorter:
        said.append(t("room.window_shorter", n=shorter, w=t.int(w)))
    return fig, where, said


def sink(t: Translator, done: list, cfg: dict):
    """Step 4: the first token's share of each row, and what a window keeps alone and
    with the first token and each text's own anchors as hubs."""
    w = done[0].numbers["hub_window"]
    labels = [t("room.group_sink"), t("room.group_window", w=t.int(w)), t("room.group_window_hubs", w=t.int(w))]
    points = []
    for x in done:
        nums = x.numbers
        for label, y in zip(labels, (nums["sink_mean"], nums["kept_window"], nums["kept_window_hubs"])):
            points.append({"group": label, "lang": x.lang, "y": y})
    fig, xs = room_figures.strips(labels, points, title=t("room.sink_title"), y_title=t("room.share_axis"),
                                  separators=t.separators, lang_names=_langs(t, done), hover=t("room.hover_share"),
                                  y_format=".0%")
    where = {x.owner: (xs[3 * i], points[3 * i]["y"]) for i, x in enumerate(done)}
    v = room_numbers.verdicts([(x.lang, x.numbers) for x in done])["sink"]
    return fig, where, [t("room.sink_caption", above=t.int(v["above"]), n=t.int(v["of"]))]


def errors(t: Translator, done: list, cfg: dict):
    """Step 6: each shortcut's output error, every text, beside the fused kernel's."""
    nums0 = done[0].numbers
    names = [m for m in nums0["errors"]]
    own = methods.own().name
    order = [own] + [m for m in names if m not in (own, "uniform")] + (["uniform"] if "uniform" in names else [])

    def label(m):
        if m == own:
            return t("room.method_fused")
        if m == "uniform":
            return t("room.method_uniform")
        return t(methods.get(m).label_key, w=nums0["error_window"], g=len(nums0["hubs"]))

    labels = [label(m) for m in order]
    points = []
    for x in done:
        for m, lab in zip(order, labels):
            if m in x.numbers["errors"]:
                points.append({"group": lab, "lang": x.lang, "y": max(x.numbers["errors"][m], 1e-9)})
    fig, xs = room_figures.strips(labels, points, title=t("room.errors_title", layer=nums0["error_layer"],
                                                          w=t.int(nums0["error_window"])),
                                  y_title=t("room.error_axis"), separators=t.separators, lang_names=_langs(t, done),
                                  hover=t("room.hover_error"), log_y=True, tick_angle=-30, height=520)
    firsts = [i for i, p in enumerate(points) if p["group"] == labels[0]]
    where = {x.owner: (xs[firsts[i]], points[firsts[i]]["y"]) for i, x in enumerate(done) if i < len(firsts)}
    return fig, where, [t("room.errors_caption")]


BUILDERS = {"cells": cells, "useful": useful, "window": window, "sink": sink, "errors": errors}  # ui.steps' room


def closing(t: Translator) -> None:
    """The closing page: the class's verdict on each claim of the lesson, from the room's
    numbers (a table; nothing when the room is not shown or holds no measured text)."""
    if member() is None or not shown():
        return
    st.subheader(t("room.verdict_heading"), divider="gray")
    verdict_table()


@st.fragment(run_every=ROOM_REFRESH)
def verdict_table() -> None:
    t, code = session.tr(), member()
    now = room_now(code) if code else None
    done = [x for x in (now[1] if now else []) if x.state == "done" and x.numbers]
    if not done:
        st.info(t("room.none_yet"), icon=":material/hourglass_top:")
        return
    v = room_numbers.verdicts([(x.lang, x.numbers) for x in done])
    rows = []
    s = v["shrinks"]
    rows.append((t("room.claim_shrinks"), t("room.verdict_shrinks", held=t.int(s["held"]), n=t.int(s["of"]),
                                            langs=t.list(f"{lang_label(t, lang)} {t.int(a)}/{t.int(b)}"
                                                         for lang, (a, b) in s["langs"].items()))))
    big = max(room_numbers.ROOM_WINDOWS)
    w = v["window"][big]
    rows.append((t("room.claim_window", w=t.int(big)),
                 t("room.verdict_window", median=t.pct(w["median"]), most=t.int(w["most"]), n=w["of"], w=t.int(big))
                 if w["of"] else t("room.verdict_window_none", w=t.int(big))))
    k = v["sink"]
    rows.append((t("room.claim_sink"), t("room.verdict_sink", median=t.pct(k["median"]), above=t.int(k["above"]),
                                         n=t.int(k["of"]))))
    own = methods.own().name
    cheap = [m for m in v["errors"] if m not in (own, "uniform")]
    rows.append((t("room.claim_price"), t("room.verdict_price", fused=t.sci(v["errors"].get(own, 0.0)),
                                          lo=t.sci(min(v["errors"][m] for m in cheap)) if cheap else "—",
                                          hi=t.sci(max(v["errors"][m] for m in cheap)) if cheap else "—")))
    widgets.data_table({t("room.col_claim"): [r[0] for r in rows], t("room.col_verdict"): [r[1] for r in rows]})
    st.caption(t("room.verdict_caption", n=t.int(len(done)), p=t.pct(room_numbers.ROOM_P, 0)))
