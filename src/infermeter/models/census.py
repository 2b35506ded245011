"""What a model contains, counted from its modules: the inputs of the cost model.

The cost model used to be written per family (Llama, GPT-2, Mixtral, ...) and was silently off
on anything else. The census instead walks the decoder blocks and counts what runs per token:
- every `nn.Linear` (and transformers' `Conv1D`) is in x out multiply-adds per token;
- experts stored as 3-D tensors [experts, out, in] (or a list of expert MLPs) are one expert's
  multiply-adds per token, run `top_k` times;
- a router kept as a bare 2-D weight is a linear layer too;
- softmax attention adds heads x (query-key dim + value dim) multiply-adds per query per key
  (multi-head latent attention has different key and value dims);
- a mixer that models/mixers.py recognises (Mamba's selective scan, Mamba-2's chunked scan,
  the gated delta rule, a short convolution, Griffin's RG-LRU, MiniMax's lightning
  attention) is costed by its formula, convolution included;
- anything else that holds matrices or convolutions (a recurrent or linear attention) is
  listed in `uncosted`: models/flopcount.py then fits what torch counts in those blocks, and
  every figure the fit cannot make exact says "approximate".
It works on the "meta" device too, so a config alone (no weights) can be costed.

Families that hide their parts, each found from what its modules hold or are given, never a name:
experts whose forward is given no routing run every expert (`dense_experts`, Llama 4); experts
stacked in 2-D [experts x width, hidden] (DBRX); stacks [experts, out, in] beside a router with no
`experts` module (JetMoE, `architecture.stacked_experts`), and such stacks inside the attention
under a module with a `top_k` (JetMoE's mixture of attention heads); a router's per-expert table
([groups, experts], Ernie 4.5's score-correction bias) is neither a matrix nor uncosted; a list of
identical modules inside weights tied across k blocks runs one entry per call (Zamba2's adapters);
Gemma 3n's AltUp adds its N^2 x hidden mixing matmul and the router's second call; a sparse-
attention indexer (a child with `index_topk`) adds heads x (dim + 1) to the score dims; cross-
attention is not costed (a causal LM's forward gives it no encoder states); bare 2-D mixing
matrices [out <= in, in a multiple of the hidden size] are one multiply-add per element per token
(hyper-connections); a block list holding only attentions (XLM) has its scores counted.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, TypedDict, cast

from infermeter.models.architecture import discover, stacked_experts
from infermeter.models.info import config_value
from infermeter.models.mixers import MixerShape, MixerShapeDoc, mixer_shape
from infermeter.models.mixers import prefill_flop_count as mixer_prefill_flop_count

_TOP_K_NAMES = ("num_experts_per_tok", "num_experts_per_token", "moe_topk", "top_k", "moe_k")


class LayerCensusDoc(TypedDict):
    """`LayerCensus` as stored: its fields by name (a test holds the two together)."""

    attention_macs: int
    mlp_macs: int
    expert_macs: int
    experts: int
    other_macs: int
    score_dims: int
    window: int | None
    linear_shapes: list[list[int]]
    expert_shapes: list[list[int]]
    mixers: list[MixerShapeDoc]
    dense_experts: bool


class _CensusDoc(TypedDict):
    layers: list[LayerCensusDoc]
    top_k: int
    lm_head_macs: int


class CensusDoc(_CensusDoc, total=False):
    """`Census.to_dict()`; a census stored before the later fields lacks them."""

    uncosted: list[str]
    extra_macs: int
    uncosted_layers: dict[str, list[int]]


@dataclass(frozen=True)
class LayerCensus:
    """Multiply-adds per token of one decoder block, by kind.

    Attributes:
        attention_macs: linear layers inside the attention module (projections).
        mlp_macs: dense linear layers inside the MLP or MoE block (router, shared expert).
        expert_macs: one routed expert's linear layers (0 for a dense block).
        experts: routed experts in the block (0 for a dense block).
        other_macs: linear layers elsewhere in the block (the mixer of a hybrid layer).
        score_dims: heads x (query-key dim + value dim) of softmax attention; 0 without it.
        window: sliding-window length of its attention, None for full attention.
        linear_shapes: [in, out] of each dense linear layer of the block, in the order found
            (attention, MLP, the rest): the GEMMs a forward runs, so time can be predicted
            per GEMM shape (analysis/timemodel.py); empty in runs stored before it existed.
        expert_shapes: [in, out] of one routed expert's matrices.
        mixers: each state-space mixer costed by formula (`MixerShape.to_dict()`): its
            convolution and scan, beyond its linear layers (counted above).
        dense_experts: the experts module runs every expert on every token (it is given no
            routing: Llama 4's batched matmul over all experts, weighted by zeros).
    """

    attention_macs: int = 0
    mlp_macs: int = 0
    expert_macs: int = 0
    experts: int = 0
    other_macs: int = 0
    score_dims: int = 0
    window: int | None = None
    linear_shapes: list[list[int]] = field(default_factory=list)
    expert_shapes: list[list[int]] = field(default_factory=list)
    mixers: list[MixerShapeDoc] = field(default_factory=list)
    dense_experts: bool = False


@dataclass(frozen=True)
class Census:
    """The cost model's inputs for a whole model; `uncosted` says what it cannot count."""

    layers: list[LayerCensus]
    top_k: int
    lm_head_macs: int
    uncosted: list[str] = field(default_factory=list)
    #: linear layers outside the blocks, the LM head and a vision tower, run per token (an LM
    #: head's transform, OPT's input and output projections)
    extra_macs: int = 0
    #: class name of each module it cannot cost -> the layers that hold one
    uncosted_layers: dict[str, list[int]] = field(default_factory=dict)

    def to_dict(self) -> CensusDoc:
        """Plain dict for JSON and the store."""
        return cast("CensusDoc", asdict(self))

    @classmethod
    def from_dict(cls, d: CensusDoc) -> Census:
        """Inverse of to_dict."""
        return cls(
            layers=[LayerCensus(**x) for x in d["layers"]],
            top_k=int(d["top_k"]),
            lm_head_macs=int(d["lm_head_macs"]),
            uncosted=list(d.get("uncosted", [])),
            extra_macs=int(d.get("extra_macs", 0)),
            uncosted_layers={k: list(v) for k, v in d.get("uncosted_layers", {}).items()},
        )


def _linear_shape(module: Any) -> list[int] | None:
    """[in, out] of a linear layer (nn.Linear or transformers' Conv1D), else None."""
    import torch.nn as nn

    if isinstance(module, nn.Linear):
        return [int(module.in_features), int(module.out_features)]
    if type(module).__name__ == "Conv1D" and getattr(module, "weight", None) is not None:
        return [int(module.weight.shape[0]), int(module.weight.shape[1])]
    return None


def _linear_macs(module: Any) -> int:
    """In x out of a linear layer (nn.Linear or transformers' Conv1D), else 0."""
    shape = _linear_shape(module)
    return shape[0] * shape[1] if shape else 0


def _linear_shapes(root: Any, skip: set[int]) -> list[list[int]]:
    """[in, out] of every linear layer under `root` outside the modules in `skip`."""
    out, stack = [], [root]
    while stack:
        mod = stack.pop()
        if id(mod) in skip:
            continue
        shape = _linear_shape(mod)
        if shape:
            out.append(shape)
        else:
            stack.extend(reversed(list(mod.children())))
    return out


def _expert_macs(experts: Any) -> tuple[int, int, list[list[int]]]:
    """(one expert's multiply-adds per token, number of experts, its matrices' [in, out])."""
    import torch.nn as nn

    if isinstance(experts, nn.ModuleList) and len(experts):
        shapes = _linear_shapes(experts[0], set())
        return sum(a * b for a, b in shapes), len(experts), shapes
    stacked = [p for p in experts.parameters() if p.dim() == 3]  # also in sub-modules (Aria)
    if stacked:
        n = int(stacked[0].shape[0])
        # stored [experts, out, in] (nn.Linear's order) in most layouts; the GEMM's time
        # hardly depends on which of the two is which
        shapes = [[int(p.shape[2]), int(p.shape[1])] for p in stacked]
        return sum(int(p.numel()) // n for p in stacked), n, shapes
    # every expert's rows stacked in one 2-D matrix [experts x width, hidden] (DBRX's w1, v1,
    # w2), the number of experts held beside them
    held = getattr(experts, "num_experts", None) or getattr(experts, "moe_num_experts", None)
    flat = [p for p in experts.parameters() if p.dim() == 2]
    if isinstance(held, int) and held > 0 and flat and all(p.shape[0] % held == 0 for p in flat):
        shapes = [[int(p.shape[1]), int(p.shape[0]) // held] for p in flat]
        return sum(int(p.numel()) // held for p in flat), held, shapes
    inner = [m for m in experts.modules() if _linear_macs(m)]
    n = int(getattr(experts, "num_experts", 0) or len(inner))
    shapes = [s for m in inner[: len(inner) // n if n else 0] if (s := _linear_shape(m))]
    return (sum(_linear_macs(m) for m in inner) // n if n else 0), n, shapes


def _runs_every_expert(experts: Any) -> bool:
    """Whether an experts module is given only the hidden states, no routing.

    Such a module cannot skip the experts a token was not routed to: it runs all of them
    (Llama 4 multiplies every expert's output by a router score that is zero for most).
    """
    import inspect

    import torch.nn as nn

    if experts is None or isinstance(experts, nn.ModuleList):
        return False
    try:
        params = inspect.signature(experts.forward).parameters.values()
    except (TypeError, ValueError):
        return False
    kinds = [p.kind for p in params]
    if inspect.Parameter.VAR_POSITIONAL in kinds:
        return False
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sum(k in positional for k in kinds) == 1


def _indexer_dims(attention: Any) -> int:
    """Heads x (dim + 1) of a sparse-attention indexer inside `attention`, else 0.

    An indexer (DeepSeek's DSA: a module with `index_topk`) scores every key with its own small
    heads, then weights and sums them per query: 2 x heads x (dim + 1) FLOPs per query per
    key, a term of the attention that grows with the keys like its scores.
    """
    total = 0
    for child in attention.modules():
        if child is attention or not isinstance(getattr(child, "index_topk", None), int):
            continue
        heads = getattr(child, "n_heads", None) or getattr(child, "num_heads", None)
        dim = getattr(child, "head_dim", None)
        if isinstance(heads, int) and isinstance(dim, int):
            total += heads * (dim + 1)
    return total


def _macs_outside(root: Any, skip: set[int]) -> tuple[int, list[Any]]:
    """Linear multiply-adds under `root` outside the modules in `skip`, and the odd modules.

    Odd modules hold matrices or convolutions (parameters of 2 or more dims) that no linear
    layer owns: the census cannot cost them.
    """
    macs, strange = 0, []
    stack = [root]
    while stack:
        mod = stack.pop()
        if id(mod) in skip:
            continue
        m = _linear_macs(mod)
        if m:
            macs += m
            continue
        if any(p.dim() >= 2 for p in mod.parameters(recurse=False)):
            strange.append(mod)
        stack.extend(mod.children())
    return macs, strange


def _routed_macs(root: Any) -> tuple[int, list[Any], list[list[int]]]:
    """Per token: multiply-adds of the experts routed inside `root`, their modules, matrices.

    The matrices are the [in, out] a token runs (each of its `top_k` experts'). JetMoE's
    mixture of attention heads: a module with a `top_k` whose children hold every expert's
    projections stacked [experts, out, in]; each token runs `top_k` of them.
    """
    for module in root.modules():
        k = getattr(module, "top_k", None)
        if not isinstance(k, int) or isinstance(k, bool) or k <= 0:
            continue
        experts = stacked_experts(module)
        if experts is not None:
            per_expert, _, shapes = _expert_macs(experts)
            return k * per_expert, list(experts.children()), shapes * k
    return 0, [], []


def _contains(parent: Any, module: Any) -> bool:
    return any(m is module for m in parent.modules())


def _router_macs(router: Any) -> int:
    """A router that is a bare weight (not an nn.Linear) still multiplies by it per token."""
    if router is None or _linear_macs(router):
        return 0
    return sum(int(p.numel()) for p in router.parameters(recurse=False) if p.dim() == 2)


def _router_shapes(router: Any) -> list[list[int]]:
    """[in, out] of a router kept as a bare [experts, hidden] weight (see `_router_macs`)."""
    if router is None or _linear_macs(router):
        return []
    return [
        [int(p.shape[1]), int(p.shape[0])] for p in router.parameters(recurse=False) if p.dim() == 2
    ]


def _score_dims(attention: Any, text: Any) -> int:
    """Heads x (query-key dim + value dim) of a softmax attention module, from what it holds."""
    cfg = getattr(attention, "config", None) or text
    heads = (
        getattr(attention, "num_heads", None)
        or getattr(attention, "num_attention_heads", None)
        or config_value(cfg, "num_attention_heads", "n_head", "num_heads", "n_heads")
    )
    head_dim = getattr(attention, "head_dim", None) or config_value(cfg, "head_dim")
    hidden = config_value(cfg, "hidden_size", "n_embd", "d_model")
    if not head_dim and heads and hidden:
        head_dim = int(hidden) // int(heads)
    qk = getattr(attention, "qk_head_dim", None) or config_value(cfg, "qk_head_dim")
    if not qk:
        nope = config_value(cfg, "qk_nope_head_dim", default=0) or 0
        rope = config_value(cfg, "qk_rope_head_dim", default=0) or 0
        qk = (nope + rope) or head_dim
    v = getattr(attention, "v_head_dim", None) or config_value(cfg, "v_head_dim") or head_dim
    # differential attention (its lambda_q1 / lambda_k1 re-weighting): transformers runs two
    # attention calls over the same Q and K, one per half of V (diffllama, transformers 5.24)
    calls = 2 if hasattr(attention, "lambda_q1") and hasattr(attention, "lambda_k1") else 1
    return calls * int(heads or 0) * (int(qk or 0) + int(v or 0)) + _indexer_dims(attention)


def _window(attention: Any, text: Any, index: int) -> int | None:
    window = getattr(attention, "sliding_window", None)
    types = config_value(text, "layer_types")
    if types is not None and index < len(types):
        return (
            int(window or config_value(text, "sliding_window") or 0) or None
            if "sliding" in str(types[index])
            else None
        )
    return int(window) if window else None


def _is_softmax_attention(module: Any, text: Any = None) -> bool:
    """Attention modules whose class says they are recurrent or linear are not softmax ones.

    The model's own name is taken out of the class name first: Kimi Linear's softmax
    attention is `KimiLinearAttention`.
    """
    name = type(module).__name__.lower()
    model_type = str(getattr(text, "model_type", "") or "").replace("_", "").lower()
    if model_type:
        name = name.replace(model_type, "")
    return not any(w in name for w in ("linear", "mamba", "recurrent", "lstm", "rwkv", "ssm"))


#: a block's cross-attention, which runs only when encoder states are given (TrOCR's
#: `encoder_attn`): a causal LM's forward never gives them, so it is not costed
CROSS_ATTENTION = ("encoder_attn", "crossattention", "cross_attention")


def _is_attention_itself(block: Any) -> bool:
    """A softmax attention module standing where a block should: heads and q, k, v layers."""
    heads = any(isinstance(getattr(block, a, None), int) for a in ("n_heads", "num_heads"))
    linears = sum(1 for c in block.children() if _linear_macs(c))
    return heads and linears >= 3 and _is_softmax_attention(block)


def _cross_attention(block: Any) -> list[Any]:
    return [c for n, c in block.named_children() if n.lower() in CROSS_ATTENTION]


def _one_per_sharer(block: Any, shared_by: dict[int, int]) -> set[int]:
    """The entries that do not run of lists holding one entry per block sharing their module.

    Zamba2's shared transformer block has the same weights in several layers (tied); it keeps
    a list of adapters with one entry per such layer and runs that layer's entry alone. A list
    of identical modules, as long as the number of blocks holding its weights
    (`shared_by`: blocks per parameter id), costs one entry per call: the ids of the others'
    modules are returned, to be skipped.
    """
    import torch.nn as nn

    idle: set[int] = set()
    for mod in block.modules():
        held = [shared_by.get(id(p), 1) for p in mod.parameters()]
        sharers = min(held) if held else 1
        if not isinstance(mod, nn.ModuleList) or sharers < 2 or len(mod) != sharers:
            continue
        shapes = [[tuple(p.shape) for p in entry.parameters()] for entry in mod]
        if all(s == shapes[0] for s in shapes):
            idle |= {id(m) for entry in list(mod)[1:] for m in entry.modules()}
    return idle


def _layer(
    i: int, parts: Any, text: Any, idle: set[int] | None = None
) -> tuple[LayerCensus, list[str]]:
    """One block's census and the names of the modules in it that it cannot cost.

    `idle`: ids of modules in the block that do not run (`_one_per_sharer`).
    """
    idle = idle or set()
    parts_costed_apart = (parts.attention, parts.mlp, *_cross_attention(parts.block))
    skip = {id(m) for m in parts_costed_apart if m is not None} | idle
    other, strange = _macs_outside(parts.block, skip)
    # name the mixer that holds what cannot be costed (a state-space or linear-attention
    # layer), not its convolution
    for _, child in parts.block.named_children():
        if id(child) not in skip and any(s is child or _contains(child, s) for s in strange):
            strange = [s for s in strange if not _contains(child, s)] + [child]
    attention_macs = score = 0
    window = None
    routed_shapes: list[list[int]] = []
    if parts.attention is None and parts.mlp is None and _is_attention_itself(parts.block):
        # a block list that holds only the attentions (XLM's parallel lists: attentions[i],
        # ffns[i], ...): its linear layers were counted above, its scores are counted here
        score, window = _score_dims(parts.block, text), _window(parts.block, text, i)
    if parts.attention is not None:
        attention_macs, att_strange = _macs_outside(parts.attention, idle)
        routed, covered, routed_shapes = _routed_macs(parts.attention)
        attention_macs += routed
        strange += [m for m in att_strange if all(m is not c for c in covered)]
        softmax = _is_softmax_attention(parts.attention, text)
        if softmax and mixer_shape(parts.attention) is None:
            score, window = _score_dims(parts.attention, text), _window(parts.attention, text, i)
        else:
            strange.append(parts.attention)
    mlp_macs = expert = experts = 0
    expert_shapes: list[list[int]] = []
    # every module of the experts: their container may stand outside the model's tree
    # (architecture.stacked_experts)
    skip_experts = {id(m) for m in parts.experts.modules()} if parts.experts is not None else set()
    skip_experts |= idle
    if parts.mlp is not None:
        mlp_macs, mlp_strange = _macs_outside(parts.mlp, skip_experts)
        mlp_macs += _router_macs(parts.router)
        strange += [m for m in mlp_strange if m is not parts.router]
        if parts.experts is not None:
            expert, experts, expert_shapes = _expert_macs(parts.experts)
    shapes = [
        *(_linear_shapes(parts.attention, idle) if parts.attention is not None else []),
        *routed_shapes,
        *(_linear_shapes(parts.mlp, skip_experts) if parts.mlp is not None else []),
        *_linear_shapes(parts.block, skip),
        *_router_shapes(parts.router),
    ]
    mixers = _formula_mixers([*strange, *parts.block.children()])
    strange = [s for s in strange if not _covered(s, mixers) and not _expert_table(s, experts)]
    hidden = int(config_value(text, "hidden_size", "n_embd", "d_model", default=0) or 0)
    other += sum(_bare_matrix_macs(s, hidden) for s in strange) + _altup_macs(parts.block)
    strange = [s for s in strange if not _bare_matrix_macs(s, hidden)]
    layer = LayerCensus(
        attention_macs,
        mlp_macs,
        expert,
        experts,
        other,
        score,
        window,
        shapes,
        expert_shapes,
        [mixer_shape(m).to_dict() for m in mixers],  # type: ignore[union-attr]
        _runs_every_expert(parts.experts),
    )
    return layer, sorted({type(m).__name__ for m in strange})


def _bare_matrix_macs(module: Any, hidden: int) -> int:
    """Multiply-adds per token of a module that multiplies hidden states by bare matrices.

    Such a module (a hyper-connection's mixing weights, `F.linear(x, self.fn)`) holds 2-D
    parameters [out, in] outside any linear layer, each with `in` a multiple of the hidden
    size and `out` no larger (a table of positions is taller than it is wide), and nothing
    else of 2 or more dims. 0 for anything else, which stays uncosted.
    """
    import torch.nn as nn

    if hidden <= 0:
        return 0
    macs = 0
    for mod in module.modules():
        if isinstance(mod, nn.Embedding):  # a lookup, however wide
            return 0
        if _linear_macs(mod):
            continue
        for w in mod.parameters(recurse=False):
            if w.dim() < 2:
                continue
            if w.dim() != 2 or w.shape[1] % hidden or w.shape[0] > w.shape[1]:
                return 0
            macs += int(w.numel())
    return macs


def _altup_macs(block: Any) -> int:
    """Multiply-adds per token that Gemma 3n's AltUp adds beyond its linear layers' one call.

    AltUp keeps N copies of the hidden states; a router (`modality_router`, hidden -> N) gives
    per-token coefficients, `prediction_coefs` (N -> N x N) turns them into an N x N matrix
    that mixes the N copies (N^2 x hidden multiply-adds, a matmul of activations), and the
    router runs again in the correction step. Found by the three linear layers it holds
    under those names, with the N -> N^2 shape that only such a mixing matrix has.
    """
    import torch.nn as nn

    macs = 0
    for mod in block.modules():
        router: Any = getattr(mod, "modality_router", None)
        predict: Any = getattr(mod, "prediction_coefs", None)
        correct: Any = getattr(mod, "correction_coefs", None)
        if not all(isinstance(m, nn.Linear) for m in (router, predict, correct)):
            continue
        n, hidden = int(router.out_features), int(router.in_features)
        if predict.in_features == n and predict.out_features == n * n:
            macs += n * n * hidden + n * hidden
    return macs


def _expert_table(module: Any, experts: int) -> bool:
    """A router's per-expert table (Ernie 4.5's score-correction bias, [groups, experts]).

    Added to the routing scores, not multiplied by hidden states: no matmul to cost, and not
    to be taken for a bare matrix when the expert count happens to equal the hidden size.
    """
    own = [w for mod in module.modules() for w in mod.parameters(recurse=False) if w.dim() >= 2]
    return experts > 0 and bool(own) and all(w.dim() == 2 and w.shape[-1] == experts for w in own)


def _covered(module: Any, mixers: list[Any]) -> bool:
    """Whether every odd module under `module` (itself included) is inside a formula mixer."""
    for mod in module.modules():
        odd = not _linear_macs(mod) and any(p.dim() >= 2 for p in mod.parameters(recurse=False))
        if odd and not any(_contains(m, mod) for m in mixers):
            return False
    return True


def _formula_mixers(candidates: list[Any]) -> list[Any]:
    """The modules among `candidates` (and inside them) that models/mixers.py can cost."""
    found: list[Any] = []
    for candidate in candidates:
        for module in candidate.modules():
            if mixer_shape(module) is not None and not any(module is f for f in found):
                found.append(module)
    return found


def _top_k(text: Any, arch: Any) -> int:
    for b in arch.blocks:
        k = getattr(b.router, "top_k", None) or getattr(b.mlp, "top_k", None)
        if k:
            return int(k)
    return int(config_value(text, *_TOP_K_NAMES, default=0) or 0)


def census_of(model: Any) -> Census:
    """Count what runs per token in `model` (weights may be on the meta device)."""
    config = model.config
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    arch = discover(model)
    layers: list[LayerCensus] = []
    uncosted: dict[str, list[int]] = {}
    shared_by = Counter(id(p) for parts in arch.blocks for p in parts.block.parameters())
    for parts in arch.blocks:
        layer, strange = _layer(parts.index, parts, text, _one_per_sharer(parts.block, shared_by))
        layers.append(layer)
        for name in strange:
            uncosted.setdefault(name, []).append(parts.index)
    head = arch.lm_head
    head_macs = _linear_macs(head) if head is not None else 0
    inside = [b.block for b in arch.blocks] + [head, arch.vision_tower, arch.projector]
    inside += arch.other_encoders  # not run by a text forward
    extra, strange_outside = _macs_outside(model, {id(m) for m in inside if m is not None})
    hidden = int(config_value(text, "hidden_size", "n_embd", "d_model", default=0) or 0)
    extra += sum(_bare_matrix_macs(m, hidden) for m in strange_outside)
    if not arch.blocks:
        uncosted["decoder blocks not found"] = []
    notes = [
        f"{name} in layers {layer_ranges(idx)}: not costed (no matmul count for it)"
        if idx
        else name
        for name, idx in uncosted.items()
    ]
    by_layer = {name: idx for name, idx in uncosted.items() if idx}
    return Census(layers, _top_k(text, arch), head_macs, notes, extra, by_layer)


def layer_ranges(indices: list[int]) -> str:
    """[0, 1, 2, 5] -> '0-2, 5'."""
    out, start = [], indices[0]
    for a, b in zip(indices, [*indices[1:], None], strict=True):
        if b != a + 1:
            out.append(f"{start}-{a}" if a != start else str(a))
            start = b if b is not None else start
    return ", ".join(out)


def prefill_flop_count(layer: LayerCensus, tokens: int, top_k: int) -> int:
    """Matmul FLOPs the census predicts for one block in a prompt of `tokens` tokens.

    Batch 1, nothing cached: the figure torch's count of that block is checked against.
    """
    n = tokens
    runs = layer.experts if layer.dense_experts else top_k
    linear = layer.attention_macs + layer.mlp_macs + layer.other_macs + runs * layer.expert_macs
    mixers = sum(mixer_prefill_flop_count(MixerShape(**m), n) for m in layer.mixers)
    return 2 * n * linear + 2 * n * n * layer.score_dims + mixers
