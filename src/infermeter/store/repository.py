"""`Store`: runs and their samples in SQLite (default) or any SQLAlchemy URL (PostgreSQL).

The store is assembled from one part per job: `engine.py` (connection, pragmas, errors),
`upgrade.py` (schema versions), `writes.py`, `queries.py`, `live.py` (the dashboard's feed)
and `rows.py` (row mapping). Opening a store creates missing tables, upgrades an older schema,
and marks runs of this host whose process is gone as `crashed`.

A database it refuses (somebody else's tables, a newer schema, nothing at all for a command that
only reads) is refused before anything is written to it: not the tables, not SQLite's WAL mode.
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import TYPE_CHECKING

from sqlalchemy import inspect
from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError

from infermeter.errors import UserError
from infermeter.store.engine import default_url
from infermeter.store.live import StoreLiveFeed
from infermeter.store.queries import StoreQueries
from infermeter.store.schema import Base
from infermeter.store.upgrade import check_version, refuse_newer
from infermeter.store.writes import StoreWrites

if TYPE_CHECKING:
    import pandas as pd


class Store(StoreWrites, StoreQueries, StoreLiveFeed):
    """The database of runs.

    Args:
        url: SQLAlchemy URL or SQLite file path; None uses `default_url()`.
        timeout_s: how long a write waits for a lock before giving up (SQLite).
        create: False for commands that only read: a missing SQLite file is an error, not an
            empty new database.
        adopt: add infermeter's tables to a database that holds other tables and no
            infermeter schema marker (refused otherwise: it is somebody else's database).
    """

    def __init__(
        self,
        url: str | os.PathLike[str] | None = None,
        *,
        timeout_s: float | None = None,
        create: bool = True,
        adopt: bool = False,
    ) -> None:
        super().__init__(url, timeout_s=timeout_s, create=create)
        with self._guard("open"):
            tables = set(inspect(self.engine).get_table_names())
            if tables and "meta" not in tables and not adopt:
                shown = ", ".join(sorted(tables)[:4]) + (", ..." if len(tables) > 4 else "")
                raise UserError(
                    f"database {self.where!r} holds tables that are not infermeter's ({shown})",
                    "use another --db, or add infermeter's tables to it with "
                    "`infermeter db adopt --db ...`",
                )
            if not tables and not create and not adopt:
                # a command that only reads must not turn an empty database into ours
                raise UserError(
                    f"database {self.where!r} holds no infermeter runs (it is empty)",
                    "run `infermeter profile` with this --db first, or point --db at another",
                )
            if "meta" in tables:
                with self._sessions() as s:
                    refuse_newer(s)
            self._sqlite_modes(new=not tables)
            self._create_and_upgrade()
        # housekeeping, not the command's job: a full disk must not stop `runs list` from
        # reading what is there; the next open with room marks them
        with contextlib.suppress(UserError):
            self.recover_crashed()

    def _create_and_upgrade(self, attempts: int = 5) -> None:
        """Create missing tables and upgrade the schema, safe against a process doing the same.

        Each step checks before it acts, so when another process wins the race between check
        and act ("already exists", "duplicate column"), doing it again finds the work done.
        """
        for attempt in range(attempts):
            try:
                Base.metadata.create_all(self.engine)
                with self._sessions() as s, s.begin():
                    check_version(s)
                return
            except (OperationalError, IntegrityError, ProgrammingError) as exc:
                if not _raced(exc) or attempt == attempts - 1:
                    raise
                time.sleep(0.05 * (attempt + 1))

    def runs_frame(
        self,
        *,
        model: str | None = None,
        status: str | None = None,
        since: str | None = None,
        limit: int = 50,
    ) -> pd.DataFrame:
        """`list_runs` as a pandas DataFrame (the same filters)."""
        import pandas as pd

        return pd.DataFrame(self.list_runs(model=model, status=status, since=since, limit=limit))

    def delete(self, run_id: str, force: bool = False) -> str:
        """Delete a run and its samples; return the full id deleted (a running one: `force`)."""
        rid = self.resolve(run_id)
        self.delete_many([rid], force=force)
        return rid


#: what a database says when another process created the same table, type, column or row first:
#: SQLite "already exists" / "duplicate column"; PostgreSQL also "duplicate key value violates
#: unique constraint pg_type_typname_nsp_index" (a concurrent CREATE TABLE) and, for the version
#: row, a unique violation on the meta table's key (SQLite: "UNIQUE constraint failed: meta.key",
#: seen when a reader opened a database the moment a `load` process created it)
RACE_MARKS = (
    "already exists",
    "duplicate column",
    "duplicate key",
    "UniqueViolation",
    "UNIQUE constraint failed: meta.",
)


def _raced(exc: Exception) -> bool:
    """Whether `exc` is another process having done the same schema step first."""
    orig = getattr(exc, "orig", None)
    text = f"{type(orig).__name__}: {orig or exc}"
    return any(mark in text for mark in RACE_MARKS)


__all__ = ["Store", "default_url"]
