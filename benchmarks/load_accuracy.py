"""Serving under load, measured: the arrival process, and continuous vs static batching.

1. Arrivals: 4,000 generated inter-arrival gaps at `--rate` against the exponential
   distribution of that rate (Kolmogorov-Smirnov), and against one of half the rate (which the
   test must reject, or it could not tell rates apart).
2. The harness's own share of the wall time at rate 4 (static server: time neither inside
   `generate` nor asleep waiting for an arrival), and the request timestamps against an
   outside clock (continuous batching: when a streaming reader saw each first token vs the
   manager's own record).
3. Continuous batching (transformers' manager) vs static batches of `generate` on one model
   (default smollm2-135m, CPU), the same seeded requests at each rate: throughput, output
   tokens/s, and the median and p99 of TTFT, TPOT and end-to-end latency, then which server
   wins on each at each rate.
The last line is one JSON object.

    python benchmarks/load_accuracy.py --requests 64 --rates 2 inf
"""

from __future__ import annotations

import argparse
import json
import math
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

from infermeter.models import load_model
from infermeter.serving.load import Lengths, LoadSpec, arrival_offsets_s, run_load


def arrivals_check(rate: float) -> dict[str, float]:
    from scipy import stats

    offsets = arrival_offsets_s(rate, 4000, seed=7)
    gaps = [b - a for a, b in zip([0.0, *offsets], offsets, strict=False)]
    right = stats.kstest(gaps, "expon", args=(0, 1 / rate)).pvalue
    wrong = stats.kstest(gaps, "expon", args=(0, 2 / rate)).pvalue
    print(
        f"arrivals at {rate}/s: mean gap {sum(gaps) / len(gaps) * 1e3:.1f} ms "
        f"(expected {1e3 / rate:.1f}); KS p = {right:.3f} against the asked rate, "
        f"{wrong:.2g} against half of it"
    )
    return {"rate": rate, "ks_p": right, "ks_p_half_rate": wrong}


def harness_share(lm: object, model: str, rate: float, requests: int) -> dict[str, float]:
    """The static server's own time: wall time minus time inside generate and asleep."""
    import time

    import infermeter.run.generation as generation
    import infermeter.serving.load as load

    spent = {"generate": 0.0, "sleep": 0.0}
    real_generate, real_sleep = generation.timed_generate, time.sleep

    def timed(*a: object, **k: object) -> object:
        t0 = time.perf_counter()
        try:
            return real_generate(*a, **k)
        finally:
            spent["generate"] += time.perf_counter() - t0

    def sleep(s: float) -> None:
        t0 = time.perf_counter()
        real_sleep(s)
        spent["sleep"] += time.perf_counter() - t0

    generation.timed_generate, load.time.sleep = timed, sleep  # type: ignore[assignment]
    try:
        spec = LoadSpec(
            model=model,
            rate=rate,
            requests=requests,
            server="static",
            prompt_tokens=Lengths("fixed", 64),
            new_tokens=Lengths("fixed", 16),
        )
        t0 = time.perf_counter()
        run_load(spec, loaded=lm)
        wall = time.perf_counter() - t0
    finally:
        generation.timed_generate, load.time.sleep = real_generate, real_sleep  # type: ignore
    own = wall - spent["generate"] - spent["sleep"]
    print(
        f"harness at rate {rate:g}/s (static, {requests} requests): {own * 1e3:.1f} ms of "
        f"{wall:.2f} s outside generate and sleep = {100 * own / wall:.2f}% (request set-up "
        "and prompt building included)"
    )
    return {"rate": rate, "harness_pct": 100 * own / wall, "wall_s": wall}


def outside_clock(lm: object, requests: int) -> dict[str, float]:
    """Continuous batching: the manager's first-token times against an outside clock.

    The outside clock is when a streaming reader saw each first token (its own perf_counter),
    compared relative to the TTFT.
    """
    import time

    from transformers import GenerationConfig

    from infermeter.serving.load import make_requests

    spec = LoadSpec(
        requests=requests, prompt_tokens=Lengths("fixed", 64), new_tokens=Lengths("fixed", 8)
    )
    reqs = make_requests(spec, lm.tokenizer, 10**9)  # type: ignore[attr-defined]
    manager = lm.model.init_continuous_batching(  # type: ignore[attr-defined]
        generation_config=GenerationConfig(max_new_tokens=8, do_sample=False, eos_token_id=-1)
    )
    manager.start()
    seen: dict[str, float] = {}
    stamps: dict[str, list[float]] = {}
    added: dict[str, float] = {}
    try:
        for r in reqs:
            rid = f"r{r.index}"
            added[rid] = time.perf_counter()
            manager.add_request(
                r.prompt_ids,
                request_id=rid,
                max_new_tokens=8,
                streaming=True,
                record_timestamps=True,
                eos_token_id=-1,
            )
        while len(stamps) < len(reqs):
            res = manager.get_result(timeout=60)
            if res is None:
                break
            now = time.perf_counter()
            if res.generated_tokens and res.request_id not in seen:
                seen[res.request_id] = now
            if res.is_finished():
                stamps[res.request_id] = list(res.timestamps or [])
    finally:
        manager.stop(block=True)
    errs = []
    for rid, ts in stamps.items():
        ttft_manager = ts[0] - added[rid]
        ttft_seen = seen[rid] - added[rid]
        errs.append(abs(ttft_seen - ttft_manager) / ttft_manager)
    import statistics

    med, worst = statistics.median(errs), max(errs)
    print(
        f"outside clock (continuous, {len(errs)} requests): first token seen by a streaming "
        f"reader vs the manager's record: median {100 * med:.2f}% of TTFT, worst "
        f"{100 * worst:.2f}%"
    )
    return {"median_pct": 100 * med, "worst_pct": 100 * worst}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--rates", nargs="+", default=["2", "inf"])
    ap.add_argument("--prompt-tokens", default="uniform:32-128")
    ap.add_argument("--new-tokens", default="16")
    ap.add_argument("--static-batch", type=int, default=8)
    args = ap.parse_args(argv)
    out: dict = {"arrivals": arrivals_check(4.0), "servers": {}}
    lm = load_model(args.model, device="cpu")
    out["harness"] = harness_share(lm, args.model, 4.0, 32)
    out["outside_clock"] = outside_clock(lm, 8)
    head = f"{'rate':>5} {'server':11} {'req/s':>6} {'tok/s':>7} {'TTFT p50':>9} {'p99':>8} "
    print(
        f"\n{args.model}, {args.requests} requests, prompts {args.prompt_tokens}, "
        f"{args.new_tokens} new tokens"
    )
    print(head + f"{'TPOT p50':>9} {'p99':>7} {'e2e p50':>8} {'p99':>8}")
    for rate_text in args.rates:
        rate = math.inf if rate_text == "inf" else float(rate_text)
        for server in ("continuous", "static"):
            spec = LoadSpec(
                model=args.model,
                rate=rate,
                requests=args.requests,
                prompt_tokens=Lengths.parse(args.prompt_tokens, "--prompt-tokens"),
                new_tokens=Lengths.parse(args.new_tokens, "--new-tokens"),
                server=server,
                static_batch=args.static_batch,
            )
            s = run_load(spec, loaded=lm)["summary"]
            row = {
                "throughput_rps": s["throughput_rps"],
                "output_tokens_per_s": s["output_tokens_per_s"],
                **{
                    f"{m}_{q}": s[m][q]
                    for m in ("ttft_ms", "tpot_ms", "e2e_ms")
                    for q in ("p50", "p99")
                },
            }
            out["servers"][f"{rate_text}/{server}"] = row
            print(
                f"{rate_text:>5} {server:11} {row['throughput_rps']:6.2f} "
                f"{row['output_tokens_per_s']:7.1f} {row['ttft_ms_p50']:9.1f} "
                f"{row['ttft_ms_p99']:8.1f} {row['tpot_ms_p50']:9.1f} {row['tpot_ms_p99']:7.1f} "
                f"{row['e2e_ms_p50']:8.1f} {row['e2e_ms_p99']:8.1f}"
            )
        c, st = out["servers"][f"{rate_text}/continuous"], out["servers"][f"{rate_text}/static"]
        for key in ("output_tokens_per_s", "ttft_ms_p99", "e2e_ms_p99"):
            better = c[key] > st[key] if key == "output_tokens_per_s" else c[key] < st[key]
            print(
                f"      at rate {rate_text}: {key} favours "
                f"{'continuous' if better else 'static'} ({c[key]:.1f} vs {st[key]:.1f})"
            )
    print(json.dumps(out))


if __name__ == "__main__":
    main()
