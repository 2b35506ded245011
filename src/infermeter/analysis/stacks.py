"""The serving stacks `predict --stack` knows: what each does differently to the same forward.

Why: the device work of a decode step is much the same whoever runs it (the weights and the
KV cache are read once), but what surrounds it is not. Eager transformers launches every
operation from Python (tens of microseconds of host time per kernel, about 70 kernels per
block) and copies the whole KV cache every step (`torch.cat` in its dynamic cache); engines
replay the step as one CUDA graph of a few fused kernels per block, write the KV cache in place
(paged), and pay instead a scheduler's cost per step. Applying eager HF's host floor to vLLM
made every engine prediction too slow (issue 32: 1,916 ms predicted against 998 measured).

Each profile states, and cites, the constants the time model uses for it:
- `op_seconds`: host time per launched kernel (eager), or the device's gap between kernels of
  a CUDA graph (graphs);
- `ops_per_block`: kernels per decoder block where the stack fuses them (None: the model's
  own count, as transformers runs it);
- `overlap`: how much of the host's launching hides under device work (1: the slower of the
  two; 0: they add, as when every kernel waits on the host);
- `step_seconds` / `first_seconds`: what the stack adds per decode step (scheduler, sampling,
  detokenisation) and before the first token;
- `cache_passes`: reads and writes of the whole KV cache per step beyond attention's own read
  (2: torch.cat re-copies it; 0: written in place);
- `elementwise_factor`: the share of eager element-wise bytes left after fusion;
- efficiencies of GEMMs, attention and streaming kernels against the datasheet peaks.

The constants of `hf` and the engines are fitted to published measurements listed in
`benchmarks/published/` (its README names the fitted and the held-out sources), and
`benchmarks/predict_published.py` prints how far each stack's predictions are from them.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

#: the default: what `infermeter profile` measures
DEFAULT_STACK = "hf"


@dataclass(frozen=True)
class Stack:
    """One serving stack's profile (see the module docstring for each field)."""

    key: str
    title: str
    what: str
    op_seconds: float
    overlap: float
    step_seconds: float
    first_seconds: float
    cache_passes: float
    elementwise_factor: float
    compute_efficiency: float
    bandwidth_efficiency: float
    attention_efficiency: float
    ops_per_block: int | None = None
    #: bandwidth share of eager attention's batched matmuls at decode (a model or release
    #: without SDPA); engines never run it
    eager_attention_efficiency: float = 0.8
    #: GPU seconds per framework operation other than a GEMM or attention beyond its bytes
    #: (a small kernel's launch latency and ramp on the device): measured for eager stacks
    device_op_seconds: float = 0.0
    graphs: bool = False
    #: float16 GEMMs accumulate in float16 (full rate on GeForce chips, which halve the rate
    #: with float32 accumulation; the same rate elsewhere)
    fp16_accumulate: bool = False
    #: bandwidth efficiency per memory class ("hbm", "gddr", "unified"), where a stack's
    #: figures show it differs by memory; it replaces `bandwidth_efficiency` (and the
    #: sustained-bandwidth scaling, which it already holds) on a device of that class
    bandwidth_by_memory: tuple[tuple[str, float], ...] = ()
    sources: dict[str, str] = field(default_factory=dict)

    def summary(self) -> str:
        """One line: the stack and the constants it predicts with."""
        unit = "kernel" if self.ops_per_block else "operation"  # fused stacks count kernels
        per_op = f"{self.op_seconds * 1e6:.3g} us per {unit}"
        kernels = (
            f"{self.ops_per_block} kernels per block"
            if self.ops_per_block
            else ("the model's own kernels")
        )
        return (
            f"{self.title}: {per_op} ({'graph replay' if self.graphs else 'eager launch'}), "
            f"{kernels}, {self.step_seconds * 1e3:.3g} ms per step, overlap {self.overlap:.2g}, "
            f"KV cache moved {self.cache_passes:.3g}x per step, "
            f"efficiency compute {self.compute_efficiency:.0%} / bandwidth "
            f"{self.bandwidth_efficiency:.0%} / attention {self.attention_efficiency:.0%}"
            + (
                f" / eager attention's cache reads {self.eager_attention_efficiency:.0%} "
                "(transformers before 4.36)"
                if self.key == "hf"
                else ""
            )
        )


_FIT = "fitted to the training sources in benchmarks/published/ (README there)"
_POOLED = (
    "fitted on every engine's training sources at once (no source of this stack was fitted "
    "on; benchmarks/published/ README)"
)

#: GPU time per non-GEMM framework operation beyond its bytes, measured on an H100 (GPU busy
#: time from torch.profiler per decode step, less the bytes and FLOPs the time model charges,
#: at batch 1: 1.1 us for Llama-3.1-8B, 1.2 Qwen2.5-3B, 1.0 Llama-2-13B, 0.9 Qwen2.5-32B)
DEVICE_OP_SECONDS_H100 = 1.1e-6
_DEVICE_OP_SOURCE = (
    "measured on an H100 (benchmarks/gpu_generate_steps.py, tests/bench/data/h100/"
    "generate_steps): a decode step's GPU busy time exceeds its bytes and FLOPs by 0.9-1.2 us "
    "per operation other than a GEMM or attention (a small kernel's latency on the device)"
)

STACKS: dict[str, Stack] = {
    s.key: s
    for s in (
        Stack(
            key="hf",
            title="Hugging Face transformers, eager generate (what infermeter profiles)",
            what=(
                "every operation launched from Python, dynamic KV cache concatenated each step, "
                "SDPA attention (two matmuls where the model dispatches no attention kernel), "
                "greedy generate with its per-step logits processing"
            ),
            op_seconds=11e-6,
            overlap=1.0,
            step_seconds=0.15e-3,
            first_seconds=0.5e-3,
            cache_passes=2.0,
            elementwise_factor=1.0,
            compute_efficiency=0.65,
            bandwidth_efficiency=0.8,
            attention_efficiency=0.4,
            eager_attention_efficiency=0.12,
            device_op_seconds=DEVICE_OP_SECONDS_H100,
            sources={
                "op_seconds, overlap": "fitted with hf-fa2's to the training sources of both in "
                "benchmarks/published/ (Qwen2.5's speed benchmark, optimum's Llama-2-13B batch "
                "sweep) with the operations their transformers release dispatches (the same "
                "generate loop; only attention differs)",
                "eager_attention_efficiency": "fitted to optimum's fp16 Llama-2-13B sweep on an "
                "A100 (eager attention, batch 1-16, 512 + 512 tokens: the step grows 1.9x); "
                "the held-out fxmarty (A10G, 1,000-token prompt) and BLOOM rows moved toward "
                "their measurements (benchmarks/published/)",
                "device_op_seconds": _DEVICE_OP_SOURCE,
                "cache_passes": "torch.cat in DynamicLayer.update reads the cache and writes it "
                "again: 2 passes (transformers source)",
                "efficiency": "cuBLAS 60-75% of dense peak at large shapes, streaming kernels "
                "80-90% of HBM bandwidth, FlashAttention-2 35-50% of peak forward (Dao 2023); "
                "not hf-fa2's fitted 65% bandwidth, which carries its multi-GPU pipeline rows",
            },
        ),
        Stack(
            key="hf-fa2",
            title="transformers' eager generate with flash_attention_2 (transformers 4.4x)",
            what=(
                "as hf, with attn_implementation='flash_attention_2': each block unpads its keys "
                "and values through flash-attn's index gather (an int64 index per element) "
                "besides torch.cat, so the KV cache is moved many times per step and long "
                "contexts slow decode far more than under SDPA"
            ),
            op_seconds=11e-6,
            overlap=1.0,
            step_seconds=0.15e-3,
            first_seconds=0.5e-3,
            cache_passes=25.0,
            elementwise_factor=1.0,
            compute_efficiency=0.65,
            bandwidth_efficiency=0.65,
            attention_efficiency=0.4,
            device_op_seconds=DEVICE_OP_SECONDS_H100,
            sources={
                "op_seconds, overlap, cache_passes, bandwidth_efficiency": _FIT,
                "device_op_seconds": _DEVICE_OP_SOURCE,
            },
        ),
        Stack(
            key="hf-compile",
            title="transformers with a static cache and torch.compile (CUDA graphs)",
            what=(
                "static KV cache written in place, the decode step compiled by inductor "
                "(element-wise work fused into few Triton kernels) and replayed as a CUDA graph"
            ),
            op_seconds=2e-6,
            overlap=1.0,
            step_seconds=0.3e-3,
            first_seconds=1e-3,
            cache_passes=0.0,
            elementwise_factor=0.35,
            compute_efficiency=0.65,
            bandwidth_efficiency=0.75,
            attention_efficiency=0.4,
            ops_per_block=14,
            graphs=True,
            sources={
                "all": "not fitted (one published figure, held out: HF CI gemma-2b on an A10, "
                "-6.8%): 2 us between graph-replayed kernels, inductor's fusion of the "
                "element-wise passes, static cache written in place",
            },
        ),
        Stack(
            key="vllm",
            title="vLLM (V1 engine, CUDA graphs, paged attention)",
            what=(
                "continuous batching, decode replayed as CUDA graphs of fused kernels (QKV and "
                "gate-up merged, fused RMSNorm+residual, SiLU-and-mul, rotary), KV cache "
                "paged and written in place, a scheduler step per iteration"
            ),
            op_seconds=2e-6,
            overlap=1.0,
            step_seconds=2e-3,
            first_seconds=0.5e-3,
            cache_passes=0.0,
            elementwise_factor=0.3,
            compute_efficiency=0.7,
            bandwidth_efficiency=0.7,
            attention_efficiency=0.5,
            ops_per_block=9,
            graphs=True,
            sources={"step_seconds, first_seconds, bandwidth_efficiency": _FIT},
        ),
        Stack(
            key="sglang",
            title="SGLang (RadixAttention, CUDA graphs, overlapped scheduler)",
            what=(
                "like vLLM (CUDA graphs, fused kernels, paged KV), with the scheduler's CPU "
                "work overlapped with the previous step's GPU work"
            ),
            op_seconds=2e-6,
            overlap=1.0,
            step_seconds=0.0,
            first_seconds=3e-3,
            cache_passes=0.0,
            elementwise_factor=0.3,
            compute_efficiency=0.7,
            bandwidth_efficiency=0.65,
            attention_efficiency=0.5,
            ops_per_block=9,
            graphs=True,
            sources={"step_seconds, first_seconds, bandwidth_efficiency": _POOLED},
        ),
        Stack(
            key="tensorrt-llm",
            title="TensorRT-LLM (compiled engine, in-flight batching)",
            what=(
                "an ahead-of-time compiled engine with fused attention and GEMM plugins, paged "
                "KV written in place, C++ batch manager; no Python on the step's path"
            ),
            op_seconds=2e-6,
            overlap=1.0,
            step_seconds=0.0,
            first_seconds=3e-3,
            cache_passes=0.0,
            elementwise_factor=0.25,
            compute_efficiency=0.75,
            bandwidth_efficiency=0.6,
            attention_efficiency=0.55,
            ops_per_block=8,
            graphs=True,
            sources={"step_seconds, first_seconds, bandwidth_efficiency": _FIT},
        ),
        Stack(
            key="lmdeploy",
            title="LMDeploy (TurboMind engine)",
            what=("a C++/CUDA engine with fused kernels and a blocked KV cache, persistent batch"),
            op_seconds=2e-6,
            overlap=1.0,
            step_seconds=1e-3,
            first_seconds=0.5e-3,
            cache_passes=0.0,
            elementwise_factor=0.25,
            compute_efficiency=0.7,
            bandwidth_efficiency=0.75,
            attention_efficiency=0.5,
            ops_per_block=8,
            graphs=True,
            sources={"step_seconds, first_seconds, bandwidth_efficiency": _FIT},
        ),
        Stack(
            key="tgi",
            title="Text Generation Inference (TGI v2+, CUDA graphs, flash/paged attention)",
            what=(
                "a Rust router over a Python model server with flash/paged attention and CUDA "
                "graphs for small decode batches"
            ),
            op_seconds=2e-6,
            overlap=1.0,
            step_seconds=0.0,
            first_seconds=3e-3,
            cache_passes=0.0,
            elementwise_factor=0.35,
            compute_efficiency=0.7,
            bandwidth_efficiency=0.65,
            attention_efficiency=0.5,
            ops_per_block=10,
            graphs=True,
            sources={"step_seconds, first_seconds, bandwidth_efficiency": _POOLED},
        ),
        Stack(
            key="llama.cpp",
            title="llama.cpp (CUDA backend, GGUF weights)",
            what=(
                "a C/C++ engine with its own CUDA kernels (quantised matrix-vector products, "
                "flash attention) and CUDA graphs at batch 1"
            ),
            op_seconds=2e-6,
            overlap=1.0,
            step_seconds=0.0,
            first_seconds=3e-3,
            cache_passes=0.0,
            elementwise_factor=0.4,
            compute_efficiency=0.5,
            bandwidth_efficiency=0.65,
            attention_efficiency=0.4,
            ops_per_block=14,
            graphs=True,
            fp16_accumulate=True,
            bandwidth_by_memory=(("gddr", 0.774),),
            sources={
                "step_seconds, first_seconds, bandwidth_efficiency": _POOLED,
                "bandwidth_by_memory": (
                    "GDDR 0.774 of the datasheet bandwidth: the median of three F16 tg128 "
                    "figures of llama.cpp PR #3816 (RTX 3090 Ti 55.83 tok/s, RTX A6000 44.84 "
                    "and 45.20; benchmarks/predict_published.py --fit-memory llama.cpp). No "
                    "fit figure on HBM: its cards keep the pooled share (the Q4_0 scoreboard of "
                    "discussion #15013 shows HBM cards at 37-64% of their datasheet, GDDR ones "
                    "about 67%, but a Q4_0 kernel streams slower than F16's and no per-format "
                    "factor is fitted)"
                ),
                "fp16_accumulate": (
                    "ggml-cuda.cu ggml_cuda_op_mul_mat_cublas: F16 weights are multiplied with "
                    "cublasGemmEx(..., CUBLAS_COMPUTE_16F) unless a graph asks for F32 precision"
                ),
            },
        ),
    )
}


#: per stack: the release its constants describe, and the releases (by prefix) of the published
#: figures they were fitted on; an empty tuple: no release of it was fitted (the engines' pooled
#: constants). `--stack NAME@VERSION` outside them is predicted all the same, and says so.
STACK_RELEASES: dict[str, tuple[str, tuple[str, ...]]] = {
    "hf": ("the transformers release installed here (its operations are counted)", ()),
    "hf-fa2": ("the transformers release installed here (its operations are counted)", ()),
    "hf-compile": ("the transformers release installed here (its operations are counted)", ()),
    "vllm": ("0.6.3, the release of the Qwen2.5 speed benchmark its constants fit", ("0.6",)),
    "tensorrt-llm": ("0.9.0, the release of the performance docs its constants fit", ("0.9",)),
    "lmdeploy": ("0.1-0.2, the releases of the docs its constants fit", ("0.1", "0.2")),
    "tgi": ("2.x (CUDA graphs): no TGI figure was fitted, the engines' pooled constants", ()),
    "sglang": ("no SGLang figure was fitted: the engines' pooled constants", ()),
    "llama.cpp": ("no llama.cpp figure was fitted: the engines' pooled constants", ()),
}


@dataclass(frozen=True)
class EagerRelease:
    """An engine's releases before it replayed decode as CUDA graphs.

    Why: such a release launches every kernel of the step from Python, so a step is as slow as
    its host, whatever the GPU; predicted with the graph-replaying profile, TGI 1.0's 4-GPU
    figures came out 15-54% fast (issue 55). `op_seconds` replaces the profile's gap between
    replayed kernels with the host time per eagerly launched kernel, fitted on the source named
    in `source` (a release of the eager era, a host-bound step); everything else stays the
    profile's.
    """

    stack: str
    #: the first release that replays decode as CUDA graphs by default
    graphs_since: str
    #: where that release is said to add them
    graphs_source: str
    #: host seconds per launched kernel (the profile's `ops_per_block` kernels per block)
    op_seconds: float
    #: the figure it is fitted on, and how
    source: str
    #: releases (by prefix) of the figures it was fitted on
    fitted: tuple[str, ...]


EAGER_RELEASES: dict[str, EagerRelease] = {
    r.stack: r
    for r in (
        EagerRelease(
            stack="vllm",
            graphs_since="0.2.6",
            graphs_source=(
                "vLLM PR #1926 (CUDA graphs, `enforce_eager` to turn them off), merged "
                "2023-12-17 and first released in 0.2.6"
            ),
            op_seconds=34.3e-6,
            source=(
                "fitted on vLLM PR #1440 (2023-10-20, main before 0.2.2): Llama-2-7B, no tensor "
                "parallelism, 5 prompt and 100 new tokens in 'about 1.2s without CUDA graph' "
                "(1.05 s with): a step the host sets on any GPU that streams the weights in "
                "under 12 ms (benchmarks/published/, `predict_published.py --fit`)"
            ),
            fitted=("0.2",),
        ),
        EagerRelease(
            stack="tgi",
            graphs_since="2.0",
            graphs_source=(
                "TGI PR #1428 (2024-02-12) added CUDA graphs behind --enable-cuda-graphs "
                "(1.4.1-1.4.5); from 2.0.0 the launcher's --cuda-graphs defaults to 1,2,4,8,16,32"
            ),
            op_seconds=50.5e-6,
            source=(
                "fitted on N. Patry's text-generation-benchmark run of TGI 1.0.1 "
                "(Narsil/tmp_bench, 2023-08-17): Llama-2-7B on 4 shards, a decode step of "
                "16.35 ms at batch 1, flat to 17.9 ms at batch 16, where one shard took 30.42 "
                "(benchmarks/published/, `predict_published.py --fit`)"
            ),
            fitted=("1.0",),
        ),
    )
}


def release_numbers(version: str) -> tuple[int, ...]:
    """A release's numbers up to its first non-number: "0.2.0" or "v0.2.0" -> (0, 2, 0)."""
    out = []
    for part in version.strip().lstrip("vV").split("."):
        digits = "".join(itertools.takewhile(str.isdigit, part))
        if not digits:
            break
        out.append(int(digits))
    return tuple(out)


def eager_release(key: str, version: str | None) -> EagerRelease | None:
    """The eager-era record of `key@version`, where that release predates its CUDA graphs."""
    record = EAGER_RELEASES.get(key)
    if record is None or not version or not release_numbers(version):
        return None
    return record if release_numbers(version) < release_numbers(record.graphs_since) else None


def release_reason(key: str, version: str | None) -> str | None:
    """Why `key@version` lies outside what its constants were fitted on.

    None where it lies inside, or no version was asked. An HF stack's release is the
    transformers whose operations are counted: the installed one (another is said).
    """
    if not version:
        return None
    if key.startswith("hf"):
        from importlib.metadata import version as installed

        have = installed("transformers")  # its metadata: analysis never imports transformers
        if have == version or have.startswith(version + "."):
            return None
        return (
            f"{key} {version}: the operations are counted with the transformers installed "
            f"here ({have}), not that release's"
        )
    assumed, fitted = STACK_RELEASES[key]
    eager = eager_release(key, version)
    if eager is not None:  # its host time is fitted on these releases, the rest pooled
        fitted, assumed = eager.fitted, f"{eager.fitted[0]}.x, before CUDA graphs"
    if any(version == f or version.startswith(f + ".") for f in fitted):
        return None
    return f"{key} {version} is not a release its constants were fitted on (assumed: {assumed})"


def stack_keys() -> list[str]:
    """The stacks `--stack` accepts, the default first."""
    return list(STACKS)
