"""`infermeter plot SWEEP`: redraw a sweep's figures from stored results or its JSON."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from infermeter.cli.guard import guard
from infermeter.cli.options import DB
from infermeter.cli.output import writable_dir
from infermeter.errors import UserError


@guard
def plot_command(
    source: str = typer.Argument(..., help="A stored sweep id (or prefix) or a sweep JSON file."),
    out: Path = typer.Option(Path("."), help="Folder for the PNG and CSV files."),
    db: str = DB,
) -> None:
    """Redraw a sweep's figures from stored results, without rerunning anything."""
    import json

    from infermeter.experiments import EXPERIMENTS
    from infermeter.experiments.runner import draw
    from infermeter.report.figures import breakdown_figure, varied_knobs
    from infermeter.run.sweep import stored_sweep
    from infermeter.store import Store

    path = Path(source)
    if path.suffix == ".json":
        if not path.is_file():
            raise UserError(f"{source!r} does not exist", "give a sweep JSON file or a sweep id")
        try:
            doc = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise UserError(f"{source} is not JSON ({exc.msg})", "give a sweep JSON file") from None
        if not isinstance(doc, dict) or "summary" not in doc or "meta" not in doc:
            raise UserError(
                f"{source} is not a sweep document", "use a sweep.json infermeter wrote"
            )
    else:
        doc = stored_sweep(Store(db, create=False), source)
    if not doc["summary"]:
        raise UserError("the sweep has no finished points to plot", "run or resume it first")
    out_dir = writable_dir(out)
    exp = EXPERIMENTS.get(doc["meta"].get("name") or "")
    if exp is not None:
        files = draw(exp, doc, out_dir)
    else:
        x = varied_knobs(doc)[0]
        files = breakdown_figure(doc, x, out_dir, f"sweep-{doc['meta']['sweep_id']}-{x}")
    for f in files:
        Console(soft_wrap=True).print(f"wrote {f}", markup=False)
