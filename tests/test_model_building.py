"""Two models built at once in one process come out whole: transformers' loading patches
process-wide state while it builds (torch.nn.init emptied, parameters on the meta
device), so the app builds every model under one lock (attn.model.BUILDING) — the room's
worker, the background start and a visitor's page may each load one at the same moment."""

from __future__ import annotations

import threading

import torch

from attn import folders, loading
from harness import model_folders as mf


def test_a_tiny_model_built_while_folders_load_in_another_thread_is_the_one_built_alone(tmp_path):
    alone = {k: v.clone() for k, v in loading.tiny(device="cpu").model.state_dict().items()}
    paths = [mf.build(family, tmp_path / family) for family in ("gpt2", "llama", "bert")]
    stop, failures = threading.Event(), []

    def load_folders():
        while not stop.is_set():
            for path in paths:
                try:
                    folders.load_folder(path, device="cpu")
                except Exception as exc:  # noqa: BLE001 (a folder broken by the tiny build: reported)
                    failures.append(f"{path.name}: {exc!r}")

    other = threading.Thread(target=load_folders, daemon=True)
    other.start()
    try:
        for _ in range(40):
            built = loading.tiny(device="cpu").model.state_dict()
            for name, value in alone.items():
                assert built[name].device.type == "cpu", name
                assert torch.equal(built[name], value), name
    finally:
        stop.set()
        other.join(60)
    assert not failures
