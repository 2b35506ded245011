"""A real PostgreSQL server for the tests: `initdb` in a temp folder, `pg_ctl` on a free port.

Debian's `postgresql` package provides the binaries (`make test` installs it where it can). The
server listens on 127.0.0.1 and on a Unix socket inside its own folder, trusts local
connections, and skips fsync (the tests check behaviour, not durability against power cuts).
PostgreSQL refuses to run as root, so under root it runs as the `postgres` user the Debian
package creates, from a folder that user owns. Every test gets a database of its own.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path

USER = "infermeter"


def pg_bin_dir() -> Path | None:
    """Where initdb and pg_ctl live: on PATH, else Debian's /usr/lib/postgresql/N/bin."""
    found = shutil.which("pg_ctl")
    if found and shutil.which("initdb"):
        return Path(found).resolve().parent
    dirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda d: int(d.split("/")[-2]))
    return Path(dirs[-1]) if dirs else None


def missing_reason() -> str | None:
    """Why no server can start here (None when one can)."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (pip install 'infermeter[postgres]')"
    if pg_bin_dir() is None:
        return "PostgreSQL binaries (initdb, pg_ctl) not found: apt-get install postgresql"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no `postgres` user to run the server as"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresServer:
    """One server for the test session; `new_database()` gives each test a fresh database."""

    def __init__(self) -> None:
        self.bin = pg_bin_dir()
        assert self.bin is not None
        # directly under /tmp: pytest's own temp folders are private to root
        self.root = Path(tempfile.mkdtemp(prefix="infermeter-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self.runas: list[str] = []
        if os.geteuid() == 0:
            pg = pwd.getpwnam("postgres")
            os.chown(self.root, pg.pw_uid, pg.pw_gid)
            self.runas = ["runuser", "-u", "postgres", "--"]

    def _run(self, *args: str) -> None:
        assert self.bin is not None
        cmd = [*self.runas, str(self.bin / args[0]), *args[1:]]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            log = self.root / "server.log"
            tail = log.read_text()[-2000:] if log.exists() else ""
            raise RuntimeError(f"{' '.join(cmd)} failed: {done.stderr[-2000:]} {tail}")

    def start(self) -> PostgresServer:
        """initdb (trust, UTF-8) and start the server; returns once it accepts connections."""
        self._run(
            "initdb", "-D", str(self.data), "-U", USER, "-A", "trust", "-E", "UTF8", "--no-sync"
        )
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
        )
        self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-l",
            str(self.root / "server.log"),
            "-w",
            "-t",
            "60",
            "-o",
            options,
            "start",
        )
        return self

    def url(self, database: str = "postgres") -> str:
        """The SQLAlchemy URL of a database on this server (psycopg 3 driver)."""
        return f"postgresql+psycopg://{USER}@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """Create an empty database; its URL."""
        import psycopg

        name = "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(
            f"host=127.0.0.1 port={self.port} user={USER} dbname=postgres", autocommit=True
        ) as c:
            c.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        """Stop the server at once and remove its folder."""
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
