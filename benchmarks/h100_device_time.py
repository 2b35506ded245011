"""The time model's GPU work per decode step against an H100's own kernels.

Why: `predict` adds a step's GPU work (GEMMs, attention, element-wise bytes, each small
operation's device time) and its host time (operations x time per operation), and on a GPU
the slower sets the step. Published figures test the sum; this tests the GPU part alone,
against the GPU busy time torch.profiler measured per decode step of eager `generate`
on an H100 (benchmarks/gpu_generate_steps.py, recorded in
tests/bench/data/h100/generate_steps/steps.jsonl under transformers 4.46.3 and 5.17), and
prints beside it the kernels the GPU ran against the operations the time model counts, and
the host time per operation each step implies (the host of that loan was a noisy VM: the
same configuration's step varied 2x between processes, so no constant is fitted to it).

    python benchmarks/h100_device_time.py
    python benchmarks/h100_device_time.py --recorded mine.jsonl --hardware a100-80gb

The second form holds the model against your own GPU's recording (gpu_generate_steps.py's
output) on that GPU's spec row.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RECORDED = HERE.parent / "tests" / "bench" / "data" / "h100" / "generate_steps" / "steps.jsonl"
sys.path.insert(0, str(HERE))


def counts_for(row: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """The row's operation counts: its release's from op_counts.json, else counted here."""
    from infermeter.models.config_only import config_of
    from infermeter.models.opcount import count_ops_of_config
    from predict_published import OP_COUNTS

    hub = row["model"].replace("--", "/", 1)
    release = row["transformers"]
    if row["attn"] == "sdpa" and hub in OP_COUNTS.get(release, {}):
        return {**OP_COUNTS[release][hub], "transformers": release}, release
    config, _ = config_of(str(HERE / "published" / "models" / f"{row['model']}.json"))
    config._attn_implementation = row["attn"]
    counted = count_ops_of_config(config, row["dtype"])
    import transformers

    here = transformers.__version__
    return ({**counted, "transformers": release} if counted else None), here


def predicted(row: dict[str, Any], hardware: str = "h100-sxm") -> dict[str, Any]:
    """The time model's decode step for the row on `hardware` (a spec-table key), hf stack."""
    from infermeter.analysis.precision import precision_of
    from infermeter.analysis.timemodel import Work, device_model, forward_time
    from infermeter.measure.ceilings import LOCAL_HARDWARE, hardware_keys, spec_by_key
    from predict_published import Model

    model = Model.of(row["model"].replace("--", "/", 1))
    counts, counted_under = counts_for(row)
    ceilings = spec_by_key(hardware)
    if ceilings is None:
        keys = ", ".join(k for k in hardware_keys() if k != LOCAL_HARDWARE)  # a spec row
        raise SystemExit(f"unknown hardware {hardware!r}: use one of {keys}")
    dev = device_model(ceilings, precision_of(row["dtype"]).compute, "hf")
    context = row["prompt_tokens"] + row["new_tokens"] // 2  # the step at mid-generation
    w = Work(batch=row["batch"], tokens=1, context=context, dtype_bytes=2)
    ft = forward_time(model.shape, dev, w, "decode", counts)
    work = ft.gemm_s + ft.attention_s + ft.elementwise_s + ft.comm_s
    return {
        "work_ms": work * 1e3,
        "ops": ft.overhead_s / dev.op_seconds,
        "counted_under": counted_under,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--recorded", type=Path, default=RECORDED, help="gpu_generate_steps.py output")
    ap.add_argument("--hardware", default="h100-sxm", help="the recording GPU's spec-table key")
    args = ap.parse_args(argv)
    rows = [json.loads(line) for line in args.recorded.read_text().splitlines() if line.strip()]
    print(
        f"{'transformers':12} {'model':24} {'attn':5} {'batch':>5} {'step ms':>8} "
        f"{'GPU busy':>8} {'model':>7} {'err':>6} {'kernels':>7} {'ops':>6} {'k/op':>5} "
        f"{'host us/op':>10}"
    )
    errors, per_op, ratio = [], [], []
    for row in rows:
        p = predicted(row, args.hardware)
        busy = row["gpu_busy_ms_per_step"]
        err = (p["work_ms"] - busy) / busy
        errors.append(err)
        ratio.append(row["kernels_per_step"] / p["ops"])
        host = row["decode_step_ms"] * 1e3 / p["ops"]
        per_op.append(host)
        print(
            f"{row['transformers']:12} {row['model'][-24:]:24} {row['attn']:5} {row['batch']:5d} "
            f"{row['decode_step_ms']:8.2f} {busy:8.2f} {p['work_ms']:7.2f} {err:+6.1%} "
            f"{row['kernels_per_step']:7.0f} {p['ops']:6.0f} {ratio[-1]:5.2f} {host:10.1f}"
        )
    print(
        f"\n{len(rows)} configurations: GPU work predicted against measured GPU busy time, "
        f"median |err| {statistics.median(abs(e) for e in errors):.1%}, "
        f"max {max(abs(e) for e in errors):.1%}"
    )
    print(
        f"kernels launched per counted operation: {min(ratio):.2f}-{max(ratio):.2f}; "
        f"host time per operation the steps imply: {min(per_op):.1f}-{max(per_op):.1f} us "
        f"(median {statistics.median(per_op):.1f}; the stack's fitted 11)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
