"""Every module's input and output shapes and dtypes in one prefill and one decode step.

`infermeter inspect shapes` answers "what flows where" without a debugger: forward hooks on
every module record the tensors going in and out (first call per phase: a module called twice
in a step, such as a shared norm, keeps its first shapes and counts its calls), for a prefill
of the given prompt and the decode step that follows it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from infermeter.models.forward_args import cache_of, with_cache


@dataclass
class ShapeRow:
    """One module's tensors in one phase."""

    name: str
    type: str
    phase: str
    depth: int
    calls: int = 0
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)


def _describe(value: Any, out: list[str], limit: int = 6) -> None:
    """'[1, 16, 256] float32' for every tensor in `value` (nested tuples, lists, dicts)."""
    import torch

    if len(out) >= limit:
        return
    if isinstance(value, torch.Tensor):
        dtype = str(value.dtype).replace("torch.", "")
        out.append(f"[{', '.join(str(d) for d in value.shape)}] {dtype}")
    elif isinstance(value, (tuple, list)):
        for v in value:
            _describe(v, out, limit)
    elif isinstance(value, dict):
        for v in value.values():
            _describe(v, out, limit)
    elif hasattr(value, "to_tuple"):  # transformers' ModelOutput
        _describe(value.to_tuple(), out, limit)


def record_shapes(model: Any, input_ids: Any) -> list[ShapeRow]:
    """Rows for every module (named_modules order), prefill then one decode step."""
    import torch

    rows: dict[tuple[str, str], ShapeRow] = {}
    phase = ["prefill"]
    handles = []
    for name, module in model.named_modules():
        label = name or "(model)"

        def hook(mod: Any, args: Any, kwargs: Any, out: Any, label: str = label) -> None:
            key = (label, phase[0])
            row = rows.get(key)
            if row is None:
                depth = 0 if label == "(model)" else label.count(".") + 1
                row = rows[key] = ShapeRow(label, type(mod).__name__, phase[0], depth)
                _describe((args, kwargs), row.inputs)
                _describe(out, row.outputs)
            row.calls += 1

        handles.append(module.register_forward_hook(hook, with_kwargs=True))
    try:
        with torch.inference_mode():
            out = model(input_ids=input_ids, use_cache=True)
            phase[0] = "decode"
            next_id = out.logits[:, -1:].argmax(-1)
            model(input_ids=next_id, **with_cache(model, cache_of(out), use_cache=True))
    finally:
        for h in handles:
            h.remove()
    order = {name or "(model)": i for i, (name, _) in enumerate(model.named_modules())}
    return sorted(rows.values(), key=lambda r: (r.phase != "prefill", order.get(r.name, 0)))


__all__ = ["ShapeRow", "record_shapes"]
