"""What does instrumenting cost? Each profiling mode and torch.profiler against no instrument.

On one model (default smollm2-135m, batch 1, 128 prompt tokens, 64 new tokens) the variants run
interleaved, in a rotating order each round, so drift hits all alike:
  none         the bare timed generate call, with only the per-token clock marks
  minimal      `profile()` in minimal mode: the path `infermeter profile --mode minimal` takes
  standard     `profile()` in standard mode: block and part timing, activation statistics
  deep         `profile()` in deep mode: plus eager attention with its operations timed, probes
  torch.profiler  torch.profiler.profile() (default settings) around a minimal `profile()`
Each `profile()` call measures one sample with no warm-up (the model is warm): the figures are
the CLI's, whose run set-up (prompts, census, hooks) stays outside the timed generation.
Every variant starts after `gc.collect()`, as `infermeter profile` does before each sample:
without it, garbage left by torch.profiler made a cyclic-GC pass (50-100 ms over this heap)
land inside later prefills, unevenly across variants.
Printed per variant: median TTFT and TPOT ratio to `none` with a bootstrap 95% interval, and the
process CPU time ratio (whole call: for the `profile()` variants their set-up and tables too).
Then the direct cost: microseconds per hook pair measured in a tight loop, times hooked calls
per decode step, over the TPOT. Then the same ratios on tiny-llama (where
per-call cost dominates: the worst case), and the database bytes a run adds per generated token.
The last line is one JSON object for machines.

    python benchmarks/overhead.py --rounds 8
    python benchmarks/overhead.py --rounds 40 --until 0.01   # until every interval is +-1%
    python benchmarks/overhead.py --device cuda --model llama-3.2-1b --quick   # on a GPU
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch

from infermeter.instrument import Profiler, ProfilingConfig
from infermeter.measure.clock import clock_for
from infermeter.measure.stats import bootstrap_median_ci
from infermeter.models import load_model
from infermeter.run import RunConfig, profile
from infermeter.run.generation import generation_config, timed_generate
from infermeter.workloads import WorkloadSpec, build_batches

VARIANTS = ("none", "minimal", "standard", "deep", "torch.profiler")


def _one_sample(variant: str, lm: Any, kw: Any, config: RunConfig) -> tuple[float, float, Any]:
    """One generation of `variant`: (TTFT ms, TPOT ms, the run or None).

    `none` is the bare timed generate call (the run's own per-token marks, nothing else); every
    other variant goes through `profile()`, the path `infermeter profile --mode M` takes (one
    sample, no warm-up: the model is warm), so the figures are the CLI's. torch.profiler wraps a
    minimal-mode `profile()`.
    """
    if variant == "none":
        clock = clock_for(next(lm.model.parameters()).device)
        timed = timed_generate(
            lm.model,
            kw,
            generation_config(lm.tokenizer, config.new_tokens),
            clock,
            config.new_tokens,
        )
        ttft, steps = timed.durations(clock)
        return ttft, sum(steps) / len(steps), None
    mode = "minimal" if variant == "torch.profiler" else variant
    ctx: Any = contextlib.nullcontext()
    if variant == "torch.profiler":
        acts = [torch.profiler.ProfilerActivity.CPU]
        if next(lm.model.parameters()).is_cuda:  # kernels too, as a GPU user would profile
            acts.append(torch.profiler.ProfilerActivity.CUDA)
        ctx = torch.profiler.profile(activities=acts)
    with ctx:
        run = profile(replace(config, mode=mode), loaded=lm)
    (smp,) = run.measured
    return smp.ttft_ms, smp.tpot_ms, run


def measure(
    model_name: str,
    prompt_tokens: int,
    new_tokens: int,
    rounds: int,
    until: float = 0.0,
    device: str = "cpu",
    dtype: str = "auto",
) -> dict[str, Any]:
    """Interleaved rounds of every variant; per-round TTFT, TPOT and CPU time.

    With `until` > 0, rounds go on (up to `rounds`, at least 8) until the 95% interval of
    every variant's TPOT ratio is narrower than +-`until`.
    """
    lm = load_model(model_name, device=device, dtype=dtype)
    param = next(lm.model.parameters())
    config = RunConfig(
        model=model_name,
        prompt_tokens=prompt_tokens,
        new_tokens=new_tokens,
        samples=1,
        warmup=0,
        energy="off",
        chat=False,
        device=str(param.device),
        dtype=dtype,
    )
    spec = WorkloadSpec(prompt_tokens=prompt_tokens, chat=False)
    (batch,) = build_batches(lm.tokenizer, spec, 1)
    kw = batch.generate_kwargs(param.device, param.dtype)
    data: dict[str, dict[str, list[float]]] = {
        v: {"ttft": [], "tpot": [], "cpu": []} for v in VARIANTS
    }
    calls_per_step = 0
    stated: dict[str, list[float]] = {"standard": [], "deep": []}  # each run's own estimate

    def one(variant: str, record: bool) -> None:
        nonlocal calls_per_step
        gc.collect()  # as `infermeter profile` does: no GC pass from earlier garbage inside
        c0 = time.process_time()
        ttft, tpot, run = _one_sample(variant, lm, kw, config)
        cpu = (time.process_time() - c0) * 1e3
        if not record:
            return
        data[variant]["ttft"].append(ttft)
        data[variant]["tpot"].append(tpot)
        data[variant]["cpu"].append(cpu)
        if variant in stated and run is not None and run.instrument_cost:
            stated[variant].append(run.instrument_cost.decode_share)
        if variant == "standard" and not calls_per_step and run is not None:
            decode = [
                r
                for r in run.layers["layers"]
                if r["phase"] == "decode" and r["kind"] not in ("choose_token", "prepare_step")
            ]  # hooked modules only (generate's parts are timed from the token marks)
            calls_per_step = sum(r["calls"] for r in decode) // max(1, new_tokens - 1) + 1

    for v in VARIANTS:  # warm-up, not counted
        one(v, record=False)
    for r in range(rounds):
        order = VARIANTS[r % len(VARIANTS) :] + VARIANTS[: r % len(VARIANTS)]
        for v in order:
            one(v, record=True)
        if until and r + 1 >= 8:
            widths = [(hi - lo) / 2 for _, lo, hi in ratios(data, "tpot").values()]
            if max(widths) < until:
                break
    return {"data": data, "calls_per_step": calls_per_step, "lm": lm, "stated": stated}


def ratios(data: dict[str, dict[str, list[float]]], metric: str) -> dict[str, tuple]:
    """Per variant: (median of per-round ratio to `none`, ci low, ci high)."""
    base = data["none"][metric]
    out = {}
    for v, d in data.items():
        rs = [a / b for a, b in zip(d[metric], base, strict=True)]
        out[v] = (statistics.median(rs), *bootstrap_median_ci(rs))
    return out


def hook_pair_us(loops: int = 20000) -> float:
    """Microseconds the profiler's timing wrapper adds to one module call (tight loop)."""
    lin = torch.nn.Linear(8, 8)
    x = torch.randn(1, 8)
    wrapper = torch.nn.Sequential(lin)

    def run(n: int) -> float:
        t0 = time.perf_counter()
        with torch.inference_mode():
            for _ in range(n):
                lin(x)
        return (time.perf_counter() - t0) / n * 1e6

    plain = min(run(loops) for _ in range(3))
    prof = Profiler(wrapper, ProfilingConfig.custom(part_timing=False))
    mid = prof._register(lin, "block", 0)  # one timing wrapper, as on every timed module
    prof.active = True
    prof._step = 0
    hooked = min(run(loops) for _ in range(3))
    prof.detach()
    del mid
    return hooked - plain


def stored_bytes_per_token(lm: Any, prompt_tokens: int, new_tokens: int) -> dict[str, float]:
    """SQLite bytes a stored run adds per generated token, output text left out.

    Everything kept counts: samples, step times, per-layer tables, the packed per-call trace.
    """
    import tempfile
    from pathlib import Path

    from infermeter.store import Store

    out = {}
    for mode in ("minimal", "standard", "deep"):
        cfg = RunConfig(
            prompt_tokens=prompt_tokens, new_tokens=new_tokens, samples=2, warmup=0, mode=mode
        )
        run = profile(cfg, loaded=lm)
        run.samples = [replace(s, output_text=(), prompt_text=()) for s in run.samples]
        copies = 8  # SQLite grows in 4 KiB pages: several copies make the page rounding small
        with tempfile.TemporaryDirectory() as tmp:
            db = Path(tmp) / "r.db"
            store = Store(db)
            before = _db_bytes(store, db)
            for _ in range(copies):
                store.save(run)
            out[mode] = (_db_bytes(store, db) - before) / (copies * 2 * new_tokens)
    return out


def _db_bytes(store: Any, db: Any) -> int:
    with store.engine.connect() as c:
        c.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    return db.stat().st_size


def report(title: str, res: dict[str, Any]) -> dict[str, Any]:
    """Print the ratio table of one model; return it for the JSON line."""
    data = res["data"]
    ttft, tpot, cpu = ratios(data, "ttft"), ratios(data, "tpot"), ratios(data, "cpu")
    base_tpot = statistics.median(data["none"]["tpot"])
    base_ttft = statistics.median(data["none"]["ttft"])
    print(
        f"\n{title}: baseline TTFT {base_ttft:.2f} ms, TPOT {base_tpot:.2f} ms "
        f"({len(data['none']['tpot'])} interleaved rounds)"
    )
    head = f"{'variant':16} {'TTFT ratio (95% CI)':>26} {'TPOT ratio (95% CI)':>26}"
    print(f"{head} {'CPU ratio':>10}")
    for v in VARIANTS:
        a, b = ttft[v], tpot[v]
        print(
            f"{v:16} {a[0]:8.4f} ({a[1]:.4f}-{a[2]:.4f})   {b[0]:8.4f} ({b[1]:.4f}-{b[2]:.4f})"
            f"   {cpu[v][0]:8.4f}"
        )
    std_over = tpot["standard"][0] - 1
    tp_over = tpot["torch.profiler"][0] - 1
    if tp_over > 0:
        print(f"standard's TPOT overhead is {std_over / tp_over:.2f} of torch.profiler's")
    own: dict[str, float] = {}
    for v, shares in res["stated"].items():
        if shares:  # what the run printed of itself, against what the rounds measured
            share = statistics.median(shares)
            own[v] = share / (1 - share)  # a share of the instrumented step, as a ratio to bare
            lo, hi = tpot[v][1] - 1, tpot[v][2] - 1
            where = "inside" if lo <= own[v] <= hi else ("below" if own[v] < lo else "ABOVE")
            if v == "deep" and own[v] < lo:
                where += " (deep's estimate is a lower bound: timing and block statistics only)"
            print(
                f"{v}: the run's own estimate +{100 * own[v]:.2f}% decode; measured TPOT "
                f"{100 * (tpot[v][0] - 1):+.2f}% ({100 * lo:+.2f}..{100 * hi:+.2f}%): {where} "
                "the measured interval"
            )
    return {
        v: {"ttft": ttft[v][0], "tpot": tpot[v][0], "tpot_ci": list(tpot[v][1:]), "cpu": cpu[v][0]}
        for v in VARIANTS
    } | {
        "baseline_tpot_ms": base_tpot,
        "baseline_ttft_ms": base_ttft,
        "calls_per_decode_step": res["calls_per_step"],
        "stated_decode_overhead": own,
    }


def main(argv: list[str] | None = None, out: Callable[[str], None] = print) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--tiny-rounds", type=int, default=12)
    ap.add_argument(
        "--until",
        type=float,
        default=0.0,
        help="stop once every TPOT ratio's 95%% interval is within +-UNTIL (e.g. 0.01); "
        "--rounds is then the most",
    )
    ap.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    ap.add_argument("--dtype", default="auto")
    ap.add_argument(
        "--quick", action="store_true", help="the main model only (no tiny-llama, bytes)"
    )
    args = ap.parse_args(argv)

    main_res = measure(
        args.model,
        args.prompt_tokens,
        args.new_tokens,
        args.rounds,
        args.until,
        args.device,
        args.dtype,
    )
    summary = {"model": args.model, "device": args.device, "main": report(args.model, main_res)}
    if args.quick:
        out(json.dumps(summary))
        return
    us = hook_pair_us()
    calls = main_res["calls_per_step"]
    tpot = summary["main"]["baseline_tpot_ms"]
    print(
        f"\ndirect cost: one timing wrapper {us:.2f} us x {calls} timed calls per decode step = "
        f"{us * calls / 1e3:.3f} ms = {us * calls / 1e3 / tpot * 100:.2f}% of a {tpot:.1f} ms "
        "step (timing only; statistics add their own reductions)"
    )
    summary["hook_pair_us"] = us
    tiny_res = measure(
        "tiny-llama", args.prompt_tokens, args.new_tokens, args.tiny_rounds, args.until
    )
    summary["tiny-llama"] = report(
        "tiny-llama (worst case: tiny ops, per-call cost dominates)", tiny_res
    )
    per_token = stored_bytes_per_token(main_res["lm"], args.prompt_tokens, args.new_tokens)
    print(
        "\nSQLite bytes stored per generated token: "
        + ", ".join(f"{m} {b:,.0f} B" for m, b in per_token.items())
    )
    summary["bytes_per_token"] = per_token
    out(json.dumps(summary))


if __name__ == "__main__":
    main()
