"""A throwaway PostgreSQL cluster for tests and benchmarks: initdb in a temporary folder (as the
`postgres` user when running as root: the server refuses root), a free loopback port, stopped and
deleted at the end. Uses the binaries of Debian's `postgresql` package (or any on PATH)."""

from __future__ import annotations

import glob
import itertools
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path


def find_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)
    return candidates[0] if candidates else None


def missing_reason() -> str | None:
    """Why no cluster can be started here, or None."""
    for name in ("initdb", "pg_ctl"):
        if find_bin(name) is None:
            return (f"no PostgreSQL server binaries ({name} not found): apt-get install "
                    "postgresql")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed: pip install -e '.[postgres]'"
    return None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Cluster:
    """One server; `url(dbname)`; `new_schema_url()` for an isolated namespace per test."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root or Path(tempfile.mkdtemp(prefix="clavain-pg-"))
        self.data = self.root / "data"
        self.port = free_port()
        self.as_postgres = os.geteuid() == 0
        self._schemas = itertools.count(1)
        self.log = self.root / "server.log"

    def _run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        command = list(argv)
        if self.as_postgres:
            command = ["runuser", "-u", "postgres", "--", *command]
        return subprocess.run(command, capture_output=True, text=True, timeout=120,
                              cwd=self.root)

    def start(self) -> Cluster:
        if self.as_postgres:
            shutil.chown(self.root, "postgres", "postgres")
        result = self._run(find_bin("initdb") or "initdb", "-D", str(self.data), "-A", "trust",
                           "-U", "postgres", "-E", "UTF8", "--no-locale")
        if result.returncode != 0:
            raise RuntimeError(f"initdb failed: {result.stderr[-2000:]}")
        self._ctl_start()
        created = self.psql("CREATE DATABASE clavain", dbname="postgres")
        if created.returncode != 0:
            raise RuntimeError(f"createdb failed: {created.stderr}")
        return self

    def _ctl_start(self) -> None:
        options = (f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 "
                   "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
                   "-c max_connections=200")
        result = self._run(find_bin("pg_ctl") or "pg_ctl", "-D", str(self.data), "-o", options,
                           "-l", str(self.log), "-w", "-t", "60", "start")
        if result.returncode != 0:
            log = self.log.read_text() if self.log.exists() else ""
            raise RuntimeError(f"pg_ctl start failed: {result.stderr}\n{log[-2000:]}")

    def stop(self, mode: str = "fast") -> None:
        self._run(find_bin("pg_ctl") or "pg_ctl", "-D", str(self.data), "-m", mode, "-w",
                  "stop")

    def restart(self) -> None:
        """Stop (fast: connections are cut) and start again on the same port."""
        self.stop()
        self._ctl_start()

    def destroy(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)

    def url(self, dbname: str = "clavain") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    def psql(self, sql: str, dbname: str = "clavain") -> subprocess.CompletedProcess[str]:
        return subprocess.run([find_bin("psql") or "psql", "-X", "-q", "-v", "ON_ERROR_STOP=1",
                               "-d", self.url(dbname), "-c", sql],
                              capture_output=True, text=True, timeout=60)

    def new_schema_url(self) -> str:
        """A URL whose tables live in a fresh schema of their own (cheaper than a database)."""
        import psycopg

        name = f"t{os.getpid()}_{next(self._schemas)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {name}")
        return f"{self.url()}?options=-csearch_path%3D{name}"


def main(argv: list[str]) -> int:
    """`python3 tests/pgserver.py start` prints {"url", "root"} of a new server left running;
    `python3 tests/pgserver.py stop ROOT` stops and deletes it (scripts/teams.sh uses both)."""
    import json

    if argv[:1] == ["start"]:
        reason = missing_reason()
        if reason:
            print(reason, file=__import__("sys").stderr)
            return 1
        cluster = Cluster().start()
        print(json.dumps({"url": cluster.url(), "root": str(cluster.root)}))
        return 0
    if len(argv) == 2 and argv[0] == "stop":
        Cluster(Path(argv[1])).destroy()
        return 0
    print("usage: pgserver.py start | stop ROOT", file=__import__("sys").stderr)
    return 2


if __name__ == "__main__":
    import sys

    raise SystemExit(main(sys.argv[1:]))
