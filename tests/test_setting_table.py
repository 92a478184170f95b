"""The one table of settings (ui.setting_table), walked row by row: every page's widget
takes the range and the default its row gives, every setting comes back through a share
link, and every value a widget would refuse is refused by the link with a notice."""

import pytest

from attn import loading
from helpers import HOME, PAGE, PAGES, WALK, page_path
from ui import i18n, measures, model_swaps, setting_table
from ui.samples import sample_text
from ui.setting_rows import WIDEST, Context, Dims, Setting, window_hi
from pages import playground

pytestmark = pytest.mark.apptest

TEXT = sample_text("en")
PAGE_OF = {p.id: page_path(p) for p in WALK}  # a page's id → its file, as AppTest switches to it
SWEEP = "honest-catch"  # the page whose sweep's own settings come after its run


@pytest.fixture(scope="module")
def dims():
    a = loading.tiny(device="cpu").analyze(TEXT)
    return Dims.of(a)


def widget_of(at, key: str):
    """The widget drawn for a setting's key, whatever its kind (None when not drawn)."""
    for kind in ("slider", "number_input", "selectbox", "radio", "select_slider", "multiselect", "toggle",
                 "text_input", "button_group"):
        found = [w for w in getattr(at, kind) if getattr(w, "key", None) == key]
        if found:
            return found[0]
    return None


DRAWN_AS = {"slider": "Slider", "number": "NumberInput", "selectbox": "Selectbox", "radio": "Radio",
            "select_slider": "SelectSlider", "multiselect": "Multiselect", "toggle": "Toggle", "text": "TextInput",
            "pills": "ButtonGroup"}  # a row's ``widget`` as AppTest names what Streamlit drew


def opened(make_app, page: str, query: dict | None = None):
    at = make_app("tiny", "en")
    for k, v in (query or {}).items():
        at.query_params[k] = v
    at.run()
    if page != HOME.id:
        at.switch_page(PAGE_OF[page]).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def other_value(row: Setting, d: Dims):
    """A value its widget takes on the text that is not its default (None for guesses,
    whose options are the question's)."""
    first = row.default(d, Context(lambda k: list(range(k))))
    if row.takes == "int":
        lo, hi = row.bounds(d)
        return hi if hi != first else lo
    if row.takes == "choice":
        return next(c for c in reversed(list(row.choices(d))[:64]) if c != first)
    if row.takes == "many":
        return [1, 2] if list(first) != [1, 2] else [2]
    if row.takes == "bool":
        return not first
    if row.takes == "text":
        return "7"
    return None


def test_the_table_has_each_setting_once_and_each_page_draws_its_own(make_app, dims):
    model_swaps.forget_all()  # step 6's sweep unmeasured, whatever ran before: its button is there
    rows = [r.key for r in setting_table.TABLE]  # the rows themselves, not a dict made of them
    assert len(rows) == len(set(rows))
    for page in sorted({r.page for r in setting_table.TABLE}):
        at = opened(make_app, page)
        if page == SWEEP:
            at.button(key="s6_swap").click().run(timeout=300)  # the sweep's own settings come after its run
            model_swaps.forget_all()  # the next test (and order) starts unmeasured
        for key in setting_table.keys(page):
            if key == "pg_hubs":  # drawn when the hubs are chosen by hand
                at.radio(key="pg_hub_mode").set_value("chosen").run()
            assert widget_of(at, key) is not None, f"page {page} draws no widget for {key}"


def test_every_widget_starts_at_its_rows_default_and_takes_exactly_its_range(make_app, dims):
    """The widget's own bounds and options, read from what Streamlit drew, against the
    row (a second definition of a range anywhere would show here) — every row, those drawn
    only after a choice too (the hubs chosen by hand, the sweep's settings after its run)."""
    model_swaps.forget_all()
    for page in sorted({r.page for r in setting_table.TABLE}):
        at = opened(make_app, page)
        if page == SWEEP:
            at.button(key="s6_swap").click().run(timeout=300)  # the sweep's own settings come after its run
            model_swaps.forget_all()
        for key in setting_table.keys(page):
            if key == "pg_hubs":  # drawn when the hubs are chosen by hand (its mode was checked before)
                at.radio(key="pg_hub_mode").set_value("chosen").run()
            row, w = setting_table.row(key), widget_of(at, key)
            assert w is not None, f"page {page} draws no widget for {key}"
            if row.takes == "guess":  # its options are the question's: it starts unanswered
                assert w.value is None, key
                continue
            assert type(w).__name__ == DRAWN_AS[row.widget], (key, type(w).__name__)  # the row says what it is
            proto = w.proto
            if row.takes == "int":
                lo, hi = row.bounds(dims)
                assert (proto.min, proto.max) == (lo, hi), key
            elif row.takes in ("choice", "many") and hasattr(proto, "options"):
                assert len(proto.options) == len(list(row.choices(dims))), key
            first = row.default(dims, measures.setting_context(TEXT, "tiny"))
            value = w.value if not isinstance(w.value, tuple) else list(w.value)
            assert value == first or (isinstance(first, list) and sorted(value) == sorted(first)), key


def test_every_setting_comes_back_through_a_share_link(make_app, dims):
    from ui import share

    wanted = {r.key: other_value(r, dims) for r in setting_table.TABLE if r.takes != "guess"}
    wanted["pg_hub_mode"] = "chosen"  # so that pg_hubs is drawn
    wanted["pg_on"] = ["window", "hubs", "random"]
    assert all(setting_table.fits(k, v, type("A", (), {"n": dims.n, "n_layers": dims.n_layers,
                                                       "n_heads": dims.n_heads})()) for k, v in wanted.items())
    key = share.store().put({"text": TEXT, "lang": "en", "step": 1, "presenter": False, "settings": wanted})
    for page in sorted({r.page for r in setting_table.TABLE}):
        at = opened(make_app, page, {"s": key})
        for k in setting_table.keys(page):
            if k in wanted:
                got = at.session_state[k]
                assert (list(got) if isinstance(got, tuple) else got) == wanted[k], k


REFUSED_BY_KIND = {  # values no widget of that kind takes, on any text
    "int": [True, "3", 3.5, [3], None, -1],
    "choice": [["en"], {"a": 1}, "no such option", 10**9],
    "many": ["0", [[0]], [0, 0], [-1], [10**9]],
    "bool": [1, "true", None, [True]],
    "text": [5, ["0"], "x" * (playground.SEED_CHARS + 1)],
    "guess": [["a"], {"b": 2}, float("inf")],
}


@pytest.mark.parametrize("row", setting_table.TABLE, ids=lambda r: r.key)
def test_the_link_check_refuses_every_value_of_the_wrong_kind(row):
    for value in REFUSED_BY_KIND[row.takes]:
        assert not setting_table.valid(row.key, value), (row.key, value)
    assert setting_table.valid(row.key, row.default(WIDEST, Context()))


SHORT = "A short text of our own, so that a window of the longest text does not fit it."


def test_a_value_out_of_the_texts_range_is_refused_on_its_page_with_a_notice(make_app):
    """Past what this text and model take (valid for some text, so the link keeps it):
    each page drops it before its widget is drawn, says so, and starts from its default —
    but a window, kept at the largest this text takes."""
    from ui import share

    dims = Dims.of(loading.tiny(device="cpu").analyze(SHORT))

    beyond = {"s1_token": dims.n + 5, "s3_w": window_hi(512, dims.n) + 1, "s3_rl": dims.n_layers + 1,
              "s4_hubs": [0, dims.n], "s6_head": dims.n_heads, "s1_layer": dims.n_layers, "pg_rl": dims.n_layers + 1,
              "pg_layer": dims.n_layers + 3}
    assert all(setting_table.valid(k, v) for k, v in beyond.items())  # the link keeps them
    key = share.store().put({"text": SHORT, "lang": "en", "step": 1, "presenter": False, "settings": beyond})
    dropped = i18n.translate("en", "share.dropped")
    ctx = measures.setting_context(SHORT, "tiny")
    for page in sorted({setting_table.row(k).page for k in beyond}):
        at = opened(make_app, page, {"s": key})
        assert dropped in [t.value for t in at.toast], page
        for k in (k for k in beyond if setting_table.row(k).page == page):
            got = at.session_state[k]
            first = window_hi(512, dims.n) if k == "s3_w" else setting_table.row(k).default(dims, ctx)
            assert (list(got) if isinstance(got, tuple) else got) == first, k


def test_values_of_the_wrong_kind_in_a_link_never_fail_a_page(make_app):
    """A stored link with lists where words belong, a boolean step, a number past the
    model: each page opens, says the link did not fit, and uses its defaults."""
    from ui import share

    bad = {"text": TEXT, "lang": ["en"], "step": True, "presenter": "yes",
           "settings": {"s5_feature": ["elu"], "pg_on": [["window"]], "pg_rl": 19, "s2_p": [0.9], "s1_head": {"h": 1},
                        "pg_seed": 7, "pg_local": 1}}
    key = share.store().put(bad)
    for page in PAGES:
        at = make_app("tiny", "en")
        at.query_params["s"] = key
        at.run()
        if page != PAGE["every-pair"]:
            at.switch_page(page).run()
        assert not at.exception, (page, [e.value for e in at.exception])
    at = make_app("tiny", "en")
    at.query_params["s"] = key
    at.run()
    assert i18n.translate("en", "share.bad_values") in [t.value for t in at.toast]
    assert at.title[0].value == i18n.translate("en", "every_pair.title")  # `true` is no step: the first page
    assert "pg_local" not in at.session_state or at.session_state["pg_local"] != 1  # below its widget's minimum


def test_every_setting_is_drawn_from_its_row_by_one_helper():
    """No page names a setting's key to a widget, nor keeps it itself (persist_state):
    ui.widgets.setting draws each from its row. (The guesses are the questions' radios,
    ui.step_page's; the text area is app.py's.)"""
    import pathlib

    root = pathlib.Path(__file__).resolve().parent.parent
    sources = [p for p in root.glob("ui/**/*.py") if p.name != "widgets.py"]  # the pages' files among them
    for path in sources:
        src = path.read_text(encoding="utf-8")
        assert "persist_state" not in src or path.name == "step_page.py", path.name
        for row in setting_table.TABLE:
            if row.takes != "guess":
                assert f'key="{row.key}"' not in src, (path.name, row.key)


def test_a_link_made_when_pages_were_numbered_opens_the_same_page_and_a_new_link_names_its_id(make_app):
    """A share link the release before made (``"step": 3``, a number) opens step 3 — the
    neighbours' page — with its settings; a link made now names the page by its id."""
    from server.class_layout import NUMBERED_PAGES
    from ui import share

    old = share.store().put({"text": TEXT, "lang": "pt", "step": 3, "presenter": False, "model": "tiny",
                             "settings": {"s3_w": 7}})
    at = make_app("tiny", "en")
    at.query_params["s"] = old
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.title[0].value == i18n.translate("pt", "neighbours.title") and at.slider(key="s3_w").value == 7
    assert NUMBERED_PAGES[3] == "neighbours"
    at.sidebar.button(key="share").click().run()
    made = next(c.value for c in at.code if "?s=" in c.value)
    assert made.split("?s=")[0].endswith("/neighbours")
    view = share.store().get(made.split("?s=")[1])
    assert view["page"] == "neighbours" and "step" not in view


def test_a_window_past_a_shorter_text_is_kept_at_its_end_and_other_numbers_are_not():
    """A reader's window of 64 on a text of 20 tokens is 20 (its slider's end); a layer past
    the model is no layer of it: dropped, the widget starts from its default."""
    dims_short = Dims(n=20, n_layers=4, n_heads=4)
    a = type("A", (), {"n": 20, "n_layers": 4, "n_heads": 4})()
    assert Dims.of(a) == dims_short
    assert setting_table.kept("s3_w", 64, a) == 20
    assert setting_table.kept("s3_w", 16, a) == 16
    assert setting_table.kept("s3_w", 0, a) == 1
    assert setting_table.kept("s3_rl", 9, a) is None
    assert setting_table.kept("s3_w", "16", a) is None  # a word is no window
