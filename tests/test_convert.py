"""The converted copy in the cache folder: found, checked file by file against its
marker, and converted again when damaged, on small fake folders (no real conversion)."""

import json
import os

import pytest

from attn import convert, converted

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
    target = converted.converted_dir()
    write_fake_copy(target)
    converted.write_marker(target)
    assert converted.is_converted(target) and converted.is_converted(target, full=True)
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
    assert converted.cache_dir() == tmp_path / "xdg" / "attention-atlas"
    monkeypatch.setenv("ATLAS_CACHE_DIR", str(tmp_path / "mine"))
    assert converted.cache_dir() == tmp_path / "mine"


def test_a_half_written_conversion_is_never_taken_as_done(monkeypatch, tmp_path):
    monkeypatch.setenv("ATLAS_CACHE_DIR", str(tmp_path))
    target = converted.converted_dir()
    write_fake_copy(target)
    assert not converted.is_converted(target)  # no completion marker
    (target / converted.MARKER).write_text(json.dumps({**converted.expected_marker(), "format": 0}))
    assert not converted.is_converted(target)  # a marker from another version
    converted.write_marker(target)
    assert converted.is_converted(target)


def test_the_marker_records_each_files_size_sha256_and_time(copy):
    import hashlib

    records = json.loads((copy / converted.MARKER).read_text())["files"]
    assert set(records) == {*SMALL, WEIGHTS}  # every file but the marker itself
    data = (copy / "tokenizer.json").read_bytes()
    assert records["tokenizer.json"] == {"size": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                                         "mtime_ns": (copy / "tokenizer.json").stat().st_mtime_ns}


@pytest.mark.parametrize("name", [*SMALL, WEIGHTS])
@pytest.mark.parametrize("spoil", [truncate, os.remove], ids=["truncated", "deleted"])
def test_a_truncated_or_missing_file_is_not_converted(copy, name, spoil):
    spoil(copy / name)
    assert not converted.is_converted(copy)
    assert not converted.is_converted(copy, full=True)
    assert any(name in p for p in converted.damage(copy))


@pytest.mark.parametrize("name", SMALL)
def test_a_garbled_small_file_of_the_same_size_is_not_converted(copy, name):
    garble(copy / name)
    later = (copy / name).stat().st_mtime_ns + 10**9  # a write a second after the check
    os.utime(copy / name, ns=(later, later))
    assert not converted.is_converted(copy)
    assert converted.damage(copy, full=True) == [f"{name} has another SHA-256"]


def keep_time(file, spoil):
    """``spoil(file)`` with the file's modification time put back as it was."""
    before = file.stat().st_mtime_ns
    spoil(file)
    os.utime(file, ns=(before, before))


def hashes_counted(monkeypatch) -> list:
    """The files attn.converted hashes from now on (it still hashes them)."""
    seen, real = [], converted._sha256
    monkeypatch.setattr(converted, "_sha256", lambda f: seen.append(f.name) or real(f))
    converted._hashed.clear()
    return seen


def test_a_sound_copy_is_checked_by_its_sizes_and_times_without_hashing(copy, monkeypatch):
    seen = hashes_counted(monkeypatch)
    assert converted.is_converted(copy) and seen == []  # a later start: stat only
    assert converted.is_converted(copy, full=True) and sorted(seen) == sorted([*SMALL, WEIGHTS])


@pytest.mark.parametrize("name", [*SMALL, WEIGHTS])
def test_a_file_garbled_with_a_new_time_is_hashed_and_caught(copy, name):
    garble(copy / name)
    later = (copy / name).stat().st_mtime_ns + 5 * 10**9
    os.utime(copy / name, ns=(later, later))
    assert converted.damage(copy) == [f"{name} has another SHA-256"]


def test_garbled_weights_with_their_size_and_time_kept_are_caught_by_the_full_check_only(copy):
    keep_time(copy / WEIGHTS, garble)
    assert converted.is_converted(copy)  # every start and page run: sizes and times
    assert not converted.is_converted(copy, full=True)  # a load that failed: attn.convert.repair


def test_a_copy_whose_times_moved_is_hashed_once_and_its_times_recorded(copy, monkeypatch):
    """A restored or copied cache: the same bytes, new times. Hashed once, then taken by
    its times again; an earlier release's marker (no times) the same way."""
    for f in copy.iterdir():
        os.utime(f, ns=(f.stat().st_mtime_ns + 10**9,) * 2)
    seen = hashes_counted(monkeypatch)
    assert converted.is_converted(copy) and sorted(seen) == sorted([*SMALL, WEIGHTS])
    assert converted.is_converted(copy) and len(seen) == 5  # the new times were recorded
    path = copy / converted.MARKER
    marker = json.loads(path.read_text())
    path.write_text(json.dumps({**marker, "files": {n: {k: v for k, v in r.items() if k != "mtime_ns"}
                                                    for n, r in marker["files"].items()}}))
    converted._hashed.clear()
    assert converted.is_converted(copy) and len(seen) == 10  # no times: hashed, and recorded
    assert converted.is_converted(copy) and len(seen) == 10


def test_the_check_before_the_server_starts_imports_no_torch_and_says_what_to_do(copy, capsys):
    import subprocess
    import sys

    probe = "import sys, attn.converted; print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True).stdout.strip() == "[]"
    assert converted.main() == 0 and "ready" in capsys.readouterr().out
    truncate(copy / "config.json")
    assert converted.main() == converted.NEEDS_CONVERTING
    assert "config.json" in capsys.readouterr().out


def test_a_small_file_changed_after_a_check_is_caught_again(copy):
    assert converted.is_converted(copy)  # hashed once, remembered with its stat
    file = copy / "config.json"
    garble(file)
    later = file.stat().st_mtime_ns + 5 * 10**9  # as a change seconds after the check would be
    os.utime(file, ns=(later, later))
    assert not converted.is_converted(copy)


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
    path = copy / converted.MARKER
    path.write_text(json.dumps(marker(json.loads(path.read_text()))))
    assert not converted.is_converted(copy)


@pytest.mark.parametrize("name", ["config.json", WEIGHTS])
def test_main_says_a_damaged_copy_is_damaged_and_converts_it_again(copy, conversions, capsys, name):
    keep_time(copy / name, garble)  # the same size and time: only the full check finds it
    assert convert.main() == 0
    out = capsys.readouterr().out
    assert "damaged" in out and name in out and "ready" not in out
    assert len(conversions) == 1
    assert converted.is_converted(copy, full=True)
    assert convert.main() == 0  # sound now: nothing to do
    assert "ready" in capsys.readouterr().out and len(conversions) == 1


def test_main_converts_an_old_marker_once(copy, conversions, capsys):
    marker = json.loads((copy / converted.MARKER).read_text())
    (copy / converted.MARKER).write_text(json.dumps(old_marker(marker)))
    assert convert.main() == 0 and len(conversions) == 1
    assert convert.main() == 0 and len(conversions) == 1
    assert "ready" in capsys.readouterr().out.splitlines()[-1]


def test_repair_keeps_a_sound_copy_and_converts_a_damaged_one_again(copy, conversions):
    assert convert.repair() == copy and conversions == []
    garble(copy / WEIGHTS)
    assert convert.repair() == copy and len(conversions) == 1
    assert converted.is_converted(copy, full=True)


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
    write_marker = converted.write_marker

    def then_changed(folder):  # a file that changes after it was recorded, as on a failing disk
        write_marker(folder)
        garble(folder / "config.json")

    monkeypatch.setattr(convert, "write_marker", then_changed)  # as attn.convert calls it
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
