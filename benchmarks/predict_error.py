"""How close is `infermeter predict` to what this machine measures?

1. Calibrate: the efficiency curves (bench/curves.py) at the widths of every model below, each
   width's weights rotating through a pool the size of its model (as `calibrate --model`).
2. For each model and (batch, prompt) point: predict TTFT and TPOT from the curves alone
   ("calibration only"), then measure them (`profile`, minimal mode, medians of --samples).
3. Learning from stored runs: fit the per-device factors (analysis/predict.py
   `learn_from_runs`) on every other point of all models, predict the rest ("held out").
4. Memory: the predicted peak (weights + KV + activations + this process's RSS before the
   model was loaded) against the measured RSS peak of the run.

Printed: every point, then the median and max absolute error per phase and method, and the
machine's speed through the run (a fixed GEMM before each model's points: this machine is
shared, and its speed has moved by 2x between runs). Goals: held-out median <= 5% for TTFT
and TPOT, max <= 15%; memory within 5% of the measured peak.

    python benchmarks/predict_error.py [--samples 3] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psutil

from infermeter import RunConfig, load_model
from infermeter.analysis.predict import (
    learn_from_runs,
    memory_fit,
    phase_times,
)
from infermeter.analysis.timemodel import DeviceModel
from infermeter.bench.curves import measure_curves, model_widths
from infermeter.measure.ceilings import Ceilings
from infermeter.models.shape import Shape
from infermeter.run.profiling import profile

#: (batch, prompt tokens) points per model; batch x prompt kept <= 4096 tokens on 2 cores
POINTS = {
    "smollm2-135m": [
        (1, 32),
        (1, 128),
        (1, 256),
        (1, 512),
        (1, 1024),
        (4, 64),
        (4, 256),
        (16, 32),
        (16, 128),
    ],
    "tiny-llama": [(1, 32), (1, 128), (1, 512), (1, 1024), (4, 128), (4, 512), (16, 64), (16, 256)],
    "tiny-qwen3-moe": [
        (1, 32),
        (1, 128),
        (1, 512),
        (1, 1024),
        (4, 128),
        (4, 512),
        (16, 64),
        (16, 256),
    ],
    # GPT-2 has 1024 positions: its longest prompt leaves room for the new tokens
    "tiny-gpt2": [(1, 32), (1, 128), (1, 512), (1, 960), (4, 128), (4, 512), (16, 64), (16, 256)],
}
QUICK = {m: p[::2] for m, p in POINTS.items()}


def _err(pred: float, meas: float) -> float:
    return 100 * (pred - meas) / meas


def _summary(errs: list[float]) -> dict[str, float]:
    a = [abs(e) for e in errs]
    return {"n": len(a), "median_abs_pct": statistics.median(a), "max_abs_pct": max(a)}


#: the machine's speed through the run: a float32 GEMM of 256 x 2048 by 2048 x 2048, GFLOP/s
SPEED: list[float] = []


def speed_probe() -> float:
    """GFLOP/s of a fixed GEMM now (median of 20 calls), kept in SPEED.

    Why: this machine is shared; its speed moved by 2x between two runs of this benchmark
    (4096-row GEMMs at 56 and 105 GFLOP/s), more than the errors the goal asks for. The
    spread of the probes says how far the machine itself moved while the points were taken.
    """
    import time

    import torch

    x, w = torch.randn(256, 2048), torch.randn(2048, 2048)
    times = []
    for _ in range(20):
        t0 = time.perf_counter()
        torch.nn.functional.linear(x, w)
        times.append(time.perf_counter() - t0)
    SPEED.append(2 * 256 * 2048 * 2048 / statistics.median(times) / 1e9)
    return SPEED[-1]


def measure_points(models: dict, samples: int, new_tokens: int) -> list[dict]:
    """Profile every point; keep the run's shape, op counts, medians and memory peak."""
    out = []
    for name, points in models.items():
        speed_probe()
        rss_before = psutil.Process().memory_info().rss
        lm = load_model(name, device="cpu")
        for batch, prompt in points:
            cfg = RunConfig(
                model=name,
                prompt_tokens=prompt,
                batch_size=batch,
                new_tokens=new_tokens,
                samples=samples,
                warmup=1,
                energy="off",
                chat=False,
            )
            run = profile(cfg, loaded=lm)
            s = run.summary()
            shape = run.model_info["shape"]
            out.append(
                {
                    "model": name,
                    "batch": batch,
                    "prompt": prompt,
                    "params": run.model_info.get("params"),
                    "shape": shape,
                    "op_counts": (shape.get("flop_check") or {}).get("op_counts"),
                    "ttft_s": s["ttft_ms"].median / 1e3,
                    "tpot_s": s["tpot_ms"].median / 1e3,
                    "rss_peak_bytes": s["rss_peak_mib"].median * 2**20,
                    "rss_before_bytes": rss_before,
                }
            )
            print(
                f"measured {name} batch {batch} prompt {prompt}: "
                f"TTFT {out[-1]['ttft_s'] * 1e3:.1f} ms, TPOT {out[-1]['tpot_s'] * 1e3:.2f} ms",
                flush=True,
            )
        del lm
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=3)
    ap.add_argument("--new-tokens", type=int, default=8)
    ap.add_argument("--quick", action="store_true", help="Half the points, quick curves.")
    ap.add_argument("--curves", help="Reuse curves from this JSON file (written if missing).")
    ap.add_argument(
        "--points", help="Reuse measured points from this JSON file (written if missing)."
    )
    args = ap.parse_args(argv)
    import torch

    models = QUICK if args.quick else POINTS
    from infermeter.measure.curves import Curves

    if args.curves and Path(args.curves).exists():
        curves = Curves.from_dict(json.loads(Path(args.curves).read_text()))
    else:
        widths = []
        for name in models:
            lm = load_model(name, device="cpu")
            pool = sum(p.numel() * p.element_size() for p in lm.model.parameters())
            widths += [(k, n, pool) for k, n in model_widths(lm.model)]
            del lm
        curves = measure_curves(
            torch.device("cpu"), "float32", widths=widths, quick=args.quick, progress=print
        )
        if args.curves:
            Path(args.curves).write_text(json.dumps(curves.to_dict()))
    this_cpu = Ceilings("this CPU", {}, None, "benchmarks/predict_error.py", kind="cpu")
    dev = DeviceModel.from_curves(this_cpu, curves, {"curves": curves.source})
    print(f"curves: {json.dumps(curves.summary())}")
    if args.points and Path(args.points).exists():
        points = json.loads(Path(args.points).read_text())
    else:
        speed_probe()  # right after the calibration
        points = measure_points(models, args.samples, args.new_tokens)
        speed_probe()
        if args.points:
            Path(args.points).write_text(json.dumps(points))
    for p in points:
        p["pred"] = phase_times(
            Shape.from_dict(p["shape"]),
            dev,
            p["batch"],
            p["prompt"],
            args.new_tokens,
            "float32",
            op_counts=p["op_counts"],
        )
    report: dict = {}
    # calibration only
    for phase, key in (("prefill", "ttft_s"), ("decode", "tpot_s")):
        errs = [_err(p["pred"][phase].total_s, p[key]) for p in points]
        for p, e in zip(points, errs, strict=True):
            p.setdefault("calibration_err", {})[phase] = e
        report[f"calibration_only_{phase}"] = _summary(errs)
    # learnt from every other point of the same model (as `predict` learns from the stored
    # runs of the model it predicts), held out the rest
    phases = (("prefill", "ttft_s"), ("decode", "tpot_s"))
    errs: dict[str, list[float]] = {"prefill": [], "decode": []}
    for name in models:
        mine = [p for p in points if p["model"] == name]
        train = [i % 2 == 0 for i in range(len(mine))]
        learned = learn_from_runs(
            {
                ph: [(p["pred"][ph], p[key]) for p, t in zip(mine, train, strict=True) if t]
                for ph, key in phases
            },
            runs=sum(train),
        )
        print(f"{name}: factors learnt from {sum(train)} runs: {learned.factors}")
        for ph, key in phases:
            for p, t in zip(mine, train, strict=True):
                e = _err(learned.apply(ph, p["pred"][ph]), p[key])
                p.setdefault("held_out_err", {})[ph] = None if t else e
                if not t:
                    errs[ph].append(e)
    for ph, _ in phases:
        report[f"held_out_{ph}"] = _summary(errs[ph])
    # memory
    mem_errs = []
    for p in points:
        shape = Shape.from_dict(p["shape"])
        fit = memory_fit(
            shape,
            p["params"],
            "float32",
            p["batch"],
            p["prompt"],
            args.new_tokens,
            1,
            None,
            p["rss_before_bytes"],
        )
        p["memory_err"] = _err(fit.total_bytes, p["rss_peak_bytes"])
        mem_errs.append(p["memory_err"])
    report["memory_total"] = _summary(mem_errs)
    print(
        f"\n{'model':16} {'batch':>5} {'prompt':>6} {'TTFT ms':>9} {'calib':>7} {'held':>7} "
        f"{'TPOT ms':>8} {'calib':>7} {'held':>7} {'mem':>6}"
    )
    for p in points:
        ho = p["held_out_err"]

        def f(v):
            return "   fit" if v is None else f"{v:+6.1f}%"

        print(
            f"{p['model']:16} {p['batch']:5} {p['prompt']:6} {p['ttft_s'] * 1e3:9.1f} "
            f"{p['calibration_err']['prefill']:+6.1f}% {f(ho['prefill'])} {p['tpot_s'] * 1e3:8.2f} "
            f"{p['calibration_err']['decode']:+6.1f}% {f(ho['decode'])} {p['memory_err']:+5.1f}%"
        )
    print()
    for k, v in report.items():
        print(
            f"{k:28} median |error| {v['median_abs_pct']:5.1f}%  "
            f"max {v['max_abs_pct']:5.1f}%  ({v['n']} points)"
        )
    ok = all(
        report[f"held_out_{ph}"]["median_abs_pct"] <= 5
        and report[f"held_out_{ph}"]["max_abs_pct"] <= 15
        for ph in ("prefill", "decode")
    )
    print(f"goal held-out median <= 5%, max <= 15%: {'met' if ok else 'NOT met'}")
    if SPEED:
        spread = max(SPEED) / min(SPEED) - 1
        report["machine_speed_gflop_s"] = {"probes": SPEED, "spread_pct": 100 * spread}
        print(
            f"machine speed through the run (256 x 2048 x 2048 GEMM): "
            f"{', '.join(f'{v:.0f}' for v in SPEED)} GFLOP/s: spread {spread:.0%}"
            + (
                " (more than the goal's 15%: errors this size are the machine's)"
                if spread > 0.15
                else ""
            )
        )
    print(json.dumps(report))


if __name__ == "__main__":
    main()
