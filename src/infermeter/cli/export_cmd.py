"""`infermeter export RUN --format chrome-trace|json`: a stored run as a file."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from infermeter.cli.guard import err_console, guard
from infermeter.cli.options import DB
from infermeter.cli.output import writable_dir
from infermeter.errors import UserError
from infermeter.util.jsonio import clean_json, write_json

if TYPE_CHECKING:
    from infermeter.run.results import RunResult


FORMATS = ("chrome-trace", "json", "csv", "parquet", "vllm", "guidellm", "aiperf")


@guard
def export_command(
    run_id: str = typer.Argument(..., help="Run id or a unique prefix of it."),
    format: str = typer.Option(
        "chrome-trace",
        "--format",
        "-f",
        help="chrome-trace, json, csv or parquet (samples); or a load run as a peer's file: "
        "vllm (bench serve result JSON), guidellm (benchmarks JSON), aiperf "
        "(profile_export.jsonl records).",
    ),
    out: Path = typer.Option(Path("."), help="Folder to write into."),
    db: str = DB,
    detail: str = typer.Option("parts", help="chrome-trace: blocks, parts (no norms) or full."),
) -> None:
    """Write a run as a Chrome/Perfetto trace (open in ui.perfetto.dev) or as its JSON."""
    from infermeter.report.trace import DETAIL, write_chrome_trace
    from infermeter.store import Store
    from infermeter.util.atomic import atomic_path

    if format not in FORMATS:
        raise UserError(f"unknown format {format!r}", f"use one of {', '.join(FORMATS)}")
    if detail not in DETAIL:
        raise UserError(f"unknown detail {detail!r}", f"use one of {', '.join(DETAIL)}")
    if format == "parquet":
        from infermeter.extras import require

        require("parquet", "--format parquet")
    folder = writable_dir(out)
    run = Store(db, create=False).get(run_id)
    if format in ("vllm", "guidellm"):
        from infermeter.serving.formats import stored_as_document, to_guidellm, to_vllm

        convert = to_vllm if format == "vllm" else to_guidellm
        path = folder / f"run-{run.run_id}.{format}.json"
        write_json(path, clean_json(convert(stored_as_document(run))))
        size = path.stat().st_size
    elif format == "aiperf":
        import json

        from infermeter.serving.formats import stored_as_document, to_aiperf

        path = folder / f"run-{run.run_id}.aiperf.jsonl"
        lines = [
            json.dumps(clean_json(r), allow_nan=False) for r in to_aiperf(stored_as_document(run))
        ]
        with atomic_path(path) as tmp:
            Path(tmp).write_text("\n".join(lines) + "\n", encoding="utf-8")
        size = path.stat().st_size
    elif format == "json":
        path = folder / f"run-{run.run_id}.json"
        write_json(path, clean_json(run.to_json()))
        size = path.stat().st_size
    elif format in ("csv", "parquet"):
        frame = samples_frame(run)
        path = folder / f"run-{run.run_id}.{format}"
        with atomic_path(path) as tmp:
            if format == "csv":
                frame.to_csv(tmp, index=False)
            else:
                frame.to_parquet(tmp, index=False)
        size = path.stat().st_size
    else:
        path = folder / f"run-{run.run_id}.trace.json"
        size = write_chrome_trace(run, path, detail)
        if run.trace is None:
            err_console.print(
                "note: minimal-mode run: the trace has phases and tokens only; "
                "profile with --mode standard for per-layer events",
                markup=False,
            )
    err_console.print(f"wrote {path} ({size / 1e6:.2f} MB)", markup=False)


def samples_frame(run: RunResult) -> Any:
    """One row per sample: run id, knob values (knob_*), metrics, step times as a list."""
    import pandas as pd

    rows = []
    for s in run.samples:
        doc = run.sample_row(s)
        row = {k: v for k, v in doc.items() if k not in ("config", "memory", "energy")}
        row["output_text"] = " | ".join(doc["output_text"])  # in its place among the columns
        row["step_ms"] = " ".join(f"{v:.4f}" for v in doc["step_ms"])
        knobs = {f"knob_{k}": v for k, v in doc["config"].items()}
        rows.append({"run_id": run.run_id, **knobs, **row})
    return pd.DataFrame(rows)
