"""A text past the memory budget keeps its q, k, v in files (attn.spill), a layer at a time in
memory: the same numbers as the analysis kept in memory, on every measure the pages read, with
less memory held; the files leave nothing behind in the cache folder."""

import gc
import os

import pytest
import torch

from attn import loading, model, spill, stats
from attn.rows import RowSample
from attn.spill import LayerFile


@pytest.fixture(scope="module")
def tiny():
    return loading.tiny(device="cpu")


def text_of(n: int) -> str:
    words = "a layer at a time comes back from the file, the same bytes the model wrote; "
    return (words * (n // len(words) + 2))[: n + 16]


def test_rows_written_in_any_order_read_back_as_the_tensor_they_came_from(tmp_path):
    torch.manual_seed(0)
    whole = torch.randn(3, 1, 4, 50, 8)
    f = LayerFile(whole.shape, tmp_path)
    assert os.listdir(tmp_path) == []  # unnamed: nothing to find, nothing left behind
    pieces = [(layer, s) for layer in range(3) for s in range(0, 50, 7)]
    for i in torch.randperm(len(pieces)).tolist():
        layer, s = pieces[i]
        f.write(layer, s, whole[layer][:, :, s:s + 7])
    assert torch.equal(f.dense(), whole)
    assert torch.equal(f[2], whole[2]) and torch.equal(f[-1], whole[2])
    assert torch.equal(f[1, 0, :, 3:9], whole[1, 0, :, 3:9])
    assert torch.equal(f[0, 0, 2][[1, 4, 7]], whole[0, 0, 2][[1, 4, 7]])
    assert f.shape == whole.shape and f.numel() == whole.numel()
    assert f.nbytes == spill.KEEP * whole[0].numel() * 4  # in memory: the layers kept read back
    f.write(1, 10, torch.zeros(1, 4, 5, 8))  # a layer rewritten after a read is read again
    assert torch.equal(f[1, 0, :, 10:15], torch.zeros(4, 5, 8))
    with pytest.raises(ValueError):
        f.write(0, 48, whole[0][:, :, :5])  # past the text's end
    with pytest.raises(IndexError):
        f[:, 0]


def test_an_analysis_past_the_budget_gives_every_number_the_one_in_memory_gives(tiny, monkeypatch, tmp_path):
    """The tiny model (sliding layers of 8, one full layer), 700 tokens read in chunks of 64:
    once with room for it, once with a budget smaller than its q, k, v."""
    monkeypatch.setenv("ATLAS_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(model, "CHUNK", 64)
    text = text_of(700)
    monkeypatch.setenv("ATLAS_ANALYSIS_MB", "1000")
    kept = tiny.analyze(text)
    assert isinstance(kept.q, torch.Tensor)
    monkeypatch.setenv("ATLAS_ANALYSIS_MB", str(kept.nbytes / 3 / 2**20))
    filed = tiny.analyze(text)
    assert all(isinstance(x, LayerFile) for x in (filed.q, filed.k, filed.v))
    for name in ("q", "k", "v"):
        assert torch.equal(getattr(filed, name).dense(), getattr(kept, name)), name
    qkv = sum(4 * x.numel() for x in (kept.q, kept.k, kept.v))
    # two layers of four in memory, the rest in the files
    assert filed.nbytes == kept.nbytes - qkv + qkv * 2 // 4
    assert tiny.memory_bytes(filed.n) == tiny.arch.analysis_bytes(filed.n) - qkv + qkv * 2 // 4
    # what the pages read from them: rows, a sampled statistic, a layer's own output
    positions = torch.tensor([0, 5, 63, 64, 400, filed.n - 1])
    for layer in range(filed.n_layers):
        assert torch.equal(filed.rows(layer, None, positions), kept.rows(layer, None, positions))
        assert all(torch.equal(x, y) for x, y in zip(filed.qkv(layer), kept.qkv(layer)))
    sample = RowSample.spread(filed.n, 128, 64)
    k_filed = stats.k_for_share(filed.weights().at(sample.positions), 0.9)
    k_kept = stats.k_for_share(kept.weights().at(sample.positions), 0.9)
    assert torch.equal(torch.as_tensor(k_filed), torch.as_tensor(k_kept))
    assert stats.sink_rows(filed.weights().at(sample.positions), sample) == \
        stats.sink_rows(kept.weights().at(sample.positions), sample)
    del filed
    gc.collect()
    assert not any(files for _, _, files in os.walk(tmp_path))  # the files went with it


def test_the_memory_budget_counts_a_filed_analysis_at_the_layers_it_keeps_so_two_fit_where_one_would_not(
        monkeypatch, tmp_path):
    """The app's analysis work (ui.analyses) on a tiny model of 12 layers, under a budget of half
    one text's q, k, v: in memory not even one would fit; in files each holds two layers of
    twelve, so a second reader's text is read beside the first without dropping it."""
    from server.lru import ByteLRU
    from server.work_queue import TicketQueue
    from ui import analyses

    twelve = loading.tiny(device="cpu", layers=12)
    texts = [text_of(300), "another reader's chapter, " * 12]
    n = max(len(twelve.encode(x)[0]) for x in texts)
    qkv = 12 * (4 + 2) * n * 16 * 4  # layers · (heads + 2 kv heads) · n · d · 4 bytes, by hand
    monkeypatch.setenv("ATLAS_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("ATLAS_ANALYSIS_MB", str(qkv / 2 / 2**20))
    kept = ByteLRU(qkv // 2, lambda a: a.nbytes)
    monkeypatch.setattr(analyses, "get_model", lambda model_id: twelve)
    monkeypatch.setattr(analyses, "_analyses", lambda: kept)
    q = TicketQueue()
    read = [q.run("analysis", analyses._analysis_work(x, "twelve"), same=("twelve", x), weight=len(x), pieces=True)
            for x in texts]
    assert all(isinstance(a.q, LayerFile) for a in read)
    assert all(("twelve", x) in kept and not kept.was_dropped(("twelve", x)) for x in texts)
    assert kept.nbytes == sum(a.nbytes for a in read) <= qkv // 2
    monkeypatch.setenv("ATLAS_ANALYSIS_MB", "1000")
    for a, x in zip(read, texts):
        whole = twelve.analyze(x)
        assert torch.equal(a.q.dense(), whole.q) and torch.equal(a.v.dense(), whole.v)


def test_a_cache_folder_that_takes_no_file_keeps_the_analysis_in_memory(tiny, monkeypatch, tmp_path):
    (tmp_path / "spill").write_text("a file where the folder would be")  # no folder can be made there
    monkeypatch.setenv("ATLAS_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("ATLAS_ANALYSIS_MB", "0.001")
    a = tiny.analyze(text_of(200))
    assert isinstance(a.q, torch.Tensor) and a.n == len(tiny.encode(text_of(200))[0])


def test_a_disk_too_full_for_the_files_keeps_the_analysis_in_memory(tiny, monkeypatch, tmp_path):
    """The files' space is taken before the model runs (posix_fallocate): a full disk says so
    there, and the analysis is kept in memory, not lost halfway through the run."""
    import errno

    def full(fd, offset, length):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", full)
    monkeypatch.setenv("ATLAS_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("ATLAS_ANALYSIS_MB", "0.001")
    a = tiny.analyze(text_of(200))
    assert isinstance(a.q, torch.Tensor) and a.n == len(tiny.encode(text_of(200))[0])
