"""`infermeter report RUN_OR_SWEEP --out DIR`: Markdown, one HTML file, CSV and PNG."""

from __future__ import annotations

import sys
from pathlib import Path

import typer
from rich.console import Console

from infermeter.cli.guard import guard
from infermeter.cli.options import DB
from infermeter.cli.output import writable_dir
from infermeter.errors import UserError


@guard
def report_command(
    target: str = typer.Argument(
        ...,
        help="A run id or a sweep id (or a unique prefix), or a JSON file written by "
        "`bench attention`, `bench model` or `inspect ... --json`.",
    ),
    out: Path = typer.Option(Path("report"), help="Folder for the report files."),
    db: str = DB,
    overwrite: bool = typer.Option(
        False, "--overwrite", help="Replace a previous report in --out (asked in a terminal)."
    ),
) -> None:
    """Write report.md, report.html (self-contained), CSV tables and PNG figures."""
    from infermeter.analysis.analyze import analyze_run
    from infermeter.report.build import run_report, sweep_report
    from infermeter.run.sweep import stored_sweep
    from infermeter.store import Store

    if target.endswith(".json") or Path(target).is_file():
        _report_file(Path(target), out, overwrite)
        return
    store = Store(db, create=False)
    run, sweep = None, None
    try:
        run = store.get(target)
    except UserError as run_error:
        try:
            sweep = stored_sweep(store, target)
        except UserError:
            raise UserError(
                f"no run or sweep {target!r} in {store.where}",
                "see `infermeter runs list` and `infermeter sweeps list`",
            ) from run_error
    _refuse_to_overwrite(out, overwrite)
    folder = writable_dir(out)
    if sweep is not None:
        files = sweep_report(sweep, folder)
    else:
        assert run is not None
        analysis = None
        if run.samples and run.model_info.get("shape"):
            measured = store.measured_ceilings(str((run.device or {}).get("name")))
            analysis = analyze_run(run, measured)
        files = run_report(run, folder, analysis)
    console = Console(soft_wrap=True)
    for f in files:
        console.print(f"wrote {f}", markup=False)


def _report_file(path: Path, out: Path, overwrite: bool) -> None:
    """A benchmark or inspect document kept as a file, rendered like a run."""
    import json

    from infermeter.report.file_report import file_report

    try:
        doc = json.loads(path.read_text())
    except OSError as exc:
        raise UserError(
            f"cannot read {str(path)!r} ({exc.strerror or exc})", "give an existing JSON file"
        ) from None
    except json.JSONDecodeError as exc:
        raise UserError(
            f"{str(path)!r} is not valid JSON ({exc.msg}, line {exc.lineno})",
            "give a file written by `bench` or `inspect --json`",
        ) from None
    _refuse_to_overwrite(out, overwrite)
    folder = writable_dir(out)
    console = Console(soft_wrap=True)
    for f in file_report(doc, folder):
        console.print(f"wrote {f}", markup=False)


def _refuse_to_overwrite(out: Path, overwrite: bool) -> None:
    """A folder that holds a previous report is replaced only when asked to (or confirmed)."""
    previous = out / "report.md"
    if overwrite or not previous.exists():
        return
    if sys.stdin.isatty() and typer.confirm(
        f"{out} holds a previous report; replace its files?", err=True
    ):
        return
    raise UserError(
        f"{str(out)!r} holds a previous report (report.md)",
        "pass --overwrite to replace it, or choose another --out",
    )
