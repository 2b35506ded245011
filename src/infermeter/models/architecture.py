"""Where things are in a transformers model: blocks, their parts, router, head, vision tower.

Found by structure, not by a table per family: the decoder blocks are the longest
`nn.ModuleList` of same-class modules outside the vision tower; inside a block, attention, MLP or
MoE and norms are recognised by the names transformers uses across families (`self_attn`/`attn`,
`mlp`/`block_sparse_moe`/`feed_forward`, `*norm*`/`ln_*`). A MoE block is an MLP with a `gate`
(router) and `experts`. What cannot be found is listed in `missing`, and the rest still works.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

from infermeter.models.info import other_encoders, vision_modules

_ATTN_NAMES = (
    "self_attn",
    "attn",
    "attention",
    "self_attention",
    "multi_head_attention",
    "rel_attn",
)
_MLP_NAMES = ("mlp", "block_sparse_moe", "feed_forward", "ffn", "ff", "mlp_block")
_ACT_NAMES = ("act_fn", "act", "activation_fn", "activation")


@dataclass
class BlockParts:
    """One decoder block and the parts of it that can be timed."""

    index: int
    block: Any
    attention: Any = None
    attention_out: Any = None  # output projection (o_proj / c_proj)
    mlp: Any = None
    mlp_act: list[Any] = field(default_factory=list)  # activation modules (dense and experts)
    norms: list[tuple[str, Any]] = field(default_factory=list)
    router: Any = None
    experts: Any = None
    #: what mixes tokens where a block has no softmax attention: a state-space or recurrent
    #: layer (Mamba's `mixer`, Zamba's `mamba`, RecurrentGemma's recurrent `temporal_block`)
    mixer: Any = None

    @property
    def is_moe(self) -> bool:
        """True when the MLP is a mixture of experts with a router."""
        return self.router is not None


@dataclass
class Architecture:
    """Named places of a model; `missing` lists what was looked for and not found."""

    root: Any
    blocks_path: str | None
    blocks: list[BlockParts]
    embeddings: Any = None
    final_norm: Any = None
    #: the rotary position table module called once per forward (None where the model has none)
    rotary: Any = None
    lm_head: Any = None
    vision_tower: Any = None
    projector: Any = None
    vision_blocks: list[Any] = field(default_factory=list)
    #: encoders of other modalities (audio), which a text forward does not run
    other_encoders: list[Any] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    names: dict[int, str] = field(default_factory=dict)

    def name_of(self, module: Any) -> str:
        """Dotted path of a module inside the model."""
        return self.names.get(id(module), type(module).__name__)


def _find_child(module: Any, names: tuple[str, ...]) -> tuple[str, Any] | tuple[None, None]:
    for n in names:
        child = getattr(module, n, None)
        if child is not None and hasattr(child, "forward"):
            return n, child
    return None, None


def _module_lists(root: Any, skip: set[int]) -> list[tuple[str, Any]]:
    """Lists of blocks: ModuleLists not inside another one, whose members all have parts.

    Members may be of several classes: hybrids alternate attention and state-space layers
    (Jamba, Bamba). Lists nested in a list (a block's experts) are not candidates.
    """
    import torch.nn as nn

    found = []
    for name, mod in root.named_modules():
        above = _ancestors(root, name)[:-1]
        if any(id(m) in skip for m in above) or any(isinstance(m, nn.ModuleList) for m in above):
            continue
        if not isinstance(mod, nn.ModuleList) or len(mod) == 0:
            continue
        if all(sum(1 for _ in m.children()) >= 2 for m in mod):
            found.append((name, mod))
    return found


def _ancestors(root: Any, dotted: str) -> list[Any]:
    out, cur = [], root
    for part in dotted.split(".") if dotted else []:
        cur = getattr(cur, part, None)
        if cur is None:
            break
        out.append(cur)
    return out


def _block_parts(i: int, block: Any) -> BlockParts:
    parts = BlockParts(index=i, block=block)
    _, parts.attention = _find_child(block, _ATTN_NAMES)
    mixer = getattr(block, "mixer", None)  # one slot for every kind of layer (Nemotron-H)
    if parts.attention is None and mixer is not None:
        kind = type(mixer).__name__.lower()
        if "attention" in kind:
            parts.attention = mixer
    if parts.attention is not None:
        _, parts.attention_out = _find_child(
            parts.attention, ("o_proj", "c_proj", "out_proj", "dense")
        )
    _, parts.mlp = _find_child(block, _MLP_NAMES)
    if (
        parts.mlp is None
        and mixer is not None
        and any(w in type(mixer).__name__.lower() for w in ("moe", "mlp"))
    ):
        parts.mlp = mixer
    if parts.mlp is not None:
        gate = getattr(parts.mlp, "gate", None) or getattr(parts.mlp, "router", None)
        experts = getattr(parts.mlp, "experts", None)
        if gate is not None and experts is None:
            experts = stacked_experts(parts.mlp)
        if gate is not None and experts is not None:
            parts.router, parts.experts = gate, experts
        for mod in parts.mlp.modules():
            _, act = _find_child(mod, _ACT_NAMES)
            if act is not None and all(act is not a for a in parts.mlp_act):
                parts.mlp_act.append(act)
    for name, child in block.named_children():
        lname = name.lower()
        if "norm" in lname or lname.startswith("ln"):
            parts.norms.append((name, child))
        elif child is not parts.attention and child is not parts.mlp:
            _classify_child(parts, child)
    if parts.attention is None:
        _nested_attention(parts)
    return parts


def stacked_experts(moe: Any) -> Any | None:
    """The children of `moe` that hold every expert's weights stacked [experts, out, in].

    JetMoE keeps them in two such children of the MoE block (`input_linear`, `output_linear`)
    beside the router, with no `experts` module: they are gathered in one container (outside
    the model's tree; the modules themselves are the model's) so that the experts are costed
    as experts. None where no child holds such a weight, or their expert counts differ.
    """
    import torch.nn as nn

    held = [
        (name, child)
        for name, child in moe.named_children()
        if any(p.dim() == 3 for p in child.parameters(recurse=False))
    ]
    counts = {int(p.shape[0]) for _, c in held for p in c.parameters(recurse=False) if p.dim() == 3}
    if not held or len(counts) != 1:
        return None
    container = nn.Module()
    for name, child in held:
        container.add_module(name, child)
    return container


def _nested_attention(parts: BlockParts) -> None:
    """Attention one level down, in a wrapper of norms around it (DBRX's `norm_attn_norm`).

    The wrapper was taken for a norm by its name; its own norms take its place.
    """
    for name, child in parts.block.named_children():
        _, nested = _find_child(child, _ATTN_NAMES)
        if nested is None:
            continue
        parts.attention = nested
        _, parts.attention_out = _find_child(nested, ("o_proj", "c_proj", "out_proj", "dense"))
        parts.norms = [(n, c) for n, c in parts.norms if c is not child]
        parts.norms += [
            (f"{name}.{n}", c) for n, c in child.named_children() if "norm" in n.lower()
        ]
        return


def _classify_child(parts: BlockParts, child: Any) -> None:
    """A child not found by name: attention or MLP by its class name, else the token mixer."""
    if not any(True for _ in child.parameters()):
        return  # dropout, activation
    kind = type(child).__name__.lower()
    if parts.attention is None and "attention" in kind:
        parts.attention = child
    elif parts.mlp is None and any(w in kind for w in ("mlp", "moe", "feedforward")):
        parts.mlp = child
    elif parts.mixer is None and any(w in kind for w in ("mamba", "mixer", "recurrent", "ssm")):
        parts.mixer = child


def discover(model: Any) -> Architecture:
    """Locate the parts of `model` that profiling hooks attach to."""
    import torch.nn as nn

    names = {id(m): n for n, m in model.named_modules()}
    vision_tower, projector = vision_modules(model)
    encoders = other_encoders(model)
    skip = {id(m) for m in (vision_tower, *encoders) if m is not None}
    lists = _module_lists(model, skip)
    missing: list[str] = []
    blocks_path, blocks = None, []
    if lists:
        blocks_path, mlist = max(lists, key=lambda nl: len(nl[1]))
        blocks = [_block_parts(i, b) for i, b in enumerate(mlist)]
    else:
        missing.append("decoder blocks")
    arch = Architecture(root=model, blocks_path=blocks_path, blocks=blocks, names=names)
    try:
        arch.embeddings = model.get_input_embeddings()
    except (AttributeError, NotImplementedError):
        missing.append("embeddings")
    with contextlib.suppress(AttributeError, NotImplementedError):
        arch.lm_head = model.get_output_embeddings()
    if arch.lm_head is None:
        missing.append("lm head")
    holder = _blocks_holder(model, blocks_path)
    if holder is not None:
        _, arch.final_norm = _find_child(holder, ("norm", "ln_f", "final_layernorm", "final_norm"))
        _, arch.rotary = _find_child(holder, ("rotary_emb", "rotary_embedding"))
    if arch.final_norm is None:
        missing.append("final norm")
    for b in blocks:
        if b.attention is None:
            missing.append(f"attention of block {b.index}")
        if b.mlp is None:
            missing.append(f"mlp of block {b.index}")
    if vision_tower is not None:
        arch.vision_tower, arch.projector = vision_tower, projector
        vlists = _module_lists(vision_tower, set())
        if vlists:
            arch.vision_blocks = list(max(vlists, key=lambda nl: len(nl[1]))[1])
        if projector is None and not isinstance(vision_tower, nn.Linear):
            missing.append("multi-modal projector")  # a linear tower is its own projector
    if encoders:  # an audio model's projector is the audio's
        arch.other_encoders = encoders
        arch.projector = arch.projector or projector
    arch.missing = missing
    return arch


def _blocks_holder(model: Any, blocks_path: str | None) -> Any:
    if not blocks_path or "." not in blocks_path:
        return model if blocks_path else None
    holder = model
    for part in blocks_path.split(".")[:-1]:
        holder = getattr(holder, part)
    return holder
