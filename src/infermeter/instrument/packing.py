"""Raw timing records packed for storage: 10 bytes a record, so traces stay small.

Layout (little-endian numpy structured array): module id (uint16), start in microseconds from
the profiler's origin (uint32, 71 minutes of range; longer runs switch to float64 and say so in
the dtype tag), duration in microseconds (float32, ~0.1 us resolution at these scales).
A 30-layer model in standard mode makes ~150 records per decode step: ~1.5 KB per token.
"""

from __future__ import annotations

from typing import Any

import numpy as np

_COMPACT = np.dtype([("mid", "<u2"), ("start_us", "<u4"), ("dur_us", "<f4")])
_WIDE = np.dtype([("mid", "<u2"), ("start_us", "<f8"), ("dur_us", "<f4")])
DTYPES = {"u4": _COMPACT, "f8": _WIDE}


def pack(mids: list[int], starts_ms: list[float], durs_ms: list[float]) -> tuple[str, bytes]:
    """(dtype tag, bytes) of the records."""
    starts_us = np.asarray(starts_ms, dtype=np.float64) * 1e3
    tag = "u4" if starts_us.size == 0 or starts_us.max() < 2**32 - 1 else "f8"
    arr = np.empty(len(mids), dtype=DTYPES[tag])
    arr["mid"] = mids
    arr["start_us"] = np.rint(starts_us) if tag == "u4" else starts_us
    arr["dur_us"] = np.asarray(durs_ms, dtype=np.float64) * 1e3
    return tag, arr.tobytes()


def unpack(tag: str, blob: bytes) -> Any:
    """The structured array back from `pack`."""
    return np.frombuffer(blob, dtype=DTYPES[tag])
