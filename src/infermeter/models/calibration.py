"""A small fixed input and the quality proxy: what knobs and quantization are checked with.

Two rows of 24 built-in prompt tokens (the same for every call), the float32 logits of one
forward, and the quality proxy that compares two such logits: top-1 agreement of next-token
predictions and the mean KL divergence per position.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from infermeter.workloads.prompts import WorkloadSpec, build_batches

if TYPE_CHECKING:
    from infermeter.models.info import QualityDoc


def calibration_ids(model: Any, tokenizer: Any, rows: int = 2, tokens: int = 24) -> Any:
    """input_ids (rows x tokens) on the model's device, the same for every call."""
    spec = WorkloadSpec(batch_size=rows, prompt_tokens=tokens, chat=False, seed=1234)
    (batch,) = build_batches(tokenizer, spec, 1)
    device = next(model.parameters()).device
    return batch.input_ids.to(device)


def logits(model: Any, ids: Any) -> Any:
    """Logits of one forward (no cache), in float32."""
    import torch

    with torch.inference_mode():
        return model(input_ids=ids, use_cache=False).logits.float()


def quality(full_logits: Any, reduced_logits: Any) -> QualityDoc:
    """Top-1 agreement and mean KL(full || reduced) over every position."""
    import torch

    p = torch.log_softmax(full_logits.float(), dim=-1)
    q = torch.log_softmax(reduced_logits.float().to(p.device), dim=-1)
    agree = (p.argmax(-1) == q.argmax(-1)).float().mean()
    kl = (p.exp() * (p - q)).sum(-1).mean()
    return {"top1_agreement": float(agree), "kl_nats": float(kl)}
