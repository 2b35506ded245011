"""Measured efficiency curves of a device: GEMM time by shape, copy time by size, op overhead.

Why curves and not one peak: a matmul of 32 rows reaches a fraction of the FLOP/s of a
4096-row one (on this project's 2-core CPU, 4x less), so a model linear in FLOPs is off by
10% on prefill lengths it was not fitted on. `infermeter calibrate` times GEMMs at rows 1..4096
for the widths a model uses (or a generic set), copies from 64 KiB to 256 MiB, attention at
prefill and decode shapes, and what one framework operation costs; `analysis/timemodel.py`
turns every layer's GEMMs into time through these points.

Kept free of torch (plain numbers and interpolation) so analysis can read stored curves.
Interpolation is piecewise linear in log-log space; beyond the measured range a GEMM's time is
extrapolated at the rate of the nearest point (time proportional to work), which is what a
large GEMM does once it reaches its plateau.
"""

from __future__ import annotations

import bisect
import itertools
import math
from dataclasses import asdict, dataclass, field
from typing import Any


def _loglog(xs: list[float], ys: list[float], x: float) -> float:
    """Piecewise-linear interpolation of log y over log x; proportional beyond the ends.

    The times are read as never falling with size (a running maximum): more rows or more bytes
    cannot take less time, so a measured dip is noise. On a busy machine a 16-row GEMM once
    measured slower than the 64-row one, and `compare` predicted a 64-token prompt 6.7x faster
    than a 16-token one.
    """
    ys = list(itertools.accumulate(ys, max))
    if len(xs) == 1:
        return ys[0] * x / xs[0]
    if x <= xs[0]:
        return ys[0]  # fewer rows than the smallest measured cost no less (fixed costs)
    if x >= xs[-1]:
        return ys[-1] * x / xs[-1]
    i = bisect.bisect_right(xs, x) - 1
    lx0, lx1 = math.log(xs[i]), math.log(xs[i + 1])
    ly0, ly1 = math.log(ys[i]), math.log(ys[i + 1])
    return math.exp(ly0 + (ly1 - ly0) * (math.log(x) - lx0) / (lx1 - lx0))


@dataclass
class Curves:
    """Measured times of one dtype on one device.

    Attributes:
        dtype: the dtype the GEMMs and attention ran in.
        gemm: {"k", "n", "rows": [...], "seconds": [...]} per measured width, one call each.
        copy: {"bytes": [...], "seconds": [...]}: one copy of that many bytes (read + write).
        growth: no longer measured, kept so that older calibrations load: one growing
            `torch.cat` depended on the calibrating process's allocation history (0.23 ms or
            2.9 ms for the same 4 MiB), which `page_fault_seconds` and the time model's rule
            for glibc's mmap threshold now account for (measure/faults.py).
        page_fault_seconds: one minor page fault (a first write to fresh pages less a
            second write), 0 where not measured.
        attention: {"heads", "head_dim", "prefill": {"tokens", "seconds"},
            "decode": {"keys", "seconds"}}: one SDPA call of batch 1.
        op_seconds: one framework operation of a model's forward beyond its GEMMs and
            attention (norms, activations, views, the Python around them), measured on a real
            forward of a small built-in model (see bench/curves.py).
        generate_first_seconds: what `generate` adds to the prefill forward before the first
            token (inputs, cache, logits processing), on the same model.
        generate_step_seconds: what `generate` adds to each decode step's forward.
        reference: the model those three were measured on, with its operation counts.
        source: how they were measured.
    """

    dtype: str
    gemm: list[dict[str, Any]] = field(default_factory=list)
    copy: dict[str, list[float]] = field(default_factory=dict)
    growth: dict[str, list[float]] = field(default_factory=dict)
    attention: dict[str, Any] = field(default_factory=dict)
    op_seconds: float = 0.0
    generate_first_seconds: float = 0.0
    generate_step_seconds: float = 0.0
    page_fault_seconds: float = 0.0
    reference: dict[str, Any] = field(default_factory=dict)
    source: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON and the store."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Curves:
        """Inverse of to_dict."""
        return cls(
            dtype=d["dtype"],
            gemm=list(d.get("gemm", [])),
            copy=dict(d.get("copy", {})),
            growth=dict(d.get("growth", {})),
            attention=dict(d.get("attention", {})),
            op_seconds=float(d.get("op_seconds", 0.0)),
            generate_first_seconds=float(d.get("generate_first_seconds", 0.0)),
            generate_step_seconds=float(d.get("generate_step_seconds", 0.0)),
            page_fault_seconds=float(d.get("page_fault_seconds", 0.0)),
            reference=dict(d.get("reference", {})),
            source=str(d.get("source", "")),
        )

    def gemm_seconds(self, rows: float, k: int, n: int) -> float:
        """Time of one (rows x k) @ (k x n) matmul.

        The measured width whose k and n are closest (in log distance) is read at `rows`, then
        scaled by the ratio of work (k x n) to that width's: a GEMM twice as wide does twice
        the work at the same efficiency. Exact when this width was measured.
        """
        if not self.gemm:
            raise ValueError("no GEMM curve measured")
        rows = max(rows, 1.0)

        def distance(c: dict[str, Any]) -> float:
            return abs(math.log(c["k"] / k)) + abs(math.log(c["n"] / n))

        best = min(self.gemm, key=distance)
        t = _loglog(best["rows"], best["seconds"], rows)
        return float(t * (k * n) / (best["k"] * best["n"]))

    def gemm_flop_per_s(self, rows: float, k: int, n: int) -> float:
        """Achieved FLOP/s of that matmul (2 x rows x k x n FLOPs over its time)."""
        return 2 * rows * k * n / self.gemm_seconds(rows, k, n)

    def copy_seconds(self, nbytes: float) -> float:
        """Time to move `nbytes` (read plus write counted) at the measured size's bandwidth."""
        xs, ys = self.copy.get("bytes", []), self.copy.get("seconds", [])
        if not xs:
            raise ValueError("no copy curve measured")
        return _loglog(xs, ys, max(nbytes, 1.0))

    def bandwidth(self, nbytes: float) -> float:
        """Bytes/s a copy of `nbytes` attains."""
        return nbytes / self.copy_seconds(nbytes)

    def attention_seconds(
        self, batch: int, heads: int, head_dim: int, queries: int, keys: int
    ) -> float | None:
        """One attention call (SDPA) of `queries` new tokens over `keys` keys, or None.

        A prefill (queries == keys) reads the prefill curve at its length; a decode step
        (one query) the decode curve at its keys; anything between (a prefill after cached
        tokens) the prefill curve scaled by keys / queries. Batch and heads x head dim scale the
        measured call linearly.
        """
        att = self.attention
        if not att:
            return None
        scale = batch * heads * head_dim / (att["heads"] * att["head_dim"])
        if queries == 1 and att.get("decode"):
            d = att["decode"]
            return float(scale * _loglog(d["keys"], d["seconds"], keys))
        p = att["prefill"]
        return float(scale * _loglog(p["tokens"], p["seconds"], queries) * max(keys / queries, 1.0))

    def masked_attention_seconds(
        self, heads: int, head_dim: int, queries: int, keys: int
    ) -> float | None:
        """One SDPA call in which every query scores every key under an explicit mask, or None.

        transformers' continuous batching packs a step's requests into one sequence and hides
        other requests' keys with a mask, so the call does queries x keys scores whatever the
        requests are. Read off the prefill curve at the causal length with as many scores
        (sqrt(2 x queries x keys)), never below one query over the same keys; past the longest
        length measured, as its square (a linear extrapolation made an 8 x 256-token packed
        prefill's attention a third of what it took).
        """
        att = self.attention
        if not att or not att.get("prefill"):
            return None
        scale = heads * head_dim / (att["heads"] * att["head_dim"])
        p = att["prefill"]
        length = math.sqrt(2.0 * queries * keys)
        if length > p["tokens"][-1]:  # past the longest measured: scores grow as length^2
            t = max(p["seconds"]) * (length / p["tokens"][-1]) ** 2
        else:
            t = _loglog(p["tokens"], p["seconds"], length)
        if att.get("decode"):
            d = att["decode"]
            t = max(t, _loglog(d["keys"], d["seconds"], keys))
        return float(scale * t)

    def summary(self) -> dict[str, Any]:
        """The figures a person reads: FLOP/s at 1, 32 and 4096 rows of the widest GEMM, etc."""
        out: dict[str, Any] = {"dtype": self.dtype, "op_us": self.op_seconds * 1e6}
        if self.gemm:
            widest = max(self.gemm, key=lambda c: c["k"] * c["n"])
            k, n = widest["k"], widest["n"]
            out["gemm_width"] = [k, n]
            out["gemm_flop_per_s"] = {r: self.gemm_flop_per_s(r, k, n) for r in (1, 32, 4096)}
        if self.copy.get("bytes"):
            out["copy_bytes_per_s"] = {
                b: self.bandwidth(b) for b in (self.copy["bytes"][0], self.copy["bytes"][-1])
            }
        return out


def curves_of(details: dict[str, Any] | None) -> dict[str, Curves]:
    """The curves kept in a `Ceilings.details`, by dtype (empty when none were measured)."""
    raw = (details or {}).get("curves") or {}
    return {dt: Curves.from_dict(c) for dt, c in raw.items()}
