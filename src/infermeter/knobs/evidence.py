"""What a knob files as evidence that its value took effect: `KnobCheckDoc`.

A run keeps it under the knob's name in `RunResult.checks` (run/results.py: `ChecksDoc`). One
document for every knob, each knob writing its own keys, because a sweep files them by the
knob's name (run/sweep.py) and a reader asks for one knob's by name; the type still holds each
key to the value that knob writes. Apart from base.py so that the run's documents name it
without importing the model loader.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict, final

if TYPE_CHECKING:
    from infermeter.models.info import QualityDoc


@final  # so a reader tells the two apart by a key (`"tokens" in observed`)
class RoutingSplitDoc(TypedDict):
    """Tokens per routing path (fast, cached, learned) over every layer: knobs/routing.py."""

    tokens: dict[str, int]
    percent: dict[str, float]
    per_layer: list[dict[str, int]]
    learned_router_calls: int
    table_entries: list[int]
    cache_utilization: float


@final
class LearnedRoutingDoc(TypedDict):
    """Routing left to the learned router: nothing was split (`routing: learned`)."""

    routing: str


#: what the routing knob saw during the run: the split over its paths, or learned routing
RoutingObservedDoc = RoutingSplitDoc | LearnedRoutingDoc


# `class` is a Python keyword: the cache's keys are declared by name
_CacheEvidence = TypedDict(
    "_CacheEvidence",
    {"class": str | None, "layer_classes": list[str] | None, "kv_bytes": int | None},
    total=False,
)


class KnobCheckDoc(_CacheEvidence, total=False):
    """A knob's evidence (its `verify`), or why there is none (`error`).

    Each knob writes its own keys (the comments say whose); a sweep adds what a model knob saw
    during the run (`during_run`). The cache's (`class`, `layer_classes`, `kv_bytes`, and the
    run's own `form` and `kv_mib`) are what `profile` records of the KV cache it used.
    """

    #: the knob's value did not take effect, or its check failed: why
    error: str
    #: what a model knob saw while the run ran (routing: tokens per path)
    during_run: RoutingObservedDoc
    # batch_size, new_tokens, prompt_tokens: every sample had the value
    batch_size: int
    new_tokens: int
    prompt_tokens: int
    samples: int
    # active_layers: the blocks that ran, in the order they were ranked
    blocks_run: list[int]
    order: str
    # active_layers, dtype, routing: the quality proxy against the reference's logits
    top1_agreement: float
    kl_nats: float
    # attn_implementation
    sdpa_calls: int
    softmax_calls: int
    # cache (with the keys above): the form asked for and the cache's size
    form: str
    kv_mib: float
    # compile
    compiled: bool
    mode: str
    cuda_graphs: bool
    cold_first_call_ms: float
    warm_call_ms: float | None
    cold_over_warm: float | None
    # decoding
    decoding: str
    target_forwards: int
    tokens_per_target_forward: float | None
    # dtype
    stored_weight_dtypes: dict[str, int]
    weight_mib: float
    method: str | None
    quality_reference: str | None
    parameter_dtypes: list[str]
    # experts_implementation
    grouped_mm_calls: int
    bmm_calls: int
    # top_k
    experts_per_token: int
    # prompt_kind
    prompt_kind: str
    repeats: int
    # routing
    routing: str
    config: dict[str, float | int | str | bool | None]
    split: RoutingSplitDoc
    topk_overlap_on_shortcut_tokens: float | None
    # vision_tokens
    vision_tokens: int
    image_size: int


def with_quality(evidence: KnobCheckDoc, quality: QualityDoc) -> KnobCheckDoc:
    """`evidence` with the quality proxy's figures beside its own (the same dict)."""
    evidence["top1_agreement"] = quality["top1_agreement"]
    evidence["kl_nats"] = quality["kl_nats"]
    return evidence
