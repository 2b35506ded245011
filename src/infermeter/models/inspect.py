"""What a model is made of, read from its real module tree: `infermeter inspect`.

`structure` lists modules to a chosen depth with parameter counts, dtypes, devices and shares
of the total, like torchinfo but without a forward pass. Runs of identical siblings (a list of
decoder blocks) collapse into one row ("model.layers.0-29: LlamaDecoderLayer x30") whose
children are those of the first member, each counted once ("each"). A parameter shared by two
modules (tied input and output embeddings) counts once, for the first module that holds it,
and the other says it is tied, so the top-level rows add up to the model's total.

`moe_layers` describes each mixture-of-experts block as architecture discovery and the cost
census see it: router, routed experts, top-k, shared experts, one expert's width, and how the
routing weights are normalised (from the config).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from infermeter.errors import UserError


@dataclass
class ModuleRow:
    """One row of the structure tree."""

    name: str
    type: str
    depth: int
    params: int
    share: float
    dtypes: list[str]
    devices: list[str]
    repeat: int = 1  # collapsed identical siblings (the row's params are their sum)
    each: bool = False  # a child of a collapsed row, shown for its first member
    tied_to: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)


def _owners(model: Any) -> tuple[dict[int, str], dict[str, list[str]]]:
    """Each parameter's owner (first module holding it directly) and each module's ties."""
    owner: dict[int, str] = {}
    ties: dict[str, list[str]] = {}
    for name, module in model.named_modules(remove_duplicate=False):
        for p in module.parameters(recurse=False):
            if id(p) in owner and owner[id(p)] != name:
                ties.setdefault(name, []).append(owner[id(p)])
            else:
                owner.setdefault(id(p), name)
    return owner, ties


def _counted(module: Any, prefix: str, owner: dict[int, str]) -> int:
    """Parameters of `module` (recursively) that it or its descendants own."""
    total = 0
    for p in module.parameters():
        holder = owner.get(id(p), "")
        if holder == prefix or holder.startswith(prefix + ".") or not prefix:
            total += p.numel()
    return total


def _signature(module: Any) -> tuple[str, tuple[tuple[str, tuple[int, ...]], ...]]:
    return type(module).__name__, tuple((n, tuple(p.shape)) for n, p in module.named_parameters())


def structure(model: Any, depth: int = 3) -> list[ModuleRow]:
    """The module tree to `depth` levels below the model, repeats collapsed."""
    if depth < 1:
        raise UserError(f"--depth {depth} is below 1", "use 1 or more")
    owner, ties = _owners(model)
    total = sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
    rows: list[ModuleRow] = []

    def row(name: str, module: Any, level: int, repeat: int = 1, each: bool = False) -> None:
        params = _counted(module, name, owner) * repeat
        rows.append(
            ModuleRow(
                name=name or "(model)",
                type=type(module).__name__,
                depth=level,
                params=params,
                share=params / total if total else 0.0,
                dtypes=sorted({str(p.dtype).replace("torch.", "") for p in module.parameters()}),
                devices=sorted({str(p.device) for p in module.parameters()}),
                repeat=repeat,
                each=each,
                tied_to=ties.get(name, []),
            )
        )

    def walk(name: str, module: Any, level: int, each: bool) -> None:
        if level > depth:
            return
        children = list(module.named_children())
        i = 0
        while i < len(children):
            child_name, child = children[i]
            j = i + 1
            sig = _signature(child)
            while j < len(children) and child_name.isdigit() and _signature(children[j][1]) == sig:
                j += 1
            full = f"{name}.{child_name}" if name else child_name
            if j - i > 1:
                last = children[j - 1][0]
                label = f"{name}.{child_name}-{last}" if name else f"{child_name}-{last}"
                row(full, child, level, repeat=j - i, each=each)
                rows[-1].name = label
                walk(full, child, level + 1, True)
            else:
                row(full, child, level, each=each)
                walk(full, child, level + 1, each)
            i = j

    row("", model, 0)
    walk("", model, 1, False)
    return rows


def moe_layers(model: Any) -> list[dict[str, Any]]:
    """Per mixture-of-experts block: router, experts, top-k, shared experts, width, normalising.

    Raises:
        UserError: the model has no mixture-of-experts block.
    """
    from infermeter.models.architecture import discover
    from infermeter.models.census import census_of

    arch, census = discover(model), census_of(model)
    text = model.config.get_text_config() if hasattr(model.config, "get_text_config") else None
    norm = getattr(text, "norm_topk_prob", None)
    out = []
    for b in arch.blocks:
        if not b.is_moe:
            continue
        layer = census.layers[b.index] if b.index < len(census.layers) else None
        shared = (
            [n for n, _ in b.mlp.named_children() if "shared" in n] if b.mlp is not None else []
        )
        out.append(
            {
                "layer": b.index,
                "router": arch.name_of(b.router),
                "router_type": type(b.router).__name__,
                "experts": layer.experts if layer else None,
                "top_k": census.top_k,
                "shared_experts": shared,
                "expert_width": getattr(text, "moe_intermediate_size", None)
                or _expert_width(b.experts),
                "routing_normalised": (
                    "top-k weights renormalised to sum to 1"
                    if norm
                    else "softmax over all experts, top-k kept as they are"
                    if norm is False
                    else "not stated in the config"
                ),
            }
        )
    if not out:
        raise UserError(
            "this model has no mixture-of-experts layer (no router found)",
            "inspect a MoE model, e.g. --model tiny-qwen3-moe",
        )
    return out


def _expert_width(experts: Any) -> int | None:
    """One expert's intermediate width, from its weights (stacked 3-D or a list of MLPs)."""
    if experts is None:
        return None
    shapes = [tuple(p.shape) for p in experts.parameters()]
    stacked = [s for s in shapes if len(s) == 3]
    if stacked:
        return int(min(min(s[1], s[2]) for s in stacked))
    flat = [s for s in shapes if len(s) == 2]
    return int(min(min(s) for s in flat)) if flat else None


__all__ = ["ModuleRow", "moe_layers", "structure"]
