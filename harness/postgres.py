"""A throwaway PostgreSQL server for the tests and benchmarks: a fresh cluster in a
temporary folder, on a free port of the loopback, trusting local connections, removed
afterwards. Debian's ``postgresql`` package has the programs (``/usr/lib/postgresql/<v>/bin``,
or on PATH); they refuse to run as root, so as root they run as the ``postgres`` user.

    with postgres_server() as server:
        url = server.new_database()      # postgresql://atlas@127.0.0.1:PORT/atlas_1
        server.stop(); server.start()    # a restart mid-test
"""

from __future__ import annotations

import contextlib
import glob
import itertools
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import psycopg

from .serve import free_port

USER = "atlas"


def pg_bin(name: str) -> str | None:
    """A PostgreSQL program (``initdb``, ``pg_ctl``): on PATH, else Debian's folder."""
    found = shutil.which(name)
    if found:
        return found
    for folder in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if os.access(os.path.join(folder, name), os.X_OK):
            return os.path.join(folder, name)
    return None


def available() -> bool:
    return pg_bin("initdb") is not None and pg_bin("pg_ctl") is not None


class Server:
    def __init__(self, folder: Path, port: int):
        self.folder, self.port = folder, port
        self.data = folder / "data"
        self._names = itertools.count(1)

    def _as_owner(self, cmd: list[str]) -> list[str]:
        return ["runuser", "-u", "postgres", "--"] + cmd if os.geteuid() == 0 else cmd

    def _run(self, cmd: list[str], timeout: float = 120) -> None:
        subprocess.run(self._as_owner(cmd), check=True, timeout=timeout, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE)

    def init(self) -> None:
        self._run([pg_bin("initdb"), "-D", str(self.data), "-A", "trust", "-U", USER, "--no-sync", "-E", "UTF8",
                   "--locale=C"])

    def start(self) -> None:
        options = f"-k {self.folder} -p {self.port} -h 127.0.0.1 -c fsync=off -c full_page_writes=off"
        self._run([pg_bin("pg_ctl"), "-D", str(self.data), "-o", options, "-l", str(self.folder / "log"),
                   "-w", "-t", "60", "start"])

    def stop(self, mode: str = "fast") -> None:
        self._run([pg_bin("pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop"])

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """A fresh, empty database on this server: its URL."""
        name = f"atlas_{next(self._names)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)


@contextlib.contextmanager
def postgres_server():
    """A fresh PostgreSQL cluster, started; stopped and removed afterwards."""
    if not available():
        raise RuntimeError("PostgreSQL's programs are missing (Debian: apt-get install postgresql)")
    folder = Path(tempfile.mkdtemp(prefix="atlas-pg-"))
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres", "postgres")
    server = Server(folder, free_port())
    try:
        server.init()
        server.start()
        yield server
    finally:
        with contextlib.suppress(Exception):
            server.stop("immediate")
        shutil.rmtree(folder, ignore_errors=True)
