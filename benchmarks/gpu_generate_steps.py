"""Eager ``generate`` on one GPU, measured the way published benchmarks measured it.

Why: ``predict --stack hf`` is held against published HF ``generate`` figures
(benchmarks/published/). Where it misses (issue 32) the question is which part of
the step the model has wrong: the host's time per kernel, the number of kernels, or
the device's time (eager attention's reads, small-batch GEMMs). This script runs the
published workloads on the GPU at hand and records, per configuration:

- the decode step as optimum-benchmark measures it (the mean gap between
  consecutive logits-processor calls, CUDA events, no synchronisation), and the
  generate time per output token as optimum's GPTQ benchmark does;
- from ``torch.profiler`` over a prefill-only generate and one with ``--profile-tokens``
  more: kernels launched per decode step and the GPU's busy time per step, so
  host time per kernel = step / kernels where the step is launch-bound.

It needs only torch and transformers (any release from 4.36), so it runs under
the transformers release a published figure names. Models are built from the
configs in benchmarks/published/models with random weights: time does not depend
on the weights' values. Each configuration is written to ``--out`` (JSON lines) as
it ends, so a lease cut short keeps what finished. Each warms up with one generate of the
full length first (``warmup_tokens``; the H100 recording of 2026-11-27, whose rows lack the
field, warmed up with 8 tokens and its first timed repeat ran up to 4x slow).

    python benchmarks/gpu_generate_steps.py --out steps.jsonl \
        --run meta-llama--Llama-3.1-8B:bfloat16:sdpa:1,8,32:64:100
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

MODELS_DIR = Path(__file__).resolve().parent / "published" / "models"
LAUNCH_NAMES = ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernelEx")


def parse_run(spec: str) -> dict:
    """``model:dtype:attn:batches:prompt:new`` -> a dict (batches comma-separated)."""
    model, dtype, attn, batches, prompt, new = spec.split(":")
    return {
        "model": model,
        "dtype": dtype,
        "attn": attn,
        "batches": [int(b) for b in batches.split(",")],
        "prompt_tokens": int(prompt),
        "new_tokens": int(new),
    }


def build_model(model_name: str, dtype_name: str, attn: str, device: str, tiny: bool):
    """A model of the published config's shape with random weights, on ``device``."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    raw = json.loads((MODELS_DIR / f"{model_name}.json").read_text())
    if tiny:  # a CPU smoke test of this script: the same architecture, few layers and narrow
        raw.update(num_hidden_layers=2, hidden_size=64, intermediate_size=128, vocab_size=512)
        raw.update(num_attention_heads=4, num_key_value_heads=2)
        raw.pop("head_dim", None)
    config = AutoConfig.for_model(**raw)
    dtype = getattr(torch, dtype_name)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(
            config, torch_dtype=dtype, attn_implementation=attn
        )
    return model.eval(), config


class StepClock:
    """A logits processor recording a CUDA event (or a clock reading) at each call."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.marks: list = []

    def __call__(self, input_ids, scores):
        """Mark this step (optimum-benchmark's per-token latency is the gap between marks)."""
        import torch

        if self.device == "cuda":
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            self.marks.append(event)
        else:
            self.marks.append(time.perf_counter())
        return scores

    def gaps_ms(self) -> list[float]:
        """Milliseconds between consecutive steps' marks."""
        if self.device == "cuda":
            import torch

            torch.cuda.synchronize()
            return [a.elapsed_time(b) for a, b in zip(self.marks, self.marks[1:], strict=False)]
        return [(b - a) * 1000.0 for a, b in zip(self.marks, self.marks[1:], strict=False)]


def sync(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def generate_once(
    model, inputs, new_tokens: int, device: str, clock: StepClock | None = None
) -> float:
    """Wall milliseconds of one greedy generate of exactly ``new_tokens`` tokens."""
    from transformers import LogitsProcessorList

    processors = LogitsProcessorList([clock]) if clock is not None else None
    sync(device)
    start = time.perf_counter()
    model.generate(
        **inputs,
        max_new_tokens=new_tokens,
        min_new_tokens=new_tokens,
        do_sample=False,
        eos_token_id=None,
        pad_token_id=0,
        logits_processor=processors,
    )
    sync(device)
    return (time.perf_counter() - start) * 1000.0


def profile_generate(model, inputs, new_tokens: int, device: str) -> tuple[int, float]:
    """(kernel launches, GPU busy ms) of one generate, from torch.profiler."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with profile(activities=activities) as prof:
        generate_once(model, inputs, new_tokens, device)
    launches = 0
    busy_us = 0.0
    for event in prof.events():
        if event.name in LAUNCH_NAMES:
            launches += 1
        if device == "cuda" and event.device_type == torch.autograd.DeviceType.CUDA:
            busy_us += event.time_range.elapsed_us()
    return launches, busy_us / 1000.0


def measure(
    model,
    config,
    run: dict,
    batch: int,
    device: str,
    repeats: int,
    profile_tokens: int,
    warmup_full: bool = True,
) -> dict:
    """One (model, batch) configuration's figures."""
    import torch

    prompt, new = run["prompt_tokens"], run["new_tokens"]
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(10, config.vocab_size - 1, (batch, prompt), generator=generator).to(device)
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    # warm-up at full length: on the H100 an 8-token warm-up left the first timed generate up
    # to 4x slower than the next (the caching allocator and cuBLAS still growing to the cache)
    generate_once(model, inputs, new if warmup_full else min(new, 8), device)
    steps_ms, per_token_ms, prefill_ms = [], [], []
    for _ in range(repeats):
        clock = StepClock(device)
        total = generate_once(model, inputs, new, device, clock)
        gaps = clock.gaps_ms()
        steps_ms.append(statistics.fmean(gaps))
        per_token_ms.append(total / new)
        prefill_ms.append(generate_once(model, inputs, 1, device))
    launches_1, busy_1 = profile_generate(model, inputs, 1, device)
    launches_n, busy_n = profile_generate(model, inputs, 1 + profile_tokens, device)
    step = statistics.median(steps_ms)
    kernels = (launches_n - launches_1) / profile_tokens
    return {
        "model": run["model"],
        "dtype": run["dtype"],
        "attn": run["attn"],
        "batch": batch,
        "prompt_tokens": prompt,
        "new_tokens": new,
        "decode_step_ms": round(step, 3),
        "decode_step_ms_runs": [round(s, 3) for s in steps_ms],
        "generate_ms_per_token": round(statistics.median(per_token_ms), 3),
        "prefill_generate_ms": round(statistics.median(prefill_ms), 3),
        "kernels_per_step": round(kernels, 1),
        "gpu_busy_ms_per_step": round((busy_n - busy_1) / profile_tokens, 3),
        "host_us_per_kernel_if_launch_bound": round(step * 1000.0 / kernels, 2)
        if kernels
        else None,
        "prefill_kernels": launches_1,
        "warmup_tokens": new if warmup_full else min(new, 8),
    }


def environment(device: str) -> dict:
    import torch
    import transformers

    info = {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": sys.version.split()[0],
    }
    if device == "cuda":
        info["gpu"] = torch.cuda.get_device_name(0)
        info["cuda"] = torch.version.cuda
    return info


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--run", action="append", required=True, help="model:dtype:attn:batches:prompt:new"
    )
    parser.add_argument("--out", type=Path, required=True, help="JSON lines, one per configuration")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--profile-tokens", type=int, default=8)
    parser.add_argument(
        "--deadline-s", type=float, default=1e9, help="start no configuration after this"
    )
    parser.add_argument(
        "--tiny", action="store_true", help="narrow models: a smoke test of this script"
    )
    args = parser.parse_args(argv)
    import torch

    started = time.perf_counter()
    env = environment(args.device)
    print(json.dumps(env), flush=True)
    with args.out.open("a") as out:
        for spec in args.run:
            run = parse_run(spec)
            if time.perf_counter() - started > args.deadline_s:
                print(f"deadline: skipped {spec}", flush=True)
                continue
            try:
                load_start = time.perf_counter()
                model, config = build_model(
                    run["model"], run["dtype"], run["attn"], args.device, args.tiny
                )
                load_s = time.perf_counter() - load_start
            except Exception as exc:  # one failed model must not lose the others
                print(f"build failed: {spec}: {type(exc).__name__}: {exc}", flush=True)
                continue
            for batch in run["batches"]:
                if time.perf_counter() - started > args.deadline_s:
                    print(f"deadline: skipped {spec} batch {batch}", flush=True)
                    break
                try:
                    with torch.inference_mode():
                        row = measure(
                            model,
                            config,
                            run,
                            batch,
                            args.device,
                            args.repeats,
                            args.profile_tokens,
                        )
                except Exception as exc:  # one failed batch must not lose the others
                    print(f"failed: {spec} batch {batch}: {type(exc).__name__}: {exc}", flush=True)
                    continue
                row.update(
                    env, build_s=round(load_s, 1), elapsed_s=round(time.perf_counter() - started, 1)
                )
                out.write(json.dumps(row) + "\n")
                out.flush()
                print(json.dumps(row), flush=True)
            del model
            if args.device == "cuda":
                torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
