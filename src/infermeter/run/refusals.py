"""Refusals that need only a model's config, made before its weights load.

Why: a new user waited 121 s for a prompt longer than the model's context to be refused, and
56 s for a top-k above its experts: both were checked on the loaded model, though the config
(read in well under a second, for any model a run accepts) holds the answer (issue 59, item 5).
The checks on the loaded model stay: they also see what a config cannot (natural prompts'
lengths under the tokenizer, routers without a top_k).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from infermeter.errors import UserError
from infermeter.models.config_only import config_of
from infermeter.models.info import config_value
from infermeter.run.config import RunConfig


def _ints(values: Iterable[Any]) -> list[int]:
    return [int(v) for v in values if isinstance(v, int | float) and not isinstance(v, bool)]


def refuse_from_config(base: RunConfig, knob_values: dict[str, list[Any]] | None = None) -> None:
    """Refuse (UserError) what the model's config rules out, for the run or every sweep point.

    Args:
        base: the run's (or the sweep's base) configuration.
        knob_values: a sweep's values per knob; their largest prompt and output lengths and
            every top-k are judged (the grid holds the point with both largest lengths).
    """
    knobs = knob_values or {}
    config, name = config_of(base.model)
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    prompts = _ints(knobs.get("prompt_tokens", [base.prompt_tokens]))
    outputs = _ints(knobs.get("new_tokens", [base.new_tokens]))
    limit = config_value(text, "max_position_embeddings", "n_positions")
    if limit and prompts and outputs and max(prompts) + max(outputs) > int(limit):
        raise UserError(
            f"prompt ({max(prompts)} tokens) + --new-tokens {max(outputs)} exceed the context "
            f"of {name} ({int(limit)} positions)",
            f"keep prompt + new tokens <= {int(limit)}",
        )
    top_ks = _ints(knobs.get("top_k", []))
    if not top_ks:
        return
    experts = config_value(text, "num_local_experts", "num_experts", "n_routed_experts")
    if not experts:
        raise UserError(
            f"top_k applies to mixture-of-experts models; {name} is dense",
            "use a MoE model (e.g. tiny-mixtral, tiny-qwen3-moe) or drop this knob",
        )
    over = [k for k in top_ks if k > int(experts)]
    if over:
        raise UserError(
            f"top_k={max(over)} is above the {int(experts)} experts of {name}",
            f"use 1..{int(experts)}",
        )
