"""Raw timing records packed for storage, so a run's full trace stays small.

Column-wise (struct of arrays), little-endian: the count (uint32), module ids (uint16), start
times as whole-microsecond deltas from the previous record (int32: records are appended when a
module ends, so a parent comes after its children and its delta is negative), durations in
microseconds (float32); then zlib. Module ids repeat in the same order every step and start
deltas are small, so this compresses well (bytes per token: `benchmarks/overhead.py`).
The tag "soa-z1" names this format, so a later one can be told apart.
"""

from __future__ import annotations

import zlib
from typing import Any, TypedDict

import numpy as np

TAG = "soa-z1"
_RECORD = np.dtype([("mid", "<u2"), ("start_us", "<f8"), ("dur_us", "<f4")])


class PackedRecords(TypedDict):
    """An instrumented run's per-call records as `pack` keeps them.

    `modules` is the table their ids index: one [name, kind, layer] row per timed module.
    """

    dtype: str
    records: bytes
    count: int
    modules: list[list[Any]]


class TraceDoc(PackedRecords):
    """`PackedRecords` placed on the run's timeline.

    `offset_ms` is where the records' zero lies (the model load comes first), so a trace
    export lines them up with the phases.
    """

    offset_ms: float


def pack(mids: list[int], starts_ms: list[float], durs_ms: list[float]) -> tuple[str, bytes]:
    """(format tag, bytes) of the records."""
    n = len(mids)
    start_us = np.rint(np.asarray(starts_ms, dtype=np.float64) * 1e3).astype(np.int64)
    deltas = np.diff(start_us, prepend=0)
    if n and (np.abs(deltas) >= 2**31).any():
        raise ValueError("a gap between records exceeds 35 minutes; cannot pack")
    body = b"".join(
        (
            np.asarray([n], dtype="<u4").tobytes(),
            np.asarray(mids, dtype="<u2").tobytes(),
            deltas.astype("<i4").tobytes(),
            (np.asarray(durs_ms, dtype=np.float64) * 1e3).astype("<f4").tobytes(),
        )
    )
    return TAG, zlib.compress(body, 6)


def unpack(tag: str, blob: bytes) -> Any:
    """Structured array (mid, start_us, dur_us) back from `pack`."""
    if tag != TAG:
        raise ValueError(f"unknown trace format {tag!r}")
    body = zlib.decompress(blob)
    n = int(np.frombuffer(body, "<u4", 1)[0])
    off = 4
    mids = np.frombuffer(body, "<u2", n, off)
    off += 2 * n
    deltas = np.frombuffer(body, "<i4", n, off)
    off += 4 * n
    durs = np.frombuffer(body, "<f4", n, off)
    out = np.empty(n, dtype=_RECORD)
    out["mid"] = mids
    out["start_us"] = np.cumsum(deltas.astype(np.int64))
    out["dur_us"] = durs
    return out
