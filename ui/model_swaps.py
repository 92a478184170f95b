"""The model itself feels the catch: run it with its attention swapped for a
shortcut and measure what it loses (perplexity, KL, top-1 agreement).

Runs only on a button press, with a progress bar, bounded to a token budget, and
cached per text and settings."""

from __future__ import annotations

import streamlit as st

from attn import methods, swap
from attn.swap import SWAP_MAX_TOKENS, WINDOWS

from server.lru import CountLRU

from . import analyses, drawing, figures, glossary, measures, served_model, widgets
from .i18n import Translator


def _run_sweep(text: str, swaps: list[swap.Swap], budget: int, bar) -> list:
    model = served_model.ensure_model()

    def progress(i, _result):
        bar.progress((i + 1) / len(swaps), text=f"{i + 1} / {len(swaps)}")

    k = _key(text, swaps, budget)

    def work():
        done = _store().get(k)  # measured meanwhile by a reader ahead in the line
        return done if done is not None else swap.sweep(model, text, swaps, max_tokens=budget, progress=progress)

    return analyses.in_line("sweep", work, same=k)


def complete(results) -> bool:
    """Whether a run gave every number (each entry a SwapResult, none an error)."""
    return bool(results) and all(isinstance(r, swap.SwapResult) for r in results)


def failure(t: Translator, results) -> bool:
    """Say why a run has no numbers, when it has none: a text too short to predict
    anything from, or (anything else) what failed. True when something was said."""
    bad = [r for r in results if not isinstance(r, swap.SwapResult)]
    if not bad:
        return False
    if any(isinstance(r, swap.TextTooShort) for r in bad):
        drawing.error_box(t, "swap.too_short")
    else:
        drawing.error_box(t, "swap.failed")
        st.code(f"{type(bad[0]).__name__}: {bad[0]}", language=None)  # the reason, as the engine said it
    return True


def _key(text: str, swaps: list[swap.Swap], budget: int, model_id: str | None = None) -> str:
    """A sweep's key: the model (the reader's, unless given), its token budget, the swaps and
    the text."""
    import hashlib

    raw = repr((model_id or served_model.model_id(), budget, swaps)) + text
    return "swap_" + hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:24]


SWEEPS = 32  # finished sweeps kept per process


def _store() -> CountLRU:
    """Finished sweeps by key (small: a few numbers per setting), shared by readers."""
    return measures.finished_results("sweeps", SWEEPS)


def keep(text: str, swaps: list[swap.Swap], results: list, budget: int | None = None,
         model_id: str | None = None) -> None:
    """A finished sweep's results, kept for every reader of the process (as a run by the
    button keeps them)."""
    budget = swap_budget(model_id) if budget is None else budget
    _store()[_key(text, swaps, budget, model_id)] = results


def forget_all() -> None:
    """Every kept sweep dropped: each page's sweep is unmeasured again."""
    _store().clear()


def measured(text: str, swaps: list[swap.Swap], budget: int | None = None, model_id: str | None = None) -> list | None:
    """The results of a sweep already run on this text (by any reader) with the model (the
    reader's, unless given), or None."""
    budget = swap_budget(model_id) if budget is None else budget
    return _store().get(_key(text, swaps, budget, model_id))


def run_or_show(t: Translator, text: str, swaps: list[swap.Swap], budget: int, button_label: str, key: str):
    """The results when already measured; else a button that measures them — or, for a
    model whose folder has no language-model head, the sentence that says nothing can be
    measured (no number, no button)."""
    if not no_head_said(t):
        return None
    store = _store()
    k = _key(text, swaps, budget)
    if k in store:
        return store[k]
    if not st.button(button_label, key=key, type="primary"):
        return None
    bar = st.progress(0.0, text=t("swap.running"))
    try:
        results = _run_sweep(text, swaps, budget, bar)
    except Exception as exc:  # the whole run failed: each swap has that reason, and nothing is kept
        return [exc] * len(swaps)
    finally:
        bar.empty()
    store[k] = results
    return results


def no_head_said(t: Translator) -> bool:
    """True when the model has its language-model head; else says, in one sentence, that
    nothing here can be measured with it (and shows no number), and is False."""
    if served_model.has_head():
        return True
    st.info(t("swap.no_head"), icon=":material/block:")
    return False


def swap_budget(model_id: str | None = None) -> int:
    """Tokens a swap reads: SWAP_MAX_TOKENS, or fewer where the model (the reader's, unless
    given) reads fewer."""
    model = served_model.ensure_model() if model_id is None else served_model.get_model(model_id)
    return min(SWAP_MAX_TOKENS, model.max_tokens)


def budget_caption(t: Translator, n: int, key: str, **kw) -> None:
    """What a swap runs on: the first swap_budget() tokens of a longer text, or the
    whole text (``n`` tokens) when it is no longer (never "the first 256" of 114)."""
    budget = swap_budget()
    if n > budget:
        st.caption(t(key, n=t.int(budget), **kw))
    else:
        st.caption(t(f"{key}_all", n=n, **kw))


def masked_note(t: Translator, a, result) -> None:
    """On an encoder, what its "perplexity" is: masked words guessed from both sides."""
    if not a.causal:
        st.caption(t("swap.masked_note", m=t.int(len(result.predicted))))


def hub_evidence(t: Translator, a, text: str) -> None:
    """Step 4's borrowed number: one hub at a 4-token window, in every layer."""
    if not no_head_said(t):
        return
    budget_caption(t, a.n, "swap.budget")
    res = run_or_show(t, text, swap.hub_pair(4), swap_budget(), t("swap.measure_hub"), "s4_swap")
    if not res:
        return
    if failure(t, res):
        return
    alone, hub = res
    masked_note(t, a, alone)
    base = alone.base_perplexity
    c1, c2, c3 = st.columns(3)
    c1.metric(t("swap.base_ppl"), t.float(base, 1))
    c2.metric(t("swap.w4_ppl"), t.float(alone.perplexity, 1),
              delta=t("swap.times", x=t.float(alone.perplexity / base, 1)), **drawing.REFERENCE)
    c3.metric(t("swap.w4_hub_ppl"), t.float(hub.perplexity, 1),
              delta=t("swap.times", x=t.float(hub.perplexity / base, 1)), **drawing.REFERENCE)
    st.caption(t("swap.hub_caption", kl0=t.float(alone.kl, 2), kl1=t.float(hub.kl, 2),
                 a0=t.pct(alone.top1_agreement, 0), a1=t.pct(hub.top1_agreement, 0)))


def sweep_of(a, layer: int) -> list:
    """Step 6's sweep on this model: its layers, which of them slide, the layer picked."""
    return swap.standard_sweep((0,), layer, sliding=any(x.sliding for x in a.layers), n_layers=a.n_layers,
                               sliding_layers=tuple(i for i, x in enumerate(a.layers) if x.sliding))


def sweep_section(t: Translator, a, text: str, step) -> None:
    """Step 6's second half: the whole model with its attention swapped (``step``: the
    page's Step, whose prose links the glossary's terms)."""
    st.subheader(t("swap.heading"))
    if not served_model.has_head():  # what the page did measure first; then the one thing it cannot
        st.markdown(t("swap.lead_no_head"))
        no_head_said(t)
        return
    glossary.prose(t, step, "swap.lead" if a.causal else "swap.lead_masked")
    layer = widgets.setting(t, "s6_swap_layer", a, t("swap.pick_layer"))
    swaps = sweep_of(a, layer)
    if a.causal:
        budget_caption(t, a.n, "swap.budget_sweep", runs=len(swaps))
    else:  # each run reads one copy of the text per masked word: longer, and said so
        masked = swap.masked_positions(served_model.ensure_model(), a.ids[:swap_budget()])
        budget_caption(t, a.n, "swap.budget_sweep_masked", runs=len(swaps), m=len(masked))
    res = run_or_show(t, text, swaps, swap_budget(), t("swap.measure_sweep"), "s6_swap")
    if not res:
        return
    if failure(t, res):
        return
    control = res[0]
    masked_note(t, a, control)
    c1, c2, c3, c4 = st.columns(4)
    c1.metric(t("swap.base_ppl"), t.float(control.base_perplexity, 2))
    c2.metric(t("swap.control_ppl"), t.float(control.perplexity, 2))
    c3.metric(t("swap.control_kl"), t.sci(max(control.kl, 0.0)))
    c4.metric(t("swap.control_top1"), t.pct(control.top1_agreement, 0))
    if a.causal:  # a soft-capped model's own attention is written out, not fused
        capped = any(layer.softcap is not None for layer in a.layers)
        st.caption(t("swap.control_caption_written" if capped else "swap.control_caption", n=t.int(control.n)))
    else:  # an encoder is measured on the words it guesses, hidden one at a time
        st.caption(t("swap.control_caption_masked", m=t.int(len(control.predicted))))

    metric = widgets.setting(t, "s6_swap_metric", a, t("swap.pick_metric"), horizontal=True,
                             names=lambda m: t(f"swap.metric_{m}"))
    by_window, by_map, *by_exact = drawing.figure_once("s6_swap", (_key(text, swaps, swap_budget()), metric, layer),
                                                       lambda: sweep_figures(t, res, metric, layer))
    drawing.show_figure(by_window, key="s6_swap_window")
    drawing.show_figure(by_map, key="s6_swap_linear")
    for fig in by_exact:  # with the hybrid stacks: the metric against the share of layers kept exact
        drawing.show_figure(fig, key="s6_swap_exact")
    if any(s.series.endswith("/stack") for s in swaps):  # the hybrid stacks: what they copy, which layers stayed
        st.caption(stacks_note(t, a, swaps))
    st.markdown(t("swap.outro"))


def stacks_note(t: Translator, a, swaps: list) -> str:
    """What the hybrid stacks copy and which layers they kept exact, with the window's 5 in 6
    said as what happened to it: drawn; left out as the model's own sliding layers (its
    numbers are the sliding-layers line); or not run, the model having fewer layers."""
    exact4, exact6 = _exact(t, a.n_layers, swap.STACK_EVERY), _exact(t, a.n_layers, swap.WINDOW_STACK_EVERY)
    if any(s.series == f"{methods.window().name}/stack" for s in swaps):
        return t("swap.stacks_note", exact4=exact4, exact6=exact6)
    if a.n_layers >= swap.WINDOW_STACK_EVERY:  # the stack is the model's own sliding layers
        return t("swap.stacks_note_own", exact4=exact4, exact6=exact6, line=t("swap.series_window_sliding"))
    return t("swap.stacks_note_few", exact4=exact4, every=swap.WINDOW_STACK_EVERY, layers=a.n_layers)


def sweep_figures(t: Translator, res: list, metric: str, layer: int):
    """The sweep's charts: each window family against w, the feature maps, and (with the
    hybrid stacks) the metric against the share of layers kept exact."""
    n_layers = max((max(r.layers) + 1 for r in res if r.layers), default=0)
    figs = (_window_figure(t, res, metric, n_layers), _linear_figure(t, res, metric, layer, n_layers))
    fig3 = exact_share_figure(t, res, metric, n_layers)
    return figs + ((fig3,) if fig3 is not None else ())


def _window_names(t: Translator, n_layers: int) -> dict:
    """Each window family's series → its name; the hybrid stacks' names say which layers
    stayed exact (the control swaps every layer: its layers are the model's)."""
    plain, with_hubs = methods.window().name, methods.window(hubs=True).name  # the sweep's series, by method
    indexer = methods.top_k(indexer=True)
    return {f"{plain}/all": t("swap.series_window_all"), f"{with_hubs}/all": t("swap.series_hubs_all"),
            f"{plain}/sliding": t("swap.series_window_sliding"),
            f"{with_hubs}/sliding": t("swap.series_hubs_sliding"),
            f"{methods.top_k().name}/all": t("swap.series_topk_all"),
            f"{indexer.name}/all": t("swap.series_topk_indexer_all", dims=indexer.indexer_dims),
            f"{methods.top_k().name}/stack": t("swap.series_topk_stack", exact=_exact(t, n_layers, swap.STACK_EVERY)),
            f"{plain}/stack": t("swap.series_window_stack", exact=_exact(t, n_layers, swap.WINDOW_STACK_EVERY))}


def _exact(t: Translator, n_layers: int, every: int) -> str:
    """The layers a stack of one exact layer in ``every`` keeps exact, as a list."""
    return t.list(str(i) for i in swap.kept_exact(n_layers, every))


def _window_figure(t: Translator, res: list, metric: str, n_layers: int):
    """Each window family (and top-k) against w: one line a series the sweep ran."""
    series = []
    for tag, name in _window_names(t, n_layers).items():
        pts = [(r.swap.window, getattr(r, metric)) for r in res if r.swap.series == tag]
        if not pts:  # a model without sliding layers has no such series: none is drawn
            continue
        chosen = methods.get(tag.split("/")[0]).data_dependent  # top-k: dotted, beside the windows
        series.append({"name": name, "x": [p[0] for p in pts], "y": [p[1] for p in pts],
                       "dash": "dash" if "sliding" in tag else "dot" if chosen else "solid",
                       "hover": t("swap.hover_point")})
    return figures.lines(series, title=t("swap.chart_window", metric=t(f"swap.metric_{metric}")),
                         x_title=t("swap.w_axis"), y_title=t(f"swap.metric_{metric}"), separators=t.separators,
                         log_x=True, log_y=(metric != "top1_agreement"),
                         x_ticks=(list(WINDOWS), [t.int(w) for w in WINDOWS]))


def _linear_figure(t: Translator, res: list, metric: str, layer: int, n_layers: int):
    """The feature maps: in every layer, in one layer, and in a hybrid stack."""
    groups = []
    for tag, name in (("linear/all", t("swap.series_linear_all")),
                      ("linear/one", t("swap.series_linear_one", layer=layer)),
                      ("linear/stack", t("swap.series_linear_stack", exact=_exact(t, n_layers, swap.STACK_EVERY)))):
        values = [getattr(r, metric) for r in res if r.swap.series == tag]
        if values:  # a model with fewer layers than a stack's period has no stack
            groups.append({"name": name, "values": values})
    linear = [r.swap.method for r in res if r.swap.series == "linear/all"]
    return figures.grouped_bars(groups, [t(methods.get(m).label_key) for m in linear],
                                title=t("swap.chart_linear", metric=t(f"swap.metric_{metric}")),
                                y_title=t(f"swap.metric_{metric}"), separators=t.separators,
                                log_y=(metric != "top1_agreement"))


EXACT_SHARE_WINDOW = 16  # top-k's line on the exact-share chart: at the cells of this window


def exact_share_figure(t: Translator, res: list, metric: str, n_layers: int):
    """The metric against the share of layers kept exact, one line per method swapped in
    every layer, in a hybrid stack and (linear) in one layer, ending at the control (every
    layer its own): how much exactness buys back. None without stacks."""
    if not any(r.swap.series.endswith("/stack") for r in res) or not n_layers:
        return None
    control = next(r for r in res if r.swap.series == "control")
    oracle = methods.top_k().name
    series = []
    for name in dict.fromkeys(r.swap.method for r in res if r.swap.series in ("linear/all", f"{oracle}/all")):
        rows = [r for r in res if r.swap.method == name and r.swap.series != "control"
                and (not methods.get(name).data_dependent or r.swap.window == EXACT_SHARE_WINDOW)]
        pts = sorted({1 - len(r.layers) / n_layers: getattr(r, metric) for r in rows}.items())
        pts.append((1.0, getattr(control, metric)))
        label = t(methods.get(name).label_key, w=EXACT_SHARE_WINDOW, g=0)
        if methods.get(name).data_dependent:
            label = t("swap.series_topk_at", name=label, w=EXACT_SHARE_WINDOW)
        series.append({"name": label, "x": [x for x, _ in pts], "y": [y for _, y in pts],
                       "hover": t("swap.hover_exact"), "dash": "dot" if methods.get(name).data_dependent else "solid"})
    return figures.lines(series, title=t("swap.chart_exact", metric=t(f"swap.metric_{metric}")),
                         x_title=t("swap.exact_axis"), y_title=t(f"swap.metric_{metric}"), separators=t.separators,
                         log_y=(metric != "top1_agreement"), x_ticks=([0, 0.25, 0.5, 0.75, 1.0],
                                                                      [t.pct(x, 0) for x in (0, 0.25, 0.5, 0.75, 1.0)]))
