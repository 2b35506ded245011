"""torch's own FLOP counts of a model's forward: the check of the census, and what it misses.

The census (models/census.py) costs what it can name: linear layers, experts, softmax
attention. Some blocks do more: a state-space scan, a gated delta rule, a sparse-attention
indexer, a differential attention's second softmax, a block run twice. A formula per mixer
would be dozens of formulas and a new one every release, so instead the *residual* of a block
(what torch's FlopCounterMode counts in it minus what the census predicts) is counted on the
model itself at a few prompt lengths n and fitted as

    residual(n) = a + b n + c n^2 + d m + e m^2,    m = ceil(n / chunk)

where `chunk` is the block's chunk size: a chunked scan pads the prompt to whole chunks, and
passes state from chunk to chunk (d = e = 0 without one; some kernels count n // chunk + 1
chunks instead, and the fit finds which). The fit has more lengths than terms
and must reproduce every count exactly; a block it does not reproduce stays "approximate".
A decode step runs the recurrent form of such a mixer, not the chunked one: it is costed by
the per-token terms only (b p + c p t for p new tokens and t keys), extrapolated from the
prompt fit, and labelled so.

Counting runs the model (eager attention and experts, which torch can count), so it costs
forwards of 8 and 16 tokens for every model, and of 24, 32 (and around one, two and three
chunks) tokens only for models with a block the census gets wrong.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypedDict, cast

from infermeter.models.architecture import discover
from infermeter.models.census import (
    Census,
    CensusDoc,
    census_of,
    layer_ranges,
    prefill_flop_count,
)
from infermeter.models.info import config_value
from infermeter.models.mixers import chunk_size
from infermeter.models.opcount import count_ops

#: prompt lengths of the check every model gets (16 - 2 x 8 isolates a length-squared term)
CHECK_TOKENS = (8, 16)
#: prompt lengths of the fit, for models with a block the census gets wrong
FIT_TOKENS = (8, 16, 24, 32)
#: a block's residual under this share of the whole forward's count is not worth a fit
AGREEMENT = 1e-4


@contextmanager
def eager_kernels(model: Any) -> Iterator[None]:
    """Eager attention and experts for the duration, the model's own choices put back after.

    Torch counts 0 for CPU SDPA and grouped experts. A composite model (a VLM) keeps one
    choice per sub-model: GOT-OCR2's outer config said "eager" while its language model ran
    SDPA, and the check fitted the missing attention scores as "FLOPs beyond the census".
    """
    config = model.config
    attn = _implementations(config, "_attn_implementation")
    experts = _implementations(config, "_experts_implementation")
    swap_attn = _not_eager(attn) and hasattr(model, "set_attn_implementation")
    swap_experts = _not_eager(experts) and hasattr(model, "set_experts_implementation")
    try:
        if swap_attn:
            model.set_attn_implementation("eager")
        if swap_experts:
            model.set_experts_implementation("eager")
        yield
    finally:
        if swap_attn:
            model.set_attn_implementation(attn)
        if swap_experts:
            model.set_experts_implementation(experts)


def _implementations(config: Any, attr: str) -> dict[str, Any]:
    """{"": the config's choice, sub-config name: its own, ...}: what to put back after."""
    out = {"": getattr(config, attr, None)}
    for name in getattr(config, "sub_configs", None) or {}:
        sub = getattr(config, name, None)
        if sub is not None and hasattr(sub, attr):
            out[name] = getattr(sub, attr)
    return {k: v for k, v in out.items() if v is not None}


def _not_eager(choices: dict[str, Any]) -> bool:
    return any(v != "eager" for v in choices.values())


def _token_ids(model: Any, tokens: int) -> Any:
    """`tokens` ids within the vocabulary (3, 4, ... wrapping), on the model's device."""
    import torch

    text = model.config.get_text_config() if hasattr(model.config, "get_text_config") else None
    vocab = int(config_value(text or model.config, "vocab_size", default=0) or 0)
    ids = torch.arange(tokens)
    if vocab > 3:
        ids = ids % (vocab - 3)
    return (ids + 3).unsqueeze(0).to(next(model.parameters()).device)


def count_module_flops(model: Any, tokens: int) -> dict[str, int]:
    """Matmul FLOPs torch counts in one text forward of `tokens` tokens (batch 1), by module.

    Keys are the names `model.named_modules()` gives ("" for the whole model); a module run
    twice counts twice. Call inside `eager_kernels(model)` for counts of every kernel.
    """
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    # the counter hooks the backward of outputs that need grad; a module that returns one of
    # its parameters (GPT-NeoX-Japanese's bias) would break it, and no count needs grad
    needs_grad = [p for p in model.parameters() if p.requires_grad]
    try:
        for p in needs_grad:
            p.requires_grad_(False)
        with torch.inference_mode(), counter:
            model(input_ids=_token_ids(model, tokens), use_cache=False)
    finally:
        for p in needs_grad:
            p.requires_grad_(True)
    prefix = type(model).__name__ + "."
    out = {"": int(counter.get_total_flops())}
    for key, ops in counter.get_flop_counts().items():
        if key.startswith(prefix):
            out[key[len(prefix) :]] = int(sum(ops.values()))
    return out


def count_forward_flops(model: Any, tokens: int = 8) -> int:
    """The matmul FLOPs torch itself counts of one text forward of `tokens` tokens (batch 1).

    Attention and experts run eager for the count and are put back after.
    """
    with eager_kernels(model):
        return count_module_flops(model, tokens)[""]


#: how a chunked kernel counts its chunks: padding up to whole chunks, or whole chunks plus
#: one for the rest (which is then a whole chunk when the length is a multiple: xLSTM)
CHUNK_RULES = {
    "ceil": lambda n, c: math.ceil(n / c),
    "floor+1": lambda n, c: n // c + 1,
}


def _terms(tokens: int, chunk: int | None, rule: str = "ceil") -> list[float]:
    """The fit's terms at a prompt of `tokens` tokens: 1, n, n^2 (and m, m^2 with a chunk)."""
    n = float(tokens)
    if chunk is None:
        return [1.0, n, n * n]
    m = float(CHUNK_RULES[rule](tokens, chunk))
    return [1.0, n, n * n, m, m * m]


def fit_residual(counts: Mapping[int, float], chunk: int | None) -> dict[str, Any]:
    """Fit `counts` (prompt tokens -> residual FLOPs) by the terms above.

    `exact` is True only when the terms are all determined, at least one length is spare, and
    the fit reproduces every count to 1e-6 of the largest. With a chunk, each rule of counting
    chunks is tried and the first exact one kept.
    """
    import numpy as np

    tokens = sorted(counts)
    y = np.array([float(counts[n]) for n in tokens])
    fit: dict[str, Any] = {}
    for rule in CHUNK_RULES if chunk else ["ceil"]:
        a = np.array([_terms(n, chunk, rule) for n in tokens])
        coef, *_ = np.linalg.lstsq(a, y, rcond=None)
        rank = int(np.linalg.matrix_rank(a))
        worst = float(np.max(np.abs(a @ coef - y))) if len(tokens) else 0.0
        exact = rank == a.shape[1] and len(tokens) > rank
        exact = exact and worst <= 1e-6 * max(float(np.max(np.abs(y))), 1.0)
        coefficients = [float(c) for c in coef] + [0.0] * (5 - len(coef))
        fit = {"coefficients": coefficients, "chunk": chunk, "chunk_rule": rule}
        fit.update(tokens=tokens, exact=bool(exact))
        if exact:
            break
    return fit


def residual_flop_count(fit: dict[str, Any], tokens: int, keys: int, cached: bool) -> float:
    """FLOPs of a fitted residual for `tokens` new tokens (batch 1) attending over `keys`.

    A prompt (nothing cached) uses every term. A step after cached tokens runs the recurrent
    form: only the per-token terms, b p + c p t.
    """
    a, b, c, d, e = (float(v) for v in fit["coefficients"])
    per_token = b * tokens + c * tokens * keys
    if cached:
        return per_token
    chunk = fit.get("chunk")
    m = CHUNK_RULES[fit.get("chunk_rule", "ceil")](tokens, chunk) if chunk else 0
    return a + per_token + d * m + e * m * m


def _fit_lengths(chunks: set[int], max_tokens: int | None) -> list[int]:
    """Prompt lengths for the fit: FIT_TOKENS, and lengths in a second and third chunk.

    Whole multiples of the chunk (c, 2c) tell the rules of counting chunks apart.
    """
    lengths = set(FIT_TOKENS)
    for c in chunks:
        lengths |= {c, c + 8, c + 24, 2 * c, 2 * c + 8}
    limit = max_tokens if isinstance(max_tokens, int) and max_tokens > 0 else None  # -1: none
    return sorted(n for n in lengths if limit is None or n <= limit)


#: the key of the fit of what runs outside the decoder blocks (a pooler, a head's transform)
OUTSIDE = "outside"


def _residuals(
    model: Any, census: Census, counts: dict[int, dict[str, int]]
) -> dict[str, dict[int, int]]:
    """Per block (by index) and outside the blocks: torch's count minus the census's, by length.

    Outside the blocks the census predicts its extra linear layers and the LM head on every
    position (a plain forward computes all logits).
    """
    names = {id(m): n for n, m in model.named_modules()}
    blocks = [names[id(b.block)] for b in discover(model).blocks][: len(census.layers)]
    out: dict[str, dict[int, int]] = {str(i): {} for i in range(len(blocks))}
    out[OUTSIDE] = {}
    for n, by_module in counts.items():
        inside = 0
        for i, name in enumerate(blocks):
            counted = by_module.get(name, 0)
            inside += counted
            out[str(i)][n] = counted - prefill_flop_count(census.layers[i], n, census.top_k)
        head = 2 * n * (census.extra_macs + census.lm_head_macs)
        out[OUTSIDE][n] = by_module[""] - inside - head
    return out


def _check_counts(model: Any, census: Census) -> dict[str, Any]:
    """Counts at CHECK_TOKENS, and a fit of every block whose count the census misses."""
    blocks = [b.block for b in discover(model).blocks]
    with eager_kernels(model):
        counts = {n: count_module_flops(model, n) for n in CHECK_TOKENS}
        residuals = _residuals(model, census, counts)
        off = [
            key
            for key, by_length in residuals.items()
            if any(abs(r) > AGREEMENT * max(counts[n][""], 1) for n, r in by_length.items())
        ]
        text = model.config.get_text_config() if hasattr(model.config, "get_text_config") else None
        chunks = {
            k: chunk_size(blocks[int(k)], text or model.config) if k != OUTSIDE else None
            for k in off
        }
        max_tokens = config_value(text or model.config, "max_position_embeddings")
        for n in _fit_lengths({c for c in chunks.values() if c}, max_tokens) if off else []:
            counts.setdefault(n, count_module_flops(model, n))
    residuals = _residuals(model, census, counts)
    fits = {key: fit_residual(residuals[key], chunks[key]) for key in off}
    return {"counted_8": counts[8][""], "counted_16": counts[16][""], "fits": fits}


class FlopCheckDoc(TypedDict, total=False):
    """`flop_check`'s answer, kept with a loaded model and in each run's shape.

    Every key is written; a run stored by an older release may lack the later ones.
    """

    #: `Census.to_dict()`: the census the counts were made for
    census: CensusDoc
    #: torch's FLOP counts of an 8- and a 16-token forward (None: the forward could not run)
    counted_8: float | None
    counted_16: float | None
    #: per block index ("outside" for the rest): the fit of what the census misses
    fits: dict[str, dict[str, Any]]
    #: what stays approximate once the fits are applied, in words
    approximate: list[str]
    #: `count_ops`: the model's own kernels by kind (None: it could not run)
    op_counts: dict[str, Any] | None


def flop_check(model: Any) -> FlopCheckDoc:
    """The census, torch's counts of an 8- and a 16-token forward, and fits of what it misses.

    The fits are block by block, and outside the blocks (see the module docstring).

    Two lengths at least, because a term that grows with the square of the length (attention
    scores the census did not find) hides in one short count: 16 - 2 x 8 tokens isolates it.
    A model that cannot run the forward (a vision model that needs images) keeps None counts.
    `approximate` lists what stays approximate after the fits.
    """
    census = census_of(model)
    check: dict[str, Any] = {"census": census.to_dict()}
    try:
        check.update(_check_counts(model, census))
    except Exception:  # the check is optional; the analysis says it is missing
        check.update(counted_8=None, counted_16=None, fits={})
    check["approximate"] = fit_notes(census, check["fits"])
    # with the model's own kernels: what the time model charges as framework overhead
    check["op_counts"] = count_ops(model)
    return cast(FlopCheckDoc, check)


def fit_notes(census: Census, fits: dict[str, Any]) -> list[str]:
    """What stays approximate in the census once `fits` cover the blocks it gets wrong."""
    notes = []
    for note in census.uncosted:
        layers = census.uncosted_layers.get(note.split(" in layers ")[0])
        if not (layers and all(fits.get(str(i), {}).get("exact") for i in layers)):
            notes.append(note)

    def where(keys: list[str]) -> str:
        layers = sorted(int(k) for k in keys if k != OUTSIDE)
        parts = [f"layers {layer_ranges(layers)}"] if layers else []
        return " and ".join(parts + (["outside the blocks"] if OUTSIDE in keys else []))

    bad = [k for k, f in fits.items() if not f["exact"]]
    if bad:
        top = max(max(f["tokens"]) for f in fits.values())
        notes.append(
            f"{where(bad)}: torch's FLOP counts at 8-{top} tokens follow no polynomial in the "
            "prompt length the census can fit"
        )
    good = [k for k, f in fits.items() if f["exact"]]
    if good:
        notes.append(
            f"{where(good)}: FLOPs beyond the census fitted to torch's counts of prompts "
            "(exact for prompts; decode steps extrapolated from the per-token terms)"
        )
    return notes
