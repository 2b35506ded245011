"""What deep mode's prefill probes cost, the old way against the new, on a real model's tensors.

Deep mode reduces every layer's attention weights (entropy, sparsity) and MLP activations (kill
ratio) on the prefill. On smollm2-135m with a 128-token prompt (CPU) its TTFT was 1.39x the
bare forward's against a goal of 1.3x. A profile of the profiler put 77 ms of the 76-ms excess
in the probes, none in the eager attention path:
  staging    a prefill met the element cap meant for decode steps, so its 30 layers' tensors
             were stacked (18 and 24 MB copies) and reduced from memory at the forward's end;
             now a call of more than `stage_batch` tokens is reduced when recorded
  entropy    `xlogy(p, p)` is not vectorised on CPU; `p * log(max(p, tiny))` gives the same sum
Each pair runs interleaved (A B A B) on the same tensors, captured from one real prefill;
printed: median microseconds per prefill (all layers) and the ratio old / new.

    python benchmarks/deep_probes.py                      # smollm2-135m, 128 tokens
    python benchmarks/deep_probes.py --model tiny-llama --rounds 50
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch

from infermeter.instrument import Profiler, ProfilingConfig
from infermeter.instrument.probes import AttentionProbe, KillProbe
from infermeter.models import load_model
from infermeter.workloads import WorkloadSpec, build_batches


def capture(model_name: str, tokens: int) -> tuple[list[Any], list[Any]]:
    """One deep prefill's attention weights and MLP activations, per layer (copies)."""
    lm = load_model(model_name)
    (batch,) = build_batches(lm.tokenizer, WorkloadSpec(prompt_tokens=tokens, chat=False), 1)
    kw = batch.generate_kwargs(torch.device("cpu"), torch.float32)
    weights: list[Any] = []
    acts: list[Any] = []
    att_record, kill_record = AttentionProbe.record, KillProbe.record
    AttentionProbe.record = lambda self, p, layer, w: weights.append(w.detach().clone())  # type: ignore[method-assign]
    KillProbe.record = lambda self, p, layer, y: acts.append(y.detach().clone())  # type: ignore[method-assign]
    try:
        with Profiler(lm.model, ProfilingConfig.deep()), torch.inference_mode():
            lm.model(input_ids=kw["input_ids"], attention_mask=kw.get("attention_mask"))
    finally:
        AttentionProbe.record, KillProbe.record = att_record, kill_record  # type: ignore[method-assign]
    return weights, acts


def old_attention(weights: list[Any], stacked: bool) -> None:
    """The columns as they were: xlogy and count_nonzero (stacked: all layers in one tensor)."""
    groups = (
        [torch.stack([w[0].reshape(w.shape[1], -1) for w in weights])]
        if stacked
        else [w[0].reshape(1, w.shape[1], -1) for w in weights]
    )
    for g in groups:
        s = g.reshape(-1, g.shape[-1]).float()
        -torch.special.xlogy(s, s).sum(1)
        torch.count_nonzero(s < 1e-3, dim=1)
        s.shape[1] - torch.linalg.vector_norm(s, 0, dim=1)


def new_attention(weights: list[Any]) -> None:
    """The columns now, per call as the forward writes them."""
    tiny = torch.finfo(torch.float32).tiny
    for w in weights:
        s = w[0].reshape(w.shape[1], -1).float()
        -(s * s.clamp_min(tiny).log_()).sum(1)
        (s < 1e-3).sum(1)
        s.shape[1] - torch.linalg.vector_norm(s, 0, dim=1)


def old_kill(acts: list[Any], stacked: bool) -> None:
    """Killed activations counted (stacked: all layers in one tensor, as a prefill was)."""
    groups = (
        [torch.stack([a.reshape(-1) for a in acts])]
        if stacked
        else [a.reshape(1, -1) for a in acts]
    )
    for g in groups:
        torch.count_nonzero(g.abs() <= 1e-3, dim=1)


def new_kill(acts: list[Any]) -> None:
    """The same count per call, as the forward writes them."""
    for a in acts:
        torch.count_nonzero(a.reshape(1, -1).abs() <= 1e-3, dim=1)


def interleaved(a: Callable[[], None], b: Callable[[], None], rounds: int) -> tuple[float, float]:
    """Median microseconds of `a` and of `b`, run A B A B."""
    ta, tb = [], []
    a()
    b()
    for _ in range(rounds):
        for f, out in ((a, ta), (b, tb)):
            t0 = time.perf_counter()
            f()
            out.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(ta), statistics.median(tb)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=30)
    args = ap.parse_args()
    weights, acts = capture(args.model, args.tokens)
    print(
        f"{args.model}, {args.tokens}-token prefill: {len(weights)} attention calls "
        f"{tuple(weights[0].shape)}, {len(acts)} MLP activations {tuple(acts[0].shape)}"
    )
    pairs = {
        "attention, stacked xlogy -> per call clamp-log": (
            lambda: old_attention(weights, True),
            lambda: new_attention(weights),
        ),
        "attention, per call xlogy -> per call clamp-log": (
            lambda: old_attention(weights, False),
            lambda: new_attention(weights),
        ),
        "kill ratio, stacked -> per call": (
            lambda: old_kill(acts, True),
            lambda: new_kill(acts),
        ),
    }
    with torch.inference_mode():
        for name, (old, new) in pairs.items():
            a, b = interleaved(old, new, args.rounds)
            print(f"{name}: {a / 1e3:.2f} ms -> {b / 1e3:.2f} ms per prefill (x{a / b:.2f})")


if __name__ == "__main__":
    main()
