"""Each step's matched question (peer instruction's check after the reveal): the same idea on
other numbers — another length, share, window, layer or method — measured as the page
measures its own, on a decoder (the tiny model) and on an encoder (a BERT folder). Expected
answers come from loops and counts written here, or from transformers' own eager attention."""

import pytest

from harness import model_folders as mf
from test_model_folder_app import encoder_run, hops_by_bfs
from ui import analyses, measures, setting_table, walk, summaries
from ui.i18n import LANGS, Translator
from ui.samples import sample_text
from pages.hubs import HOP_TOKENS
from pages.neighbours import REACH_TOKENS


@pytest.fixture(scope="module", params=["decoder", "encoder"])
def reader(request, tmp_path_factory):
    """(model id, text, analysis, the pages' settings at first, the BERT folder or None)."""
    folder = mf.build("bert", tmp_path_factory.mktemp("bert") / "bert") if request.param == "encoder" else None
    model_id = str(folder) if folder else "tiny"
    text = sample_text("en")
    a = analyses.get_analysis(text, model_id)
    cfg = setting_table.settings_for(a, measures.setting_context(text, model_id), {})
    return model_id, text, a, cfg, folder


def matched(step_id: str, reader, lang: str = "en"):
    """(the step's question, its matched question) as a class would be asked them."""
    model_id, text, a, cfg, _ = reader
    step = walk.get(step_id)
    m = step.matched[0]
    args = (a, text, model_id, cfg) if step.needs_text else (None, "", model_id, {})
    t = Translator(lang)
    return summaries.asked(step, m.of, t, *args), summaries.asked(step, m.id, t, *args)


def test_each_question_has_one_matched_question_with_its_own_id_and_other_words(reader):
    ids = [q for s in walk.steps() for q in s.questions]
    seen = set()
    for step in walk.steps():
        assert [m.of for m in step.matched] == list(step.questions), step.id  # one for each question
        for m in step.matched:
            assert m.id not in ids and m.id not in seen and m.id.startswith(m.of.split(".")[0] + ".")
            seen.add(m.id)
            assert (m.change is None) != (m.ask is None)
            for lang in LANGS:
                main, q = matched(step.id, reader, lang)
                assert q.id == m.id and q.text != main.text, (step.id, lang)  # the numbers it names differ
                assert len(q.options) >= 2 and q.right in q.options


def cells_by_rows(a, layer: int, n: int) -> int:
    """Row by row, the keys a query of ``layer`` reads on n tokens: before it (a decoder) or
    all (an encoder), within the layer's window if it slides."""
    window = a.layers[layer].window
    if a.causal:
        return sum(min(i + 1, window or n) for i in range(n))
    return sum(sum(1 for j in range(n) if window is None or abs(i - j) < window) for i in range(n))


def test_step_1_three_times_as_long_counted_by_rows(reader):
    _, _, a, cfg, _ = reader
    window = a.layers[cfg["s1_layer"]].window

    def cells(n):
        return cells_by_rows(a, cfg["s1_layer"], n)

    _, q = matched("every-pair", reader)
    assert q.answer == pytest.approx(cells(3 * a.n) / cells(a.n), rel=1e-12)
    if window is None:
        assert q.right == 9


def test_step_2_another_share_averages_each_heads_k_by_loops(reader):
    model_id, text, a, cfg, folder = reader
    main, q = matched("nearly-empty", reader)
    p = 0.5 if cfg["s2_p"] >= 0.8 else 0.95
    assert f"{round(p * 100)}%" in q.text and f"{round(p * 100)}%" not in main.text
    # the encoder's weights from transformers' own eager attention; the decoder's as captured
    # (tests/test_model_folders.py checks the capture against the softmax of its q and k)
    attn = encoder_run(folder, text)[1] if folder is not None else a.weights().dense().double()
    layer = cfg["s2_layer"]

    rows = attn[layer]  # (heads, n, n): each head's rows, largest cells first, summed until they hold p
    held = rows.sort(dim=-1, descending=True).values.cumsum(-1)
    k = (held < p * rows.sum(-1, keepdim=True) - 1e-6).sum(-1) + 1
    assert q.answer == pytest.approx(float(k.double().mean()), abs=0.02)


def test_step_3_the_reach_on_a_wider_window_by_a_walk_over_the_layers(reader):
    _, _, a, cfg, _ = reader
    _, q = matched("neighbours", reader)
    rw, rl, rn = cfg["s3_rw"] + 2, cfg["s3_rl"], min(a.n, REACH_TOKENS)
    i = rn - 1 if a.causal else rn // 2
    reached = {i}
    for _ in range(rl):  # a layer lets i read j when j is within the window (before it, in a decoder)
        reached |= {j for r in reached for j in range(rn) if abs(r - j) < rw and (j <= r or not a.causal)}
    assert f"window of {rw}" in q.text
    assert q.answer == len(reached) and q.right == len(reached)


def test_step_4_hubs_on_another_window_by_breadth_first_search(reader):
    _, _, a, cfg, _ = reader
    _, q = matched("hubs", reader)
    hn = min(a.n, HOP_TOKENS)
    hw = 2 if min(cfg["s4_w"], 4) > 2 else 4
    hubs = [h for h in cfg["s4_hubs"] if h < hn] or [0]
    assert f"window {hw}" in q.text
    assert q.answer == max(max(row) for row in hops_by_bfs(hn, hw, hubs)) == 2  # hubs: two layers, any window


def test_step_5_an_eighth_of_the_text_counted_by_hand(reader):
    model_id, text, a, cfg, _ = reader
    _, q = matched("linear", reader)
    n = max(4, a.n // 8)
    grid = n * (n + 1) // 2 if cfg["s5_causal"] else n * n
    layer = cfg["s5_layer"]
    _, _, v = a.qkv(layer)
    m = measures.linear_orders(text, model_id, layer, cfg["s5_feature"], cfg["s5_causal"]).m
    summary = m * v.shape[-1]  # the m × d summary KᵀV a head keeps
    assert f"{n:,}" in q.text
    assert q.answer == ("grid" if grid < summary else "summary")


def test_step_6_the_same_question_on_the_other_kind_of_layer(reader):
    model_id, text, a, cfg, _ = reader
    main, q = matched("honest-catch", reader)
    full = [x.window is None for x in a.layers]
    layer = cfg["s6_layer"]
    other = next((i for i, f in enumerate(full) if f != full[layer]), (layer + len(full) // 2) % len(full))
    assert other != layer and f"layer {other}" in q.text and f"layer {layer}" in main.text
    step = walk.get("honest-catch")
    again = summaries.asked(step, "s6.closest", Translator("en"), a, text, model_id, {**cfg, "s6_layer": other})
    assert (q.options, q.answer) == (again.options, again.answer)


def test_step_7_full_attention_doubles_to_four_times_the_work(reader):
    main, q = matched("payoff", reader)
    assert main.right == 2 and q.right == 4
    assert q.answer == pytest.approx(4, rel=0.01) and main.answer == pytest.approx(2, rel=0.01)  # n² against n


def test_steps_1_2_3_and_7_ask_their_count_or_ratio_as_an_estimate(reader):
    """An estimate is the step's own measured number (step 1's: the cells on a text twice
    as long, counted row by row here), asked without options."""
    model_id, text, a, cfg, _ = reader
    ids = [q for s in walk.steps() for q in (*s.questions, *(m.id for m in s.matched))]
    assert [s.id for s in walk.steps() if s.estimates] == ["every-pair", "nearly-empty", "neighbours", "payoff"]
    for step in walk.steps():
        for e in step.estimates:
            assert e.of in step.questions and e.id not in ids
            args = (a, text, model_id, cfg) if step.needs_text else (None, "", model_id, {})
            q = summaries.asked(step, e.id, Translator("en"), *args)
            main = summaries.asked(step, e.of, Translator("en"), *args)
            assert q.form == "estimate" and q.options == [] and q.right is None and q.answer > 0
            if step.id != "every-pair":
                assert (q.text, q.answer) == (main.text, main.answer)
    n = 2 * a.n
    q = summaries.asked(walk.get("every-pair"), "s1.cells_estimate", Translator("en"), a, text, model_id, cfg)
    assert q.answer == cells_by_rows(a, cfg["s1_layer"], n) and f"{n:,}" in q.text
