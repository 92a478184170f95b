"""The model this process serves: loaded once for every reader (converted first when
needed, with a progress bar; or read from the folder ``ATLAS_MODEL`` names, falling back
to the packaged model with one sentence when that folder cannot serve), the token budget
on this device, and the lines that name the model and the device in the reader's
language."""

from __future__ import annotations

import gc
import logging
import threading
import time
from pathlib import Path

import streamlit as st
import torch
from streamlit.runtime.scriptrunner import get_script_run_ctx

from attn import convert, folders, settings
from attn import converted as converted_copy
from attn import budgets, loading
from attn.device import device_info, pick_device

from . import keys, page_run
from .i18n import Translator
from .page_run import stop_page
from .session import tr

_convert_lock = threading.Lock()
_log = logging.getLogger(__name__)
# folders that could not serve, by path: the process runs the packaged model instead
# the model ui.warm's thread is loading just now (None: none), since when (time.monotonic())
# and what it reads now ("tokenizer", "weights"; "": the libraries): a page opened meanwhile says so
background = {"loading": None, "since": 0.0, "stage": ""}
LOADING_TICK = 0.25  # seconds between two updates of what a page opened while loading says
_refused: dict[str, folders.ModelFolderError] = {}
_budgets: dict[str, int] = {}  # each loaded model's token budget
_imported: set[str] = set()  # folders whose model family was imported (folders.import_family)
CONVERTED_SECONDS = 5.0  # a converted copy found whole is not looked at again for this long
_converted_ok: list = [None, 0.0]  # [the check that found it whole, when]


def is_folder(model_id: str) -> bool:
    """A model read from a folder (``ATLAS_MODEL=<folder>``), not a packaged one."""
    return model_id not in ("gemma", "tiny")


def offered() -> list[str]:
    """The models a reader may pick (ATLAS_MODEL's first, then ATLAS_MODELS'), less the
    folders that could not serve; the packaged Gemma first where ATLAS_MODEL's could not."""
    configured = settings.read().models
    out = [k for k in configured if k not in _refused]
    if configured[0] in _refused and "gemma" not in out:
        out.insert(0, "gemma")
    return out


def measured_as(model_id: str) -> str:
    """What a number made by a model records of it: its id, and for a folder its weights'
    fingerprint (the same path with other weights is another model)."""
    return f"{model_id}#{folders.fingerprint(model_id)}" if is_folder(model_id) else model_id


def default_model() -> str:
    """The model a reader runs until they pick another (and every background task)."""
    return offered()[0]


def model_id() -> str:
    """The model this reader's pages run: their pick among :func:`offered`, else the
    default. Every cache is keyed by it (a folder by its absolute path). Outside a page
    run (a background thread) the default."""
    chosen = st.session_state.get(keys.MODEL) if get_script_run_ctx(suppress_warning=True) else None
    return chosen if chosen is not None and chosen in offered() else default_model()


def choose(model_id) -> bool:
    """Put a model picked elsewhere (a share link, a class) in this session; False when
    this server does not offer it (the reader's own model stays)."""
    if not isinstance(model_id, str) or model_id not in offered():
        return False
    st.session_state[keys.MODEL] = model_id
    page_run.set_by_app(keys.MODEL_CHOICE, model_id)
    return True


def on_model_change() -> None:
    """on_change of the sidebar's model selectbox: the reader's own change (one from the
    browser's past is put back instead: ``page_run.stale``)."""
    if page_run.stale(keys.MODEL_CHOICE):
        return
    st.session_state[keys.MODEL] = st.session_state[keys.MODEL_CHOICE]
    st.session_state.setdefault(keys.CHANGED, set()).add(keys.MODEL)


def refusals() -> list[folders.ModelFolderError]:
    """Why configured folders do not serve (empty: every one does)."""
    return [_refused[k] for k in settings.read().models if k in _refused]


# --- language and text -----------------------------------------------------------


def token_budget() -> int:
    """Tokens the analysis reads at most (the model's budget on this device, once known)."""
    return _budgets.get(model_id()) or budgets.token_budget(pick_device())


@st.cache_resource(show_spinner=False, max_entries=2)
def get_model(model_id: str):
    """One model per process, shared by every reader (it switches its attention only
    under its own lock and restores it). Once loaded, everything alive so far (the
    libraries, the model) is moved out of the garbage collector's sight (gc.freeze):
    it lives as long as the process, and each collection then scans only what readers
    make."""
    use_threads()
    if model_id == "tiny":
        model = loading.tiny()
    elif model_id == "gemma":
        model = loading.load(on_stage=lambda stage: background.update(stage=stage))
    else:
        try:
            model = folders.load_folder(model_id)
        except Exception as exc:  # anything else the folder's files make transformers or torch raise
            if isinstance(exc, folders.ModelFolderError):
                raise
            raise folders.ModelFolderError(model_id, "broken", f"{type(exc).__name__}: {exc}") from exc
    _budgets[model_id] = model.max_tokens
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


def resolve_folder() -> None:
    """Load this reader's folder model (with a wait shown) before the page reads which
    model serves; a folder that cannot serve is remembered, said once in the log, and
    the default serves instead (:func:`folder_notice` says why on every page)."""
    if not _imported:  # every offered folder's family, before FlexAttention's warm-up compiles
        _imported.update(k for k in settings.read().models if is_folder(k))
        for k in _imported:
            folders.import_family(k)
    while is_folder(chosen := model_id()):
        try:
            with st.spinner(tr()("model.loading_folder", folder=Path(chosen).name)):
                get_model(chosen)
            return
        except folders.ModelFolderError as exc:
            _refused[chosen] = exc  # model_id() no longer offers it: the next one is tried
            _log.warning("model folder refused, serving another model: %s", exc)


def model_name(t: Translator, model_id: str) -> str:
    """A model's short name, for the sidebar's choice."""
    if model_id == "gemma":
        return loading.MODEL_LABEL
    if model_id == "tiny":
        return t("sidebar.tiny_model")
    try:
        family = _described(model_id)["family"]
    except (OSError, ValueError):  # offered, not yet tried, and unreadable: its sentence comes once picked
        return Path(model_id).name
    return t("sidebar.folder_model", family=family, folder=Path(model_id).name)


def folder_notice(t: Translator) -> None:
    """One sentence per configured folder that cannot serve: the folder, why, and the
    model that runs instead (nothing when every one serves)."""
    for exc in refusals():
        f = exc.figures
        why = t(f"model.why_{exc.reason}", parameters=t.int(f.get("parameters", 0)),
                need=t.float(f.get("need", 0) / 2**30), have=t.float(f.get("have", 0) / 2**30))
        st.warning(t("model.folder_refused", folder=exc.folder, why=why, model=model_name(t, default_model())),
                   icon=":material/warning:")


def model_choice(t: Translator) -> None:
    """The sidebar's choice of model, where the server offers more than one."""
    kinds = offered()
    if len(kinds) < 2:
        return
    st.session_state[keys.MODEL_CHOICE] = model_id()  # a share link or a class may have set it
    page_run.drawing(keys.MODEL_CHOICE)
    st.selectbox(t("sidebar.model"), kinds, key=keys.MODEL_CHOICE, format_func=lambda k: model_name(t, k),
                 on_change=on_model_change, help=t("sidebar.model_help"))


def converted() -> bool:
    """Whether the packaged model's converted copy is whole (``converted_copy.is_converted``: a
    stat of each of its files), looked at once every CONVERTED_SECONDS at most: under a
    hundred page runs at once each file-system call gives up the interpreter lock and waits
    to get it back (5.7 % of a following student's page run in a profile). A copy damaged
    meanwhile fails its load, which checks in full and repairs it (``ensure_model``)."""
    check = converted_copy.is_converted
    found_by, when = _converted_ok
    if found_by is check and time.monotonic() - when < CONVERTED_SECONDS:
        return True
    ok = check()
    _converted_ok[:] = [check, time.monotonic()] if ok else [None, 0.0]
    return ok


def ensure_model():
    """The model, converting it first (once, with a progress bar) when needed. A copy
    that fails to load is checked in full and converted again once (a damaged file
    whose size still looks right); a copy that cannot be rebuilt stops the page with
    one sentence saying which folder to delete."""
    chosen = model_id()
    if is_folder(chosen):
        try:
            return get_model(chosen)
        except folders.ModelFolderError as exc:  # not yet tried this run (resolve_folder tries first)
            _refused[chosen] = exc
            st.rerun()  # the page again, on the model that serves instead, with the sentence
    try:
        if chosen == "gemma" and not converted():
            _converting(lambda progress: converted_copy.is_converted() or convert.convert(progress))
        try:
            if background["loading"] == chosen:  # the server has just started: its own thread loads the model
                loading_said(tr())
            return get_model(chosen)
        except Exception:
            if chosen != "gemma":
                raise
            _converting(convert.repair)  # converts again when the copy is damaged
            return get_model(chosen)  # a failure now is not the copy's
    except convert.CacheDamaged as exc:
        st.error(tr()("model.damaged", path=str(exc.path)), icon=":material/error:")
        stop_page()


def loading_said(t: Translator) -> None:
    """While the start's thread loads the model: what it reads now and for how long, said
    until it has loaded it (or given up: the page then loads it itself)."""
    slot = st.empty()
    while background["loading"] is not None:
        stage = background["stage"]
        slot.info(t("model.loading", stage=t(f"model.stage_read_{stage}") if stage else t("model.stage_libraries"),
                    seconds=t.int(time.monotonic() - background["since"])), icon=":material/hourglass_top:")
        time.sleep(LOADING_TICK)
    slot.empty()


def reads_back_only() -> bool:
    """Whether the served model looks back only (a decoder); False: both ways (an encoder)."""
    return ensure_model().causal


def check_environment() -> None:
    """Stop with one sentence naming an environment variable the server cannot use."""
    try:
        settings.read()
    except settings.SettingError as exc:
        st.error(tr()("app.bad_environment", variable=exc.variable), icon=":material/error:")
        st.stop()


@st.cache_resource(show_spinner=False)
def _described(folder: str) -> dict:
    return folders.describe(folder)


def credits(t: Translator) -> str:
    """The closing page's (and the handout's) credit line for the model this reader ran;
    a folder without a licence file is not sent to one."""
    chosen = model_id()
    if chosen == "gemma":
        return t("closing.credits")
    if is_folder(chosen) and _described(chosen)["licence"] is None:
        return t("closing.credits_other_no_licence", model=model_name(t, chosen))
    return t("closing.credits_other", model=model_name(t, chosen))


def has_head(chosen: str | None = None) -> bool:
    """Whether the model (this reader's, unless given) has its own language-model head: a
    folder saved without one (a sentence-transformers folder, a bare ``BertModel``) had it
    initialised at random, and nothing that reads it is measured (attn.swap)."""
    return get_model(chosen or model_id()).has_head


def model_line(t: Translator) -> str:
    """The model, its quantisation and licence, in the reader's language; a folder's
    model by its family, its size and the folder's licence file."""
    chosen = model_id()
    if is_folder(chosen):
        d = _described(chosen)
        licence = (t("sidebar.folder_licence", file=d["licence"]) if d["licence"]
                   else t("sidebar.folder_no_licence"))
        line = t("sidebar.about_folder", family=d["family"], folder=Path(chosen).name,
                 millions=t.float(d["parameters"] / 1e6), licence=licence)
        parts = [line]  # the licence ends without a stop: what follows is its own part, after " · "
        caps = sorted({c for c in get_model(chosen).arch.softcaps if c is not None})
        if caps:  # a soft cap changes every score the pages read: named on the model's card
            parts.append(t("sidebar.softcap", cap=t.list(f"±{t.float(c, 1)}" for c in caps)))
        if not has_head(chosen):
            parts.append(t("sidebar.no_head"))
        return " · ".join(parts)
    name = loading.MODEL_LABEL if chosen == "gemma" else t("sidebar.tiny_model")
    return t("sidebar.about", model=name, quant=loading.QUANT_LABEL, licence=t("sidebar.licence"))


def use_threads() -> None:
    """The CPU threads torch may use in this process, where set: a replica's share of the
    machine's cores (``ATLAS_TORCH_THREADS``, scripts/serve.sh), not every core. Set before
    the model runs and before the sidebar says how many threads compute."""
    threads = settings.read().torch_threads
    if threads and torch.get_num_threads() != threads:
        torch.set_num_threads(threads)


@st.cache_resource(show_spinner=False)
def _device_info() -> dict:
    use_threads()  # the sidebar can be drawn before the model is loaded: it says the threads torch will use
    return device_info(pick_device())


def device_line() -> str:
    """The device in the reader's language."""
    info, t = _device_info(), tr()
    if info["type"] == "cuda":
        return t("sidebar.device_cuda", name=info["name"], gib=t.int(info["gib"]), dtype=info["dtype"])
    return t("sidebar.device_cpu", threads=t.int(info["threads"]), dtype=info["dtype"])
