"""`infermeter analyze RUN`: roofline, bounds and bottleneck findings of a stored run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich import box
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from infermeter.cli.guard import guard
from infermeter.cli.options import DB, JSON_OUT
from infermeter.cli.output import writable_dir
from infermeter.util import fmt
from infermeter.util.jsonio import clean_json, print_json, write_json


@guard
def analyze_command(
    run_id: str = typer.Argument(..., help="Run id or unique prefix."),
    db: str = DB,
    out: Path = typer.Option(None, help="Also write analysis.json and the roofline PNG/CSV."),
    json_out: bool = JSON_OUT,
) -> None:
    """Roofline, bandwidth and compute bounds, and bottleneck findings of a stored run."""
    from infermeter.analysis.analyze import analyze_run
    from infermeter.report.roofline_figure import roofline_figure
    from infermeter.store import Store

    store = Store(db, create=False)
    run = store.get(run_id)
    measured = store.measured_ceilings(str((run.device or {}).get("name")))
    doc = clean_json(analyze_run(run, measured, _learned_from_others(store, run, measured)))
    files = []
    if out is not None:
        folder = writable_dir(out)
        files = [
            write_json(folder / f"analysis-{run.run_id}.json", doc),
            *roofline_figure(doc, folder, f"roofline-{run.run_id}"),
        ]
    if json_out:
        print_json(doc)
        return
    Console(soft_wrap=True).print(analysis_card(doc))
    for f in files:
        Console(soft_wrap=True).print(f"wrote {f}", style="dim", markup=False)


def _learned_from_others(store: Any, run: Any, measured: Any) -> Any:
    """Factors learnt from the device's other stored runs (None without curves or runs)."""
    from infermeter.analysis.predict import learn_from_stored
    from infermeter.analysis.timemodel import device_model
    from infermeter.experiments.whatif import stored_runs
    from infermeter.measure.curves import curves_of

    if measured is None or not curves_of(measured.details):
        return None
    spec = str(run.model_info.get("spec"))
    others = [r for r in stored_runs(store, measured, True, spec) if r.run_id != run.run_id]
    if not others:
        return None
    return learn_from_stored(others, device_model(measured, str(run.model_info.get("dtype"))))


def time_model_lines(tm: dict[str, Any]) -> list[Text]:
    """The time model's predicted vs measured TTFT and TPOT, one line each."""
    if not tm.get("rows"):
        return [Text(tm.get("note") or "no time model", style="dim")]
    learned = tm["learned"]
    how = (
        f"curves + factors learnt from {learned['runs']} other stored "
        + ("run" if learned["runs"] == 1 else "runs")
        if learned["runs"]
        else "calibrated curves only"
    )
    out = [Text(f"time model ({how})", style="bold")]
    for r in tm["rows"]:
        parts = ", ".join(f"{k} {v:.2f}" for k, v in r["parts_ms"].items() if v)
        err = "n/a" if r["error_pct"] is None else f"{r['error_pct']:+.1f}%"
        out.append(
            Text(
                f"  {r['metric'][:-3].upper()}: predicted {r['predicted_ms']:.2f} ms, measured "
                f"{r['measured_ms']:.2f} ms ({err}); parts ms (adding up to the prediction): "
                f"{parts}"
            )
        )
        if r.get("note"):
            out.append(Text(f"    {r['note']}", style="yellow"))
    return out


def analysis_card(doc: dict[str, Any]) -> Group:
    """The roofline table, the bounds and the findings, for people."""
    from infermeter.analysis.roofline import all_rows

    roof = doc["roofline"]
    parts: list[Any] = [
        Text(
            f"run {doc['run_id']} · {doc['model']} · {doc['device']} · ceilings: "
            f"{doc['ceilings_source']}",
            style="bold",
        )
    ]
    if roof.get("unavailable"):
        parts.append(Text(f"roofline: {roof['unavailable']}", style="yellow"))
        parts.extend(_findings_lines(doc["findings"]))
        return Group(*parts)
    approx = roof.get("approximate") or []
    t = Table(
        title="roofline: one forward, ms = median over measured samples"
        + (" (approximate FLOPs and bytes)" if approx else ""),
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
    )
    for col in ("phase", "kind", "GFLOP", "MB", "FLOP/B", "ms", "GFLOP/s", "% attain", "bound"):
        t.add_column(
            col, justify="left" if col in ("phase", "kind", "bound") else "right", no_wrap=True
        )

    for r in all_rows(roof):
        t.add_row(
            r["phase"],
            r["kind"],
            fmt.scaled(r["flop_count"], 1e9),
            fmt.scaled(r["bytes"], 1e6),
            f"{r['intensity']:.2f}",
            fmt.scaled(r["measured_ms"], 1),
            fmt.scaled(r["achieved_flop_per_s"], 1e9),
            "-" if r["pct_attainable"] is None else f"{r['pct_attainable']:.0f}%",
            r["bound"] or "-",
        )
    parts.append(t)
    for why in approx:
        parts.append(Text(f"approximate: {why}", style="yellow"))
    for flag in roof.get("above_ceiling") or []:
        parts.append(Text(f"above the ceiling: {flag}", style="yellow"))
    if roof.get("decode_min_ms") is not None:
        parts.append(
            Text(
                f"decode step: {roof['decode_measured_ms']:.2f} ms measured (median) vs "
                f"{roof['decode_min_ms']:.2f} ms to read weights + KV cache at full bandwidth "
                f"({roof['decode_measured_ms'] / roof['decode_min_ms']:.1f}x)"
            )
        )
    if roof.get("prefill_min_ms") is not None:
        parts.append(
            Text(
                f"prefill: {roof['prefill_measured_ms']:.2f} ms measured (median) vs "
                f"{roof['prefill_min_ms']:.2f} ms at peak FLOP/s"
            )
        )
    if roof.get("ridge_flop_per_byte"):
        parts.append(Text(f"ridge point: {roof['ridge_flop_per_byte']:.1f} FLOP/byte", style="dim"))
    parts.extend(_findings_lines(doc["findings"]))
    parts.extend(time_model_lines(doc.get("time_model") or {}))
    parts.extend(communication_lines(doc.get("communication")))
    return Group(*parts)


def _findings_lines(findings: list[dict[str, Any]]) -> list[Text]:
    if not findings:
        return [Text("no bottleneck rule fired", style="dim")]
    out = [Text("findings", style="bold")]
    for f in findings:
        color = {"high": "red", "medium": "yellow"}.get(f["severity"], "white")
        out.append(Text(f"[{f['severity']}] {f['id']}: {f['title']}", style=color))
        out.append(Text(f"    -> {f['advice']}", style="dim"))
    return out


def communication_lines(comm: dict[str, Any] | None) -> list[Text]:
    """Per phase: measured communication per forward, and the same calls on each link."""
    if not comm:
        return []
    out = [
        Text(f"communication over {comm['processes']} processes ({comm['model']})", style="bold")
    ]
    for p in comm["phases"]:
        links = ", ".join(f"{k} {v:.3f}" for k, v in p["modelled_comm_ms_per_forward"].items())
        bus = p["attained_bus_bytes_per_s"]
        out.append(
            Text(
                f"  {p['phase']}: {p['collectives_per_forward']:.0f} collectives, "
                f"{p['bytes_per_forward'] / 1e3:.1f} KB per forward; measured "
                f"{p['measured_comm_ms_per_forward']:.3f} ms communicating vs "
                f"{p['measured_compute_ms_per_forward']:.3f} ms computing"
                + (f" (bus {bus / 1e9:.3g} GB/s)" if bus else "")
                + f"; on other links, ms: {links}"
            )
        )
    return out
