"""batch_size: rows per generate call; verified per sample."""

from __future__ import annotations

from infermeter.knobs.base import Knob, parse_int, verify_samples

BATCH_SIZE = Knob(
    "batch_size",
    "rows per generate call",
    "config",
    parse_int("batch_size"),
    verify=verify_samples("batch_size"),
    field="batch_size",
)
