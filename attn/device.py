"""Which device runs the attention, in one place, and a one-line description of it."""

from __future__ import annotations

import torch

from . import settings


def pick_device(prefer: str | None = None) -> torch.device:
    """CUDA when present, else CPU. ``ATLAS_DEVICE=cpu`` (or ``prefer``) forces one."""
    choice = prefer or settings.read().device
    if choice:
        dev = torch.device(choice)
        if dev.type == "cuda" and not torch.cuda.is_available():
            raise ValueError("ATLAS_DEVICE asks for CUDA, but torch sees no CUDA device")
        return dev
    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


def compute_dtype(device: torch.device) -> torch.dtype:
    """The dtype the fast paths use: bfloat16 on CUDA (flash / cuDNN kernels),
    float32 on CPU."""
    return torch.bfloat16 if torch.device(device).type == "cuda" else torch.float32


def device_info(device: torch.device | None = None) -> dict:
    """What the sidebar says about the device: its type, name, memory or threads, dtype."""
    device = torch.device(device) if device is not None else pick_device()
    dtype = str(compute_dtype(device)).replace("torch.", "")
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return {"type": "cuda", "name": props.name, "gib": round(props.total_memory / 2**30), "dtype": dtype}
    return {"type": "cpu", "name": "CPU", "threads": torch.get_num_threads(), "dtype": dtype}


def describe_device(device: torch.device | None = None) -> str:
    """e.g. ``NVIDIA H200 · 139 GiB · bfloat16`` or ``CPU · 2 threads · float32``."""
    info = device_info(device)
    if info["type"] == "cuda":
        return f"{info['name']} · {info['gib']} GiB · {info['dtype']}"
    return f"CPU · {info['threads']} threads · {info['dtype']}"


def synchronize(device: torch.device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)
