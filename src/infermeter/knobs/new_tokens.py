"""new_tokens: tokens generated per row, exactly (EOS cannot stop early); verified per sample."""

from __future__ import annotations

from infermeter.knobs.base import Knob, check_context, parse_int, verify_samples

NEW_TOKENS = Knob(
    "new_tokens",
    "tokens generated per row, exactly (EOS suppressed until then)",
    "config",
    parse_int("new_tokens"),
    check=check_context("new_tokens"),
    verify=verify_samples("new_tokens"),
    field="new_tokens",
)
