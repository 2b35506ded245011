"""Where standard mode's cost goes: its features switched on one at a time, interleaved.

On one model (default smollm2-135m, batch 1, 128 prompt tokens, 64 new tokens) each variant
times the same generate call, in a rotating order every round, and is reported as the median
of its per-round TPOT and TTFT ratios to the bare call, with a bootstrap 95% interval:
  none        the bare timed generate call (the run's per-token clock marks only)
  blocks      Profiler with one hook pair per decoder block (+ embeddings, final norm, head)
  +parts      plus a hook pair on each block's attention, MLP and norms, and generate's parts
  +stats      plus block output statistics on 1 decode step in 4: what standard mode attaches
  profile()   `profile()` in standard mode: the path `infermeter profile --mode standard` takes
              (adds building the tables after the sample, outside the timed call)
The differences between neighbours are the cost of each feature; the last line is JSON.

    python benchmarks/standard_parts.py --rounds 12
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import statistics
from dataclasses import replace
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from infermeter.instrument import Profiler, ProfilingConfig
from infermeter.measure.clock import clock_for
from infermeter.measure.stats import bootstrap_median_ci
from infermeter.models import load_model
from infermeter.run import RunConfig, profile
from infermeter.run.generation import generation_config, timed_generate
from infermeter.workloads import WorkloadSpec, build_batches

CONFIGS: dict[str, ProfilingConfig | None] = {
    "none": None,
    "blocks": ProfilingConfig.custom(part_timing=False),
    "+parts": ProfilingConfig.custom(part_timing=True),
    "+stats": ProfilingConfig.standard(),
    "profile()": None,
}


def _sample(variant: str, lm: Any, kw: Any, config: RunConfig) -> tuple[float, float]:
    """(TTFT ms, TPOT ms) of one generate call of `variant`."""
    if variant == "profile()":
        (smp,) = profile(replace(config, mode="standard"), loaded=lm).measured
        return smp.ttft_ms, smp.tpot_ms
    clock = clock_for("cpu")
    prof_config = CONFIGS[variant]
    ctx: Any = contextlib.nullcontext()
    if prof_config is not None:
        ctx = Profiler(lm.model, prof_config)
    with ctx:
        timed = timed_generate(
            lm.model,
            kw,
            generation_config(lm.tokenizer, config.new_tokens),
            clock,
            config.new_tokens,
        )
    ttft, steps = timed.durations(clock)
    return ttft, sum(steps) / len(steps)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=12)
    args = ap.parse_args(argv)

    lm = load_model(args.model, device="cpu")
    config = RunConfig(
        model=args.model,
        prompt_tokens=args.prompt_tokens,
        new_tokens=args.new_tokens,
        samples=1,
        warmup=0,
        energy="off",
        chat=False,
    )
    (batch,) = build_batches(
        lm.tokenizer, WorkloadSpec(prompt_tokens=args.prompt_tokens, chat=False), 1
    )
    kw = batch.generate_kwargs("cpu", next(lm.model.parameters()).dtype)
    names = list(CONFIGS)
    data: dict[str, dict[str, list[float]]] = {v: {"ttft": [], "tpot": []} for v in names}
    for v in names:  # warm-up
        gc.collect()
        _sample(v, lm, kw, config)
    for r in range(args.rounds):
        for v in names[r % len(names) :] + names[: r % len(names)]:
            gc.collect()
            ttft, tpot = _sample(v, lm, kw, config)
            data[v]["ttft"].append(ttft)
            data[v]["tpot"].append(tpot)
    base = {m: statistics.median(data["none"][m]) for m in ("ttft", "tpot")}
    print(
        f"{args.model}: baseline TTFT {base['ttft']:.1f} ms, TPOT {base['tpot']:.2f} ms, "
        f"{args.rounds} interleaved rounds"
    )
    print(f"{'variant':10} {'TTFT ratio (95% CI)':>24} {'TPOT ratio (95% CI)':>24}")
    out: dict[str, Any] = {"model": args.model, "rounds": args.rounds, "baseline": base}
    for v in names:
        row = {}
        for m in ("ttft", "tpot"):
            rs = [a / b for a, b in zip(data[v][m], data["none"][m], strict=True)]
            row[m] = (statistics.median(rs), *bootstrap_median_ci(rs))
        out[v] = row
        t, p = row["ttft"], row["tpot"]
        print(f"{v:10} {t[0]:8.3f} ({t[1]:.3f}-{t[2]:.3f})   {p[0]:8.3f} ({p[1]:.3f}-{p[2]:.3f})")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
