"""The built-in experiments: each a sweep recipe (knob grid and base settings) and its figure.

`quick` gives fewer points and samples, never a different code path. Grids adapt to the model
(top-k up to half the experts, layers up to L, lengths within the context) and an experiment
that does not apply says why (moe-topk on a dense model).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from infermeter.experiments.speculation import speculation_verdict
from infermeter.models.info import ModelInfo


@dataclass(frozen=True)
class Experiment:
    """A named sweep recipe.

    Attributes:
        grid: (info, quick, cuda) -> {knob: [values as text]}; the first knob is the x axis.
        base: RunConfig overrides (quick and full alike unless `quick_base` overrides them).
        figure: the figure's options (see report/figures.py).
        scaling: (metric, per_x) to fit against x (per_x: divide the metric by x, e.g. TTFT
            per prompt token), or None.
        applies: info -> None, or why this experiment does not apply.
    """

    name: str
    help: str
    grid: Callable[[ModelInfo, bool, bool], dict[str, list[str]]]
    base: dict[str, Any] = field(default_factory=dict)
    quick_base: dict[str, Any] = field(default_factory=dict)
    figure: dict[str, Any] = field(default_factory=dict)
    scaling: tuple[str, bool] | None = None
    applies: Callable[[ModelInfo], str | None] = lambda info: None
    #: a serving experiment: a rate sweep of `infermeter load` (grid: {"rate": [...]})
    serving: bool = False
    #: sweep document -> rows that say what the experiment found (written as verdict.csv)
    verdict: Callable[[dict[str, Any]], list[dict[str, Any]]] | None = None


def _within(values: list[int], limit: int | None, reserve: int = 16) -> list[str]:
    return [str(v) for v in values if not limit or v + reserve <= limit]


def _powers(upto: int) -> list[int]:
    out, v = [], 1
    while v <= upto:
        out.append(v)
        v *= 2
    return out


def _precisions(cuda: bool) -> list[str]:
    """The dtypes this machine runs: int4 where torchao has its kernel, fp8 on newer GPUs."""
    from infermeter.errors import UserError
    from infermeter.models.quantize import check_scheme

    out = ["float32", "bfloat16", "int8"]
    if cuda:
        out.append("float16")
    for scheme in ("int4", "fp8") if cuda else ("int4",):
        try:
            check_scheme(scheme, "cuda" if cuda else "cpu")
            out.append(scheme)
        except UserError:
            pass
    return out


def _context(info: ModelInfo, quick: bool, cuda: bool) -> dict[str, list[str]]:
    if info.vision is not None:  # a VLM: image tokens are its context knob
        return {
            "vision_tokens": ["16", "64", "144"] if quick else ["16", "64", "144", "256", "576"]
        }
    lengths = [16, 32, 64, 128] if quick else [32, 64, 128, 256, 512, 1024, 2048]
    return {"prompt_tokens": _within(lengths, info.max_positions)}


def _layers(info: ModelInfo, quick: bool, cuda: bool) -> dict[str, list[str]]:
    n = info.layers
    if quick:
        values = sorted({1, max(1, n // 2), n})
    else:
        step = max(1, n // 12)
        values = sorted({*range(1, n + 1, step), n})
    return {"active_layers": [str(v) for v in values]}


def _speculation(info: ModelInfo, quick: bool, cuda: bool) -> dict[str, list[str]]:
    """Draft lengths of prompt lookup, and the first half of the blocks as a self-draft."""
    lookups = (3,) if quick else (1, 2, 4, 8)
    values = ["greedy", *(f"prompt_lookup:{n}" for n in lookups)]
    if not quick and info.layers and info.layers > 1:
        values.append(f"early_exit:{max(1, info.layers // 2)}")
    return {"decoding": values, "prompt_kind": ["natural", "repetitive"]}


EXPERIMENTS: dict[str, Experiment] = {
    e.name: e
    for e in (
        Experiment(
            "context-scaling",
            "prompt (or image) tokens -> prefill latency and its components",
            _context,
            base={"new_tokens": 8, "mode": "standard", "samples": 5, "prompt_tokens": 32},
            quick_base={"new_tokens": 4, "samples": 3},
            figure={"components": True},
            scaling=("ttft_ms", True),
        ),
        Experiment(
            "moe-topk",
            "MoE top-k -> prefill and decode",
            lambda info, quick, cuda: {
                "top_k": [str(k) for k in _powers(max(1, (info.experts or 2) // 2))]
            },
            base={"prompt_tokens": 128, "new_tokens": 32, "samples": 5},
            quick_base={"prompt_tokens": 32, "new_tokens": 8, "samples": 3},
            applies=lambda info: None if info.is_moe else "the model has no experts",
        ),
        Experiment(
            "serving",
            "offered request rate -> latency vs throughput, goodput, the knee (static batches)",
            lambda info, quick, cuda: {
                "rate": ["2", "8", "32"] if quick else ["0.5", "1", "2", "4", "8", "16", "32"]
            },
            base={"prompt_tokens": 64, "new_tokens": 16, "samples": 32},
            quick_base={"prompt_tokens": 32, "new_tokens": 8, "samples": 8},
            serving=True,
        ),
        Experiment(
            "routing-shortcuts",
            "MoE routing shortcuts by frequency threshold -> latency and the quality proxy",
            lambda info, quick, cuda: {
                "routing": [
                    "learned",
                    *(
                        f"shortcuts:frequency_threshold={t}"
                        for t in ((0.9, 0.5) if quick else (0.95, 0.9, 0.7, 0.5, 0.3))
                    ),
                ]
            },
            base={"prompt_tokens": 128, "new_tokens": 32, "samples": 5},
            quick_base={"prompt_tokens": 32, "new_tokens": 8, "samples": 3},
            figure={
                "overlay": ("top1_agreement", "top-1 agreement with learned routing"),
                "columns": ("kl_nats", "topk_overlap_on_shortcut_tokens"),
            },
            applies=lambda info: None if info.is_moe else "the model has no experts",
        ),
        Experiment(
            "layers",
            "active decoder blocks -> latency and a quality proxy",
            _layers,
            base={"prompt_tokens": 128, "new_tokens": 32, "samples": 5},
            quick_base={"prompt_tokens": 32, "new_tokens": 8, "samples": 3},
            figure={"overlay": ("top1_agreement", "top-1 agreement with all blocks")},
        ),
        Experiment(
            "output-tokens",
            "new tokens -> decode and total (log scale)",
            lambda info, quick, cuda: {
                "new_tokens": _within(
                    [1, 5, 10, 20, 50] if quick else [1, 5, 10, 20, 50, 100, 200],
                    info.max_positions,
                    reserve=64,
                )
            },
            base={"prompt_tokens": 64, "samples": 5},
            quick_base={"prompt_tokens": 32, "samples": 3},
            figure={"log_y": True},
            scaling=("tpot_ms", False),
        ),
        Experiment(
            "batch",
            "batch size -> latency and throughput",
            lambda info, quick, cuda: {
                "batch_size": [str(b) for b in ([1, 2, 4, 8] if quick else _powers(64))]
            },
            base={"prompt_tokens": 64, "new_tokens": 32, "samples": 5},
            quick_base={"prompt_tokens": 32, "new_tokens": 8, "samples": 3},
            figure={"overlay": ("tokens_per_s", "throughput (tokens/s)")},
        ),
        Experiment(
            "precision",
            "float32 vs bfloat16, int8 and int4 weights (and float16, fp8 on GPU), with the "
            "quality proxy against full precision",
            lambda info, quick, cuda: {"dtype": _precisions(cuda)},
            base={"prompt_tokens": 64, "new_tokens": 32, "samples": 5},
            quick_base={"prompt_tokens": 32, "new_tokens": 8, "samples": 3},
            figure={
                "overlay": ("top1_agreement", "top-1 agreement vs full precision"),
                "columns": ("kl_nats", "weight_mib", "rss_peak_mib"),
            },
        ),
        Experiment(
            "speculation",
            "greedy vs speculative decoding (prompt lookup, self-speculation) on natural and "
            "repetitive prompts: where it pays",
            _speculation,
            base={"prompt_tokens": 128, "new_tokens": 64, "samples": 5, "batch_size": 1},
            quick_base={"prompt_tokens": 64, "new_tokens": 16, "samples": 3},
            verdict=speculation_verdict,
        ),
        Experiment(
            "compile",
            "torch.compile off vs on (cold first call reported apart)",
            lambda info, quick, cuda: {"compile": ["off", "on"]},
            base={"prompt_tokens": 64, "new_tokens": 32, "samples": 5},
            quick_base={"prompt_tokens": 32, "new_tokens": 8, "samples": 3},
            figure={"overlay": ("compile_first_call_ms", "cold first call (ms)")},
        ),
    )
}
