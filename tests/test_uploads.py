"""The server's store of uploaded files (launch.BoundedUploads): a file is kept only under
an id its session was given, and a session holds at most two; on the real upload endpoint
too (PUT /_stcore/upload_file/<session>/<id>, a made-up id and a self-made XSRF token)."""

import asyncio
import os
import re
import uuid

import pytest
import requests
from streamlit.runtime.uploaded_file_manager import UploadedFileRec

from harness.proxy import haproxy_path, proxy
from harness.readers import Reader
from harness.serve import app_server
from launch import BoundedUploads


def _file(file_id: str, size: int = 10) -> UploadedFileRec:
    return UploadedFileRec(file_id=file_id, name="a.txt", type="text/plain", data=b"x" * size)


def test_a_file_is_kept_only_under_an_id_its_session_was_given_and_two_at_most():
    store = BoundedUploads("/_stcore/upload_file")
    given = [u.file_id for u in store.get_upload_urls("s1", ["a.txt", "b.txt", "c.txt"])]
    store.add_file("s1", _file(str(uuid.uuid4())))  # made up: nothing kept
    store.add_file("s2", _file(given[0]))  # given to another session: nothing kept
    assert store.get_files("s1", given) == [] and store.get_files("s2", given) == []
    for file_id in given:
        store.add_file("s1", _file(file_id, 100))
    kept = store.get_files("s1", given)
    assert [f.file_id for f in kept] == given[1:]  # two at most: the oldest went
    assert store.get_stats()["cache_memory_bytes"][0].byte_length == 200
    store.remove_session_files("s1")
    store.add_file("s1", _file(given[2]))  # the session ended: its ids with it
    assert store.get_files("s1", given) == []


def test_the_upload_endpoint_keeps_nothing_under_made_up_ids():
    """As a prankster would: a session's id from its websocket, then 20 files of 100 kB PUT
    under made-up ids with a self-made XSRF cookie and header. Streamlit answers each, and
    the server's memory of uploads stays empty (its own metrics)."""
    with app_server("tiny") as url:
        async def session():
            reader = Reader(url, "en")
            await reader.connect()
            await reader.run("")
            return reader

        reader = asyncio.run(session())
        token = "2|deadbeef|" + "0" * 32 + "|1700000000"
        for _ in range(20):
            sent = requests.put(f"{url}/_stcore/upload_file/{reader.session_id}/{uuid.uuid4()}",
                                files={"file": ("a.txt", b"x" * 100_000, "text/plain")},
                                headers={"X-Xsrftoken": token}, cookies={"_streamlit_xsrf": token}, timeout=30)
            assert sent.status_code == 204  # taken by the endpoint (not refused for its token): kept or not
        metrics = requests.get(f"{url}/_stcore/metrics", timeout=30).text
        held = [int(float(x)) for x in re.findall(r'cache_type="UploadedFileManager"[^}]*\} (\S+)', metrics)]
        assert sum(held) == 0, metrics


def test_the_proxy_bounds_uploads_from_one_address():
    """deploy/haproxy.cfg: 20 uploads a minute from one client address, each at most 3 MB;
    the 21st is refused at the proxy (429), as is one larger than 3 MB (413), whatever the
    replica would have said."""
    if haproxy_path() is None:
        if os.environ.get("CI"):
            pytest.fail("no haproxy in CI: scripts/test.sh installs Debian's haproxy")
        pytest.skip("no haproxy here")
    with app_server("tiny") as backend, proxy([backend.removeprefix("http://")]) as url:
        big = requests.put(f"{url}/_stcore/upload_file/s/{uuid.uuid4()}", data=b"x" * (3 * 2**20 + 1),
                           headers={"Content-Type": "application/octet-stream"}, timeout=30)
        assert big.status_code == 413
        said = [requests.put(f"{url}/_stcore/upload_file/s/{uuid.uuid4()}", data=b"x", timeout=30).status_code
                for _ in range(21)]
        assert 429 not in said[:19] and said[-1] == 429, said
