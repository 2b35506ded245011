"""A small fixed input for verifying knobs (`models/calibration.py`), and executed operations."""

from __future__ import annotations

from collections import Counter
from typing import Any

from infermeter.models import calibration as _calibration
from infermeter.models.calibration import logits, quality
from infermeter.models.loader import LoadedModel

__all__ = ["calibration_ids", "executed_ops", "logits", "quality"]


def calibration_ids(loaded: LoadedModel, rows: int = 2, tokens: int = 24) -> Any:
    """input_ids (rows x tokens) on the model's device, the same for every call."""
    return _calibration.calibration_ids(loaded.model, loaded.tokenizer, rows, tokens)


def executed_ops(model: Any, ids: Any) -> Counter[str]:
    """Names of the aten operations one forward executed, with counts (measured, not assumed)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class _Record(TorchDispatchMode):  # type: ignore[misc]  # torch is read as Any
        def __init__(self) -> None:
            super().__init__()
            self.ops: Counter[str] = Counter()

        def __torch_dispatch__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            self.ops[func.overloadpacket.__name__] += 1
            return func(*args, **(kwargs or {}))

    rec = _Record()
    with torch.inference_mode(), rec:
        model(input_ids=ids, use_cache=False)
    return rec.ops
