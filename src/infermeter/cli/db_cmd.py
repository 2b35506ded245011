"""`infermeter db`: the database itself: vacuum, adopt a foreign one, migrate runs into another."""

from __future__ import annotations

import typer

from infermeter.cli.guard import err_console, guard
from infermeter.cli.options import DB

db_app = typer.Typer(help="The database itself: vacuum, adopt, migrate.", no_args_is_help=True)


@db_app.command("vacuum")
@guard
def vacuum(db: str = DB) -> None:
    """Give the space of deleted runs back to the disk (SQLite VACUUM, PostgreSQL VACUUM FULL)."""
    from infermeter.store import Store

    store = Store(db, create=False)
    freed = store.vacuum()
    err_console.print(f"{store.where}: {freed / 2**20:.1f} MiB given back", markup=False)


@db_app.command("adopt")
@guard
def adopt(db: str = DB) -> None:
    """Add infermeter's tables to an existing database that holds other tables."""
    from infermeter.store import Store

    store = Store(db, create=False, adopt=True)
    err_console.print(f"{store.where}: infermeter's tables added", markup=False)


@db_app.command("migrate")
@guard
def migrate_command(
    to: str = typer.Option(..., "--to", help="The destination database URL (PostgreSQL)."),
    db: str = DB,
) -> None:
    """Copy the runs, sweeps, calibrations and predictions of --db into --to (e.g. PostgreSQL).

    --db is by default the local SQLite file; running it again copies only what is new.
    """
    from infermeter.errors import UserError
    from infermeter.store import Store
    from infermeter.store.engine import normalise_url
    from infermeter.store.migrate import migrate

    source = Store(db, create=False)
    if normalise_url(to) == source.url:
        raise UserError("--to is the database the runs come from", "give another --to")
    dest = Store(to)

    def on_run(done: int, total: int, run_id: str) -> None:
        if done == total or done % 25 == 0:
            err_console.print(f"  {done}/{total} runs looked at", markup=False, style="dim")

    report = migrate(source, dest, on_run)
    err_console.print(
        f"{source.where} -> {dest.where}: copied {report.runs} runs ({report.samples} samples), "
        f"{report.sweeps} sweeps, {report.ceilings} calibrations, {report.predictions} "
        f"predictions; {report.already_there} runs were already there"
        + (
            f", {report.still_running} still running were left (migrate again when they end)"
            if report.still_running
            else ""
        ),
        markup=False,
    )
