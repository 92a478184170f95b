"""Faults a reader meets as a sentence in their language, never a traceback: a busy,
full or read-only share store, one reader making link after link, a server variable the
app cannot use, a model copy that cannot be rebuilt, a swap that fails for a reason of
its own. Tiny model, through AppTest."""

import pytest

from helpers import PAGE
from server import store as sharestore
from ui import i18n, keys, share

pytestmark = pytest.mark.apptest


def toasts(at) -> list[str]:
    return [t.value for t in at.toast]


def assert_clean(at):
    assert not at.exception, [e.value for e in at.exception]


@pytest.mark.parametrize("reason", sharestore.StoreError.REASONS)
@pytest.mark.parametrize("lang", ["ja", "pt"])
def test_a_link_the_store_cannot_read_just_now_is_a_notice(make_app, monkeypatch, reason, lang):
    def failing(self, key, reader=""):
        raise sharestore.StoreError(reason, "as the store said it")

    monkeypatch.setattr(sharestore.Store, "get", failing)
    at = make_app("tiny", lang)
    at.query_params["s"] = "0123456789ab"
    at.run()
    assert_clean(at)
    assert toasts(at) == [i18n.translate(lang, f"share.store_{reason}")]
    assert at.title[0].value == i18n.translate(lang, "every_pair.title")


@pytest.mark.parametrize("reason", sharestore.StoreError.REASONS)
def test_a_link_that_cannot_be_kept_is_a_notice_and_no_dialog(make_app, monkeypatch, reason):
    def failing(self, view, address=None, maker=""):
        raise sharestore.StoreError(reason)

    monkeypatch.setattr(sharestore.Store, "put", failing)
    at = make_app("tiny", "pt")
    at.run()
    at.sidebar.button(key="share").click().run()
    assert_clean(at)
    assert toasts(at) == [i18n.translate("pt", f"share.store_{reason}")]
    assert not at.code  # no link was shown


def test_one_reader_cannot_make_links_without_end(make_app, monkeypatch, tmp_path):
    monkeypatch.setattr(share, "LINKS_PER_SESSION", 3)
    mine = sharestore.Store(tmp_path / "links.sqlite3")  # counted alone: no other test's links evicted
    monkeypatch.setattr(share, "store", lambda: mine)
    at = make_app("tiny", "en")
    at.run()
    before = share.store().count()
    links = []
    for i in range(3):
        at.sidebar.text_area(key="text").input(f"Text number {i} of one busy reader, long enough.").run()
        at.sidebar.button(key="share").click().run()
        links.append(at.code[0].value)
    assert len(set(links)) == 3 and share.store().count() == before + 3
    at.sidebar.text_area(key="text").input("A fourth text: one link too many for this session.").run()
    at.sidebar.button(key="share").click().run()
    assert_clean(at)
    assert toasts(at) == [i18n.translate("en", "share.too_many", n="3")]
    assert not at.code and share.store().count() == before + 3
    at.sidebar.text_area(key="text").input("Text number 2 of one busy reader, long enough.").run()
    at.sidebar.button(key="share").click().run()  # a link already made: the same one, no new entry
    assert at.code[0].value == links[2]


@pytest.mark.parametrize("variable", ["ATLAS_MAX_TOKENS", "ATLAS_ANALYSIS_MB"])
def test_a_server_variable_the_app_cannot_use_is_one_sentence_naming_it(make_app, monkeypatch, variable):
    monkeypatch.setenv(variable, "lots")
    at = make_app("tiny", "ja")
    at.run()
    assert_clean(at)
    assert [e.value for e in at.error] == [i18n.translate("ja", "app.bad_environment", variable=variable)]


def test_a_model_copy_that_cannot_be_rebuilt_names_the_folder_to_delete(make_app, monkeypatch, tmp_path):
    from attn import convert, converted

    monkeypatch.setattr(converted, "is_converted", lambda *a, **k: False)

    def cannot(progress=None, **kw):
        raise convert.CacheDamaged(tmp_path / "gemma", "a file could not be removed")

    monkeypatch.setattr(convert, "convert", cannot)
    at = make_app("gemma", "pt")
    at.run()
    assert_clean(at)
    assert [e.value for e in at.error] == [i18n.translate("pt", "model.damaged", path=str(tmp_path / "gemma"))]
    assert not at.get("progress")  # the conversion's bar went away


def test_a_copy_that_fails_to_load_is_repaired_once_then_loads(make_app, monkeypatch, fresh_caches):
    """A damaged weight file of the right size passes the quick check and fails the
    load: the app checks in full, converts again (repair) and loads the mended copy."""
    from attn import convert, converted
    from attn import loading

    calls = []
    monkeypatch.setattr(converted, "is_converted", lambda *a, **k: True)
    monkeypatch.setattr(convert, "repair", lambda progress=None: calls.append("repair"))

    def load(**kw):  # as served_model calls it (with what it hears of each stage)
        calls.append("load")
        if calls.count("load") == 1:
            raise OSError("unable to read the weights (truncated)")
        return loading.tiny(device="cpu")

    monkeypatch.setattr(loading, "load", load)
    at = make_app("gemma", "en")  # fresh_caches: no model loaded before, and the stand-in serves no later test
    at.run()
    assert_clean(at)
    assert calls == ["load", "repair", "load"] and not at.error


@pytest.mark.parametrize(("raised", "key"), [(RuntimeError("out of memory"), "swap.failed"),
                                             (None, "swap.too_short")])
def test_a_swap_that_fails_says_why(make_app, monkeypatch, raised, key):
    from attn import swap

    def failing(model, text, swaps, **kw):
        raise raised if raised is not None else swap.TextTooShort("too short")

    monkeypatch.setattr(swap, "sweep", failing)
    at = make_app("tiny", "en")
    at.run()
    at.sidebar.text_area(key="text").input(f"A text of our own for a failing swap ({key}), long enough.").run()
    at.switch_page(PAGE["honest-catch"]).run()
    at.button(key="s6_swap").click().run(timeout=300)
    assert_clean(at)
    assert i18n.translate("en", key) in [e.value for e in at.error]
    if raised is not None:
        assert any("RuntimeError: out of memory" in c.value for c in at.code)
    assert not at.get("progress")  # the run's bar went away


def test_a_live_benchmark_that_fails_says_so_and_leaves_no_bar(make_app, monkeypatch):
    from attn import bench

    def failing(*args, **kwargs):
        raise RuntimeError("the device went away")

    monkeypatch.setattr(bench, "run_plan", failing)
    at = make_app("tiny", "ja")
    at.run()
    at.switch_page(PAGE["payoff"]).run()
    at.button(key="s7_run").click().run(timeout=300)
    assert_clean(at)
    assert i18n.translate("ja", "payoff.failed") in [e.value for e in at.error]
    assert any("RuntimeError: the device went away" in c.value for c in at.code)
    assert not at.get("progress")


def test_with_postgresql_out_of_reach_the_steps_work_and_sharing_and_classes_say_so(make_app, monkeypatch):
    """ATLAS_DATABASE_URL names a server that is not there: every step still works (they
    need no database); sharing and starting a class each say, in the reader's
    language, that the store is away — and the URL's password is shown nowhere."""
    from harness.serve import free_port
    from server import pgstore
    from ui.classroom import reset_caches

    monkeypatch.setenv("ATLAS_DATABASE_URL", f"postgresql://atlas:pw-never-shown@127.0.0.1:{free_port()}/atlas")
    share.store.clear()
    reset_caches()
    try:
        at = make_app("tiny", "pt")
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        assert at.metric  # step 1 measured the text as always
        said = i18n.translate("pt", "share.store_unavailable")
        at.sidebar.button(key="share").click().run()
        assert said in [t.value for t in at.toast]
        at.sidebar.button(key="class_start").click().run()
        assert not at.exception and keys.CLASS not in at.session_state
        assert said in [t.value for t in at.toast]
        shown = " ".join(str(e.value) for kind in (at.toast, at.markdown, at.caption, at.error, at.warning)
                         for e in kind)
        assert "pw-never-shown" not in shown
    finally:
        share.store.clear()
        reset_caches()
        pgstore.close_all()
