"""Runs kept in a database: SQLite by default, PostgreSQL (or any SQLAlchemy URL) by URL."""

from typing import TYPE_CHECKING

from infermeter.util.lazy import lazy_exports

if TYPE_CHECKING:  # what the names are, for type checkers; at run time each loads on first use
    from infermeter.store.repository import Store, default_url
    from infermeter.store.schema import SCHEMA_VERSION

__getattr__, __dir__ = lazy_exports(
    globals(),
    {
        "Store": "infermeter.store.repository",
        "default_url": "infermeter.store.repository",
        "SCHEMA_VERSION": "infermeter.store.schema",
    },
)

__all__ = ["SCHEMA_VERSION", "Store", "default_url"]
