"""prompt_tokens: exact prompt length per row, chat template included; verified per sample."""

from __future__ import annotations

from infermeter.knobs.base import Knob, check_context, parse_int, verify_samples

PROMPT_TOKENS = Knob(
    "prompt_tokens",
    "exact prompt length per row, in tokens (chat template included)",
    "config",
    parse_int("prompt_tokens"),
    check=check_context("prompt_tokens"),
    verify=verify_samples("prompt_tokens"),
    field="prompt_tokens",
)
