"""What each knob that trades quality for cost does to a real model's output, on both of them.

For SmolLM2-135M and Gemma 3 270M (the two trained models on PyPI): the weight schemes (bfloat16,
int8, int4 in groups of 128/64/32), fewer active blocks (first N, or the N most important), and
the 4-bit quantized KV cache, each held against the model in float32 with the dynamic cache.
Scored over every position of 4 rows of 128 tokens of natural text from the built-in corpus
(508 predictions; the knobs' own proxy in a run uses 2 x 24 tokens): top-1 agreement of the
next-token prediction, mean KL(reference || variant) in nats, and the text's perplexity under
each. The weight schemes also get their decode time per token as a ratio to float32, from rounds
that alternate the models (the median of 5 rounds of 24 tokens after a 64-token prompt).

The KV cache's proxy is teacher-forced: the first 160 tokens of each row are the prompt, and the
next 96 are fed one at a time through the cache (the same tokens for both caches), so every
decode step reads a cache holding more than quanto's 128 unquantized recent positions.

Speculative decoding's proxy is exact agreement with greedy output (benchmarks/speculation.py);
routing shortcuts have none here: neither model is a mixture of experts.

    python benchmarks/quality_proxies.py                 # both models
    python benchmarks/quality_proxies.py -m gemma3-270m  # one
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from infermeter import load_model
from infermeter.knobs import KNOBS
from infermeter.knobs.active_layers import parse as parse_active
from infermeter.models.calibration import quality
from infermeter.models.quantize import stored_weight_dtypes
from infermeter.workloads.prompts import WorkloadSpec, build_batches

SCHEMES = ("bfloat16", "int8", "int4", "int4-g64", "int4-g32")
MODELS = ("smollm2-135m", "gemma3-270m")


def _ids(tokenizer, rows: int, tokens: int) -> torch.Tensor:
    spec = WorkloadSpec(batch_size=rows, prompt_tokens=tokens, chat=False, seed=77)
    (batch,) = build_batches(tokenizer, spec, 1)
    return batch.input_ids


def _logits(model, ids: torch.Tensor) -> torch.Tensor:
    with torch.inference_mode():
        return model(input_ids=ids, use_cache=False).logits.float()


def _perplexity(logits: torch.Tensor, ids: torch.Tensor) -> float:
    nll = torch.nn.functional.cross_entropy(
        logits[:, :-1].reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1)
    )
    return float(nll.exp())


def _score(ref: torch.Tensor, got: torch.Tensor, ids: torch.Tensor) -> dict[str, float]:
    return {**quality(ref[:, :-1], got[:, :-1]), "perplexity": _perplexity(got, ids)}


def _weight_mib(model) -> float:
    """The dtype knob's own figure: weights at their stored width (tied ones once)."""
    from infermeter.knobs.dtype import weight_mib

    return weight_mib(stored_weight_dtypes(model))


def _tpot_ms(model, prompt: torch.Tensor, new_tokens: int = 24) -> float:
    """Decode ms per token: a generate of `new_tokens` less one of 1 token, divided."""

    def run(n: int) -> float:
        t = time.perf_counter()
        with torch.inference_mode():
            model.generate(input_ids=prompt, max_new_tokens=n, min_new_tokens=n, do_sample=False)
        return time.perf_counter() - t

    return (run(new_tokens) - run(1)) / (new_tokens - 1) * 1e3


def weight_schemes(name: str, ids: torch.Tensor, rounds: int) -> list[dict]:
    """Each scheme against float32: quality, weight MiB, decode time ratio (alternating)."""
    models = {"float32": load_model(name, device="cpu", dtype="float32")}
    for scheme in SCHEMES:
        models[scheme] = load_model(name, device="cpu", dtype=scheme)
    ref = _logits(models["float32"].model, ids)
    prompt = ids[:1, :64]
    for lm in models.values():
        _tpot_ms(lm.model, prompt, 4)  # warm-up
    times: dict[str, list[float]] = {k: [] for k in models}
    for _ in range(rounds):
        for key, lm in models.items():
            times[key].append(_tpot_ms(lm.model, prompt))
    base = statistics.median(times["float32"])
    rows = []
    for key, lm in models.items():
        q = lm.info.quantization or {}
        rows.append(
            {
                "model": name,
                "knob": "dtype",
                "value": key,
                **_score(ref, _logits(lm.model, ids), ids),
                "weight_mib": round(_weight_mib(lm.model), 1),
                "tpot_ms": round(statistics.median(times[key]), 2),
                "tpot_vs_float32": round(statistics.median(times[key]) / base, 3),
                "method": q.get("method", ""),
            }
        )
    return rows


def active_layers(name: str, ids: torch.Tensor) -> list[dict]:
    """First N and the N most important blocks, N = L-2, L-4 and L/2, against all L."""
    lm = load_model(name, device="cpu", dtype="float32")
    ref = _logits(lm.model, ids)
    blocks = lm.info.layers
    rows = []
    for n in (blocks - 2, blocks - 4, blocks // 2):
        for order in ("first", "importance"):
            value = parse_active(f"{n}:{order}")
            with KNOBS["active_layers"].apply(lm, value) as applied:
                got = _logits(lm.model, ids)
            rows.append(
                {
                    "model": name,
                    "knob": "active_layers",
                    "value": f"{n}:{order}",
                    "kept": applied["kept"],
                    **_score(ref, got, ids),
                }
            )
    return rows


def _forced_logits(model, ids: torch.Tensor, prompt: int, cache) -> torch.Tensor:
    """Logits of each position after `prompt`, decoding the given tokens one at a time."""
    from infermeter.models.forward_args import with_cache

    out = []
    with torch.inference_mode():
        step = model(**with_cache(model, cache, input_ids=ids[:, :prompt], use_cache=True))
        out.append(step.logits[:, -1:].float())
        for t in range(prompt, ids.shape[1] - 1):
            step = model(**with_cache(model, cache, input_ids=ids[:, t : t + 1], use_cache=True))
            out.append(step.logits[:, -1:].float())
    return torch.cat(out, dim=1)


def kv_cache(name: str, ids: torch.Tensor, prompt: int = 160) -> list[dict]:
    """The 4-bit quanto cache against the dynamic cache, teacher-forced, from `prompt` on."""
    from transformers import DynamicCache
    from transformers.cache_utils import QuantizedCache

    from infermeter.errors import UserError
    from infermeter.run.cache_probe import check_cache_form

    lm = load_model(name, device="cpu", dtype="float32")
    try:
        check_cache_form("quantized", lm.model, "cpu")
    except UserError as exc:
        return [{"model": name, "knob": "cache", "value": "quantized", "refused": str(exc)}]
    config = lm.model.config
    ref = _forced_logits(lm.model, ids, prompt, DynamicCache(config=config))
    got = _forced_logits(lm.model, ids, prompt, QuantizedCache("quanto", config, nbits=4))
    targets = ids[:, prompt:]
    nll = torch.nn.functional.cross_entropy(got.reshape(-1, got.shape[-1]), targets.reshape(-1))
    ref_nll = torch.nn.functional.cross_entropy(ref.reshape(-1, ref.shape[-1]), targets.reshape(-1))
    return [
        {
            "model": name,
            "knob": "cache",
            "value": "quantized (4-bit quanto)",
            **quality(ref, got),
            "perplexity": float(nll.exp()),
            "perplexity_dynamic": float(ref_nll.exp()),
            "positions": int(targets.numel()),
        }
    ]


def _table(rows: list[dict]) -> None:
    print(
        f"{'model':<14} {'knob':<14} {'value':<26} {'top-1':>6} {'KL nats':>8} {'ppl':>8} "
        f"{'weights MiB':>11} {'TPOT x fp32':>11}"
    )
    for r in rows:
        if "refused" in r:
            print(f"{r['model']:<14} {r['knob']:<14} {r['value']:<26} refused: {r['refused']}")
            continue
        print(
            f"{r['model']:<14} {r['knob']:<14} {r['value']:<26} {r['top1_agreement']:>6.3f} "
            f"{r['kl_nats']:>8.4f} {r['perplexity']:>8.4g} {r.get('weight_mib', ''):>11} "
            f"{r.get('tpot_vs_float32', ''):>11}"
            + (f"  (dynamic cache: ppl {r['perplexity_dynamic']:.4g})" if "positions" in r else "")
        )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("-m", "--model", nargs="+", default=list(MODELS))
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    torch.manual_seed(0)
    rows: list[dict] = []
    for name in args.model:
        tokenizer = load_model(name, device="cpu").tokenizer
        ids = _ids(tokenizer, rows=4, tokens=128)
        long_ids = _ids(tokenizer, rows=2, tokens=256)
        rows += weight_schemes(name, ids, args.rounds)
        rows += active_layers(name, ids)
        rows += kv_cache(name, long_ids)
    _table(rows)
    print(json.dumps({"rows": rows}, default=str))


if __name__ == "__main__":
    main()
