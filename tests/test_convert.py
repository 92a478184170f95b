"""The converted copy in the cache folder: found, checked file by file against its
marker, and converted again when damaged, on small fake folders (no real conversion)."""

import json
import os

import pytest

from attn import convert

SMALL = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json")
WEIGHTS = "model.safetensors"


def write_fake_copy(out, weights=b"\x01\x02" * 2048):
    """A converted folder's files, small: the names the conversion writes."""
    out.mkdir(parents=True, exist_ok=True)
    for name in SMALL:
        (out / name).write_text(json.dumps({"name": name, "vocab": ["a", "b", "東京"]}))
    (out / WEIGHTS).write_bytes(weights)


@pytest.fixture
def copy(monkeypatch, tmp_path):
    """A sound fake copy in a tmp cache folder, its marker written as the conversion does."""
    monkeypatch.setenv("ATLAS_CACHE_DIR", str(tmp_path / "cache"))
    target = convert.converted_dir()
    write_fake_copy(target)
    convert.write_marker(target)
    assert convert.is_converted(target) and convert.is_converted(target, full=True)
    return target


@pytest.fixture
def conversions(monkeypatch):
    """Fake the dequantising step of :func:`convert.convert`; the list of folders it wrote."""
    written = []

    def fake(work, out, say):
        write_fake_copy(out)
        written.append(out)

    monkeypatch.setattr(convert, "_dequantise", fake)
    return written


def truncate(file):
    file.write_bytes(file.read_bytes()[:-3])


def garble(file):
    """Other bytes, the same size."""
    data = bytearray(file.read_bytes())
    data[len(data) // 2] ^= 0xFF
    file.write_bytes(bytes(data))


def test_cache_folder_follows_xdg_and_the_override(monkeypatch, tmp_path):
    monkeypatch.delenv("ATLAS_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert convert.cache_dir() == tmp_path / "xdg" / "attention-atlas"
    monkeypatch.setenv("ATLAS_CACHE_DIR", str(tmp_path / "mine"))
    assert convert.cache_dir() == tmp_path / "mine"


def test_a_half_written_conversion_is_never_taken_as_done(monkeypatch, tmp_path):
    monkeypatch.setenv("ATLAS_CACHE_DIR", str(tmp_path))
    target = convert.converted_dir()
    write_fake_copy(target)
    assert not convert.is_converted(target)  # no completion marker
    (target / convert.MARKER).write_text(json.dumps({**convert.expected_marker(), "format": 0}))
    assert not convert.is_converted(target)  # a marker from another version
    convert.write_marker(target)
    assert convert.is_converted(target)


def test_the_marker_records_each_files_size_and_sha256(copy):
    import hashlib

    records = json.loads((copy / convert.MARKER).read_text())["files"]
    assert set(records) == {*SMALL, WEIGHTS}  # every file but the marker itself
    data = (copy / "tokenizer.json").read_bytes()
    assert records["tokenizer.json"] == {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


@pytest.mark.parametrize("name", [*SMALL, WEIGHTS])
@pytest.mark.parametrize("spoil", [truncate, os.remove], ids=["truncated", "deleted"])
def test_a_truncated_or_missing_file_is_not_converted(copy, name, spoil):
    spoil(copy / name)
    assert not convert.is_converted(copy)
    assert not convert.is_converted(copy, full=True)
    assert any(name in p for p in convert.damage(copy))


@pytest.mark.parametrize("name", SMALL)
def test_a_garbled_small_file_of_the_same_size_is_not_converted(copy, name):
    garble(copy / name)
    assert not convert.is_converted(copy)
    assert convert.damage(copy, full=True) == [f"{name} has another SHA-256"]


def test_garbled_weights_of_the_same_size_are_caught_by_the_full_check_only(copy):
    garble(copy / WEIGHTS)
    assert convert.is_converted(copy)  # every page run: the weights' size only
    assert not convert.is_converted(copy, full=True)


def test_a_small_file_changed_after_a_check_is_caught_again(copy):
    assert convert.is_converted(copy)  # hashed once, remembered with its stat
    file = copy / "config.json"
    garble(file)
    later = file.stat().st_mtime_ns + 5 * 10**9  # as a change seconds after the check would be
    os.utime(file, ns=(later, later))
    assert not convert.is_converted(copy)


def old_marker(m):
    """The marker as written before it recorded the files: the header, format 1."""
    return {**{k: v for k, v in m.items() if k != "files"}, "format": 1}


@pytest.mark.parametrize("marker", [
    old_marker,
    lambda m: {k: v for k, v in m.items() if k != "files"},  # today's header, no file records
    lambda m: {**m, "files": {WEIGHTS: m["files"][WEIGHTS]}},  # records without config or tokenizer
    lambda m: {**m, "files": {**m["files"], "config.json": {"size": "12"}}},  # a record without its hash
], ids=["old format", "no records", "too few records", "a record without its hash"])
def test_a_marker_without_sound_file_records_is_not_converted(copy, marker):
    path = copy / convert.MARKER
    path.write_text(json.dumps(marker(json.loads(path.read_text()))))
    assert not convert.is_converted(copy)


@pytest.mark.parametrize("name", ["config.json", WEIGHTS])
def test_main_says_a_damaged_copy_is_damaged_and_converts_it_again(copy, conversions, capsys, name):
    garble(copy / name)  # the same size: only the full check at each start finds the weights
    assert convert.main() == 0
    out = capsys.readouterr().out
    assert "damaged" in out and name in out and "ready" not in out
    assert len(conversions) == 1
    assert convert.is_converted(copy, full=True)
    assert convert.main() == 0  # sound now: nothing to do
    assert "ready" in capsys.readouterr().out and len(conversions) == 1


def test_main_converts_an_old_marker_once(copy, conversions, capsys):
    marker = json.loads((copy / convert.MARKER).read_text())
    (copy / convert.MARKER).write_text(json.dumps(old_marker(marker)))
    assert convert.main() == 0 and len(conversions) == 1
    assert convert.main() == 0 and len(conversions) == 1
    assert "ready" in capsys.readouterr().out.splitlines()[-1]


def test_repair_keeps_a_sound_copy_and_converts_a_damaged_one_again(copy, conversions):
    assert convert.repair() == copy and conversions == []
    garble(copy / WEIGHTS)
    assert convert.repair() == copy and len(conversions) == 1
    assert convert.is_converted(copy, full=True)


def test_a_copy_that_cannot_be_removed_raises_cache_damaged_naming_the_folder(copy, conversions, monkeypatch,
                                                                               capsys):
    def refuse(path, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(path))

    garble(copy / "tokenizer.json")
    monkeypatch.setattr(convert.shutil, "rmtree", refuse)
    with pytest.raises(convert.CacheDamaged) as caught:
        convert.repair()
    assert caught.value.path == copy and "Permission denied" in caught.value.reason
    assert convert.main() == 1
    err = capsys.readouterr().err
    assert f"delete the folder {copy}" in err and "Traceback" not in err
    assert conversions == []


def test_a_fresh_copy_that_does_not_check_out_raises_cache_damaged(copy, conversions, monkeypatch, capsys):
    write_marker = convert.write_marker

    def then_changed(folder):  # a file that changes after it was recorded, as on a failing disk
        write_marker(folder)
        garble(folder / "config.json")

    monkeypatch.setattr(convert, "write_marker", then_changed)
    garble(copy / WEIGHTS)
    with pytest.raises(convert.CacheDamaged) as caught:
        convert.repair()
    assert caught.value.path == copy and "config.json" in caught.value.reason
    assert len(conversions) == 1
    assert convert.main() == 1 and str(copy) in capsys.readouterr().err


def test_main_names_a_setting_that_does_not_fit_in_one_sentence(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("ATLAS_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("ATLAS_MAX_TOKENS", "lots")
    assert convert.main() == 1
    err = capsys.readouterr().err
    assert "ATLAS_MAX_TOKENS" in err and "'lots'" in err and "Traceback" not in err
