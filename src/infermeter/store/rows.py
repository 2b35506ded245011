"""Row mapping: results to rows and back, and the packed float64 blobs of steps and power.

Per-step decode times and power readings are packed as little-endian float64 bytes (an exact
round trip): 1,000 steps are 8 KB, not 1,000 rows.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any, cast

from infermeter.instrument.cost import InstrumentCost
from infermeter.store.schema import (
    POWER_CHUNK,
    PowerSamplesRow,
    RunRow,
    SampleRow,
    StepsRow,
    TraceRow,
)

if TYPE_CHECKING:  # annotations only: run.results imports numpy, slow for `runs list`
    from infermeter.instrument.packing import TraceDoc
    from infermeter.measure.device import DeviceDoc
    from infermeter.measure.energy.attribution import EnergyDoc, PowerDoc, SampleEnergyDoc
    from infermeter.run.config import RunConfigDoc
    from infermeter.run.environment import VersionsDoc
    from infermeter.run.results import LayersDoc, RunResult, RunStatus, SampleResult


def pack(values: tuple[float, ...] | list[float]) -> bytes:
    """Floats as little-endian float64 bytes."""
    return struct.pack(f"<{len(values)}d", *values)


def unpack(blob: bytes, count: int) -> tuple[float, ...]:
    """`count` float64 values back from `pack`'s bytes."""
    return struct.unpack(f"<{count}d", blob) if count else ()


def trace_dict(t: TraceRow | None) -> TraceDoc | None:
    """A run's packed per-call records from their row (None when not instrumented)."""
    if t is None:
        return None
    return {
        "dtype": t.dtype,
        "count": t.count,
        "offset_ms": t.offset_ms,
        "modules": t.modules,
        "records": t.records,
    }


def mib_keys(value: Any) -> Any:
    """`value` with every dict key ending `_mb` renamed `_mib`, at any depth.

    Schema versions up to 7 wrote memory in MiB under `_mb` names (`rss_peak_mb`, a model's
    `weights_mb`, a device's `total_memory_mb`); version 8 says `_mib`. Every such key meant
    MiB, so stored JSON written before is read under today's names, without rewriting it.
    """
    if isinstance(value, dict):
        return {
            (k[:-3] + "_mib" if isinstance(k, str) and k.endswith("_mb") else k): mib_keys(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [mib_keys(v) for v in value]
    return value


def sample_from_row(r: SampleRow) -> SampleResult:
    """A stored sample with its decode steps unpacked."""
    from infermeter.run.results import SampleResult

    steps = unpack(r.steps.step_ms, r.steps.count) if r.steps else ()
    return SampleResult(
        index=r.index,
        warmup=r.warmup,
        batch_size=r.batch_size,
        prompt_tokens=r.prompt_tokens,
        new_tokens=r.new_tokens,
        vision_tokens=r.vision_tokens,
        start_ms=r.start_ms,
        ttft_ms=r.ttft_ms,
        step_ms=tuple(steps),
        memory=mib_keys(r.memory or {}),
        output_text=tuple(r.output_text or ()),
        prompt_text=tuple(r.prompt_text or ()),
        energy=cast("SampleEnergyDoc | None", r.energy),
    )


def sample_row(smp: SampleResult) -> SampleRow:
    """A sample as its row, decode steps packed."""
    sample = SampleRow(
        index=smp.index,
        warmup=smp.warmup,
        batch_size=smp.batch_size,
        prompt_tokens=smp.prompt_tokens,
        new_tokens=smp.new_tokens,
        vision_tokens=smp.vision_tokens,
        start_ms=smp.start_ms,
        ttft_ms=smp.ttft_ms,
        # derived columns, for SQL filters only (the exact steps are packed below); SQLite
        # stores NaN as NULL, which these NOT NULL columns refuse: a NaN step counts as 0 here
        decode_ms=_finite(smp.decode_ms, sum(x for x in smp.step_ms if x == x)),
        total_ms=_finite(smp.total_ms, smp.ttft_ms + sum(x for x in smp.step_ms if x == x)),
        rss_peak_mib=smp.rss_peak_mib,
        peak_allocated_mib=smp.peak_allocated_mib,
        memory=smp.memory,
        output_text=list(smp.output_text),
        prompt_text=list(smp.prompt_text),
        energy=cast("dict[str, Any] | None", smp.energy),  # a JSON column
    )
    sample.steps = StepsRow(count=len(smp.step_ms), step_ms=pack(smp.step_ms))
    return sample


def _finite(value: float, instead: float) -> float:
    """`value`, or `instead` when it is NaN (infinities are stored as they are)."""
    return instead if value != value else value


def power_rows(power: PowerDoc) -> list[PowerSamplesRow]:
    """The sampler's readings in batches of POWER_CHUNK rows, packed as float64."""
    t, joules = power["t_ms"], power["joules"]
    rows = []
    for chunk, start in enumerate(range(0, len(t), POWER_CHUNK)):
        part_t = t[start : start + POWER_CHUNK]
        part_j = [x for reading in joules[start : start + POWER_CHUNK] for x in reading]
        rows.append(
            PowerSamplesRow(
                chunk=chunk,
                count=len(part_t),
                source=power["source"],
                domains=list(power["domains"]),
                t_ms=pack(part_t),
                joules=pack(part_j),
            )
        )
    return rows


def power_from_rows(rows: list[PowerSamplesRow]) -> PowerDoc | None:
    """Readings back from their chunks (None for runs without energy)."""
    if not rows:
        return None
    n_dom = len(rows[0].domains)
    t: list[float] = []
    joules: list[list[float]] = []
    for r in rows:
        t.extend(unpack(r.t_ms, r.count))
        flat = unpack(r.joules, r.count * n_dom)
        joules.extend(list(flat[i : i + n_dom]) for i in range(0, len(flat), n_dom))
    return {"source": rows[0].source, "domains": list(rows[0].domains), "t_ms": t, "joules": joules}


def trace_row(t: TraceDoc) -> TraceRow:
    """A run's packed per-call records as their row."""
    return TraceRow(
        dtype=t["dtype"],
        count=t["count"],
        offset_ms=t["offset_ms"],
        modules=t["modules"],
        records=t["records"],
    )


def run_from_row(row: RunRow) -> RunResult:
    """A stored run with everything it holds (samples, tables, trace, energy, power)."""
    from infermeter.run.results import RunResult

    return RunResult(
        run_id=row.id,
        config=cast("RunConfigDoc", row.config),
        knobs=row.knobs,
        model_info=mib_keys(row.model_info),
        device=cast("DeviceDoc", mib_keys(row.device)),
        versions=cast("VersionsDoc", row.versions),
        created=row.created,
        phases=row.phases or {},
        samples=[sample_from_row(r) for r in row.samples],
        status=cast("RunStatus", row.status),
        error=row.error,
        notes=row.notes or [],
        layers=cast("LayersDoc", {ls.table: mib_keys(ls.rows) for ls in row.layer_stats}),
        trace=trace_dict(row.trace),
        energy=cast("EnergyDoc | None", row.energy),
        power=power_from_rows(row.power),
        sweep_id=row.sweep_id,
        checks=mib_keys(row.checks or {}),
        instrument_cost=InstrumentCost(**row.instrument_cost) if row.instrument_cost else None,
    )
