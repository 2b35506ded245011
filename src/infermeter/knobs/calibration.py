"""A small fixed input for verifying knobs: two rows of 24 built-in prompt tokens."""

from __future__ import annotations

from collections import Counter
from typing import Any

from infermeter.models.loader import LoadedModel
from infermeter.workloads.prompts import WorkloadSpec, build_batches


def calibration_ids(loaded: LoadedModel, rows: int = 2, tokens: int = 24) -> Any:
    """input_ids (rows x tokens) on the model's device, the same for every call."""
    spec = WorkloadSpec(batch_size=rows, prompt_tokens=tokens, chat=False, seed=1234)
    (batch,) = build_batches(loaded.tokenizer, spec, 1)
    device = next(loaded.model.parameters()).device
    return batch.input_ids.to(device)


def logits(model: Any, ids: Any) -> Any:
    """Logits of one forward (no cache), in float32."""
    import torch

    with torch.inference_mode():
        return model(input_ids=ids, use_cache=False).logits.float()


def executed_ops(model: Any, ids: Any) -> Counter[str]:
    """Names of the aten operations one forward executed, with counts (measured, not assumed)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class _Record(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.ops: Counter[str] = Counter()

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None):
            self.ops[func.overloadpacket.__name__] += 1
            return func(*args, **(kwargs or {}))

    rec = _Record()
    with torch.inference_mode(), rec:
        model(input_ids=ids, use_cache=False)
    return rec.ops
