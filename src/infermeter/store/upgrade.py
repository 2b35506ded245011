"""Schema versions: a newer database is refused, an older one is upgraded in place.

New tables come from `create_all`; columns added or renamed since version 1 are listed in
`schema.py` and applied here, each only when the database lacks it, so an upgrade that was
interrupted simply runs again.
"""

from __future__ import annotations

from sqlalchemy import inspect, text
from sqlalchemy.orm import Session

from infermeter.errors import UserError
from infermeter.store.schema import ADDED_COLUMNS, RENAMED_COLUMNS, SCHEMA_VERSION, Meta


def refuse_newer(s: Session) -> None:
    """Refuse a database whose schema is newer than this infermeter's, reading only."""
    row = s.get(Meta, "schema_version")
    if row is not None and int(row.value) > SCHEMA_VERSION:
        raise UserError(
            f"database schema version {row.value} is newer than this infermeter ({SCHEMA_VERSION})",
            "upgrade infermeter or use another --db",
        )


def check_version(s: Session) -> None:
    """Record the version in a new database, upgrade an older one, refuse a newer one."""
    row = s.get(Meta, "schema_version")
    if row is None:
        s.add(Meta(key="schema_version", value=str(SCHEMA_VERSION)))
    elif int(row.value) > SCHEMA_VERSION:
        raise UserError(
            f"database schema version {row.value} is newer than this infermeter ({SCHEMA_VERSION})",
            "upgrade infermeter or use another --db",
        )
    else:  # older, or a development copy of this version: add what is missing
        upgrade(s, 1)
        row.value = str(SCHEMA_VERSION)


def _columns(s: Session, table: str) -> set[str]:
    return {c["name"] for c in inspect(s.connection()).get_columns(table)}


def upgrade(s: Session, version: int) -> None:
    """Add and rename the columns that versions after `version` introduced."""
    for v in range(version + 1, SCHEMA_VERSION + 1):
        for table, column, kind in ADDED_COLUMNS.get(v, []):
            if column not in _columns(s, table):
                s.execute(text(f"ALTER TABLE {table} ADD COLUMN {column} {kind}"))
        for table, old, new in RENAMED_COLUMNS.get(v, []):
            have = _columns(s, table)
            if old in have and new not in have:
                s.execute(text(f"ALTER TABLE {table} RENAME COLUMN {old} TO {new}"))
