"""Measure a device's efficiency curves (measure/curves.py) for `infermeter calibrate`.

- GEMMs: `F.linear` of rows x k by a k x n weight, rows 1..4096, at each width asked for (a
  model's linear layers, or a generic set). The weights rotate through a pool as large as the
  model's weights (or 512 MiB), so a decode-sized GEMM reads from memory as it does in the model,
  not from a cache the benchmark warmed. Rows whose call would take over a quarter second are
  skipped: the curve extrapolates at the last measured rate.
- Copies from 64 KiB to 256 MiB: bandwidth by size (small activations stay in cache).
- One page fault (measure/faults.py): what a KV cache mapped afresh each step pays per page.
- Attention: SDPA at prefill lengths (causal) and decode steps over growing keys.
- Framework overhead: a real prefill and decode step of a small built-in model (tiny-llama),
  with its operations counted; what its GEMMs and attention do not explain, per operation, is
  `op_seconds`. And `generate` on it: what generate adds before the first token and per step.

Medians of repeated loops, each loop long enough for the clock; the device is synchronised
around every timed loop.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from infermeter.measure.curves import Curves
from infermeter.measure.faults import measure_fault_seconds

ROWS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
QUICK_ROWS = (1, 4, 16, 64, 256, 1024, 4096)
#: linear widths measured when no model is named: square and 4x-wide layers
GENERIC_WIDTHS = ((512, 512), (512, 2048), (2048, 512), (2048, 2048), (4096, 4096))
COPY_BYTES = tuple(2**p for p in range(16, 29, 2))  # 64 KiB .. 256 MiB
PREFILL_TOKENS = (1, 8, 32, 128, 512, 1024, 2048)
DECODE_KEYS = (16, 128, 512, 2048, 8192)
#: the slowest single call a curve point may take before the curve is extrapolated
MAX_CALL_S = 0.1


def fmt_mib(nbytes: float) -> str:
    """Bytes as MiB for progress lines."""
    return f"{nbytes / 2**20:.0f} MiB"


def _sync(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def _median_call_s(fn: Callable[[int], Any], device: Any, calls: int, repeats: int) -> float:
    """Median over `repeats` loops of the mean time of one of `calls` calls (fn gets the index)."""
    loops = _interleaved_rounds_s({"call": (fn, calls)}, device, repeats)
    return statistics.median(r["call"] for r in loops)


def _calls_for(one_call_s: float, target_s: float = 0.02, at_least: int = 1) -> int:
    return max(at_least, min(200, int(target_s / max(one_call_s, 1e-7))))


def measure_gemm(
    device: Any, dtype: Any, k: int, n: int, rows: tuple[int, ...], pool_bytes: int
) -> dict[str, Any]:
    """Median seconds of one `F.linear` call per row count, for a k -> n layer."""
    import torch
    import torch.nn.functional as F

    esize = torch.empty(0, dtype=dtype).element_size()
    pool = max(1, min(64, -(-pool_bytes // max(k * n * esize, 1))))
    weights = [torch.randn(n, k, device=device, dtype=dtype) for _ in range(pool)]
    out_rows, out_s = [], []
    for r in rows:
        x = torch.randn(r, k, device=device, dtype=dtype)

        def call(i: int, x: Any = x) -> Any:
            return F.linear(x, weights[i % pool])

        t0 = time.perf_counter()
        call(0)
        _sync(device)
        first = time.perf_counter() - t0
        if first > 4 * MAX_CALL_S:
            break
        repeats = 3 if first > MAX_CALL_S / 4 else 5
        secs = _median_call_s(call, device, _calls_for(first, at_least=min(pool, 16)), repeats)
        out_rows.append(r)
        out_s.append(secs)
        if secs > MAX_CALL_S:
            break
    return {"k": k, "n": n, "rows": out_rows, "seconds": out_s}


def measure_copies(device: Any, sizes: tuple[int, ...]) -> dict[str, list[float]]:
    """Median seconds of one copy of each size (bytes counted read plus write)."""
    import torch

    out_b, out_s = [], []
    for nbytes in sizes:
        src = torch.empty(nbytes // 4, device=device, dtype=torch.float32).uniform_()
        dst = torch.empty_like(src)
        t0 = time.perf_counter()
        dst.copy_(src)
        _sync(device)
        calls = _calls_for(time.perf_counter() - t0)

        def copy(i: int, d: Any = dst, s: Any = src) -> Any:
            return d.copy_(s)

        secs = _median_call_s(copy, device, calls, 5)
        out_b.append(2.0 * nbytes)
        out_s.append(secs)
    return {"bytes": out_b, "seconds": out_s}


def measure_attention(
    device: Any, dtype: Any, heads: int, head_dim: int, quick: bool
) -> dict[str, Any]:
    """Median seconds of one SDPA call (batch 1): causal prefills, and decode steps."""
    import torch
    import torch.nn.functional as F

    def timed(q: Any, kv: Any, causal: bool) -> float:
        def call(i: int) -> Any:
            return F.scaled_dot_product_attention(q, kv, kv, is_causal=causal)

        t0 = time.perf_counter()
        call(0)
        _sync(device)
        return _median_call_s(call, device, _calls_for(time.perf_counter() - t0), 5)

    tokens = PREFILL_TOKENS[::2] if quick else PREFILL_TOKENS
    keys = DECODE_KEYS[::2] if quick else DECODE_KEYS
    pre = []
    for p in tokens:
        x = torch.randn(1, heads, p, head_dim, device=device, dtype=dtype)
        pre.append(timed(x, x, True))
    dec = []
    for t in keys:
        q = torch.randn(1, heads, 1, head_dim, device=device, dtype=dtype)
        kv = torch.randn(1, heads, t, head_dim, device=device, dtype=dtype)
        dec.append(timed(q, kv, False))
    return {
        "heads": heads,
        "head_dim": head_dim,
        "prefill": {"tokens": list(tokens), "seconds": pre},
        "decode": {"keys": list(keys), "seconds": dec},
    }


def _reference_model(device: Any, dtype: Any) -> Any:
    """tiny-llama with random weights on `device`: the model framework overhead is timed on."""
    import transformers

    from infermeter.models.presets import DEFAULT_PRESET, build_config, get_preset
    from infermeter.models.tokenizer import builtin_tokenizer

    preset = get_preset(DEFAULT_PRESET)
    assert preset is not None
    config = build_config(preset, builtin_tokenizer())
    return transformers.AutoModelForCausalLM.from_config(config).to(device=device, dtype=dtype)


def model_widths(model: Any) -> list[tuple[int, int]]:
    """The distinct [in, out] of a model's linear layers, its experts' and its LM head's."""
    from infermeter.models.census import census_of

    census = census_of(model)
    shapes = [tuple(s) for lay in census.layers for s in (*lay.linear_shapes, *lay.expert_shapes)]
    text = model.config.get_text_config()
    hidden = int(getattr(text, "hidden_size", 0) or 0)
    if census.lm_head_macs and hidden:
        shapes.append((hidden, census.lm_head_macs // hidden))
    return list(dict.fromkeys((int(a), int(b)) for a, b in shapes))


def _gemm_seconds(curves: Curves, model: Any, census: Any, rows: int) -> float:
    """The model's GEMMs at `rows` rows (block linears and LM head) through the curves."""
    hidden = model.config.hidden_size
    head = curves.gemm_seconds(rows, hidden, census.lm_head_macs // hidden)
    return head + sum(
        curves.gemm_seconds(rows, k, n) for lay in census.layers for k, n in lay.linear_shapes
    )


#: interleaved rounds of the framework-overhead timings: a fit negative in all of them (a sign
#: test's p = 2**-7 when the true value is 0) is a clamp, not noise
OVERHEAD_ROUNDS = 7


def _interleaved_rounds_s(
    calls: dict[str, tuple[Callable[[int], Any], int]], device: Any, rounds: int
) -> list[dict[str, float]]:
    """Per round, each call's mean seconds over its count of calls, the calls taken in turn."""
    for fn, _ in calls.values():
        fn(0)
    _sync(device)
    out = []
    for _ in range(rounds):
        row = {}
        for name, (fn, n) in calls.items():
            t0 = time.perf_counter()
            for i in range(n):
                fn(i)
            _sync(device)
            row[name] = (time.perf_counter() - t0) / n
        out.append(row)
    return out


def fit_of_rounds(values: list[float]) -> tuple[float, str]:
    """(seconds, verdict) of a fit measured once per round: its median, or 0 when negative.

    The verdict is "ok"; "noise" when the median is negative but some round is not (0 is
    within what the rounds measured); "clamped" when every round is negative (the parts
    measured slower than the whole, beyond this host's noise).
    """
    median = statistics.median(values)
    if median >= 0:
        return median, "ok"
    return 0.0, "clamped" if max(values) < 0 else "noise"


def measure_overhead(curves: Curves, model: Any, device: Any) -> None:
    """Fill `op_seconds` and generate's costs from a small model (its GEMMs' curves measured)."""
    import torch

    from infermeter.models.census import census_of
    from infermeter.models.forward_args import cache_of, with_cache
    from infermeter.models.opcount import count_ops

    census = census_of(model)
    counts = count_ops(model)
    assert counts is not None, "tiny-llama always runs a text forward"
    ids = torch.arange(1, 9, device=device).unsqueeze(0)
    with torch.no_grad():
        cache = cache_of(model(input_ids=ids, use_cache=True))
        assert cache is not None, "a causal LM returns its cache with use_cache=True"

        def prefill(i: int) -> Any:
            return model(input_ids=ids, use_cache=True)

        def step(i: int) -> Any:
            model(input_ids=ids[:, -1:], **with_cache(model, cache, use_cache=True))
            cache.crop(-1)

        def generate(new: int) -> Callable[[int], Any]:
            def call(i: int) -> Any:
                return model.generate(
                    ids, max_new_tokens=new, min_new_tokens=new, do_sample=False, pad_token_id=0
                )

            return call

        # the four timings interleaved, round by round: each fit below is a difference of
        # them, and this host's speed drifts by more than that difference between timings
        # taken seconds apart (a bare step 7.2 then 7.6 ms, generate's step 9.0 then 8.3 ms)
        rounds = _interleaved_rounds_s(
            {
                "prefill": (prefill, 20),
                "step": (step, 20),
                "gen1": (generate(1), 3),
                "gen9": (generate(9), 3),
            },
            device,
            OVERHEAD_ROUNDS,
        )
    heads = model.config.num_attention_heads
    head_dim = model.config.hidden_size // heads
    layers = len(census.layers)
    gemm_decode = _gemm_seconds(curves, model, census, 1)
    att = curves.attention_seconds(1, heads, head_dim, 1, 9) or 0.0
    other = counts["decode"]["other"]
    per_round = {
        "framework cost per operation": [
            (r["step"] - gemm_decode - layers * att) / other for r in rounds
        ],
        "generate's cost before the first token": [r["gen1"] - r["prefill"] for r in rounds],
        "generate's cost per step": [(r["gen9"] - r["gen1"]) / 8 - r["step"] for r in rounds],
    }
    fits = {name: fit_of_rounds(values) for name, values in per_round.items()}
    curves.op_seconds, curves.generate_first_seconds, curves.generate_step_seconds = (
        value for value, _ in fits.values()
    )
    t_prefill, t_step, t_gen1, t_gen9 = (
        statistics.median(r[k] for r in rounds) for k in ("prefill", "step", "gen1", "gen9")
    )
    curves.reference = {
        # fits negative in every round, forced to 0: measure/stability.py calls the
        # calibration unstable; a fit negative in some rounds only is 0 within its noise
        "clamped": [name for name, (_, verdict) in fits.items() if verdict == "clamped"],
        "zero_within_noise": [name for name, (_, verdict) in fits.items() if verdict == "noise"],
        "model": "tiny-llama",
        "op_counts": counts,
        "prefill_forward_s": t_prefill,
        "decode_forward_s": t_step,
        "generate_1_s": t_gen1,
        "generate_9_s": t_gen9,
    }


def measure_curves(
    device: Any,
    dtype_name: str,
    widths: list[tuple[int, ...]] | None = None,
    attention: tuple[int, int] = (16, 64),
    pool_bytes: int = 512 * 2**20,
    quick: bool = False,
    progress: Callable[[str], None] | None = None,
) -> Curves:
    """Every curve of one dtype on `device` (see the module docstring)."""
    import torch

    dtype = getattr(torch, dtype_name)
    say = progress or (lambda _msg: None)
    rows = QUICK_ROWS if quick else ROWS
    reference = _reference_model(device, dtype).eval()
    ref_bytes = sum(p.numel() * p.element_size() for p in reference.parameters())
    # (k, n, pool bytes): a model's widths rotate through its own size (a small model's
    # weights stay in cache, a large one's do not); generic widths through `pool_bytes`
    generic = GENERIC_WIDTHS[::3] if quick else GENERIC_WIDTHS
    asked = [(*w[:2], w[2] if len(w) > 2 else pool_bytes) for w in (widths or generic)]
    asked += [(k, n, ref_bytes) for k, n in model_widths(reference)]
    todo: dict[tuple[int, int], int] = {}
    for k, n, pool in asked:
        todo.setdefault((k, n), pool)
    curves = Curves(dtype=dtype_name)
    for (k, n), pool in todo.items():
        say(f"GEMM {k} x {n}, rows {rows[0]}..{rows[-1]}, weights rotating through {fmt_mib(pool)}")
        curves.gemm.append({**measure_gemm(device, dtype, k, n, rows, pool), "pool_bytes": pool})
    say("copies")
    curves.copy = measure_copies(device, COPY_BYTES[::2] if quick else COPY_BYTES)
    if device.type == "cpu":  # a GPU's cache lives in its own allocator's memory
        say("page faults")
        curves.page_fault_seconds = measure_fault_seconds() or 0.0
    say("attention")
    curves.attention = measure_attention(device, dtype, *attention, quick)
    say("framework overhead (tiny-llama forward and generate)")
    measure_overhead(curves, reference, device)
    curves.source = (
        f"measured by infermeter calibrate: {len(todo)} GEMM widths x rows "
        f"{rows[0]}..{rows[-1]} (weights rotating through their model's size, or "
        f"{fmt_mib(pool_bytes)} for generic widths), "
        f"copies, a page fault, SDPA, tiny-llama's framework overhead; torch {torch.__version__}"
    )
    return curves
