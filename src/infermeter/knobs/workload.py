"""Workload knobs: prompt_tokens, new_tokens (exact: EOS cannot stop early), batch_size.

Each is a RunConfig field; verification reads what the samples actually had.
"""

from __future__ import annotations

from typing import Any

from infermeter.knobs.base import Knob, KnobNotApplied, parse_int


def _verify_samples(attr: str) -> Any:
    def verify(loaded: Any, value: int, result: Any, applied: Any = None) -> dict[str, Any]:
        seen = sorted({getattr(s, attr) for s in result.samples})
        if seen != [value]:
            raise KnobNotApplied(f"{attr}={value} but the samples had {seen}")
        return {attr: value, "samples": len(result.samples)}

    return verify


def _check_context(field: str) -> Any:
    def check(value: int, loaded: Any) -> None:
        from infermeter.errors import UserError

        limit = loaded.info.max_positions
        if limit and value >= limit:
            raise UserError(
                f"{field}={value} does not fit the context of {loaded.info.spec} ({limit})",
                f"use values below {limit}",
            )

    return check


PROMPT_TOKENS = Knob(
    "prompt_tokens",
    "exact prompt length per row, in tokens (chat template included)",
    "config",
    parse_int("prompt_tokens"),
    check=_check_context("prompt_tokens"),
    verify=_verify_samples("prompt_tokens"),
    field="prompt_tokens",
)
NEW_TOKENS = Knob(
    "new_tokens",
    "tokens generated per row, exactly (EOS suppressed until then)",
    "config",
    parse_int("new_tokens"),
    check=_check_context("new_tokens"),
    verify=_verify_samples("new_tokens"),
    field="new_tokens",
)
BATCH_SIZE = Knob(
    "batch_size",
    "rows per generate call",
    "config",
    parse_int("batch_size"),
    verify=_verify_samples("batch_size"),
    field="batch_size",
)
