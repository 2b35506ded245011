"""Does infermeter's clock agree with an outside stopwatch?

For each round, on the same prompt batch, it runs `model.generate` twice, in alternating order:
  A  timed only by an outside `time.perf_counter()` around the call (what a user would do),
  B  timed by infermeter (the stopping-criterion marks `infermeter profile` uses): TTFT + decode.
Interleaving (A B, B A, ...) makes machine drift hit both alike. Printed: the median of each,
the median of the per-round ratio B/A with a bootstrap 95% interval, and B's own outside wall
time (so the part of the call infermeter does not see, setup before the first forward and
teardown after the last token, is visible too). Last line: one JSON object for machines.

    python benchmarks/stopwatch.py --model smollm2-135m --prompt-tokens 128 --new-tokens 32
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch

from infermeter.measure.clock import clock_for
from infermeter.measure.stats import bootstrap_median_ci
from infermeter.models import load_model
from infermeter.run.generation import generation_config, timed_generate
from infermeter.workloads import WorkloadSpec, build_batches


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--batch-size", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--prompts", type=int, default=4, help="distinct prompt batches, cycled")
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()

    lm = load_model(args.model, device=args.device)
    model, tok = lm.model, lm.tokenizer
    device = next(model.parameters()).device
    dtype = next(model.parameters()).dtype
    spec = WorkloadSpec(batch_size=args.batch_size, prompt_tokens=args.prompt_tokens)
    batches = [b.generate_kwargs(device, dtype) for b in build_batches(tok, spec, args.prompts)]
    gen_cfg = generation_config(tok, args.new_tokens)
    clock = clock_for(device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

    def outside(kw: dict) -> float:
        sync()
        t0 = time.perf_counter()
        with torch.inference_mode():
            out = model.generate(**kw, generation_config=gen_cfg)
        sync()
        assert out.shape[1] == kw["input_ids"].shape[1] + args.new_tokens
        return (time.perf_counter() - t0) * 1e3

    def inside(kw: dict) -> tuple[float, float]:
        sync()
        t0 = time.perf_counter()
        timed = timed_generate(model, kw, gen_cfg, clock, args.new_tokens)
        sync()
        wall = (time.perf_counter() - t0) * 1e3
        ttft, steps = timed.durations(clock)
        assert len(steps) == args.new_tokens - 1
        return ttft + sum(steps), wall

    for kw in batches[:2]:  # warm-up, not counted
        outside(kw)
        inside(kw)
    a_ms, b_ms, b_wall, ratios = [], [], [], []
    for r in range(args.rounds):
        kw = batches[r % len(batches)]
        if r % 2 == 0:
            a = outside(kw)
            b, w = inside(kw)
        else:
            b, w = inside(kw)
            a = outside(kw)
        a_ms.append(a)
        b_ms.append(b)
        b_wall.append(w)
        ratios.append(b / a)
    med_ratio = statistics.median(ratios)
    lo, hi = bootstrap_median_ci(ratios)
    unseen = statistics.median(w - b for w, b in zip(b_wall, b_ms, strict=True))
    print(
        f"model {args.model} · {args.prompt_tokens} prompt tokens · {args.new_tokens} new "
        f"tokens · batch {args.batch_size} · {args.rounds} interleaved rounds · {device}"
    )
    print(f"A  outside perf_counter around generate : median {statistics.median(a_ms):9.2f} ms")
    print(f"B  infermeter TTFT + decode             : median {statistics.median(b_ms):9.2f} ms")
    print(
        f"B/A per-round ratio                     : median {med_ratio:.4f} "
        f"(95% CI {lo:.4f}-{hi:.4f}), |1 - ratio| = {abs(1 - med_ratio) * 100:.2f}%"
    )
    print(
        f"B's call, outside wall minus infermeter : median {unseen:9.2f} ms "
        "(generate set-up before the first forward, teardown after the last token)"
    )
    print(
        json.dumps(
            {
                "benchmark": "stopwatch",
                "model": args.model,
                "prompt_tokens": args.prompt_tokens,
                "new_tokens": args.new_tokens,
                "batch_size": args.batch_size,
                "rounds": args.rounds,
                "outside_ms_p50": statistics.median(a_ms),
                "infermeter_ms_p50": statistics.median(b_ms),
                "ratio_p50": med_ratio,
                "ratio_ci95": [lo, hi],
                "unseen_ms_p50": unseen,
            }
        )
    )


if __name__ == "__main__":
    main()
