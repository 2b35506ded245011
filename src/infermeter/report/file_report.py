"""Reports of documents kept as files: `bench attention`, `bench model` and `inspect` JSON.

`infermeter report FILE.json --out DIR` renders them like a run or a sweep: report.md, one
self-contained report.html, a CSV per table, the figures as PNG with their CSV, and the
document itself. The document's `kind` (`bench-attention`, `bench-model`, `inspect-*`) says
which renderer applies; a JSON file of another shape is refused with the reason.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from infermeter.errors import UserError
from infermeter.report.bench_figures import attention_figures, model_figures
from infermeter.report.build import _Doc
from infermeter.report.figures import write_csv
from infermeter.util.jsonio import write_json

#: the columns people read first in an attention table, in order
ATTENTION_COLUMNS = (
    "kind",
    "seq_len",
    "latency_ms",
    "ci95",
    "peak_memory_mib",
    "mask_sparsity",
    "skipped_fraction",
    "useful_gflop",
    "executed_gflop",
    "useful_gflop_per_s",
    "max_abs_diff_vs_dense",
    "compile_ms",
)
MODEL_COLUMNS = (
    "model",
    "seq_len",
    "forward_ms",
    "forward_ci95",
    "forward_peak_mib",
    "train_ms",
    "train_ci95",
    "train_peak_mib",
    "train_over_forward",
    "loss",
    "loss_after_steps",
)


def _ci(summary: dict[str, Any] | None) -> str:
    if not summary or summary.get("median_ci95_low") is None:
        return "-"
    return f"{_short(summary['median_ci95_low'])}-{_short(summary['median_ci95_high'])}"


def _short(v: float) -> str:
    """Three significant digits, whole numbers from 1,000 up (never 1.21e+03)."""
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}"


def attention_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The attention summary flattened for tables: medians, intervals, GFLOP."""
    return [
        {
            "kind": r["kind"],
            "seq_len": r["seq_len"],
            "latency_ms": r["latency_ms"]["p50"],
            "ci95": _ci(r["latency_ms"]),
            "noisy": bool(r["latency_ms"].get("noisy")),
            "peak_memory_mib": r["peak_memory_mib"],
            "mask_sparsity": r["mask_sparsity"],
            "skipped_fraction": r["skipped_fraction"],
            "useful_gflop": r["useful_flop_count"] / 1e9,
            "executed_gflop": r["executed_flop_count"] / 1e9,
            "useful_gflop_per_s": (r["useful_flop_per_s"] or 0) / 1e9,
            "achieved_gflop_per_s": (r["achieved_flop_per_s"] or 0) / 1e9,
            "max_abs_diff_vs_dense": r["max_abs_diff_vs_dense"],
            "compile_ms": r["compile_ms"],
            "executed_flops": r["executed_flops_note"],
        }
        for r in doc["summary"]
    ]


def model_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The model summary flattened for tables."""
    out = []
    for r in doc["summary"]:
        train = r.get("train_ms") or {}
        losses = r.get("step_losses") or []
        out.append(
            {
                "model": r["model"],
                "seq_len": r["seq_len"],
                "forward_ms": r["forward_ms"]["p50"],
                "forward_ci95": _ci(r["forward_ms"]),
                "forward_noisy": bool(r["forward_ms"].get("noisy")),
                "train_noisy": bool(train.get("noisy")),
                "forward_peak_mib": r["forward_peak_mib"],
                "train_ms": train.get("p50"),
                "train_ci95": _ci(train),
                "train_peak_mib": r["train_peak_mib"],
                "train_over_forward": r["train_over_forward"],
                "loss": r["loss"],
                "loss_after_steps": losses[-1] if losses else None,
                "params": r["params"],
            }
        )
    return out


def _bench_report(doc: dict[str, Any], out: Path, title: str) -> list[Path]:
    meta = doc["meta"]
    report = _Doc(title, out)
    device = meta.get("device") or {}
    spec = ", ".join(
        f"{k}={_cell(v) if isinstance(v, list | tuple) else v}" for k, v in meta["spec"].items()
    )
    report.text(
        f"device: {device.get('name', device.get('type'))} · torch "
        f"{meta['versions'].get('torch')} · {spec}"
    )
    cols: tuple[str, ...]
    if meta["kind"] == "bench-attention":
        rows, cols, figures = attention_rows(doc), ATTENTION_COLUMNS, attention_figures(doc, out)
        report.text(meta.get("flop_convention", ""))
    else:
        rows, cols, figures = model_rows(doc), MODEL_COLUMNS, model_figures(doc, out)
    report.heading("Results (medians of the timed calls, 95% interval of the median)")
    report.table(rows, list(cols))
    files = [write_csv(out / "summary.csv", rows)]
    if figures:
        report.heading("Figures")
        for png in [p for p in figures if p.suffix == ".png"]:
            report.figure(png, png.stem.replace("_", " "))
    notes = {r.get("note") for r in doc["summary"]} - {"", None}
    if notes:
        report.heading("Notes")
        for note in sorted(notes):
            report.text(str(note))
    files += figures
    files.append(write_csv(out / "samples.csv", doc["all_samples"]))
    files.append(write_json(out / f"{meta['kind'].replace('-', '_')}.json", doc))
    return files + report.write()


def _inspect_report(doc: dict[str, Any], out: Path) -> list[Path]:
    """Every list of rows in an `inspect --json` document becomes a table and a CSV."""
    report = _Doc(f"infermeter {doc['kind'].replace('-', ' ')}: {doc.get('model')}", out)
    files: list[Path] = []
    for key, value in doc.items():
        if isinstance(value, list) and value and isinstance(value[0], dict):
            rows = [{k: _cell(v) for k, v in row.items()} for row in value]
            report.heading(key.replace("_", " "))
            report.table(rows)
            files.append(write_csv(out / f"{key}.csv", rows))
        elif isinstance(value, dict) and value:
            rows = [{"name": k, "value": _cell(v)} for k, v in value.items()]
            report.heading(key.replace("_", " "))
            report.table(rows)
            files.append(write_csv(out / f"{key}.csv", rows))
        elif key != "kind" and not isinstance(value, list | dict):
            report.text(f"{key}: {value}")
    files.append(write_json(out / f"{doc['kind'].replace('-', '_')}.json", doc))
    return files + report.write()


def _cell(v: Any) -> Any:
    """Lists and dicts inside a row print as compact text."""
    if isinstance(v, list):
        return ", ".join(str(x) for x in v)
    if isinstance(v, dict):
        return "; ".join(f"{k}={x}" for k, x in v.items())
    return v


def file_report(doc: dict[str, Any], out: Path) -> list[Path]:
    """Render a benchmark or inspect document; refuse any other JSON with the reason."""
    kind = (doc.get("meta") or {}).get("kind") if isinstance(doc, dict) else None
    out.mkdir(parents=True, exist_ok=True)
    if kind == "bench-attention":
        return _bench_report(doc, out, "infermeter bench attention")
    if kind == "bench-model":
        models = ", ".join(m["spec"] for m in doc["meta"].get("models", []))
        return _bench_report(doc, out, f"infermeter bench model: {models}")
    if isinstance(doc, dict) and str(doc.get("kind", "")).startswith("inspect-"):
        return _inspect_report(doc, out)
    raise UserError(
        "this JSON file is not a document infermeter can report (no bench or inspect kind)",
        "give a run or sweep id, or a file written by `bench` or `inspect --json`",
    )
