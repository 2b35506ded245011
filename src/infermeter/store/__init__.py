"""Runs kept in a database: SQLite by default, PostgreSQL (or any SQLAlchemy URL) by URL."""

from infermeter.store.repository import Store, default_url
from infermeter.store.schema import SCHEMA_VERSION

__all__ = ["SCHEMA_VERSION", "Store", "default_url"]
