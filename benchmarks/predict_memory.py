"""How far is `infermeter predict`'s memory from published peak-memory measurements?

Reads `benchmarks/published/memory.json` (59 figures from five sources that publish the peak
GPU memory of transformers' generate: each with its quote, address, model, GPU count, batch,
lengths, dtype, transformers release and what was measured) and predicts each with
`analysis/predict.py`'s `memory_fit`, the model's shape and parameter count from its config in
`benchmarks/published/models/`, as `predict --stack hf@RELEASE` would. It prints the error per
figure and per split (fit and held-out sources, as for the time figures) and the coverage of
90% intervals built one held-out source left out at a time.

What is compared, by what each source measured (decided from the sources' words, before any
prediction was looked at):
- `peak_allocated_gb` (torch.cuda.max_memory_allocated, summed over the GPUs of a multi-GPU
  run) and `peak_memory_gb_unspecified` (the Qwen2 and Qwen1.5 pages, by the team whose later
  script measures max_memory_allocated): weights + KV cache + prefill activations, without the
  runtime (a CUDA context is not allocated through torch);
- `peak_allocated_plus_external_gb` (optimum's script: the allocated peak plus the device
  memory outside torch's allocator): the same plus predict's runtime (0.6 GB per GPU).

A run over several GPUs (accelerate's device_map, one model split by layers) is predicted as
the whole model on one device: the sum of the GPUs' peaks is that, plus each GPU's share of
the transient activations, which this leaves out.

    python benchmarks/predict_memory.py                    # the table and the summary
    python benchmarks/predict_memory.py --write-intervals  # and the held-out errors that
        # predict's memory intervals come from (analysis/data/prediction_errors.json, "memory")
"""

from __future__ import annotations

import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import predict_published as pp
from infermeter.analysis.predict import GPU_RUNTIME_BYTES, memory_fit
from infermeter.analysis.timemodel import eager_attention

MEMORY = pp.HERE / "memory.json"
UNIT_BYTES = {"GB": 1e9, "GiB": 2**30, "MB": 1e6}
#: metrics that include memory outside torch's allocator (the CUDA context)
WITH_RUNTIME = ("peak_allocated_plus_external_gb",)


def entries() -> list[dict[str, Any]]:
    """The published memory figures (benchmarks/published/memory.json)."""
    rows: list[dict[str, Any]] = json.loads(MEMORY.read_text())
    return rows


def predicted_bytes(e: dict[str, Any]) -> float:
    """Predict's memory for the entry's workload, on the entry's basis (see module docstring)."""
    model = pp.Model.of(e["model"])
    eager = e["stack"] == "hf" and eager_attention(pp.op_counts_for(e, model), "prefill")
    gpus = int(e.get("gpus") or 1)
    runtime = GPU_RUNTIME_BYTES * gpus if e["metric"] in WITH_RUNTIME else 0.0
    m = memory_fit(
        model.shape,
        model.params,
        e["dtype"],
        int(e["batch"]),
        max(int(e["prompt_tokens"]), 1),
        int(e["new_tokens"]),
        1,
        None,
        runtime,
        eager=eager,
        release=e.get("transformers_version"),
    )
    return m.total_bytes


def evaluate(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each figure with its measured and predicted bytes and the log error."""
    out = []
    for e in rows:
        measured = float(e["value"]) * UNIT_BYTES[e["unit"]]
        pred = predicted_bytes(e)
        out.append(
            {
                **e,
                "measured_bytes": measured,
                "predicted_bytes": pred,
                "log_error": math.log(measured / pred),
                "error_pct": (pred / measured - 1) * 100,
            }
        )
    return out


def summary(rows: list[dict[str, Any]]) -> list[tuple[str, int, float, float]]:
    """(split, n, median |error| %, max |error| %) of the prediction against the figure."""
    out = []
    for split in ("fit", "held-out"):
        errs = [abs(r["error_pct"]) for r in rows if r["split"] == split]
        if errs:
            out.append((split, len(errs), statistics.median(errs), max(errs)))
    return out


def held_out_errors(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The held-out figures' log errors, as the shipped intervals keep them."""
    return [
        {"id": r["id"], "source": r["source"], "log_error": round(r["log_error"], 6)}
        for r in rows
        if r["split"] == "held-out"
    ]


def write_intervals(rows: list[dict[str, Any]]) -> None:
    """The held-out memory errors and the memory figures' scope, beside the time errors."""
    import datetime

    known = [r for r in rows if r["split"] in ("fit", "held-out")]
    doc = json.loads(pp.CALIBRATION.read_text())
    doc["memory"] = {
        "written": datetime.date.today().isoformat(),
        "by": "benchmarks/predict_memory.py --write-intervals",
        "what": "log(measured / predicted) of each held-out published peak-memory figure; "
        "scope: every published memory figure",
        "errors": held_out_errors(rows),
        "scope": {
            "device_kinds": ["gpu"],
            "stacks": sorted({r["stack"] for r in known}),
            "dtypes": sorted({r["dtype"] for r in known}),
            "model_types": sorted({pp._model_type(r["model"]) for r in known}),
            "max_batch": max(int(r["batch"]) for r in known),
            "max_prompt_tokens": max(int(r["prompt_tokens"]) for r in known),
            "max_new_tokens": max(int(r["new_tokens"]) for r in known),
        },
    }
    pp.CALIBRATION.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote the memory errors into {pp.CALIBRATION}")


def main() -> int:
    from infermeter.analysis.intervals import leave_one_source_out

    write = "--write-intervals" in sys.argv[1:]
    rows = evaluate(entries())
    print(
        f"{'id':44} {'split':8} {'gpus':>4} {'b':>3} {'in':>6} {'out':>5} {'release':>8} "
        f"{'measured GB':>11} {'predicted':>10} {'error':>7}"
    )
    for r in rows:
        print(
            f"{r['id'][:44]:44} {r['split']:8} {r['gpus']:>4} {r['batch']:>3} "
            f"{r['prompt_tokens']:>6} {r['new_tokens']:>5} {r.get('transformers_version', ''):>8} "
            f"{r['measured_bytes'] / 1e9:>11.2f} {r['predicted_bytes'] / 1e9:>10.2f} "
            f"{r['error_pct']:>+6.1f}%"
        )
    print(f"\n{'split':9} {'n':>3} {'median |err|':>13} {'max |err|':>10}")
    for split, n, med, mx in summary(rows):
        print(f"{split:9} {n:>3} {med:>12.1f}% {mx:>9.1f}%")
    held = held_out_errors(rows)
    inside, judged = leave_one_source_out(held)
    print(
        f"\n90% intervals, one held-out source left out at a time: {inside} of {judged} "
        f"inside ({inside / max(judged, 1):.0%}), {len({r['source'] for r in held})} sources"
    )
    if write:
        write_intervals(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
