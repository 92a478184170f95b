"""An analysis' q, k or v kept in a file, a layer at a time in memory.

A text whose q, k, v would take more than half the memory budget (ATLAS_ANALYSIS_MB: a
chapter of 8,192 tokens of the packaged model holds 906 MB of them in float32, its whole
context of 32,768 tokens 3.6 GB) keeps them in an unnamed file in the
cache folder — the same float32 bytes the model used, so every number on every page is
what it would be in memory — and reads one layer back when a page asks for it (the pages
read a layer's rows together). The layers read last stay in memory (``KEEP``); the file goes
with the analysis (it has no name on disk: nothing is left behind, even by a crash).
This is what serving systems do with a key/value cache that outgrows memory: they move it
to slower storage and page it back.
"""

from __future__ import annotations

import errno
import os
import tempfile
import threading
import weakref
from collections import OrderedDict
from pathlib import Path

import torch

KEEP = 2  # layers read back and kept in memory, per tensor


class LayerFile:
    """A float32 tensor ``(layers, 1, heads, n, d)`` in a file: ``store[layer]`` (and
    ``store[layer, ...]``) reads that layer back, ``write`` fills rows of a layer.
    Read-only for the pages, like the tensor it stands for."""

    dtype = torch.float32

    def __init__(self, shape, folder: Path | str):
        self.shape = torch.Size(shape)
        if len(self.shape) != 5 or self.shape[1] != 1:
            raise ValueError(f"a layer file holds (layers, 1, heads, n, d), got {tuple(self.shape)}")
        Path(folder).mkdir(parents=True, exist_ok=True)
        fd, path = tempfile.mkstemp(prefix="analysis-", suffix=".f32", dir=folder)
        os.unlink(path)  # unnamed: the file lives as long as its descriptor
        self._fd = fd
        self._close = weakref.finalize(self, os.close, fd)
        try:  # the space taken now: a disk too full says so here, not halfway through the model's run
            os.posix_fallocate(fd, 0, self.numel() * 4)
        except OSError as e:
            if e.errno == errno.ENOSPC:
                raise
            os.ftruncate(fd, self.numel() * 4)  # a file system that cannot (tmpfs can): a sparse file
        self._kept: OrderedDict[int, torch.Tensor] = OrderedDict()
        self._lock = threading.Lock()

    # what the pages ask of a tensor
    def numel(self) -> int:
        return self.shape.numel()

    @property
    def layer_bytes(self) -> int:
        return self.shape[1:].numel() * 4

    @property
    def nbytes(self) -> int:
        """What it holds in memory at most: the layers it keeps read back."""
        return min(KEEP, self.shape[0]) * self.layer_bytes

    def _offset(self, layer: int, head: int, row: int) -> int:
        _, _, heads, n, d = self.shape
        return ((layer * heads + head) * n + row) * d * 4

    def write(self, layer: int, start: int, x: torch.Tensor) -> None:
        """Rows ``[start, start + x.shape[2])`` of one layer, from ``x`` (1, heads, rows, d)."""
        if x.shape[0] != 1 or x.shape[1] != self.shape[2] or x.shape[3] != self.shape[4] \
                or not 0 <= start <= start + x.shape[2] <= self.shape[3]:
            raise ValueError(f"rows {tuple(x.shape)} at {start} do not fit a layer of {tuple(self.shape[1:])}")
        x = x.detach().to("cpu", torch.float32)
        for head in range(x.shape[1]):
            data = x[0, head].contiguous().numpy().tobytes()
            offset = self._offset(layer, head, start)
            while data:  # pwrite may write less than asked
                done = os.pwrite(self._fd, data, offset)
                data, offset = data[done:], offset + done
        with self._lock:
            self._kept.pop(layer, None)  # a layer read back before this write is stale

    def layer(self, layer: int) -> torch.Tensor:
        """One layer ``(1, heads, n, d)``, read back (or kept from a recent read)."""
        if not -self.shape[0] <= layer < self.shape[0]:
            raise IndexError(f"layer {layer} out of {self.shape[0]}")
        layer %= self.shape[0]
        with self._lock:
            if layer in self._kept:
                self._kept.move_to_end(layer)
                return self._kept[layer]
        out = torch.empty(self.shape[1:], dtype=torch.float32)  # read outside the lock: others read theirs
        view, offset = memoryview(out.numpy()).cast("B"), self._offset(layer, 0, 0)
        while view:
            done = os.preadv(self._fd, [view], offset)
            if done == 0:
                raise OSError("the analysis' file ended early")
            view, offset = view[done:], offset + done
        with self._lock:
            out = self._kept.setdefault(layer, out)  # another thread's read of it meanwhile: one copy kept
            self._kept.move_to_end(layer)
            while len(self._kept) > KEEP:
                self._kept.popitem(last=False)
            return out

    def __getitem__(self, index):
        if isinstance(index, tuple):
            if not index:
                raise IndexError("a layer file is read a layer at a time")
            first, rest = index[0], index[1:]
        else:
            first, rest = index, ()
        if isinstance(first, torch.Tensor) and first.numel() == 1:
            first = int(first)
        if not isinstance(first, int):
            raise IndexError("a layer file is read a layer at a time: index it by one layer first")
        x = self.layer(first)
        return x[rest] if rest else x

    def dense(self) -> torch.Tensor:
        """Every layer in one tensor (for a test: it holds the whole file in memory)."""
        return torch.stack([self.layer(i) for i in range(self.shape[0])])


# an analysis whose q, k, v would take more than this share of the memory budget keeps them in
# files: in a class, one reader's chapter (8,192 tokens: 906 MB of the default 1,000) would
# otherwise fill the budget alone, and the next reader's would wait for it or push it out
SHARE = 0.5


def spills(qkv_bytes: int, budget: int) -> bool:
    """Whether an analysis whose q, k, v take ``qkv_bytes`` keeps them in files: when they
    alone would take more than SHARE of the memory budget."""
    return qkv_bytes > SHARE * budget


def held_by(arch, n: int, budget: int) -> int:
    """What an analysis of n tokens of a model (attn.arch.Architecture) holds in memory: all
    its q, k, v (arch.analysis_bytes), or, where they spill, the layers its files keep."""
    qkv = arch.qkv_bytes(n)
    kept = qkv if not spills(qkv, budget) else min(KEEP, arch.n_layers) * qkv // arch.n_layers
    return arch.analysis_bytes(n) - qkv + kept


def empty(shapes: dict, budget) -> dict:
    """An analysis' tensors to fill, name → shape: in memory, or, where together they pass the
    memory budget (attn.settings.Settings: ``analysis_bytes``), layer files in the cache folder."""
    if spills(sum(4 * torch.Size(shape).numel() for shape in shapes.values()), budget.analysis_bytes):
        try:
            return {name: LayerFile(shape, budget.cache_dir / "spill") for name, shape in shapes.items()}
        except OSError:  # a cache folder that takes no file (read-only, too full): in memory, as before
            pass
    return {name: torch.empty(shape) for name, shape in shapes.items()}


def write(store, layer: int, start: int, rows: torch.Tensor) -> None:
    """Rows ``(1, heads, r, d)`` of one layer into an analysis' tensor or layer file."""
    if isinstance(store, LayerFile):
        store.write(layer, start, rows)
    else:
        store[layer][:, :, start:start + rows.shape[2]].copy_(rows)


def nbytes(x) -> int:
    """What a tensor or a layer file holds in memory."""
    if isinstance(x, LayerFile):
        return x.nbytes
    return x.element_size() * x.numel()
