"""The communication roofline of a tensor-parallel run, here and on other interconnects.

What its collectives cost on this machine, and what the same collectives would cost on the
interconnects users choose between.

A ring all-reduce of S bytes over N processes moves 2 (N - 1) / N x S through each link, so it
takes 2 (N - 1) / N x S / bandwidth + latency; an all-gather moves half of that. The run's own
figures (rank 0's clock, `instrument/collectives.py`) give the bus bandwidth it attained, and
every interconnect of `INTERCONNECTS` the time per forward the same calls would take there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from infermeter.analysis.timemodel import ALLREDUCE_LATENCY_S

if TYPE_CHECKING:  # annotations only: the run's module imports numpy
    from infermeter.run.results import RunResult

#: name -> (bytes/s per direction, source)
INTERCONNECTS: dict[str, tuple[float, str]] = {
    "pcie4-x16": (32e9, "PCI Express 4.0 x16: 16 GT/s x 16 lanes, about 32 GB/s per direction"),
    "pcie5-x16": (64e9, "PCI Express 5.0 x16: 32 GT/s x 16 lanes, about 64 GB/s per direction"),
    "nvlink3": (300e9, "NVIDIA A100 datasheet: NVLink 3, 600 GB/s in both directions"),
    "nvlink4": (450e9, "NVIDIA H100 SXM datasheet: NVLink 4, 900 GB/s in both directions"),
}

#: share of a ring all-reduce's bytes an operation moves per link
TRAFFIC = {"all_reduce": 1.0, "all_gather": 0.5}


def ring_seconds(op: str, nbytes: float, processes: int, bytes_per_s: float) -> float:
    """One collective of `nbytes` over `processes` on a link of `bytes_per_s` (ring model)."""
    if processes < 2:
        return 0.0
    moved = TRAFFIC.get(op, 1.0) * 2 * (processes - 1) / processes * nbytes
    return moved / bytes_per_s + ALLREDUCE_LATENCY_S


def communication_roofline(run: RunResult) -> dict[str, Any] | None:
    """Per phase: measured collectives and time per forward, the bus bandwidth attained.

    Beside them, the modelled time per forward on each interconnect; None for a run without
    collectives.
    """
    phases = (run.layers or {}).get("communication")
    calls = (run.layers or {}).get("collectives")
    if not phases or not calls:
        return None
    tp = (run.knobs or {}).get("tp")
    n = int(tp) if isinstance(tp, (int, float)) and tp else 2  # processes the calls spanned
    out = []
    for ph in phases:
        forwards = ph["forwards"] or 1
        mine = [c for c in calls if c["phase"] == ph["phase"]]
        moved = sum(TRAFFIC.get(c["op"], 1.0) * 2 * (n - 1) / n * c["bytes"] for c in mine)
        comm_s = ph["comm_ms"] / 1e3
        modelled = {}
        for name, (bw, _) in INTERCONNECTS.items():
            secs = sum(c["count"] * ring_seconds(c["op"], c["bytes_per_call"], n, bw) for c in mine)
            modelled[name] = secs / forwards * 1e3
        out.append(
            {
                "phase": ph["phase"],
                "collectives_per_forward": ph["collectives"] / forwards,
                "bytes_per_forward": ph["bytes"] / forwards,
                "measured_comm_ms_per_forward": ph["comm_ms"] / forwards,
                "measured_compute_ms_per_forward": ph["compute_ms"] / forwards,
                "comm_share": ph["comm_share"],
                "attained_bus_bytes_per_s": moved / comm_s if comm_s > 0 else None,
                "modelled_comm_ms_per_forward": modelled,
            }
        )
    return {
        "processes": n,
        "model": "ring: 2 (N-1)/N x bytes / bandwidth + "
        f"{ALLREDUCE_LATENCY_S * 1e6:.0f} us per collective (all-gather: half the bytes)",
        "interconnects": {
            k: {"bytes_per_s": bw, "source": src} for k, (bw, src) in INTERCONNECTS.items()
        },
        "phases": out,
    }
