"""The store behind share links: keys, bounds, several processes, a broken file."""

import subprocess
import sys
import textwrap

from ui.sharestore import Store, is_key


def test_a_view_comes_back_by_its_key_and_the_same_view_gets_the_same_key(tmp_path):
    s = Store(tmp_path / "v.sqlite3")
    view = {"text": "東京の朝 😀 <b>", "lang": "ja", "step": 3, "settings": {"s3_w": 24}}
    key = s.put(view)
    assert is_key(key) and s.put(dict(view)) == key and s.count() == 1
    assert s.get(key) == view
    assert s.get("0" * 12) is None  # never kept
    for bad in ("../etc", "ABCDEF012345", "x" * 12, "", None, 12, "0" * 13):
        assert s.get(bad) is None  # not a key of ours: never looked up


def test_least_recently_used_views_are_evicted_at_the_bounds(tmp_path):
    s = Store(tmp_path / "v.sqlite3", max_views=3)
    keys = [s.put({"text": f"text {i}"}) for i in range(3)]
    s.get(keys[0])  # used again: the oldest is now keys[1]
    s.put({"text": "text 3"})
    assert s.count() == 3 and s.get(keys[1]) is None and s.get(keys[0]) is not None
    small = Store(tmp_path / "b.sqlite3", max_bytes=300)
    first = small.put({"text": "a" * 200})
    second = small.put({"text": "b" * 200})
    assert small.get(first) is None and small.get(second) is not None


WRITER = textwrap.dedent("""
    import sys
    from ui.sharestore import Store
    s = Store(sys.argv[1])
    for i in range(150):
        s.put({"text": f"{sys.argv[2]} {i}"})
    print("done")
""")


def test_two_processes_write_at_once(tmp_path):
    path = tmp_path / "v.sqlite3"
    Store(path)
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), name], stdout=subprocess.PIPE, text=True)
             for name in ("one", "two")]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs) and all("done" in o for o in outs)
    assert Store(path).count() == 300


def test_a_corrupted_file_is_set_aside_and_a_fresh_store_made(tmp_path):
    path = tmp_path / "v.sqlite3"
    key = Store(path).put({"text": "kept"})
    path.write_bytes(b"this is not a database" * 100)
    for extra in ("-wal", "-shm"):
        p = tmp_path / f"v.sqlite3{extra}"
        if p.exists():
            p.unlink()
    s = Store(path)
    assert s.recreated and s.get(key) is None and s.count() == 0
    assert list(tmp_path.glob("v.sqlite3.corrupt-*"))  # nothing of ours deleted: set aside
    assert is_key(s.put({"text": "new"}))
