"""Validate every CUDA path on a real GPU: one table and gpu_check.json (issue 21).

Runs the product as a user would, each step a command whose JSON it reads:
- `infermeter energy probe` and `infermeter calibrate --device cuda` (matmul FLOP/s per dtype,
  device-to-device copy bandwidth), each as a fraction of the spec-table figure;
- `infermeter profile` of shape presets in bfloat16 (llama-3.2-1b and qwen3-4b, batch 1 and 16,
  512 prompt tokens, 128 new) with NVML energy: TTFT, TPOT, TPOT over the bandwidth-bound
  minimum (`analyze`: weights + KV cache read per step at the measured bandwidth), allocator
  peak against the device memory used (`mem_get_info`), J per token;
- `benchmarks/stopwatch.py --device cuda`: CUDA-event TTFT + decode vs an outside stopwatch
  (goal within 2%);
- `benchmarks/nvml_integration.py`: NVML power integrated vs the energy counter on the same
  windows (goal within 3%), J per token;
- `benchmarks/overhead.py --device cuda --quick`: minimal / standard / deep and torch.profiler
  (CPU + CUDA activities) against no instrument, interleaved, with 95% intervals (goals: the
  interval's top within 1%, 3%, 8%);
- `infermeter analyze` and `infermeter report` of those runs, PNGs next to the JSON.
Without CUDA it prints one line saying why and exits 0. A step that fails is a row with its
error, never the end of the check.

`--steps context,quant,compile` runs only those profiles of the first model at batch 1 (a short
loan spent on what the full check lacks): TPOT at 128 / 2,048 / 8,192 prompt tokens; int8 and
fp8 weights against bfloat16; eager, eager with a static cache, torch.compile, and CUDA graphs
over the static cache (which transformers' generate compiles itself).

    python benchmarks/gpu_check.py [--out gpu-check/] [--quick]     (also: make gpu-check)
    python benchmarks/gpu_check.py --models llama-3.2-1b --samples 3 --steps context,quant,compile
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MODELS = ("llama-3.2-1b", "qwen3-4b")
BATCHES = (1, 16)
GOALS = {"stopwatch_diff_pct": 2.0, "nvml_diff_pct": 3.0}
#: most TPOT overhead per profiling mode (percent over no instrument)
OVERHEAD_GOALS_PCT = {"minimal": 1.0, "standard": 3.0, "deep": 8.0}


def cli(*args: str) -> list[str]:
    """The infermeter command line in this interpreter."""
    return [sys.executable, "-m", "infermeter", *args]


#: seconds one step may take (--step-timeout); a step past it becomes a failed row
STEP_TIMEOUT_S = [1800.0]
#: where each failed step's whole stderr is appended (set by run_checks)
ERROR_LOG: list[Path] = []


def run_json(cmd: list[str], timeout_s: float | None = None) -> Any:
    """Run a command and parse the last JSON document on its stdout."""
    limit = timeout_s or STEP_TIMEOUT_S[0]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=limit, cwd=ROOT)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"{' '.join(cmd[2:5])} ran past {limit:.0f} s") from None
    if done.returncode != 0:
        if ERROR_LOG:
            with ERROR_LOG[0].open("a") as log:
                log.write(f"$ {' '.join(cmd)}\nexit {done.returncode}\n{done.stderr}\n\n")
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"{' '.join(cmd[2:5])} exited {done.returncode}: {last}")
    text = done.stdout.strip()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return json.loads(text.splitlines()[-1])


def row(
    check: str,
    value: Any,
    unit: str = "",
    reference: Any = None,
    goal: str = "",
    ok: bool | None = None,
    note: str = "",
) -> dict[str, Any]:
    """One line of the table."""
    return {
        "check": check,
        "value": value,
        "unit": unit,
        "reference": reference,
        "goal": goal,
        "ok": ok,
        "note": note,
    }


def calibrate_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Measured peaks and bandwidth as fractions of the datasheet."""
    measured, spec = doc["measured"], doc.get("spec") or {}
    out = []
    for dtype, flops in sorted((measured.get("flop_per_s") or {}).items()):
        ref = (spec.get("flop_per_s") or {}).get(dtype)
        note = f"{flops / ref:.0%} of datasheet" if ref else "no datasheet"
        out.append(
            row(f"matmul {dtype}", flops / 1e12, "TFLOP/s", ref / 1e12 if ref else None, note=note)
        )
    bw, ref_bw = measured.get("bandwidth_bytes_per_s"), spec.get("bandwidth_bytes_per_s")
    if bw:
        note = f"{bw / ref_bw:.0%} of datasheet" if ref_bw else "no datasheet"
        out.append(
            row("copy bandwidth", bw / 1e9, "GB/s", ref_bw / 1e9 if ref_bw else None, note=note)
        )
    return out


def _summary(run: dict[str, Any]) -> dict[str, Any]:
    """A profile's summary: `profile --json` gives one per configuration (a list); one here."""
    s = run["summary"]
    return s[0] if isinstance(s, list) else s


def _median(summary: dict[str, Any], metric: str) -> float | None:
    m = summary.get(metric) or {}
    return m.get("median", m.get("p50"))


def profile_rows(label: str, run: dict[str, Any], analysis: dict[str, Any]) -> list[dict]:
    """TTFT, TPOT against the bandwidth-bound minimum, memory and energy of one profile."""
    s = _summary(run)
    tpot = _median(s, "tpot_ms")
    roof = analysis.get("roofline") or {}
    floor = roof.get("decode_min_ms")
    out = [
        row(f"{label} TTFT", _median(s, "ttft_ms"), "ms"),
        row(
            f"{label} TPOT",
            tpot,
            "ms",
            floor,
            note=f"{tpot / floor:.2f}x the bandwidth-bound minimum" if tpot and floor else "",
        ),
    ]
    samples = [x for x in run.get("all_samples", []) if not x.get("warmup")]
    if samples:
        mem = samples[-1].get("memory") or {}
        alloc, free, total = (
            mem.get("peak_reserved_mib"),
            mem.get("device_free_mib"),
            mem.get("device_total_mib"),
        )
        if alloc is not None and free is not None and total:
            used = total - free
            out.append(
                row(
                    f"{label} memory",
                    alloc,
                    "MiB",
                    used,
                    note=f"allocator reserved vs device used; {used - alloc:.0f} MiB "
                    "outside the allocator (CUDA context, other processes)",
                )
            )
    j = _median(s, "j_per_token") if "j_per_token" in s else None
    if j is not None:
        out.append(row(f"{label} energy", j, "J/token", note="NVML"))
    return out


def stopwatch_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """CUDA-event timing against the outside stopwatch."""
    ratio = doc.get("ratio_p50")
    if ratio is None:
        return [row("stopwatch", None, note=f"unexpected output: {sorted(doc)[:6]}")]
    diff = 100 * (ratio - 1)
    goal = GOALS["stopwatch_diff_pct"]
    return [
        row("CUDA events vs stopwatch", diff, "%", goal=f"|diff| <= {goal}%", ok=abs(diff) <= goal)
    ]


def overhead_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Each mode's TPOT over no instrument (benchmarks/overhead.py), against its goal."""
    main = doc["main"]
    out = []
    for mode in (*OVERHEAD_GOALS_PCT, "torch.profiler"):
        r = main[mode]
        pct = 100 * (r["tpot"] - 1)
        lo, hi = (100 * (x - 1) for x in r.get("tpot_ci") or (r["tpot"], r["tpot"]))
        goal = OVERHEAD_GOALS_PCT.get(mode)
        out.append(
            row(
                f"overhead {mode}",
                pct,
                "% TPOT",
                goal=f"<= {goal:g}%" if goal else "",
                ok=(hi <= goal if goal else None),
                note=f"95% CI {lo:+.2f} to {hi:+.2f}%; TTFT {100 * (r['ttft'] - 1):+.2f}%",
            )
        )
    return out


def nvml_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """NVML power integrated against the energy counter (benchmarks/nvml_integration.py)."""
    diff = doc.get("median_abs_diff_pct")
    goal = GOALS["nvml_diff_pct"]
    note = (
        f"largest {doc.get('max_abs_diff_pct', float('nan')):.2f}% over {doc.get('windows')} "
        f"windows, polled every {doc.get('interval_ms')} ms"
    )
    out = [
        row(
            "NVML integrated vs counter",
            diff,
            "% (median |diff|)",
            goal=f"<= {goal}%",
            ok=diff is not None and diff <= goal,
            note=note,
        )
    ]
    if doc.get("j_per_token") is not None:
        out.append(
            row(
                "energy per token (counter)",
                doc["j_per_token"],
                "J/token",
                note=doc.get("model", ""),
            )
        )
    return out


def table(rows: list[dict[str, Any]]) -> str:
    """The rows as a plain-text table (what the check prints and docs/gpu.md holds)."""

    def cell(v: Any) -> str:
        if v is None:
            return "-"
        if isinstance(v, float):
            return f"{v:.4g}"
        return str(v)

    head = ("check", "value", "unit", "reference", "goal", "ok", "note")
    lines = [
        [cell(r[h]) if h != "ok" else {True: "yes", False: "NO", None: ""}[r["ok"]] for h in head]
        for r in rows
    ]
    widths = [
        max(len(h), *(len(ln[i]) for ln in lines)) if lines else len(h) for i, h in enumerate(head)
    ]
    fmt_row = "  ".join("{:<%d}" % w for w in widths)
    return "\n".join([fmt_row.format(*head), *(fmt_row.format(*ln) for ln in lines)])


def _step(rows: list[dict[str, Any]], name: str, fn: Any) -> None:
    """Run one step, its rows (or one failed row) printed and saved at once.

    A check stopped from outside (a lease's time limit) keeps what it measured.
    """
    start = len(rows)
    try:
        rows.extend(fn())
    except Exception as exc:  # a failed step is a row, the check goes on
        rows.append(row(name, None, ok=False, note=f"failed: {exc}"))
    for r in rows[start:]:
        print(f"[gpu_check] {json.dumps(r)}", flush=True)
    if PARTIAL:
        PARTIAL[0].write_text(json.dumps({"rows": rows, "partial": True}, indent=1))


#: the JSON file rewritten after every step (set by main)
PARTIAL: list[Path] = []


def run_checks(
    out: Path,
    quick: bool,
    models: tuple[str, ...] = MODELS,
    samples: int | None = None,
    compile_check: bool = False,
) -> list[dict[str, Any]]:
    """Every step on the GPU; the table's rows."""
    db = str(out / "gpu_check.db")
    ERROR_LOG[:] = [out / "errors.log"]
    n_samples = str(samples or (3 if quick else 10))
    rows: list[dict[str, Any]] = []
    _step(
        rows,
        "energy probe",
        lambda: [
            row(
                "energy sources",
                ", ".join(
                    s.get("source", "?")
                    for s in run_json(cli("energy", "probe", "--json")).get("sources", [])
                    if s.get("available")
                ),
            )
        ],
    )
    _step(
        rows,
        "calibrate",
        lambda: calibrate_rows(
            run_json(cli("calibrate", "--device", "cuda", "--db", db, "--json"))
        ),
    )
    for model in models[:1] if quick else models:
        for batch in BATCHES:
            label = f"{model} b{batch}"

            def prof(model: str = model, batch: int = batch, label: str = label) -> list[dict]:
                run = run_json(
                    cli(
                        "profile",
                        "-m",
                        model,
                        "--dtype",
                        "bfloat16",
                        "--device",
                        "cuda",
                        "--batch-size",
                        str(batch),
                        "--prompt-tokens",
                        "512",
                        "--new-tokens",
                        "128",
                        "--samples",
                        n_samples,
                        "--energy",
                        "nvml",
                        "--db",
                        db,
                        "--json",
                    )
                )
                rid = run["meta"]["run_id"]
                an = run_json(cli("analyze", rid, "--db", db, "--json", "--out", str(out)))
                subprocess.run(
                    cli("report", rid, "--db", db, "--out", str(out)),
                    cwd=ROOT,
                    capture_output=True,
                    timeout=600,
                )
                return profile_rows(label, run, an)

            _step(rows, label, prof)
    _step(
        rows,
        "stopwatch",
        lambda: stopwatch_rows(
            run_json(
                [
                    sys.executable,
                    str(ROOT / "benchmarks" / "stopwatch.py"),
                    "--device",
                    "cuda",
                    "--model",
                    models[0],
                    "--rounds",
                    "10" if quick else "40",
                ]
            )
        ),
    )
    _step(
        rows,
        "NVML integration",
        lambda: nvml_rows(
            run_json(
                [
                    sys.executable,
                    str(ROOT / "benchmarks" / "nvml_integration.py"),
                    "--model",
                    models[0],
                    "--windows",
                    "5" if quick else "20",
                ]
            )
        ),
    )
    _step(
        rows,
        "overhead",
        lambda: overhead_rows(
            run_json(
                [
                    sys.executable,
                    str(ROOT / "benchmarks" / "overhead.py"),
                    "--device",
                    "cuda",
                    "--dtype",
                    "bfloat16",
                    "--model",
                    models[0],
                    "--quick",
                    "--rounds",
                    "4" if quick else "12",
                ]
            )
        ),
    )
    if compile_check:
        _step(rows, "reduce-overhead", lambda: compile_rows(models[0], db, n_samples))
    return rows


#: what each variant step profiles: (label, profile arguments beyond the common ones)
COMPILE_VARIANTS = (
    ("eager", ["--prompt-tokens", "512"]),
    ("eager static cache", ["--prompt-tokens", "512", "--cache", "static"]),
    ("compile", ["--prompt-tokens", "512", "--compile"]),
    (
        "graphs static cache",
        ["--prompt-tokens", "512", "--compile-mode", "reduce-overhead", "--cache", "static"],
    ),
)
#: decode with a longer context: eager generate is launch-bound, yet each step still reads
#: the whole cache (what `predict --stack hf` combines with the host time)
CONTEXT_VARIANTS = tuple((f"context {n}", ["--prompt-tokens", str(n)]) for n in (128, 2048, 8192))
#: 8-bit weights (torchao weight-only), against bfloat16 at the same shape
QUANT_VARIANTS = (
    ("bfloat16 512", ["--prompt-tokens", "512"]),
    ("int8 weights", ["--prompt-tokens", "512", "--dtype", "int8"]),
    ("fp8 weights", ["--prompt-tokens", "512", "--dtype", "fp8"]),
)


def variant_rows(
    model: str, db: str, samples: str, variants: tuple[tuple[str, list[str]], ...]
) -> list[dict[str, Any]]:
    """TTFT and TPOT of one model at batch 1 under each variant; ratios against the first.

    Each variant is its own profile and its own rows: one that fails (a compile error, a
    missing kernel) does not take the others with it. CUDA graphs need the static cache (a
    replay overwrites what a dynamic cache keeps), so the graphs' own gain is read against
    eager with the static cache.
    """
    out = []
    base: float | None = None
    for label, extra in variants:
        args = [
            "profile", "-m", model, "--dtype", "bfloat16", "--device", "cuda",
            "--new-tokens", "64", "--samples", samples,
            "--mode", "minimal", "--energy", "off", "--db", db, "--json", *extra,
        ]  # fmt: skip
        name = f"{model} b1 {label}"
        try:
            summary = _summary(run_json(cli(*args)))
        except Exception as exc:  # the next variant still runs
            out.append(row(f"{name} TPOT", None, ok=False, note=f"failed: {exc}"))
            continue
        tpot, ttft = _median(summary, "tpot_ms"), _median(summary, "ttft_ms")
        first = base is None
        base = tpot if first else base
        note = "" if first or not (base and tpot) else f"{base / tpot:.2f}x the first row's speed"
        out.append(row(f"{name} TTFT", ttft, "ms"))
        out.append(row(f"{name} TPOT", tpot, "ms", note=note))
    return out


def compile_rows(model: str, db: str, samples: str) -> list[dict[str, Any]]:
    """Eager against torch.compile's default and reduce-overhead (CUDA graphs) modes."""
    return variant_rows(model, db, samples, COMPILE_VARIANTS)


#: what --steps may name: profiles of the first model under each variant, nothing else
EXTRA_STEPS = {"compile": COMPILE_VARIANTS, "context": CONTEXT_VARIANTS, "quant": QUANT_VARIANTS}


def run_steps(out: Path, model: str, steps: list[str], samples: int | None) -> list[dict]:
    """Only the named variant steps (a short loan spent on what the full check lacks)."""
    db = str(out / "gpu_check.db")
    ERROR_LOG[:] = [out / "errors.log"]
    rows: list[dict[str, Any]] = []
    for name in steps:
        variants = EXTRA_STEPS[name]
        _step(rows, name, lambda v=variants: variant_rows(model, db, str(samples or 3), v))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("gpu-check"))
    ap.add_argument("--quick", action="store_true", help="One model, fewer samples.")
    ap.add_argument("--models", default=",".join(MODELS), help="Comma-separated presets.")
    ap.add_argument("--samples", type=int, default=None, help="Samples per profile.")
    ap.add_argument("--step-timeout", type=float, default=1800.0, help="Seconds per step.")
    ap.add_argument(
        "--compile", action="store_true", help="Also eager vs compile vs reduce-overhead."
    )
    ap.add_argument(
        "--steps",
        default="",
        help=f"Only these, in order: {', '.join(EXTRA_STEPS)} (first model, batch 1).",
    )
    args = ap.parse_args(argv)
    steps = [x.strip() for x in args.steps.split(",") if x.strip()]
    unknown = [x for x in steps if x not in EXTRA_STEPS]
    if unknown:
        ap.error(f"unknown step {unknown[0]!r}: choose from {', '.join(EXTRA_STEPS)}")
    STEP_TIMEOUT_S[0] = args.step_timeout
    import torch

    if not torch.cuda.is_available():
        why = (
            "CUDA_VISIBLE_DEVICES hides every GPU"
            if os.environ.get("CUDA_VISIBLE_DEVICES") == ""
            else f"torch {torch.__version__} sees no CUDA device"
        )
        print(f"gpu_check: nothing ran: {why}")
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    name = torch.cuda.get_device_name(0)
    PARTIAL[:] = [args.out / "gpu_check.json"]
    models = tuple(m.strip() for m in args.models.split(",") if m.strip())
    if steps:
        rows = run_steps(args.out, models[0], steps, args.samples)
    else:
        rows = run_checks(args.out, args.quick, models, args.samples, args.compile)
    doc = {"device": name, "torch": torch.__version__, "cuda": torch.version.cuda, "rows": rows}
    (args.out / "gpu_check.json").write_text(json.dumps(doc, indent=1))
    print(f"{name} (torch {torch.__version__}, CUDA {torch.version.cuda})")
    print(table(rows))
    print(f"wrote {args.out / 'gpu_check.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
