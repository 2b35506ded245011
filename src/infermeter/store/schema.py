"""SQLAlchemy 2 schema of the run store (docs/design.md, "The store").

JSON columns hold shapes that vary (config, model info, memory details); real columns hold what
people filter or sort on (model, status, created, phase times). Per-step decode times are packed
as little-endian float64 bytes (an exact round trip): 1,000 steps are 8 KB, not 1,000 rows.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    Float,
    ForeignKey,
    Integer,
    LargeBinary,
    String,
    Text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

#: Bumped whenever a table or column changes; a newer database is refused, not misread.
SCHEMA_VERSION = 9

#: Columns added since version 1, so an older database is upgraded in place (no data lost).
ADDED_COLUMNS = {
    2: [
        ("runs", "energy", "JSON"),
        ("runs", "checks", "JSON"),
        ("samples", "energy", "JSON"),
        ("sweeps", "spec", "JSON"),
    ],
    5: [("progress", "steps", "JSON")],
    7: [
        ("progress", "host", "VARCHAR(255)"),
        ("progress", "pid", "INTEGER"),
        ("progress", "pid_started", "FLOAT"),
    ],
    9: [("runs", "instrument_cost", "JSON")],
}

#: Columns renamed since version 1 (table, old name, new name): units in the names from v3.
RENAMED_COLUMNS = {
    3: [
        ("ceilings", "flops", "flop_per_s"),
        ("ceilings", "bandwidth", "bandwidth_bytes_per_s"),
    ],
    # memory in MiB says so (`_mib`); keys inside stored JSON are renamed as they are read
    # (`rows.mib_keys`), so a version-7 database reads the same
    8: [
        ("samples", "rss_peak_mb", "rss_peak_mib"),
        ("samples", "peak_allocated_mb", "peak_allocated_mib"),
    ],
}


class Base(DeclarativeBase):
    """Declarative base of all tables."""


class Meta(Base):
    """Key/value facts about the database itself (schema version)."""

    __tablename__ = "meta"
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class SweepRow(Base):
    """A grid of runs over knob values, stored together."""

    __tablename__ = "sweeps"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    knobs: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created: Mapped[str] = mapped_column(String(40))
    #: model, base configuration and knob grid as given (for resuming and for the JSON).
    spec: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)


class RunRow(Base):
    """One profiled configuration."""

    __tablename__ = "runs"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    sweep_id: Mapped[str | None] = mapped_column(ForeignKey("sweeps.id", ondelete="SET NULL"))
    status: Mapped[str] = mapped_column(String(16), index=True)
    model_spec: Mapped[str] = mapped_column(String(500), index=True)
    model_info: Mapped[dict[str, Any]] = mapped_column(JSON)
    config: Mapped[dict[str, Any]] = mapped_column(JSON)
    knobs: Mapped[dict[str, Any]] = mapped_column(JSON)
    mode: Mapped[str] = mapped_column(String(16))
    device: Mapped[dict[str, Any]] = mapped_column(JSON)
    versions: Mapped[dict[str, Any]] = mapped_column(JSON)
    phases: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    notes: Mapped[list[Any]] = mapped_column(JSON, default=list)
    created: Mapped[str] = mapped_column(String(40), index=True)
    finished: Mapped[str | None] = mapped_column(String(40))
    error: Mapped[str | None] = mapped_column(Text)
    host: Mapped[str] = mapped_column(String(255))
    pid: Mapped[int] = mapped_column(Integer)
    pid_started: Mapped[float] = mapped_column(Float)
    energy: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    checks: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    instrument_cost: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    samples: Mapped[list[SampleRow]] = relationship(
        back_populates="run", cascade="all, delete-orphan", order_by="SampleRow.index"
    )
    layer_stats: Mapped[list[LayerStatsRow]] = relationship(
        back_populates="run", cascade="all, delete-orphan", order_by="LayerStatsRow.id"
    )
    trace: Mapped[TraceRow | None] = relationship(
        back_populates="run", cascade="all, delete-orphan", uselist=False
    )
    power: Mapped[list[PowerSamplesRow]] = relationship(
        back_populates="run", cascade="all, delete-orphan", order_by="PowerSamplesRow.chunk"
    )


class SampleRow(Base):
    """One generation of a run (warm-up samples kept and flagged)."""

    __tablename__ = "samples"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    index: Mapped[int] = mapped_column(Integer)
    warmup: Mapped[bool] = mapped_column(Boolean)
    batch_size: Mapped[int] = mapped_column(Integer)
    prompt_tokens: Mapped[int] = mapped_column(Integer)
    new_tokens: Mapped[int] = mapped_column(Integer)
    vision_tokens: Mapped[int] = mapped_column(Integer, default=0)
    start_ms: Mapped[float] = mapped_column(Float)
    ttft_ms: Mapped[float] = mapped_column(Float)
    decode_ms: Mapped[float] = mapped_column(Float)
    total_ms: Mapped[float] = mapped_column(Float)
    rss_peak_mib: Mapped[float | None] = mapped_column(Float)
    peak_allocated_mib: Mapped[float | None] = mapped_column(Float)
    memory: Mapped[dict[str, Any]] = mapped_column(JSON)
    output_text: Mapped[list[Any]] = mapped_column(JSON, default=list)
    prompt_text: Mapped[list[Any]] = mapped_column(JSON, default=list)
    energy: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    run: Mapped[RunRow] = relationship(back_populates="samples")
    steps: Mapped[StepsRow | None] = relationship(
        back_populates="sample", cascade="all, delete-orphan", uselist=False
    )


class StepsRow(Base):
    """Every inter-token latency of a sample, packed as float64."""

    __tablename__ = "steps"
    sample_id: Mapped[int] = mapped_column(
        ForeignKey("samples.id", ondelete="CASCADE"), primary_key=True
    )
    count: Mapped[int] = mapped_column(Integer)
    step_ms: Mapped[bytes] = mapped_column(LargeBinary)
    sample: Mapped[SampleRow] = relationship(back_populates="steps")


class LayerStatsRow(Base):
    """One per-layer table of a run (standard/deep modes): layers, parts, activations, ...

    Rows are per layer and phase (time, calls, activation/attention/MoE statistics), kept as a
    JSON list per table: they are always read together, and their columns vary by mode.
    """

    __tablename__ = "layer_stats"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    table: Mapped[str] = mapped_column(String(64))
    rows: Mapped[list[Any]] = mapped_column(JSON)
    run: Mapped[RunRow] = relationship(back_populates="layer_stats")


class TraceRow(Base):
    """Every timed call of an instrumented run, packed and compressed, for trace export."""

    __tablename__ = "traces"
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    dtype: Mapped[str] = mapped_column(String(8))
    count: Mapped[int] = mapped_column(Integer)
    offset_ms: Mapped[float] = mapped_column(Float)
    modules: Mapped[list[Any]] = mapped_column(JSON)
    records: Mapped[bytes] = mapped_column(LargeBinary)
    run: Mapped[RunRow] = relationship(back_populates="trace")


class PowerSamplesRow(Base):
    """A batch of power-sampler readings: times (ms on the run's timeline) and cumulative J.

    Readings are written in chunks of up to `POWER_CHUNK` (one row each), packed as float64:
    `joules` is count x len(domains), row-major.
    """

    __tablename__ = "power_samples"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    chunk: Mapped[int] = mapped_column(Integer)
    count: Mapped[int] = mapped_column(Integer)
    source: Mapped[str] = mapped_column(String(64))
    domains: Mapped[list[Any]] = mapped_column(JSON)
    t_ms: Mapped[bytes] = mapped_column(LargeBinary)
    joules: Mapped[bytes] = mapped_column(LargeBinary)
    run: Mapped[RunRow] = relationship(back_populates="power")


#: Readings per power_samples row.
POWER_CHUNK = 1024


class CeilingsRow(Base):
    """Ceilings measured by `infermeter calibrate` on one device of one host."""

    __tablename__ = "ceilings"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    device: Mapped[str] = mapped_column(String(255), index=True)
    host: Mapped[str] = mapped_column(String(255))
    #: peak FLOP/s per dtype name
    flop_per_s: Mapped[dict[str, Any]] = mapped_column(JSON)
    bandwidth_bytes_per_s: Mapped[float | None] = mapped_column(Float)
    source: Mapped[str] = mapped_column(Text)
    details: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created: Mapped[str] = mapped_column(String(40))


class PredictionRow(Base):
    """One `infermeter predict` document (model, hardware, workload and every figure)."""

    __tablename__ = "predictions"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    model_spec: Mapped[str] = mapped_column(String(500), index=True)
    hardware: Mapped[str] = mapped_column(String(255))
    doc: Mapped[dict[str, Any]] = mapped_column(JSON)
    created: Mapped[str] = mapped_column(String(40), index=True)


class ProgressRow(Base):
    """Where a profile in progress is, from its start: the live page's progress line.

    Written before the run is registered too (while the model loads). One row per profile,
    replaced as it advances, deleted at its end. Added in schema 4 (a new table, which
    `create_all` makes in an older database).
    """

    __tablename__ = "progress"
    key: Mapped[str] = mapped_column(String(32), primary_key=True)
    run_id: Mapped[str | None] = mapped_column(String(32))
    model: Mapped[str] = mapped_column(String(500))
    #: load, compile, warmup, sample or done
    stage: Mapped[str] = mapped_column(String(16))
    done: Mapped[int] = mapped_column(Integer)
    total: Mapped[int] = mapped_column(Integer)
    #: tokens generated so far in this profile (measured and warm-up samples)
    tokens: Mapped[int] = mapped_column(Integer, default=0)
    updated: Mapped[str] = mapped_column(String(40))
    #: the sample being generated, as it goes (schema 5): {"tokens", "of", "ttft_ms",
    #: "step_ms" (its latest steps)}; None between samples
    steps: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    #: the process writing it (schema 7): a row whose process is gone is stale (SIGKILL, disk
    #: full, a double SIGTERM left 23 of them on the live page after 24 kills)
    host: Mapped[str | None] = mapped_column(String(255), nullable=True)
    pid: Mapped[int | None] = mapped_column(Integer, nullable=True)
    pid_started: Mapped[float | None] = mapped_column(Float, nullable=True)
