"""Settings read from the environment: a value that does not fit names its variable."""

import pytest

from attn import settings


WHOLE_NUMBERS = [("ATLAS_MAX_TOKENS", "max_tokens", "512", bad) for bad in ["abc", "0", "-5", "1.5", "1e3", " "]]
WHOLE_NUMBERS += [("ATLAS_TORCH_THREADS", "torch_threads", "3", bad) for bad in ["0", "-2", "many", "1.5"]]


@pytest.mark.parametrize("variable, field, good, bad", WHOLE_NUMBERS)
def test_a_whole_number_setting_refuses_anything_else_and_names_its_variable(monkeypatch, variable, field, good, bad):
    monkeypatch.setenv(variable, good)
    assert getattr(settings.read(), field) == int(good)
    monkeypatch.setenv(variable, bad)
    with pytest.raises(settings.SettingError) as caught:
        settings.read()
    error = caught.value
    assert isinstance(error, ValueError)
    assert (error.variable, error.value) == (variable, bad)
    assert str(error).startswith(f"{variable}={bad!r} does not fit") and "whole number" in str(error)


@pytest.mark.parametrize("bad", ["abc", "0", "-1", "nan", "inf", "1e-9", "700MB"])
def test_an_analysis_budget_that_is_not_a_positive_number_names_the_variable(monkeypatch, bad):
    monkeypatch.setenv("ATLAS_ANALYSIS_MB", "1.5")
    assert settings.read().analysis_bytes == 1.5 * 2**20
    monkeypatch.delenv("ATLAS_ANALYSIS_MB")
    assert settings.read().analysis_bytes == 1000 * 2**20  # its default, as documented
    monkeypatch.setenv("ATLAS_ANALYSIS_MB", bad)
    with pytest.raises(settings.SettingError) as caught:
        settings.read()
    error = caught.value
    assert (error.variable, error.value) == ("ATLAS_ANALYSIS_MB", bad)
    assert str(error).startswith(f"ATLAS_ANALYSIS_MB={bad!r} does not fit") and "megabytes" in str(error)


@pytest.mark.parametrize(("raw", "on"), [(None, True), ("1", True), ("", True), ("0", False), ("off", False),
                                         ("No", False)])
def test_the_background_compile_is_on_unless_turned_off(monkeypatch, raw, on):
    if raw is None:
        monkeypatch.delenv("ATLAS_FLEX_WARMUP", raising=False)
    else:
        monkeypatch.setenv("ATLAS_FLEX_WARMUP", raw)
    assert settings.read().flex_warmup is on


def test_with_the_background_compile_off_the_app_starts_none_and_with_it_on_starts_one(monkeypatch):
    """What ATLAS_FLEX_WARMUP does to the app: off, nothing is compiled in the background;
    on, the warm-up starts (its thread stood in for: nothing is compiled here)."""
    from ui import warmup

    started = []
    monkeypatch.setattr(warmup, "_flex_warmup", lambda: started.append("compile") or "a thread")
    monkeypatch.setenv("ATLAS_FLEX_WARMUP", "0")
    assert warmup.start_flex_warmup() is None and started == []
    monkeypatch.setenv("ATLAS_FLEX_WARMUP", "1")
    assert warmup.start_flex_warmup() == "a thread" and started == ["compile"]


@pytest.mark.parametrize("bad", ["lots", "0", "63", "1000", "-1024"])
def test_a_live_benchmark_length_that_is_not_a_power_of_two_names_the_variable(monkeypatch, bad):
    monkeypatch.setenv("ATLAS_LIVE_MAX_N", bad)
    with pytest.raises(settings.SettingError) as err:
        settings.read()
    assert err.value.variable == "ATLAS_LIVE_MAX_N"


def test_the_live_benchmark_doubles_up_to_its_largest_length(monkeypatch):
    from attn import bench

    monkeypatch.setenv("ATLAS_LIVE_MAX_N", "1024")
    assert bench.live_sizes("cpu") == [128, 256, 512, 1024]
    monkeypatch.delenv("ATLAS_LIVE_MAX_N")
    assert bench.live_sizes("cpu") == [512, 1024, 2048, 4096]


def test_the_store_has_settings_of_its_own_and_a_database_url_never_shows_its_password(monkeypatch, tmp_path):
    monkeypatch.setenv("ATLAS_CACHE_DIR", str(tmp_path / "models"))
    monkeypatch.delenv("ATLAS_STORE_PATH", raising=False)
    monkeypatch.delenv("ATLAS_DATABASE_URL", raising=False)
    assert settings.read().store_path == tmp_path / "models" / "shared-views.sqlite3"  # beside the model, as before
    assert settings.read().database_url is None
    monkeypatch.setenv("ATLAS_STORE_PATH", str(tmp_path / "links" / "room.sqlite3"))
    assert settings.read().store_path == tmp_path / "links" / "room.sqlite3"  # a model copy shared, a store not
    monkeypatch.setenv("ATLAS_DATABASE_URL", "postgresql://atlas:s3cret@db.example:5432/atlas?sslmode=require")
    assert settings.read().database_url.endswith("?sslmode=require")
    monkeypatch.setenv("ATLAS_DATABASE_URL", "mysql://atlas:s3cret@db.example/atlas")
    with pytest.raises(settings.SettingError) as caught:
        settings.read()
    assert caught.value.variable == "ATLAS_DATABASE_URL" and "s3cret" not in str(caught.value)
    assert "postgresql://" in str(caught.value)
    assert settings.hide_password("postgresql://a:pw@h/db") == "postgresql://a:***@h/db"



def test_the_sidebar_says_the_threads_torch_will_use_even_before_the_model_is_loaded(monkeypatch, fresh_caches):
    """A replica given ATLAS_TORCH_THREADS=1 says "1 thread" from its first page, drawn
    before any model is loaded (the sidebar's device line was cached with every core's
    threads then, while torch later ran on one)."""
    import torch

    from ui import served_model

    before = torch.get_num_threads()
    monkeypatch.setenv("ATLAS_TORCH_THREADS", "1")
    try:
        torch.set_num_threads(2)  # as a process starts on 2 cores
        assert served_model.device_line().startswith("CPU · 1 thread · ")
        assert torch.get_num_threads() == 1  # and torch computes on that one
    finally:
        torch.set_num_threads(before)
