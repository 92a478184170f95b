"""The app on a model from a folder (ATLAS_MODEL=<folder>): tiny random-weight folders of
each decoder family (harness.model_folders), every page opened through app.py in AppTest.

The expected numbers come from the folder's own config and tokenizer, counted here by
loops, never from the app's code; a folder that cannot serve gives its sentence and the
packaged model runs instead."""

import json

import pytest
import torch
from transformers import AutoConfig, AutoModelForMaskedLM, AutoTokenizer

from harness import model_folders as mf
from ui.i18n import Translator
from helpers import HOME, WALK, page_path
from ui import walk

pytestmark = pytest.mark.usefixtures("fresh_caches")


@pytest.fixture(scope="module")
def folder_of(tmp_path_factory):
    root = tmp_path_factory.mktemp("model-folders")
    made = {}

    def get(family):
        if family not in made:
            made[family] = mf.build(family, root / family)
        return made[family]

    return get


def window_of_layer(config, layer: int):
    """The layer's sliding window as the family's modeling file reads its config
    (written out here per family, as in tests/test_model_folders.py)."""
    kind = config.model_type
    if kind in ("gemma2", "gemma3_text"):
        return config.sliding_window if config.layer_types[layer] == "sliding_attention" else None
    if kind in ("qwen2", "qwen3"):
        return config.sliding_window if layer >= config.max_window_layers else None
    if kind in ("mistral", "phi3"):
        return config.sliding_window
    return None


def causal_cells(n: int, window) -> int:
    """Pairs (i, j) with j ≤ i (and i − j < window), counted one by one."""
    return sum(1 for i in range(n) for j in range(i + 1) if window is None or i - j < window)


def caption_values(at) -> list[str]:
    return [c.value for c in at.caption]


@pytest.mark.parametrize("family", mf.FAMILIES)
def test_every_page_opens_on_each_family(make_app, folder_of, family):
    folder = folder_of(family)
    t = Translator("en")
    at = make_app(str(folder))
    at.run()
    for page in WALK:
        if page.id != HOME.id:
            at.switch_page(page_path(page)).run()
        assert not at.exception, (family, page.id, at.exception[0].message if at.exception else "")
        assert not at.warning or all("cannot be used" not in w.value for w in at.warning), (family, page.id)
        if page.is_step:  # the step's own page ran, not the first one again
            total = len(walk.steps())
            assert t("common.step_of", step=walk.number(page), total=total) in caption_values(at), (family, page.id)


@pytest.mark.parametrize("lang", ["ja", "pt"])
@pytest.mark.parametrize("family", ["bert", "gpt2"])
def test_every_page_opens_in_every_language_on_an_encoder_and_a_decoder(make_app, folder_of, family, lang):
    at = make_app(str(folder_of(family)), lang=lang)
    at.run()
    t = Translator(lang)
    for page in WALK:
        if page.id != HOME.id:
            at.switch_page(page_path(page)).run()
        assert not at.exception, (family, lang, page.id, at.exception[0].message if at.exception else "")
        if page.is_step:
            assert t("common.step_of", step=walk.number(page), total=len(walk.steps())) in caption_values(at), \
                (family, lang, page.id)
    at.switch_page(page_path(HOME)).run()
    said = caption_values(at)
    assert (t("every_pair.formula_caption_both") in said) == (family == "bert"), (family, lang)


@pytest.mark.parametrize("family", ["gpt2", "gemma2", "qwen2", "llama"])
def test_step_one_counts_follow_the_folders_model(make_app, folder_of, family):
    folder = folder_of(family)
    config = AutoConfig.from_pretrained(str(folder))
    tok = AutoTokenizer.from_pretrained(str(folder))
    at = make_app(str(folder))
    at.run()
    assert not at.exception
    text = at.session_state["text"]
    positions = getattr(config, "max_position_embeddings", None) or config.n_positions
    n = min(len(tok(text)["input_ids"]), positions, 1024)
    layer = at.selectbox(key="s1_layer").value
    window = window_of_layer(config, layer)
    t = Translator("en")
    metrics = {m.label: m.value for m in at.metric}
    assert metrics[t("every_pair.metric_n")] == t.int(n)
    assert metrics[t("every_pair.metric_square")] == t.int(n * n)
    assert metrics[t("every_pair.metric_causal")] == t.int(causal_cells(n, window))
    assert metrics[t("every_pair.metric_doubled", n2=t.int(2 * n))] == t.int(causal_cells(2 * n, window))
    # the whole model: every head of every layer, each layer with its own window
    heads = config.num_attention_heads if hasattr(config, "num_attention_heads") else config.n_head
    layers = config.num_hidden_layers if hasattr(config, "num_hidden_layers") else config.n_layer
    whole = heads * sum(causal_cells(n, window_of_layer(config, i)) for i in range(layers))
    assert any(t.int(whole) in c for c in caption_values(at)), caption_values(at)
    # the sidebar: how many tokens are read, and which model from which folder
    sidebar = [c.value for c in at.sidebar.caption]
    assert any(f"the first {t.int(n)} tokens" in c for c in sidebar), sidebar
    line = next(c for c in sidebar if c.startswith("Model:"))
    assert config.model_type in line and f"`{folder.name}`" in line, line


def test_the_sink_sentence_follows_the_models_first_token(make_app, folder_of):
    t = Translator("en")
    said = {}
    for family in ("gpt2", "llama"):  # GPT-2's tokenizer adds no start token; this llama's adds <s>
        at = make_app(str(folder_of(family)))
        at.run()
        at.switch_page("pages/hubs/page.py").run()
        assert not at.exception
        said[family] = t("hubs.first_is_text") in caption_values(at)
    assert said == {"gpt2": True, "llama": False}


@pytest.mark.parametrize("lang", ["en", "ja", "pt"])
def test_a_folder_that_cannot_serve_says_why_and_the_packaged_model_runs(make_app, tmp_path, lang):
    missing = tmp_path / "no-model-here"
    at = make_app(str(missing), lang=lang)
    at.run()
    assert not at.exception
    t = Translator(lang)
    want = t("model.folder_refused", folder=str(missing.resolve()), why=t("model.why_missing"), model="Gemma-3-270m")
    assert [w.value for w in at.sidebar.warning] == [want]
    line = next(c.value for c in at.sidebar.caption if "Gemma-3-270m" in c.value)
    assert t("sidebar.licence") in line  # the packaged model's own line


def model_line(at) -> str:
    return next(c.value for c in at.sidebar.caption if c.value.startswith("Model:"))


@pytest.fixture
def two_models(monkeypatch, folder_of):
    """The server offers the tiny model (ATLAS_MODEL, the default) and a Llama folder."""
    folder = folder_of("llama")
    monkeypatch.setenv("ATLAS_MODELS", f"tiny, {folder}")
    return str(folder.resolve())


def test_the_sidebar_offers_the_configured_models_and_each_reader_runs_their_own(make_app, two_models):
    t = Translator("en")
    tok = AutoTokenizer.from_pretrained(two_models)
    at = make_app("tiny")
    at.run()
    choice = at.sidebar.selectbox(key="model_choice")
    assert choice.options == [t("sidebar.tiny_model"), t("sidebar.folder_model", family="llama", folder="llama")]
    assert choice.value == "tiny" and t("sidebar.tiny_model") in model_line(at)
    choice.set_value(two_models).run()
    assert not at.exception
    assert "llama" in model_line(at) and at.session_state["model"] == two_models
    n = min(len(tok(at.session_state["text"])["input_ids"]), 128)
    assert {m.label: m.value for m in at.metric}[t("every_pair.metric_n")] == t.int(n)
    at.switch_page("pages/nearly_empty/page.py").run()  # the pick outlives a page switch
    assert not at.exception and "llama" in model_line(at)
    other = make_app("tiny")  # another reader of the same server keeps the default
    other.run()
    assert t("sidebar.tiny_model") in model_line(other)


def test_a_share_link_carries_its_model(make_app, two_models):
    at = make_app("tiny")
    at.run()
    at.sidebar.selectbox(key="model_choice").set_value(two_models).run()
    at.sidebar.button(key="share").click().run()
    key = at.code[0].value.split("?s=")[1]
    fresh = make_app("tiny")
    fresh.query_params["s"] = key
    fresh.run()
    assert not fresh.exception
    assert "llama" in model_line(fresh) and fresh.sidebar.selectbox(key="model_choice").value == two_models


def test_a_student_follows_on_the_teachers_model_and_leaves_by_picking_another(make_app, two_models):
    from ui import keys

    teacher = make_app("tiny")
    teacher.run()
    teacher.sidebar.selectbox(key="model_choice").set_value(two_models).run()
    teacher.sidebar.button(key="class_start").click().run()
    assert not teacher.exception
    student = make_app("tiny", lang="pt")
    student.query_params["class"] = teacher.session_state[keys.CLASS]
    student.run()
    assert not student.exception
    assert student.session_state["model"] == two_models and student.session_state[keys.FOLLOWING]
    student.sidebar.selectbox(key="model_choice").set_value("tiny").run()
    assert not student.session_state[keys.FOLLOWING]  # the student's own pick: exploring now
    assert Translator("pt")("class.left") in [x.value for x in student.toast]


def test_the_credits_and_the_models_own_preset_follow_the_model(make_app, folder_of):
    t = Translator("en")
    (folder_of("gemma2") / "LICENSE").write_text("Terms written for this test.\n")  # the gpt2 folder has none
    for family, slides in (("gpt2", False), ("gemma2", True)):
        at = make_app(str(folder_of(family)))
        at.run()
        at.switch_page("pages/playground/page.py").run()
        assert not at.exception
        button = at.button(key="pg_preset_model")
        assert button.disabled is not slides, family
        at.switch_page("pages/closing/page.py").run()
        key = "closing.credits_other" if slides else "closing.credits_other_no_licence"  # never a file not there
        credit = t(key, model=t("sidebar.folder_model", family=family, folder=family))
        assert credit in caption_values(at) and t("closing.credits") not in caption_values(at)


def test_at_most_two_models_are_held_and_the_least_recently_used_goes(monkeypatch, folder_of):
    from attn import folders
    from ui import served_model

    loads = []
    real = folders.load_folder

    def counted(folder, *a, **kw):
        loads.append(folder)
        return real(folder, *a, **kw)

    monkeypatch.setattr(folders, "load_folder", counted)
    a, b, c = (str(folder_of(f).resolve()) for f in ("llama", "gpt2", "qwen2"))
    for kind in (a, b, a, c):  # c lets go of b, used least recently; a stays
        served_model.get_model(kind)
    assert loads == [a, b, c]
    served_model.get_model(a)  # still held
    served_model.get_model(b)  # loaded again
    assert loads == [a, b, c, b]


def test_an_offered_folder_that_cannot_serve_is_said_once_picked_and_the_default_runs(make_app, monkeypatch,
                                                                                      tmp_path):
    missing = str((tmp_path / "gone").resolve())
    monkeypatch.setenv("ATLAS_MODELS", f"tiny,{missing}")
    t = Translator("en")
    at = make_app("tiny")
    at.run()
    choice = at.sidebar.selectbox(key="model_choice")
    assert choice.options == [t("sidebar.tiny_model"), "gone"]  # unread yet: named by its folder
    choice.set_value(missing).run()
    assert not at.exception
    want = t("model.folder_refused", folder=missing, why=t("model.why_missing"), model=t("sidebar.tiny_model"))
    assert [w.value for w in at.sidebar.warning] == [want]
    assert t("sidebar.tiny_model") in model_line(at)


# --- an encoder: every step reads both ways ------------------------------------------------


def encoder_run(folder, text: str):
    """The ids the app reads and transformers' own eager attention on them (independent of
    the app's capture): the text's first tokens up to the model's positions, closed on its
    [SEP] when cut, and the weights (layers, heads, n, n); also a run on any ids."""
    config = AutoConfig.from_pretrained(str(folder))
    tok = AutoTokenizer.from_pretrained(str(folder))
    net = AutoModelForMaskedLM.from_pretrained(str(folder), attn_implementation="eager").eval()
    ids = tok(text)["input_ids"]
    top = config.max_position_embeddings
    if len(ids) > top:
        ids = ids[:top - 1] + ids[-1:]

    def weights(these):
        with torch.no_grad():
            out = net.base_model(input_ids=torch.tensor([these]), output_attentions=True)
        return torch.stack([w[0] for w in out.attentions]).double()

    return ids, weights(ids), weights, tok


def k_by_loops(row) -> int:
    """Cells, largest first, until they hold 0.9 of the row (its own sum)."""
    total, need = 0.0, 0.9 * float(sum(row))
    for k, x in enumerate(sorted((float(v) for v in row), reverse=True), start=1):
        total += x
        if total >= need - 1e-6:
            return k
    return len(row)


def hops_by_bfs(n: int, w: int, hubs) -> list[list[int]]:
    """Fewest layers from j to i: one layer joins i and j when |i − j| < w or either is a
    hub (both ways); breadth-first search from every j."""
    def near(i, j):
        return abs(i - j) < w or i in hubs or j in hubs

    out = [[-1] * n for _ in range(n)]
    for j in range(n):
        out[j][j], frontier = 0, [j]
        while frontier:
            nxt = []
            for a in frontier:
                for b in range(n):
                    if out[j][b] < 0 and near(a, b):
                        out[j][b] = out[j][a] + 1
                        nxt.append(b)
            frontier = nxt
    return out


def test_the_steps_follow_an_encoder(make_app, folder_of):
    folder = folder_of("bert")
    config = AutoConfig.from_pretrained(str(folder))
    t = Translator("en")
    at = make_app(str(folder))
    at.run()
    assert not at.exception
    ids, attn, run, _ = encoder_run(folder, at.session_state["text"])
    n, layers, heads = len(ids), config.num_hidden_layers, config.num_attention_heads
    assert n == 130  # the sample text is longer than these positions: cut, closed on [SEP]

    # step 1: every pair both ways, the whole square in every layer
    metrics = {m.label: m.value for m in at.metric}
    assert metrics[t("every_pair.metric_causal")] == t.int(n * n) == metrics[t("every_pair.metric_square")]
    assert metrics[t("every_pair.metric_doubled", n2=t.int(2 * n))] == t.int(4 * n * n)
    said = caption_values(at)
    assert t("every_pair.formula_caption_both") in said and not any(t("every_pair.formula_caption") == c for c in said)
    assert any(c.startswith(t("every_pair.model_cells_full_both", cells=t.int(heads * layers * n * n), heads=heads,
                                layers=layers, sliding=0, full=layers, w=0, all_full=0)[:60]) for c in said)
    assert t.int(heads * layers * n * n) in " ".join(said)
    assert t("every_pair.outro_both") in " ".join(m.value for m in at.markdown)  # a million cells at 1,000 tokens

    # step 2: each beginning is a run of its own; its share of useful cells, counted here
    at.switch_page("pages/nearly_empty/page.py").run()
    assert not at.exception
    layer = at.selectbox(key="s2_layer").value
    first = run(ids[:15] + ids[-1:])[layer]  # the first 16 tokens, closed on [SEP]
    k_first = sum(k_by_loops(first[h, i]) for h in range(heads) for i in range(16)) / (heads * 16)
    k_all = sum(k_by_loops(attn[layer, h, i]) for h in range(heads) for i in range(n)) / (heads * n)
    said = " ".join(caption_values(at))
    assert t("nearly_empty.prefix_how_encoder") in said and t("nearly_empty.prefix_how") not in said
    assert f"first 16 tokens, {t.pct(16 * k_first / 256)} of the cells" in said, said
    assert t.pct(n * k_all / (n * n)) in said
    assert t("every_pair.outro_both") not in said  # (step 1's prose, checked there below)

    # step 3: the window both ways; its cells and the weight it keeps, by loops and by hand
    at.switch_page("pages/neighbours/page.py").run()
    assert not at.exception
    w = at.slider(key="s3_w").value
    band = torch.tensor([[abs(i - j) < w for j in range(n)] for i in range(n)])
    metrics = {m.label: m.value for m in at.metric}
    assert metrics[t("neighbours.metric_cells")] == t.int(int(band.sum()))
    assert metrics[t("neighbours.metric_kept_all")] == t.pct(float((attn * band).sum(-1).mean()))
    said = caption_values(at)
    assert t("neighbours.formula_caption_both") in said and t("neighbours.reach_both") in said
    assert any(t("neighbours.model_note_none", layers=layers, n=t.int(n), sliding=0, w=0) == i.value for i in at.info)
    # the reach both ways: the middle of the first 64 tokens, reached from either side — by a
    # breadth-first walk over the stacked windows here (window 3, as many layers as the model's)
    rw, rl = at.slider(key="s3_rw").value, at.slider(key="s3_rl").value
    reached = {32}
    for _ in range(rl):
        reached = {j for i in reached for j in range(64) if abs(i - j) < rw}
    assert metrics[t("neighbours.metric_reach_measured", i=32)] == t.int(len(reached)) == t.int(2 * rl * (rw - 1) + 1)
    assert metrics[t("neighbours.metric_reach_formula_both")] == t.int(len(reached))
    assert t("neighbours.lead_both") in " ".join(m.value for m in at.markdown)

    # step 4: with hubs, any two tokens at most two layers apart (breadth-first search here)
    at.switch_page("pages/hubs/page.py").run()
    assert not at.exception
    hubs = sorted(at.multiselect(key="s4_hubs").value)
    hw, hn = min(at.slider(key="s4_w").value, 4), min(n, 48)
    hop_hubs = [h for h in hubs if h < hn] or [0]
    far_alone = max(max(row) for row in hops_by_bfs(hn, hw, []))
    far_hubs = max(max(row) for row in hops_by_bfs(hn, hw, hop_hubs))
    assert far_hubs <= 2 < far_alone
    values = [m.value for m in at.metric if m.label == t("hubs.metric_max_hops")]
    assert values == [t.int(far_alone), t.int(far_hubs)]  # no causal grid on an encoder
    headings = [h.value for h in at.subheader]
    assert t("hubs.encoder_heading") in headings and t("hubs.sink_heading") not in headings
    assert t("hubs.hops_real") in caption_values(at)
    # each end on its own: [CLS] at 0 and [SEP] at n − 1, each row's weight on it (every layer and
    # head) beside its even share 1/n, called a hub only at twice that
    text = [m.value.replace("\\", "") for m in at.markdown]
    hub_tokens, plain_tokens = [], []
    for p, token in ((0, "[CLS]"), (n - 1, "[SEP]")):
        share = float(attn[..., p].mean())
        key = "hubs.encoder_token_hub" if share >= 2 / n else "hubs.encoder_token_plain"
        said = t(key, token=f"{p} · {token}", share=t.pct(share), even=t.pct(1 / n), ratio=t.float(share * n, 1))
        assert f"- {said}" in text, (said, text)
        (hub_tokens if share >= 2 / n else plain_tokens).append(f"{p} · {token}")
    # why hubs form names no token as such a place unless the shares above find it one (64, 5)
    why = next(m for m in text if "gpt-oss" in m)  # its glossary terms are linked: found by a word of its own
    assert all(token.split(" · ")[1] not in why for token in plain_tokens), why
    key = ("hubs.sink_which_some" if hub_tokens and plain_tokens else "hubs.sink_which_all" if hub_tokens
           else "hubs.sink_which_none")
    assert t(key, hubs=t.list(hub_tokens), plain=t.list(plain_tokens)).replace("\\", "") in text
    # the model with a window of 4: masked words guessed from both sides, said on screen
    at.button(key="s4_swap").click().run()
    assert not at.exception
    own = sum(1 for i in ids if i not in AutoTokenizer.from_pretrained(str(folder)).all_special_ids)
    assert t("swap.masked_note", m=t.int(min(32, own))) in caption_values(at)

    # step 6's sweep: each run reads one copy of the text per hidden word, and says so
    at.switch_page("pages/honest_catch/page.py").run()
    assert not at.exception
    # the control, the two window series at three windows in every layer (no sliding-layer series:
    # BERT slides no window), top-k (oracle, indexer) at the three windows' cells in every layer,
    # the four feature maps in every layer and in one: 1 + 6 + 6 + 8 runs
    assert t("swap.budget_sweep_masked_all", runs=21, n=n, m=t.int(min(32, own))) in caption_values(at)
    assert any(c.startswith(t("honest_catch.uniform_said_both")) for c in caption_values(at))  # equal weights, both
    assert t("swap.lead_masked") in " ".join(m.value for m in at.markdown)

    # the playground: the pattern read both ways by default, and kept as the model reads
    at.switch_page("pages/playground/page.py").run()
    assert not at.exception
    assert at.toggle(key="pg_causal").value is False
    assert t("playground.keep_lead_both") in [m.value for m in at.markdown]

    # step 7: the cost model in the encoder's own shape, the whole square in every layer and head
    at.switch_page("pages/payoff/page.py").run()
    assert not at.exception
    d = config.hidden_size // heads
    traces = [tr for ch in at.get("plotly_chart") for tr in json.loads(ch.proto.spec)["data"]]
    full = next(tr for tr in traces if tr["name"].startswith(t("methods.full")))
    assert full["y"][0] == 512 * 512 * 4 * d * heads * layers
    assert t("payoff.formula_caption_both", layers=layers, h=heads, d=d, w="128", g="4") in caption_values(at)

    # what to take home: the neighbours on either side, and with the first token, by hand
    at.switch_page("pages/closing/page.py").run()
    assert not at.exception
    near = torch.tensor([[abs(i - j) < 16 for j in range(n)] for i in range(n)])
    first = torch.arange(n) == 0
    near_first = near | first[None, :] | first[:, None]  # a hub is seen by every token and sees every token
    text = " ".join(m.value for m in at.markdown)
    assert t("closing.lead_numbers_both", n=t.int(n), sink=t.pct(float(attn[..., 1:, 0].mean())), w=16,
             near=t.pct(float((attn * near).sum(-1).mean())),
             both=t.pct(float((attn * near_first).sum(-1).mean()))) in text, text


@pytest.mark.parametrize("family", ["bert", "llama"])
def test_a_folder_without_its_head_serves_every_page_and_shows_no_number_that_needs_the_head(make_app, tmp_path,
                                                                                             family, monkeypatch):
    """A BertModel checkpoint, a decoder saved as a bare AutoModel: every page's attention is
    there; step 4's hub, step 6's sweep, the playground's swap and the closing page each say
    in one sentence that this folder has no language-model head, with no button and no
    number; the sidebar says it too; the handout's note says it."""
    from ui import analyses, handout

    folder = mf.build(family, tmp_path / family, head=False, tied=False)
    t = Translator("pt")
    at = make_app(str(folder), lang="pt")
    at.run()
    assert t("sidebar.no_head") in " ".join(c.value for c in at.sidebar.caption)
    said = t("swap.no_head")
    for page in WALK:
        if page.id != HOME.id:
            at.switch_page(page_path(page)).run()
        assert not at.exception, (page.id, at.exception[0].message if at.exception else "")
        shown = [i.value for i in at.info] + [m.value for m in at.markdown]
        buttons = [b.key for b in at.button]
        if page.id in ("hubs", "honest-catch", "playground", "closing"):
            assert said in shown, page.id
        assert not {"s4_swap", "s6_swap", "pg_swap"} & set(buttons), (page.id, buttons)
        if page.id == "hubs":
            assert not [m for m in at.metric if m.label == t("swap.w4_ppl")]
            # what can be measured leads; nothing announces a measure the next box refuses (64, 6)
            assert t("hubs.model_text_no_head") in shown and t("hubs.model_text") not in shown
        if page.id == "honest-catch":
            assert t("swap.lead_no_head") in shown
            assert not any(m.startswith(t("swap.lead")[:40]) for m in shown)
        if page.id == "playground":  # nothing runs: no caption says what it runs on
            runs = {t(k, n="§", scope="§").split("§")[0] for k in ("playground.swap_caption",
                                                                  "playground.swap_caption_all")}
            assert not [c.value for c in at.caption if any(c.value.startswith(r) for r in runs)]
    text = at.session_state["text"]
    page = handout.build(t, analyses.get_analysis(text, str(folder)), text, str(folder), {}, device="cpu",
                         model="x")
    import html

    assert html.escape(said) in page


@pytest.mark.parametrize("family, written", [("gemma2", True), ("llama", False)])
def test_step_six_names_how_the_layers_own_attention_was_computed(make_app, folder_of, family, written):
    """A soft-capped layer (Gemma 2) cannot go through the fused kernel: its own attention is
    written out, and the metric says so; a plain layer's goes through the fused kernel."""
    t = Translator("en")
    at = make_app(str(folder_of(family)))
    at.run()
    at.switch_page("pages/honest_catch/page.py").run()
    assert not at.exception
    labels = [m.label for m in at.metric]
    assert (t("honest_catch.metric_written") in labels) is written
    assert (t("honest_catch.metric_fused") in labels) is not written
    # the exact bar, the question and the caption say what ran; the cap is named with its value,
    # on the page and on the model's card in the sidebar (64, 11)
    config = AutoConfig.from_pretrained(str(folder_of(family)))
    cap = getattr(config, "attn_logit_softcapping", None)
    assert (cap is not None) is written
    bars = [tr for ch in at.get("plotly_chart") for tr in json.loads(ch.proto.spec)["data"] if tr.get("type") == "bar"]
    names = list(bars[0]["x"])
    ran = "written" if written else "fused"
    assert names[0] == t(f"honest_catch.name_{ran}", dtype="float32"), names
    assert not any(t("honest_catch.name_fused", dtype="float32") == x for x in names) if written else True
    layer = at.selectbox(key="s6_layer").value
    said = caption_values(at)
    assert (t("honest_catch.errors_dtype_written", dtype="float32") in said) is written
    assert (t("honest_catch.errors_dtype", dtype="float32") in said) is not written
    asked = f"**{t('predict.heading')}** · {t(f'honest_catch.question_{ran}', layer=layer)}"
    assert asked in [m.value for m in at.markdown]
    note = t("honest_catch.softcap_note", layer=layer, cap=t.float(cap, 1)) if written else None
    assert (note in said) if written else not any("tanh" in c for c in said)
    card = " ".join(c.value for c in at.sidebar.caption) + " ".join(m.value for m in at.sidebar.markdown)
    assert (t("sidebar.softcap", cap=f"±{t.float(cap, 1)}") in card) if written else "±" not in card
    shown = (t("honest_catch.metric_written"), t("honest_catch.metric_fused"))
    value = next(m.value for m in at.metric if m.label in shown)
    mantissa, _, power = value.partition(" × 10")  # "1.2 × 10⁻⁷": rounding, far below a percent
    exponent = int(power.translate(str.maketrans("⁻⁰¹²³⁴⁵⁶⁷⁸⁹", "-0123456789")))
    assert float(mantissa) * 10 ** exponent < 1e-4, value


@pytest.mark.parametrize("lang", ["en", "ja", "pt"])
def test_step_one_says_what_the_tokenizer_costs_the_text(make_app, tmp_path, lang):
    """An uncased vocabulary that drops accents and voicing marks (BERT's normaliser) on a
    text it barely knows: step 1 says which characters it reads otherwise and what share
    of the tokens are unknown, each counted here apart from the app."""
    folder = mf.build("bert", tmp_path / "uncased")
    spec = json.loads((folder / "tokenizer.json").read_text())
    spec["normalizer"] = {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": False,
                          "strip_accents": True, "lowercase": True}
    (folder / "tokenizer.json").write_text(json.dumps(spec))
    text = "Pão de queijo パン A window keeps the nearby words."
    t = Translator(lang)
    at = make_app(str(folder), lang)
    at.run()
    at.text_area(key="text").input(text).run()
    assert not at.exception
    # by hand: P → p, ã → a, パ → ハ, A → a (no other character of the text changes)
    changed = {"P": "p", "ã": "a", "パ": "ハ", "A": "a"}
    letters = [c for c in text if not c.isspace()]
    share = sum(1 for c in letters if c in changed) / len(letters)
    tok = AutoTokenizer.from_pretrained(str(folder))
    ids = tok(text)["input_ids"]
    unknown = sum(1 for i in ids if i == tok.unk_token_id)
    said = [t("every_pair.normalised_note", share=t.pct(share),
              examples=t.list(f"{c} → {m}" for c, m in list(changed.items())[:3]))]
    if unknown / len(ids) > 0.03:
        said.insert(0, t("every_pair.unknown_note", share=t.pct(unknown / len(ids)), count=unknown))
    assert unknown > 0  # this vocabulary never saw パ or ハ
    assert t.sentences(said) in caption_values(at), caption_values(at)


def test_step_six_says_where_the_window_stack_is_the_models_own_sliding_layers(make_app, tmp_path):
    """A Gemma 3 folder of 6 layers slides in layers 0–4 and keeps layer 5 full: the window in
    5 of every 6 layers is its own layout, run once as the sliding-layers line, and the note
    says so instead of naming a line that is not drawn (64, 9)."""
    folder = mf.build("gemma3_text", tmp_path / "g6", layers=6)
    config = AutoConfig.from_pretrained(str(folder))
    assert [window_of_layer(config, i) is not None for i in range(6)] == [True] * 5 + [False]
    t = Translator("en")
    at = make_app(str(folder))
    at.run()
    at.switch_page("pages/honest_catch/page.py").run()
    at.button(key="s6_swap").click().run(timeout=300)
    assert not at.exception
    traces = [tr.get("name", "") for ch in at.get("plotly_chart") for tr in json.loads(ch.proto.spec)["data"]]
    line = t("swap.series_window_sliding")
    assert line in traces and not any(name.startswith("window, 5 of every 6") for name in traces)
    said = t("swap.stacks_note_own", exact4="3", exact6="5", line=line)
    assert said in caption_values(at), caption_values(at)
