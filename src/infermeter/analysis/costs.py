"""Exact FLOPs and bytes of every layer of a forward, from the model's config and the shapes.

Conventions. A matmul of (m x k) by (k x n) is 2mkn FLOPs (one multiply and one add per term);
that is what `torch.utils.flop_counter.FlopCounterMode` counts, and `flop_count` below holds
exactly those matmul FLOPs so the two can be compared. Element-wise work (norms, activations,
softmax, RoPE, residual adds) goes in `other_flop_count`: small, and invisible to the counter.
Bytes moved are the weights a layer reads (parameters x dtype size), the activations it reads
and writes, and the KV cache it reads and appends. A forward processes `tokens` new tokens per
row, for `batch` rows, after `context` tokens already in the KV cache (0 for a prefill, the
position for a decode step); attention sees T = context + tokens keys per query.

Per decoder block (d hidden, H query heads, G KV heads, h head dim, f MLP width):
- attention projections: q 2BPd(Hh), k and v 2BPd(Gh) each, o 2BP(Hh)d. GQA and MQA are G < H.
- scores and values: QK^T 2BHPTh and (attention x V) 2BHPTh. The eager kernel computes the whole
  P x T block even where a causal or sliding-window mask zeroes it, so this is what executes;
  `useful_attention_flop_count` gives the masked count for comparison.
- gated MLP (Llama, Mistral, Qwen): gate, up and down, 3 x 2BPdf; GPT-2's MLP has 2 x 2BPdf.
- MoE: router 2BPdE; each token runs k experts of width f_e: 3 x 2(BPk)d f_e in total however the
  tokens spread; Qwen2-MoE adds a shared expert (3 x 2BPd f_s) and its gate 2BPd.
- LM head: 2 B L d V for the L positions whose logits are computed (generate computes only the
  last position in prefill: L = 1; a plain forward computes all: L = P).
- Vision (LLaVA with CLIP): patch embedding 2 N (3 p^2) D (a convolution), then each tower block
  as above with N + 1 tokens (CLS), MHA and a plain 2-matrix MLP; the projector 2 N D d + 2 N d d.

Where torch's counter undercounts (tests show each): the CPU SDPA kernel
(`_scaled_dot_product_flash_attention_for_cpu`) has no formula, so attention scores and values
count 0 with `attn_implementation="sdpa"`; grouped experts (`_grouped_mm`) count 0, so a MoE model
with `experts_implementation="grouped_mm"` shows only its dense parts. Use eager for both to
compare, or trust this model.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

from infermeter.models.census import Census
from infermeter.models.flopcount import OUTSIDE, residual_flop_count
from infermeter.models.mixers import MixerShape, state_elements, step_flop_count
from infermeter.models.mixers import prefill_flop_count as mixer_prefill_flop_count
from infermeter.models.shape import Shape, VisionShape, shape_of

__all__ = [
    "Cost",
    "approximate",
    "Shape",
    "VisionShape",
    "forward_costs",
    "generation_costs",
    "shape_of",
    "total",
    "useful_attention_flop_count",
]


@dataclass
class Cost:
    """FLOPs and bytes of one module in one forward."""

    name: str
    kind: str
    layer: int | None
    flop_count: float = 0.0
    other_flop_count: float = 0.0
    weight_bytes: float = 0.0
    act_bytes: float = 0.0
    kv_read_bytes: float = 0.0
    kv_write_bytes: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def bytes(self) -> float:
        """All bytes moved."""
        return self.weight_bytes + self.act_bytes + self.kv_read_bytes + self.kv_write_bytes

    @property
    def intensity(self) -> float:
        """Operational intensity: matmul FLOPs per byte moved."""
        return self.flop_count / self.bytes if self.bytes else float("nan")

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (with bytes and intensity) for tables and JSON."""
        d = asdict(self)
        d.pop("notes")
        d["bytes"] = self.bytes
        d["intensity"] = self.intensity
        return d


def _attention(
    s: Shape, layer: int, b: int, p: int, t: int, e: int, hidden: int | None = None
) -> Cost:
    """Self-attention of one block: projections, QK^T, softmax, attention x V (MHA/GQA/MQA)."""
    d = hidden or s.hidden
    hq, hkv, hd = s.heads * s.head_dim, s.kv_heads * s.head_dim, s.head_dim
    proj = 2 * b * p * d * (hq + 2 * hkv) + 2 * b * p * hq * d
    scores = 2 * 2 * b * s.heads * p * t * hd
    c = Cost(f"layers.{layer}.attention", "attention", layer)
    c.flop_count = proj + scores
    c.other_flop_count = 5 * b * s.heads * p * t + 6 * b * p * (hq + hkv)  # softmax, scaling, RoPE
    c.weight_bytes = e * (d * (hq + 2 * hkv) + hq * d)
    c.act_bytes = e * b * p * (2 * d + 2 * hq + 2 * hkv)
    c.kv_read_bytes = e * 2 * b * (t - p) * hkv
    c.kv_write_bytes = e * 2 * b * p * hkv
    return c


def useful_attention_flop_count(s: Shape, b: int, p: int, context: int) -> float:
    """QK^T and attention x V FLOPs a causal (and sliding-window) mask leaves, per block."""
    total = 0
    for i in range(p):
        keys = context + i + 1
        if s.sliding_window:
            keys = min(keys, s.sliding_window)
        total += keys
    return 2 * 2 * b * s.heads * s.head_dim * total


def _mlp(s: Shape, layer: int, b: int, p: int, e: int) -> Cost:
    d, f = s.hidden, s.intermediate
    mats = 3 if s.gated_mlp else 2
    c = Cost(f"layers.{layer}.mlp", "mlp", layer)
    c.flop_count = mats * 2 * b * p * d * f
    c.other_flop_count = b * p * f * (4 if s.gated_mlp else 8)  # activation and gating
    c.weight_bytes = e * mats * d * f
    c.act_bytes = e * b * p * (2 * d + mats * f)
    return c


def _moe(s: Shape, layer: int, b: int, p: int, e: int, top_k: int) -> Cost:
    d, fe, n = s.hidden, s.moe_intermediate, b * p
    routed = n * top_k
    c = Cost(f"layers.{layer}.moe", "moe", layer)
    c.flop_count = 2 * n * d * s.experts + 3 * 2 * routed * d * fe
    c.other_flop_count = n * s.experts * 5 + routed * fe * 4 + routed * d * 2
    c.act_bytes = e * (2 * n * d + 3 * routed * fe + n * s.experts)
    # weights read: the router, and each expert that receives at least one token; with many
    # tokens that is all of them, with one token only top_k (decode is why MoE saves bytes)
    hit = min(s.experts, routed)
    c.weight_bytes = e * (d * s.experts + hit * 3 * d * fe)
    if s.shared_intermediate:
        fs = s.shared_intermediate
        c.flop_count += 3 * 2 * n * d * fs + 2 * n * d
        c.other_flop_count += n * fs * 4
        c.weight_bytes += e * (3 * d * fs + d)
        c.act_bytes += e * n * 3 * fs
    return c


def _vision(v: VisionShape, b: int, e: int) -> list[Cost]:
    """CLIP tower (all layers run) and LLaVA's two-layer projector, for `b` images."""
    n, n1, dv = v.patches, v.patches + 1, v.hidden
    out = []
    emb = Cost("vision.embeddings", "vision_tower", None)
    emb.flop_count = 2 * b * n * v.channels * v.patch_size**2 * dv
    emb.weight_bytes = e * (v.channels * v.patch_size**2 * dv + n1 * dv)
    emb.act_bytes = e * b * (v.channels * v.image_size**2 + n1 * dv)
    out.append(emb)
    hd = dv // v.heads
    for i in range(v.layers):
        c = Cost(f"vision.layers.{i}", "vision_tower", None)
        c.flop_count = 4 * 2 * b * n1 * dv * dv + 2 * 2 * b * v.heads * n1 * n1 * hd
        c.flop_count += 2 * 2 * b * n1 * dv * v.intermediate
        c.other_flop_count = 5 * b * v.heads * n1 * n1 + 8 * b * n1 * v.intermediate
        c.weight_bytes = e * (4 * dv * dv + 2 * dv * v.intermediate)
        c.act_bytes = e * b * n1 * (6 * dv + 2 * v.intermediate)
        out.append(c)
    proj = Cost("projector", "projector", None)
    proj.flop_count = 2 * b * n * dv * v.text_hidden + 2 * b * n * v.text_hidden * v.text_hidden
    proj.other_flop_count = 8 * b * n * v.text_hidden
    proj.weight_bytes = e * (dv * v.text_hidden + v.text_hidden**2)
    proj.act_bytes = e * b * n * (dv + 2 * v.text_hidden)
    out.append(proj)
    return out


def forward_costs(
    s: Shape,
    *,
    tokens: int,
    context: int = 0,
    batch: int = 1,
    dtype_bytes: int = 4,
    logits_tokens: int | None = None,
    top_k: int | None = None,
    images: int = 0,
    active_layers: int | None = None,
) -> list[Cost]:
    """Per-module costs of one forward of `tokens` new tokens per row after `context` cached.

    Args:
        s: the model's shape (`shape_of(model)`).
        tokens: new tokens per row (the prompt in a prefill, 1 in a decode step).
        context: tokens already in the KV cache.
        batch: rows.
        dtype_bytes: bytes per weight and activation element (4 float32, 2 bf16/fp16).
        logits_tokens: positions whose logits are computed (default: all `tokens`; generate's
            prefill computes 1).
        top_k: experts per token when a knob changed it (default: the config's).
        images: images encoded in this forward (a VLM's prefill: one per row).
        active_layers: decoder blocks that run (the active_layers knob).
    """
    b, p, e = batch, tokens, dtype_bytes
    t = context + tokens
    k = top_k or (s.census.top_k if s.census is not None else 0) or s.top_k
    out: list[Cost] = []
    if images and s.vision is not None:
        out.extend(_vision(s.vision, images, e))
    emb = Cost("embeddings", "embeddings", None)
    emb.weight_bytes = e * b * p * s.hidden  # rows gathered, not the table
    emb.act_bytes = e * b * p * s.hidden
    out.append(emb)
    blocks = (
        _census_blocks(s, s.census, b, p, t, e, k, active_layers)
        if s.census is not None
        else _family_blocks(s, b, p, t, e, k, active_layers)
    )
    out.extend(blocks)
    if s.census is not None and s.census.extra_macs:
        rest = Cost("other linear layers", "other", None)
        rest.flop_count = 2 * b * p * s.census.extra_macs
        rest.weight_bytes = e * s.census.extra_macs
        rest.act_bytes = e * b * p * 2 * s.hidden
        out.append(rest)
    outside = ((s.flop_check or {}).get("fits") or {}).get(OUTSIDE)
    if outside:
        fitted = Cost("fitted outside the blocks", "fitted", None)
        fitted.flop_count = b * residual_flop_count(outside, p, t, cached=t > p)
        fitted.notes.append("FLOPs torch counts beyond the module census, fitted in length")
        out.append(fitted)
    fn = Cost("final_norm", "final_norm", None)
    fn.other_flop_count = 5 * b * p * s.hidden
    fn.weight_bytes = e * s.hidden
    fn.act_bytes = e * 2 * b * p * s.hidden
    out.append(fn)
    lt = p if logits_tokens is None else logits_tokens
    head = Cost("lm_head", "lm_head", None)
    head_macs = s.census.lm_head_macs if s.census and s.census.lm_head_macs else s.hidden * s.vocab
    head.flop_count = 2 * b * lt * head_macs
    head.weight_bytes = e * head_macs
    head.act_bytes = e * b * lt * (s.hidden + s.vocab)
    out.append(head)
    return out


def _norms(s: Shape, i: int, b: int, p: int, e: int) -> Cost:
    norms = Cost(f"layers.{i}.norms", "norm", i)
    norms.other_flop_count = 2 * 5 * b * p * s.hidden + 2 * b * p * s.hidden  # 2 norms, 2 adds
    norms.weight_bytes = e * 2 * s.hidden
    norms.act_bytes = e * 2 * 2 * b * p * s.hidden
    return norms


def _family_blocks(
    s: Shape, b: int, p: int, t: int, e: int, k: int, active_layers: int | None
) -> list[Cost]:
    """Blocks costed from the config by family formulas (runs stored before the census)."""
    out: list[Cost] = []
    for i in range(active_layers or s.layers):
        out.append(_attention(s, i, b, p, t, e))
        out.append(_moe(s, i, b, p, e, k) if s.experts else _mlp(s, i, b, p, e))
        out.append(_norms(s, i, b, p, e))
    return out


def _census_blocks(
    s: Shape,
    census: Census,
    b: int,
    p: int,
    t: int,
    e: int,
    k: int,
    active_layers: int | None,
) -> list[Cost]:
    """Blocks costed from what each one contains (models/census.py).

    Attention: its projections, plus QK^T and attention x V over every key; the eager kernel
    computes the whole block in a prefill even where a mask zeroes it, and a decode step reads
    at most the sliding window. MLP or MoE: its dense layers, plus top-k experts per token.
    A hybrid layer's mixer: its linear layers. What torch counts beyond all that in a block
    (a scan, an indexer: models/flopcount.py) is the block's "fitted" cost.
    """
    out: list[Cost] = []
    fits = (s.flop_check or {}).get("fits") or {}
    d = s.hidden
    hkv = s.kv_heads * s.head_dim
    for i, layer in enumerate(census.layers[: active_layers or len(census.layers)]):
        keys = min(t, layer.window) if (p == 1 and layer.window) else t
        att = Cost(f"layers.{i}.attention", "attention", i)
        att.flop_count = 2 * b * p * layer.attention_macs + 2 * b * p * keys * layer.score_dims
        # softmax's element-wise work per head (a model whose config names no heads: one)
        heads = layer.score_dims // (2 * s.head_dim) if s.head_dim else 1
        att.other_flop_count = 5 * b * p * keys * max(1, heads)
        att.weight_bytes = e * layer.attention_macs
        att.act_bytes = e * b * p * (2 * d + 2 * (layer.attention_macs // max(d, 1)))
        if layer.score_dims:
            att.kv_read_bytes = e * 2 * b * (keys - p) * hkv
            att.kv_write_bytes = e * 2 * b * p * hkv
        out.append(att)
        n = b * p
        kind = "moe" if layer.experts else "mlp"
        mlp = Cost(f"layers.{i}.{kind}", kind, i)
        runs = layer.experts if layer.dense_experts else k  # every expert, when not routed
        mlp.flop_count = 2 * n * layer.mlp_macs + 2 * n * runs * layer.expert_macs
        hit = min(layer.experts, n * runs)
        mlp.weight_bytes = e * (layer.mlp_macs + hit * layer.expert_macs)
        mlp.act_bytes = e * n * (2 * d + (layer.mlp_macs + runs * layer.expert_macs) // max(d, 1))
        out.append(mlp)
        if layer.other_macs:
            mixer = Cost(f"layers.{i}.mixer", "mixer", i)
            mixer.flop_count = 2 * n * layer.other_macs
            mixer.weight_bytes = e * layer.other_macs
            mixer.act_bytes = e * n * 2 * d
            out.append(mixer)
        for j, shape in enumerate(layer.mixers):
            out.append(_scan(MixerShape(**shape), f"layers.{i}.scan{j or ''}", i, b, p, t, e))
        if str(i) in fits:
            rest = Cost(f"layers.{i}.fitted", "fitted", i)
            rest.flop_count = b * residual_flop_count(fits[str(i)], p, t, cached=t > p)
            rest.notes.append("FLOPs torch counts beyond the module census, fitted in length")
            out.append(rest)
        out.append(_norms(s, i, b, p, e))
    return out


def _scan(m: MixerShape, name: str, i: int, b: int, p: int, t: int, e: int) -> Cost:
    """A state-space mixer's convolution and scan (models/mixers.py), beyond its projections.

    A prompt runs the chunked or scanned form over every position; a step after cached tokens
    the recurrent form, which reads and writes the whole state once (a fixed size, whatever
    the context: what attention's growing KV cache is compared with).
    """
    cost = Cost(name, "mixer", i)
    state = e * b * state_elements(m)
    if t > p:
        cost.flop_count = b * step_flop_count(m, p)
        cost.kv_read_bytes = state
    else:
        cost.flop_count = b * mixer_prefill_flop_count(m, p)
    cost.kv_write_bytes = state
    cost.act_bytes = e * b * p * 2 * m.conv_channels
    cost.notes.append(f"{m.kind} scan by formula (models/mixers.py)")
    return cost


def approximate(s: Shape, tolerance: float = 0.01) -> list[str]:
    """Why this shape's FLOPs are approximate; empty when they are exact.

    Exact means: the census counted every block and agrees with torch's own count of an
    8-token forward (eager kernels, recorded when the model was loaded, with the census of that
    moment) within `tolerance`.
    """
    if s.census is None:
        return ["costed by family formulas (run stored before the module census)"]
    check = s.flop_check or {}
    reasons = list(check.get("approximate", s.census.uncosted))
    if s.vision is not None and s.vision.family != "clip_vision_model":
        reasons.append(
            f"vision tower ({s.vision.family}) and projector costed by CLIP and LLaVA formulas"
        )
    counted_8, counted_16 = check.get("counted_8"), check.get("counted_16")
    if counted_8 and "census" in check:
        at_count = replace(s, census=Census.from_dict(check["census"]))
        a8, a16 = (total(forward_costs(at_count, tokens=n)).flop_count for n in (8, 16))
        ratio = a8 / counted_8
        if abs(ratio - 1) > tolerance:
            reasons.append(f"analytic FLOPs are {ratio:.3f}x torch's count of an 8-token forward")
        # the part that grows with the square of the length (attention scores)
        quad_a, quad_c = a16 - 2 * a8, (counted_16 or 0) - 2 * counted_8
        if counted_16 and abs(quad_a - quad_c) > tolerance * max(abs(quad_c), 1):
            reasons.append(
                f"attention-score FLOPs (growing with length squared) are {quad_a:.3g} where "
                f"torch counts {quad_c:.3g} (16 vs 8 tokens): long prompts are off more"
            )
    return reasons


def total(costs: list[Cost]) -> Cost:
    """The sum of a list of costs."""
    t = Cost("total", "total", None)
    for c in costs:
        t.flop_count += c.flop_count
        t.other_flop_count += c.other_flop_count
        t.weight_bytes += c.weight_bytes
        t.act_bytes += c.act_bytes
        t.kv_read_bytes += c.kv_read_bytes
        t.kv_write_bytes += c.kv_write_bytes
    return t


def generation_costs(
    s: Shape,
    *,
    prompt_tokens: int,
    new_tokens: int,
    batch: int = 1,
    dtype_bytes: int = 4,
    top_k: int | None = None,
    images: int = 0,
    active_layers: int | None = None,
) -> dict[str, Any]:
    """Costs of one `generate` call: its prefill and every decode step (summed and per step).

    The prefill computes logits for the last position only, as generate does; each of the
    `new_tokens - 1` decode steps processes one token at a growing context.
    """
    prefill = forward_costs(
        s,
        tokens=prompt_tokens,
        context=0,
        logits_tokens=1,
        images=images,
        batch=batch,
        dtype_bytes=dtype_bytes,
        top_k=top_k,
        active_layers=active_layers,
    )
    steps = [
        total(
            forward_costs(
                s,
                tokens=1,
                context=prompt_tokens + i,
                logits_tokens=1,
                batch=batch,
                dtype_bytes=dtype_bytes,
                top_k=top_k,
                active_layers=active_layers,
            )
        )
        for i in range(new_tokens - 1)
    ]
    decode = total(steps) if steps else Cost("total", "total", None)
    return {
        "prefill": prefill,
        "prefill_total": total(prefill),
        "decode_steps": steps,
        "decode_total": decode,
    }
