"""Attention kernels side by side: dense, SDPA backends, FlexAttention masks, block-sparse.

What a user asks before picking an attention kernel or a sparse pattern: at my sequence
lengths, how long does each take, how much memory does it need, how much of the score matrix
does it skip, and does it still compute the same thing? Each kind runs on the same random
q, k, v (grouped-query heads allowed) and is checked against a float64 dense attention under
the *same* mask, so a fast kind that drops entries it should not is caught.

Kinds (`KINDS`):
  eager           matmul + mask + softmax + matmul (what transformers' eager path does), causal
  sdpa-<backend>  torch's scaled_dot_product_attention, causal, one backend forced (math, flash,
                  efficient, cudnn: those that run on the device; `sdpa` = all of them)
  flex-causal     FlexAttention with a causal block mask
  sliding-window  FlexAttention, causal and at most `window` keys back
  block-sparse    FlexAttention, causal, key blocks of `block_size` kept with probability
                  `density` (seeded; the diagonal block always kept so every query has keys)
FlexAttention kinds use `block_size` as their tile size too.

FLOPs: 4 x head_dim per score entry (QK^T and attention x V, a multiply-add each = 2 FLOPs),
per query head. *Useful* entries are those the mask keeps; *executed* entries are those the
kernel computes: the full square for eager and SDPA math (masking happens after the matmul),
the kept tiles of the block mask for compiled FlexAttention (partial tiles computed whole), the
full square for uncompiled FlexAttention (torch's eager fallback materialises every score), and
the causal half for the fused SDPA kernels (they skip tiles above the diagonal; the tile
overshoot is not counted, so their executed figure is labelled approximate).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

from infermeter.errors import UserError

SDPA_BACKENDS = ("math", "flash", "efficient", "cudnn")
FLEX_KINDS = ("flex-causal", "sliding-window", "block-sparse")
KINDS = ("eager", *(f"sdpa-{b}" for b in SDPA_BACKENDS), *FLEX_KINDS)
#: FLOPs per score entry and head dimension: QK^T and AV, one multiply-add (2 FLOPs) each
FLOP_PER_ENTRY_PER_DIM = 4


if TYPE_CHECKING:
    from infermeter.bench.eta import BenchProgress


@dataclass(frozen=True)
class AttentionSpec:
    """One benchmark's shape and options (a point adds its sequence length and kind)."""

    seq_lens: tuple[int, ...] = (512, 1024, 2048, 4096)
    batch: int = 1
    heads: int = 8
    kv_heads: int = 8
    head_dim: int = 64
    kinds: tuple[str, ...] = ("eager", "sdpa", *FLEX_KINDS)
    window: int = 256
    block_size: int = 128
    density: float = 0.25
    dtype: str = "float32"
    device: str = "cpu"
    warmup: int = 2
    samples: int = 10
    flex_compile: str = "auto"
    seed: int = 0

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON."""
        return asdict(self)


@dataclass
class AttentionPoint:
    """What one kind did at one sequence length."""

    kind: str
    seq_len: int
    latency_ms: list[float] = field(default_factory=list)
    peak_memory_mib: list[float] = field(default_factory=list)
    memory_method: str = ""
    mask_sparsity: float = 0.0
    skipped_fraction: float = 0.0
    useful_flop_count: float = 0.0
    executed_flop_count: float = 0.0
    executed_flops_note: str = "exact"
    max_abs_diff_vs_dense: float = math.nan
    compile_ms: float | None = None
    note: str = ""


def expand_kinds(kinds: list[str] | tuple[str, ...], device: Any) -> list[str]:
    """`sdpa` becomes every SDPA backend that runs on `device`; unknown kinds are refused."""
    out: list[str] = []
    for kind in kinds:
        if kind == "sdpa":
            out += [f"sdpa-{b}" for b in available_sdpa_backends(device)]
        elif kind in KINDS:
            out.append(kind)
        else:
            raise UserError(
                f"unknown attention kind {kind!r}", f"choose from sdpa, {', '.join(KINDS)}"
            )
    return list(dict.fromkeys(out))


def _backend_enum(name: str) -> Any:
    from torch.nn.attention import SDPBackend

    return {
        "math": SDPBackend.MATH,
        "flash": SDPBackend.FLASH_ATTENTION,
        "efficient": SDPBackend.EFFICIENT_ATTENTION,
        "cudnn": SDPBackend.CUDNN_ATTENTION,
    }[name]


def available_sdpa_backends(device: Any) -> list[str]:
    """The SDPA backends that run a small causal call on `device` (tried, not assumed)."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import sdpa_kernel

    dev = torch.device(device)
    dtype = torch.float32 if dev.type == "cpu" else torch.float16
    q = torch.randn(1, 2, 16, 64, device=dev, dtype=dtype)
    ok = []
    for name in SDPA_BACKENDS:
        try:
            with sdpa_kernel([_backend_enum(name)]):
                F.scaled_dot_product_attention(q, q, q, is_causal=True)
            ok.append(name)
        except RuntimeError:
            continue
    return ok


def mask_mod_for(kind: str, spec: AttentionSpec, seq_len: int) -> Callable[..., Any]:
    """FlexAttention's mask function for `kind` (True = the query attends to the key)."""
    import torch

    if kind in ("eager", "flex-causal") or kind.startswith("sdpa-"):
        return lambda b, h, q, k: q >= k
    if kind == "sliding-window":
        w = spec.window
        return lambda b, h, q, k: (q >= k) & (q - k < w)
    if kind == "block-sparse":
        bs = spec.block_size
        n = -(-seq_len // bs)
        gen = torch.Generator().manual_seed(spec.seed)
        keep = torch.rand(n, n, generator=gen) < spec.density
        keep |= torch.eye(n, dtype=torch.bool)
        keep = keep.to(spec.device)
        return lambda b, h, q, k: keep[q // bs, k // bs] & (q >= k)
    raise UserError(f"unknown attention kind {kind!r}", f"choose from {', '.join(KINDS)}")


def dense_mask(kind: str, spec: AttentionSpec, seq_len: int) -> Any:
    """The mask as a (seq_len, seq_len) boolean tensor, the reference every kind is held to."""
    import torch

    idx = torch.arange(seq_len, device=spec.device)
    mod = mask_mod_for(kind, spec, seq_len)
    return mod(None, None, idx[:, None], idx[None, :])


def reference_attention(q: Any, k: Any, v: Any, mask: Any) -> Any:
    """Dense attention in float64 under `mask`: the ground truth every kind is held to.

    One query head at a time (its kv head by grouped-query sharing), so the reference needs
    one head's scores in memory, not all of them.
    """
    import torch

    groups = q.shape[1] // k.shape[1]
    out = torch.empty_like(q)
    for b in range(q.shape[0]):
        for h in range(q.shape[1]):
            scores = q[b, h].double() @ k[b, h // groups].double().T / math.sqrt(q.shape[-1])
            scores = scores.masked_fill(~mask, float("-inf"))
            out[b, h] = (torch.softmax(scores, dim=-1) @ v[b, h // groups].double()).to(q.dtype)
    return out


def check_memory(spec: AttentionSpec, kinds: list[str]) -> None:
    """Refuse, before anything runs, a length whose full score matrices would not fit.

    Kinds that materialise every score (eager, SDPA math, uncompiled FlexAttention) hold about
    three (batch x heads x n x n) tensors at once; the float64 reference one head's three.
    """
    from infermeter.measure.memory import available_memory_mib

    elem = 4 if spec.dtype == "float32" else 2
    full = [k for k in kinds if k in ("eager", "sdpa-math")]
    if spec.flex_compile == "off":
        full += [k for k in kinds if k in FLEX_KINDS]
    free_mib = available_memory_mib(spec.device)
    for n in spec.seq_lens:
        need_mib = 3 * n * n * 8 / 2**20
        if full:
            need_mib = max(need_mib, 3 * spec.batch * spec.heads * n * n * elem / 2**20)
        if need_mib > 0.8 * free_mib:
            raise UserError(
                f"--seq-lens {n} needs about {need_mib / 1024:.1f} GiB of scores "
                f"({', '.join(full) or 'the float64 reference'}), {free_mib / 1024:.1f} GiB free",
                "drop that length, those kinds, or use fewer --heads or a smaller --batch",
            )


def eager_attention(q: Any, k: Any, v: Any, mask: Any) -> Any:
    """The eager path of transformers: scores, additive mask, softmax in float32, weights x V."""
    import torch

    groups = q.shape[1] // k.shape[1]
    if groups > 1:
        k = k.repeat_interleave(groups, dim=1)
        v = v.repeat_interleave(groups, dim=1)
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
    return weights @ v


@dataclass
class _Prepared:
    """A kind ready to call: the callable and what it computes."""

    call: Callable[[], Any]
    executed_entries: float
    executed_note: str
    compile_ms: float | None = None
    note: str = ""


def _flex_compiled(spec: AttentionSpec, device: Any) -> bool:
    """Whether FlexAttention is compiled: `auto` compiles on CUDA and on CPU (inductor's C++)."""
    if spec.flex_compile == "off":
        return False
    if spec.flex_compile == "on":
        return True
    import shutil

    has_compiler = shutil.which("g++") is not None or shutil.which("cc") is not None
    return device.type == "cuda" or has_compiler


def prepare(kind: str, spec: AttentionSpec, seq_len: int, qkv: tuple[Any, Any, Any]) -> _Prepared:
    """The callable for `kind` and how many score entries it executes (per batch and head)."""
    import torch.nn.functional as F

    q, k, v = qkv
    full = float(seq_len * seq_len)
    gqa = q.shape[1] != k.shape[1]
    if kind == "eager":
        mask = dense_mask(kind, spec, seq_len)
        return _Prepared(lambda: eager_attention(q, k, v, mask), full, "exact: full square")
    if kind.startswith("sdpa-"):
        from torch.nn.attention import sdpa_kernel

        backend = _backend_enum(kind.removeprefix("sdpa-"))

        def call() -> Any:
            with sdpa_kernel([backend]):
                return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)

        if kind == "sdpa-math":
            return _Prepared(call, full, "exact: full square, masked after")
        causal = seq_len * (seq_len + 1) / 2
        return _Prepared(call, causal, "approximate: causal half (tile overshoot not counted)")
    return _prepare_flex(kind, spec, seq_len, qkv)


def _prepare_flex(
    kind: str, spec: AttentionSpec, seq_len: int, qkv: tuple[Any, Any, Any]
) -> _Prepared:
    """A FlexAttention kind: its block mask, compiled or not, and the tiles it computes."""
    import time

    import torch
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    q, k, v = qkv
    device = q.device
    bs = spec.block_size
    block_mask = create_block_mask(
        mask_mod_for(kind, spec, seq_len),
        B=None,
        H=None,
        Q_LEN=seq_len,
        KV_LEN=seq_len,
        device=str(device),
        BLOCK_SIZE=bs,
    )
    gqa = q.shape[1] != k.shape[1]
    compiled = _flex_compiled(spec, device)
    if not compiled:
        import warnings

        def call() -> Any:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # "called without torch.compile": we know
                return flex_attention(q, k, v, block_mask=block_mask, enable_gqa=gqa)

        note = "FlexAttention not compiled: torch's fallback computes every score"
        return _Prepared(call, float(seq_len * seq_len), "exact: full square (eager)", None, note)
    # A fresh compile per point: past torch's recompile limit (8 shapes or masks) dynamo would
    # silently run the unfused fallback and every figure of the point would be wrong.
    # fullgraph=True turns any such fallback into an error instead.
    torch._dynamo.reset()
    fn = torch.compile(flex_attention, dynamic=False, fullgraph=True)

    def call_compiled() -> Any:
        return fn(q, k, v, block_mask=block_mask, enable_gqa=gqa)

    t0 = time.perf_counter()
    try:
        call_compiled()
    except Exception as exc:  # any compile failure: measure the fallback, say so
        eager = replace(spec, flex_compile="off")
        fallback = _prepare_flex(kind, eager, seq_len, qkv)
        fallback.note = f"torch.compile failed ({type(exc).__name__}); {fallback.note}"
        return fallback
    compile_ms = (time.perf_counter() - t0) * 1e3
    blocks = int(block_mask.kv_num_blocks.sum()) + int(
        block_mask.full_kv_num_blocks.sum() if block_mask.full_kv_num_blocks is not None else 0
    )
    q_block, kv_block = block_mask.BLOCK_SIZE
    executed = float(min(blocks * q_block * kv_block, seq_len * seq_len))
    return _Prepared(call_compiled, executed, "exact: kept tiles x tile size", compile_ms)


def make_qkv(spec: AttentionSpec, seq_len: int) -> tuple[Any, Any, Any]:
    """Seeded random q (heads) and k, v (kv_heads) of shape (batch, heads, seq, head_dim)."""
    import torch

    from infermeter.measure.device import resolve_dtype

    gen = torch.Generator().manual_seed(spec.seed + seq_len)
    dtype = resolve_dtype(spec.dtype, torch.device(spec.device))

    def rand(heads: int) -> Any:
        x = torch.randn(spec.batch, heads, seq_len, spec.head_dim, generator=gen)
        return x.to(device=spec.device, dtype=dtype)

    return rand(spec.heads), rand(spec.kv_heads), rand(spec.kv_heads)


def validate(spec: AttentionSpec) -> None:
    """Every option checked before anything runs, each refusal one line with the fix."""
    checks = [
        (all(1 <= s <= 65536 for s in spec.seq_lens), "--seq-lens must be within 1..65536"),
        (1 <= spec.batch <= 1024, "--batch must be within 1..1024"),
        (1 <= spec.heads <= 1024, "--heads must be within 1..1024"),
        (1 <= spec.kv_heads <= spec.heads, "--kv-heads must be within 1..--heads"),
        (
            spec.kv_heads >= 1 and spec.heads % spec.kv_heads == 0,
            "--heads must be a multiple of --kv-heads",
        ),
        (spec.head_dim in (16, 32, 64, 128, 256), "--head-dim must be 16, 32, 64, 128 or 256"),
        (1 <= spec.window <= 1 << 20, "--window must be within 1..1048576"),
        (0 <= spec.seed < 2**31, "--seed must be within 0..2147483647"),
        (spec.block_size in (16, 32, 64, 128), "--block-size must be 16, 32, 64 or 128"),
        (0.0 < spec.density <= 1.0, "--density must be within (0, 1]"),
        (0 <= spec.warmup <= 100, "--warmup must be within 0..100"),
        (1 <= spec.samples <= 10000, "--samples must be within 1..10000"),
        (spec.flex_compile in ("auto", "on", "off"), "--flex-compile must be auto, on or off"),
    ]
    for ok, message in checks:
        if not ok:
            raise UserError(message, "see `infermeter bench attention --help`")
    if spec.dtype not in ("float32", "bfloat16", "float16"):
        raise UserError(f"unknown --dtype {spec.dtype!r}", "use float32, bfloat16 or float16")
    if not spec.seq_lens or not spec.kinds:
        raise UserError("no sequence lengths or kinds to measure", "give --seq-lens and --kinds")


def run_point(kind: str, spec: AttentionSpec, seq_len: int) -> AttentionPoint:
    """One kind at one length: latency samples, peak memory, sparsity, FLOPs, max difference."""
    import torch

    from infermeter.bench.timing import peak_memory_mib, time_calls

    qkv = make_qkv(spec, seq_len)
    mask = dense_mask(kind, spec, seq_len)
    prepared = prepare(kind, spec, seq_len, qkv)
    with torch.inference_mode():
        out = prepared.call()
        diff = float((out.double() - reference_attention(*qkv, mask).double()).abs().max())
        latency = time_calls(prepared.call, spec.warmup, spec.samples, qkv[0].device)
        peak, method = peak_memory_mib(prepared.call, qkv[0].device)
    full = float(seq_len * seq_len)
    kept = float(mask.sum())
    per_entry = FLOP_PER_ENTRY_PER_DIM * spec.head_dim * spec.batch * spec.heads
    return AttentionPoint(
        kind=kind,
        seq_len=seq_len,
        latency_ms=latency,
        peak_memory_mib=[] if peak is None else [peak],
        memory_method=method,
        mask_sparsity=1.0 - kept / full,
        skipped_fraction=1.0 - prepared.executed_entries / full,
        useful_flop_count=per_entry * kept,
        executed_flop_count=per_entry * prepared.executed_entries,
        executed_flops_note=prepared.executed_note,
        max_abs_diff_vs_dense=diff,
        compile_ms=prepared.compile_ms,
        note=prepared.note,
    )


def point_row(p: AttentionPoint) -> dict[str, Any]:
    """A point's summary row: median latency with its interval, memory, sparsity, FLOP/s."""
    from infermeter.measure.stats import summarize

    lat = summarize(p.latency_ms)
    seconds = lat.p50 / 1e3 if lat.n else math.nan
    return {
        "kind": p.kind,
        "seq_len": p.seq_len,
        "latency_ms": lat.to_dict(),
        "peak_memory_mib": p.peak_memory_mib[0] if p.peak_memory_mib else None,
        "memory_method": p.memory_method,
        "mask_sparsity": p.mask_sparsity,
        "skipped_fraction": p.skipped_fraction,
        "useful_flop_count": p.useful_flop_count,
        "executed_flop_count": p.executed_flop_count,
        "executed_flops_note": p.executed_flops_note,
        "achieved_flop_per_s": p.executed_flop_count / seconds if seconds > 0 else None,
        "useful_flop_per_s": p.useful_flop_count / seconds if seconds > 0 else None,
        "max_abs_diff_vs_dense": p.max_abs_diff_vs_dense,
        "compile_ms": p.compile_ms,
        "note": p.note,
    }


def run_benchmark(
    spec: AttentionSpec,
    on_point: Callable[[AttentionPoint], None] | None = None,
    on_progress: Callable[[BenchProgress], None] | None = None,
) -> dict[str, Any]:
    """Every kind at every length: the document `bench attention` prints, saves and reports.

    Shape: {"meta": {kind, spec, device, versions}, "summary": [one row per point],
    "all_samples": [one row per timed call]}. `on_progress` hears each finished point with
    the estimate of the time left (`bench/eta.py`).
    """
    import torch

    from infermeter.bench.eta import Eta
    from infermeter.measure.device import describe_device, resolve_device

    validate(spec)
    device = resolve_device(spec.device)
    spec = AttentionSpec(**{**spec.to_dict(), "device": str(device)})
    kinds = expand_kinds(spec.kinds, device)
    check_memory(spec, kinds)
    summary, samples = [], []
    eta = Eta([(kind, n) for n in spec.seq_lens for kind in kinds])
    for seq_len in spec.seq_lens:
        for kind in kinds:
            point = run_point(kind, spec, seq_len)
            if on_point is not None:
                on_point(point)
            if on_progress is not None:
                on_progress(eta.point_done(kind, seq_len))
            summary.append(point_row(point))
            samples += [
                {"kind": kind, "seq_len": seq_len, "sample_id": i, "latency_ms": ms}
                for i, ms in enumerate(point.latency_ms)
            ]
    meta = {
        "kind": "bench-attention",
        "spec": {**spec.to_dict(), "kinds": kinds},
        "device": describe_device(device),
        "versions": {"torch": torch.__version__},
        "flop_convention": "4 x head_dim FLOPs per score entry and query head (QK^T + AV)",
    }
    return {"meta": meta, "summary": summary, "all_samples": samples}
