"""The model this process serves: loaded once for every reader (converted first when
needed, with a progress bar), the token budget on this device, and the lines that name
the model and the device in the reader's language."""

from __future__ import annotations

import gc
import threading

import streamlit as st
import torch

from attn import convert, settings
from attn import model as atlas_model
from attn.device import device_info, pick_device

from .i18n import Translator
from .page_run import stop_page
from .reader import tr

_convert_lock = threading.Lock()


def model_kind() -> str:
    return settings.read().model_kind


# --- language and text -----------------------------------------------------------


def token_budget() -> int:
    """Tokens the analysis reads at most (the model's budget on this device)."""
    return atlas_model.token_budget(pick_device())


@st.cache_resource(show_spinner=False)
def get_model(kind: str):
    """One model per process, shared by every reader (it switches its attention only
    under its own lock and restores it). Once loaded, everything alive so far (the
    libraries, the model) is moved out of the garbage collector's sight (gc.freeze):
    it lives as long as the process, and each collection then scans only what readers
    make."""
    threads = settings.read().torch_threads
    if threads:  # a replica's share of the machine's cores (scripts/serve.sh), not every core
        torch.set_num_threads(threads)
    model = atlas_model.tiny() if kind == "tiny" else atlas_model.load()
    gc.collect()
    gc.freeze()
    return model


def _converting(step) -> None:
    """Convert (or repair) the model under the process's lock, with a progress bar."""
    t = tr()
    with _convert_lock:
        bar = st.progress(0.0, text=t("model.converting"))

        def progress(fraction: float, stage: str) -> None:
            bar.progress(min(1.0, fraction), text=t("model.converting") + " — " + t(f"model.stage_{stage}"))

        try:
            step(progress)
        finally:
            bar.empty()


def ensure_model():
    """The model, converting it first (once, with a progress bar) when needed. A copy
    that fails to load is checked in full and converted again once (a damaged file
    whose size still looks right); a copy that cannot be rebuilt stops the page with
    one sentence saying which folder to delete."""
    kind = model_kind()
    try:
        if kind == "gemma" and not convert.is_converted():
            _converting(lambda progress: convert.is_converted() or convert.convert(progress))
        try:
            return get_model(kind)
        except Exception:
            if kind != "gemma":
                raise
            _converting(convert.repair)  # converts again when the copy is damaged
            return get_model(kind)  # a failure now is not the copy's
    except convert.CacheDamaged as exc:
        st.error(tr()("model.damaged", path=str(exc.path)), icon=":material/error:")
        stop_page()


def check_environment() -> None:
    """Stop with one sentence naming an environment variable the server cannot use."""
    try:
        settings.read()
    except settings.SettingError as exc:
        st.error(tr()("app.bad_environment", variable=exc.variable), icon=":material/error:")
        st.stop()


def model_line(t: Translator) -> str:
    """The model, its quantisation and licence, in the reader's language."""
    name = atlas_model.MODEL_LABEL if model_kind() == "gemma" else t("sidebar.tiny_model")
    return t("sidebar.about", model=name, quant=atlas_model.QUANT_LABEL, licence=t("sidebar.licence"))


@st.cache_resource(show_spinner=False)
def _device_info() -> dict:
    return device_info(pick_device())


def device_line() -> str:
    """The device in the reader's language."""
    info, t = _device_info(), tr()
    if info["kind"] == "cuda":
        return t("sidebar.device_cuda", name=info["name"], gib=t.int(info["gib"]), dtype=info["dtype"])
    return t("sidebar.device_cpu", threads=t.int(info["threads"]), dtype=info["dtype"])
