"""`infermeter db`: the database itself: give deleted space back, adopt a foreign database."""

from __future__ import annotations

import typer

from infermeter.cli.guard import err_console, guard

db_app = typer.Typer(help="The database itself: vacuum, adopt.", no_args_is_help=True)
_DB = typer.Option(None, "--db", help="Database URL or SQLite file.")


@db_app.command("vacuum")
@guard
def vacuum(db: str = _DB) -> None:
    """Give the space of deleted runs back to the disk (SQLite VACUUM, PostgreSQL VACUUM FULL)."""
    from infermeter.store import Store

    store = Store(db, create=False)
    freed = store.vacuum()
    err_console.print(f"{store.where}: {freed / 2**20:.1f} MiB given back", markup=False)


@db_app.command("adopt")
@guard
def adopt(db: str = _DB) -> None:
    """Add infermeter's tables to an existing database that holds other tables."""
    from infermeter.store import Store

    store = Store(db, create=False, adopt=True)
    err_console.print(f"{store.where}: infermeter's tables added", markup=False)
