"""The database connection: URL handling, SQLite pragmas, sessions, and errors in one line.

SQLite is opened in WAL mode with a busy timeout, so a reader (the dashboard, `runs list`) never
blocks a writer and two writers wait for each other instead of failing at once. Every database
failure a user can cause (locked, unreadable, not writable) becomes a `UserError` naming the
file and the fix.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DatabaseError, IntegrityError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from infermeter.errors import UserError
from infermeter.paths import data_dir
from infermeter.util.jsonio import to_json_text

DB_ENV = "INFERMETER_DB"
TIMEOUT_ENV = "INFERMETER_DB_TIMEOUT_S"
DEFAULT_TIMEOUT_S = 10.0


def default_url() -> str:
    """`INFERMETER_DB` if set, else a SQLite file in the user data folder."""
    return os.environ.get(DB_ENV) or f"sqlite:///{data_dir() / 'infermeter.db'}"


def normalise_url(url: str | os.PathLike[str]) -> str:
    """Accept a plain file path (str or Path) as well as a URL."""
    url = os.fspath(url)
    return url if "://" in url else f"sqlite:///{Path(url).expanduser().resolve()}"


def sqlite_path(url: str) -> Path | None:
    """The file behind a SQLite URL; None for other databases and in-memory SQLite.

    Also SQLite's URI form, `sqlite:///file:/path/x.db?mode=ro&uri=true` (a read-only open).
    """
    if not url.startswith("sqlite:///") or url == "sqlite:///:memory:":
        return None
    rest = url.removeprefix("sqlite:///")
    if rest.startswith("file:"):
        return Path(urlsplit(rest.split("?", 1)[0].removeprefix("file:")).path)
    return Path(rest)


def shown_url(url: str) -> str:
    """`url` as it may be shown: SQLAlchemy's rendering with the password as `***`."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return url.split("@", 1)[-1] if "@" in url else url  # not a URL: never its user part


def _driver(url: str) -> str | None:
    """The DBAPI driver SQLAlchemy picks for `url` (its default where the URL names none)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    try:
        return str(make_url(url).get_dialect().driver)
    except (ArgumentError, NoSuchModuleError):
        return None


def make_engine(url: str, timeout_s: float) -> Engine:
    """An engine; on SQLite every connection gets WAL, NORMAL sync, a busy timeout and FKs."""
    # JSON columns hold strict JSON: NaN and infinities (a sensor's NaN, an overflowed figure)
    # become null, which every database accepts (PostgreSQL refuses the NaN token)
    kwargs: dict[str, Any] = {"json_serializer": to_json_text}
    if url.startswith("postgresql") and _driver(url) == "psycopg":  # infermeter[postgres]'s
        from infermeter.extras import require

        require("postgres", f"--db {shown_url(url)}")
    if url.startswith("sqlite"):
        kwargs["connect_args"] = {"timeout": timeout_s}
    engine = create_engine(url, **kwargs)
    if url.startswith("sqlite"):
        timeout_ms = int(timeout_s * 1000)

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            # auto_vacuum and WAL mode are written into the file: `StoreCore._sqlite_modes`
            # sets them once the database is known to be ours, never on one about to be refused
            # WAL + NORMAL: commits skip the fsync (the WAL is synced at checkpoints); a power
            # cut can lose the last commits, never corrupt the file. A sweep commits per point,
            # and the fsync was most of its time outside model calls.
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute(f"PRAGMA busy_timeout={timeout_ms}")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()

    return engine


class DiskFull(UserError):
    """A write the database refused for lack of space.

    SQLite says "disk is full", PostgreSQL "No space left on device": what was stored before
    is kept, the write is not.
    """


class StoreCore:
    """Engine, sessions and error translation: what every part of the store builds on.

    Args:
        url: SQLAlchemy URL or SQLite file path; None uses `default_url()`.
        timeout_s: how long a write waits for a lock before giving up (SQLite).
    """

    def __init__(
        self,
        url: str | os.PathLike[str] | None = None,
        *,
        timeout_s: float | None = None,
        create: bool = True,
    ) -> None:
        self.url = normalise_url(url or default_url())
        if timeout_s is None:
            timeout_s = float(os.environ.get(TIMEOUT_ENV, DEFAULT_TIMEOUT_S))
        self.timeout_s = timeout_s
        path = sqlite_path(self.url)
        if path is not None and not create and not path.exists():
            # a command that only reads must not leave an empty database (or folder) behind
            raise UserError(
                f"no database at {str(path)!r}",
                "run `infermeter profile` first, or point --db (or INFERMETER_DB) at one",
            )
        if path is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise UserError(
                    f"cannot create the database folder {str(path.parent)!r} ({exc.strerror})",
                    "pass a writable --db path or set INFERMETER_DB",
                ) from None
        self.engine = make_engine(self.url, timeout_s)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)

    def _sqlite_modes(self, new: bool) -> None:
        """A SQLite database's file modes, set once it is known to be ours.

        `new` (no table yet): incremental auto-vacuum, so deleted pages are given back
        (`Store.reclaim`); it can only be chosen before the first table. Then WAL mode (a
        reader never blocks a writer), read first: a database already in WAL is left alone,
        so a read-only open (`sqlite:///file:x.db?mode=ro&uri=true`) of one works; one that
        cannot be switched (read-only, not in WAL) stays as it is, readable.
        """
        if not self.url.startswith("sqlite"):
            return
        if new:
            with self.engine.connect() as conn:
                conn.exec_driver_sql("PRAGMA auto_vacuum=INCREMENTAL")
        with self.engine.connect() as conn:
            mode = str(conn.exec_driver_sql("PRAGMA journal_mode").scalar() or "").lower()
            if mode in ("wal", "memory"):
                return
            # read-only: the file keeps its journal mode, reads still work
            with contextlib.suppress(OperationalError):
                conn.exec_driver_sql("PRAGMA journal_mode=WAL")

    @property
    def where(self) -> str:
        """The database file or URL for messages, never with its password (`***`).

        Every card, banner, error, migrate summary and dashboard message names the database
        through this, so a PostgreSQL password in `--db` is printed, logged or sent nowhere.
        """
        path = sqlite_path(self.url)
        return str(path) if path is not None else shown_url(self.url)

    @contextmanager
    def _guard(self, action: str) -> Iterator[None]:
        """Turn database failures into one-line user errors."""
        try:
            yield
        except OperationalError as exc:
            text = str(exc.orig) if exc.orig else str(exc)
            if "locked" in text or "busy" in text:
                raise UserError(
                    f"database {self.where!r} is locked by another process ({action})",
                    "wait for it to finish, or use another --db",
                ) from None
            if "disk is full" in text or "No space left" in text:
                raise DiskFull(
                    f"the disk holding database {self.where!r} is full ({action})",
                    "free some space (what was stored before is kept), or use another --db",
                ) from None
            raise UserError(
                f"cannot {action} database {self.where!r}: {text}",
                "check the path and permissions, or use another --db",
            ) from None
        except IntegrityError:
            # a constraint one of our own writes broke: a bug in the writer, not the user's
            # file, which "move the file aside (it is not an infermeter database)" said it was
            raise
        except DatabaseError as exc:
            text = str(exc.orig) if exc.orig else str(exc)
            if "malformed" in text:  # ours (or another's), with pages damaged: not foreign
                path = sqlite_path(self.url)
                raise UserError(
                    f"database {self.where!r} is damaged (SQLite: {text})",
                    f"keep it, and recover what it holds into a new file: sqlite3 {path} .recover "
                    "| sqlite3 recovered.db, then use --db recovered.db",
                ) from None
            raise UserError(
                f"database {self.where!r} is unreadable: {text}",
                "move the file aside (it is not a SQLite database, or its first page is "
                "damaged) or use another --db",
            ) from None

    @contextmanager
    def session(self, action: str = "write") -> Iterator[Session]:
        """A session that commits on success and rolls back on error."""
        with self._guard(action), self._sessions() as s, s.begin():
            yield s
