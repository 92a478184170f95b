"""The app on a model from a folder (ATLAS_MODEL=<folder>): tiny random-weight folders of
each decoder family (harness.model_folders), every page opened through app.py in AppTest.

The expected numbers come from the folder's own config and tokenizer, counted here by
loops, never from the app's code; a folder that cannot serve gives its sentence and the
packaged model runs instead."""

import pytest
from transformers import AutoConfig, AutoTokenizer

from harness import model_folders as mf
from ui.i18n import Translator
from ui.steps import PAGES

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


@pytest.mark.parametrize("family", mf.DECODERS)
def test_every_page_opens_on_each_decoder_family(make_app, folder_of, family):
    folder = folder_of(family)
    t = Translator("en")
    at = make_app(str(folder))
    at.run()
    for page in PAGES:
        if not page.default:
            at.switch_page(page.path).run()
        assert not at.exception, (family, page.path, at.exception[0].message if at.exception else "")
        assert not at.warning or all("cannot be used" not in w.value for w in at.warning), (family, page.path)
        if page.number and page.number <= 7:  # the step's own page ran, not the first one again
            assert t("common.step_of", step=page.number, total=7) in caption_values(at), (family, page.path)


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
    assert metrics[t("step1.metric_n")] == t.int(n)
    assert metrics[t("step1.metric_square")] == t.int(n * n)
    assert metrics[t("step1.metric_causal")] == t.int(causal_cells(n, window))
    assert metrics[t("step1.metric_doubled", n2=t.int(2 * n))] == t.int(causal_cells(2 * n, window))
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
        at.switch_page("pages/4_hubs.py").run()
        assert not at.exception
        said[family] = t("step4.first_is_text") in caption_values(at)
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


def test_an_encoder_folder_is_refused_with_its_reason(make_app, folder_of):
    folder = folder_of("bert")
    at = make_app(str(folder))
    at.run()
    assert not at.exception
    t = Translator("en")
    want = t("model.folder_refused", folder=str(folder.resolve()), why=t("model.why_encoder"), model="Gemma-3-270m")
    assert [w.value for w in at.sidebar.warning] == [want]


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
    assert {m.label: m.value for m in at.metric}[t("step1.metric_n")] == t.int(n)
    at.switch_page("pages/2_nearly_empty.py").run()  # the pick outlives a page switch
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
    for family, slides in (("gpt2", False), ("gemma2", True)):
        at = make_app(str(folder_of(family)))
        at.run()
        at.switch_page("pages/9_playground.py").run()
        assert not at.exception
        button = at.button(key="pg_preset_model")
        assert button.disabled is not slides, family
        at.switch_page("pages/8_closing.py").run()
        credit = t("closing.credits_other", model=t("sidebar.folder_model", family=family, folder=family))
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
