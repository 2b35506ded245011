"""`infermeter runs list|show|delete`: look again at stored runs."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from typing import Any

import typer
from rich.console import Console

from infermeter.cli.guard import err_console, fail, guard
from infermeter.cli.options import DB, JSON_OUT
from infermeter.errors import UserError
from infermeter.util import fmt
from infermeter.util.jsonio import print_json

runs_app = typer.Typer(help="List, show and delete stored runs.", no_args_is_help=True)
STATUSES = ("running", "finished", "failed", "crashed", "terminated")
#: the furthest back --since and --max-age-days reach (a century: a larger one overflowed)
MAX_DAYS = 36_500


def parse_since(value: str | None) -> str | None:
    """'7d', '12h', '30m' or an ISO date -> ISO timestamp (UTC) to compare with `created`."""
    if not value:
        return None
    m = re.fullmatch(r"(\d+)([dhm])", value.strip())
    now = dt.datetime.now(dt.timezone.utc)
    if m:
        n, unit = int(m.group(1)), m.group(2)
        per_day = {"d": 1, "h": 24, "m": 24 * 60}[unit]
        if n > MAX_DAYS * per_day:  # past year 1: every run is newer
            raise UserError(f"--since {value!r} is too far back", f"use at most {MAX_DAYS}d")
        delta = {
            "d": dt.timedelta(days=n),
            "h": dt.timedelta(hours=n),
            "m": dt.timedelta(minutes=n),
        }
        return (now - delta[unit]).isoformat(timespec="milliseconds")
    try:
        when = dt.datetime.fromisoformat(value.strip())
    except ValueError:
        raise UserError(
            f"--since {value!r} is not a date", "use e.g. 7d, 12h or 2026-11-01"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return when.isoformat(timespec="milliseconds")


@runs_app.command("list")
@guard
def list_runs(
    model: str = typer.Option(None, help="Only runs of this model spec."),
    status: str = typer.Option(None, help="running, finished, failed or crashed."),
    since: str = typer.Option(None, help="Only runs created since: 7d, 12h or a date."),
    limit: int = typer.Option(50, help="At most this many, newest first."),
    db: str = DB,
    json_out: bool = JSON_OUT,
) -> None:
    """Newest runs first, with median TTFT, TPOT and throughput, mode and model knobs."""
    from infermeter.cli.render import runs_table
    from infermeter.store import Store

    if status and status not in STATUSES:
        raise UserError(f"unknown status {status!r}", f"use one of {', '.join(STATUSES)}")
    if limit < 1:
        raise UserError(f"--limit {limit} is below 1", "use 1 or more")
    store = Store(db, create=False)
    rows = store.list_runs(model=model, status=status, since=parse_since(since), limit=limit)
    if json_out:
        print_json({"runs": rows})
    else:
        console = Console(soft_wrap=True)
        console.print(runs_table(rows, width=console.width))


@runs_app.command("show")
@guard
def show_run(
    run_id: str = typer.Argument(..., help="Run id or a unique prefix of it."),
    db: str = DB,
    json_out: bool = JSON_OUT,
    show_text: bool = typer.Option(False, help="Print the last sample's prompt and output."),
) -> None:
    """One run's summary (or its full JSON)."""
    from infermeter.cli.render import run_card
    from infermeter.store import Store

    store = Store(db, create=False)
    run = store.get(run_id)
    if json_out:
        print_json(run.to_json())
    else:
        Console(soft_wrap=True).print(run_card(run, where=store.where, show_text=show_text))


def _measured_delete(store: Any, delete: Callable[[], Any], free: Callable[[], int]) -> str:
    """Run `delete` then `free`; say what the disk got back, the data apart from the log.

    SQLite: the write-ahead log is checkpointed into the file first, so the file holds every
    row; the file's size before less after is what the delete gave back, and the log's size
    before is said beside it (`runs delete` said "3.3 MiB given back" of a 0.9 MiB database,
    most of it the log: issue 59). Other databases report what their vacuum freed.
    """
    before = store.disk_parts()
    if before is not None:
        store.checkpoint()
        held = store.disk_parts()[0]
    delete()
    freed = free()
    after = store.disk_parts()
    if before is None or after is None:
        return f"{freed / 2**20:.1f} MiB given back"
    said = f"{max(0, held - after[0]) / 2**20:.1f} MiB given back"
    if before[1] >= 0.05 * 2**20:
        said += f" (and {before[1] / 2**20:.1f} MiB of write-ahead log checkpointed)"
    return said


@runs_app.command("delete")
@guard
def delete_run(
    run_id: str = typer.Argument(..., help="Run id or a unique prefix of it."),
    db: str = DB,
    force: bool = typer.Option(False, "--force", help="Delete it even while it is running."),
) -> None:
    """Delete a run and all its samples (a run in progress only with --force)."""
    from infermeter.store import Store

    store = Store(db, create=False)
    store.get(run_id)  # an unknown id is one line before anything is touched
    rid: list[str] = []
    said = _measured_delete(
        store, lambda: rid.append(store.delete(run_id, force=force)), store.reclaim
    )
    err_console.print(f"deleted run {rid[0]}; {said}", markup=False)


@runs_app.command("cleanup")
@guard
def cleanup_runs(
    max_age_days: float = typer.Option(..., help="Delete runs created more than N days ago."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    db: str = DB,
    force: bool = typer.Option(False, "--force", help="Also delete runs still in progress."),
) -> None:
    """Delete old runs, after saying how many and asking (or --yes); in-progress ones: --force."""
    from infermeter.store import Store

    if max_age_days < 0:
        raise UserError(f"--max-age-days {max_age_days:g} is negative", "use 0 or more days")
    if not max_age_days <= MAX_DAYS:  # NaN too
        raise UserError(
            f"--max-age-days {max_age_days:g} is out of range", f"use 0..{MAX_DAYS} days"
        )
    store = Store(db, create=False)
    # to the millisecond, as `created` is kept: cut to the second, "...:01+00:00" sorted before
    # a run created at "...:01.400+00:00", so `--max-age-days 0` kept the runs of its own second
    cutoff = dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=max_age_days)
    ids = store.older_than(cutoff.isoformat(timespec="milliseconds"), running=force)
    kept = len(store.older_than(cutoff.isoformat(timespec="milliseconds"), running=True)) - len(ids)
    if kept:
        err_console.print(
            f"{fmt.plural(kept, 'run')} still in progress {'is' if kept == 1 else 'are'} kept "
            "(--force deletes them)",
            markup=False,
        )
    if not ids:
        err_console.print(
            f"no runs older than {max_age_days:g} days in {store.where}", markup=False
        )
        return
    if not yes and not typer.confirm(
        f"delete {fmt.plural(len(ids), 'run')} older than {max_age_days:g} days from "
        f"{store.where}?",
        err=True,
    ):
        raise fail("nothing deleted", 1)
    said = _measured_delete(store, lambda: store.delete_many(ids, force=force), store.vacuum)
    err_console.print(f"deleted {fmt.plural(len(ids), 'run')}; {said}", markup=False)
