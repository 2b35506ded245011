"""Results of a run: raw samples kept, statistics always recomputed from them.

`RunResult.to_json()` writes the file shape of docs/design.md ("Files it writes"): `meta`,
`summary` (one row per configuration with mean/std/p50/p90/p99 of every metric) and
`all_samples` (one row per sample).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypedDict, cast

from infermeter.instrument.cost import InstrumentCost
from infermeter.instrument.packing import TraceDoc
from infermeter.knobs.evidence import KnobCheckDoc
from infermeter.measure.device import DeviceDoc
from infermeter.measure.energy.attribution import EnergyDoc, PowerDoc, SampleEnergyDoc
from infermeter.measure.memory import SampleMemoryDoc
from infermeter.measure.stats import Summary, SummaryDoc, summarize
from infermeter.models.info import ModelInfoDoc
from infermeter.run.environment import VersionsDoc
from infermeter.run.load_docs import (
    BatchDoc,
    ClientDoc,
    DriftDoc,
    FailedRequestDoc,
    LoadEnergyDoc,
    ServerMetricsDoc,
    ServerMetricsSummaryDoc,
    StepRowDoc,
    StepStateDoc,
    TimelineRowDoc,
)

if TYPE_CHECKING:  # run/config.py loads the model presets; a stored run needs none of it
    from collections.abc import Mapping, Sequence

    import pandas as pd

    from infermeter.instrument.collectives import CollectiveRowDoc, CommunicationRowDoc
    from infermeter.instrument.probes import (
        ActivationRowDoc,
        AttentionHeadRowDoc,
        AttentionRowDoc,
        KillRowDoc,
        RoutingRowDoc,
    )
    from infermeter.instrument.tables import LayerRowDoc, MoeLoadRowDoc, PartRowDoc
    from infermeter.measure.timer import SectionRowDoc
    from infermeter.run.config import RunConfig, RunConfigDoc
    from infermeter.run.slo import SLOReportDoc, SLORowDoc
    from infermeter.run.speculation import SpeculationDoc
    from infermeter.workloads.traffic import TrafficDoc

#: Per-sample metrics summarised in every run, with their units in their names.
METRICS = (
    "ttft_ms",
    "tpot_ms",
    "decode_ms",
    "total_ms",
    "tokens_per_s",
    "decode_tokens_per_s",
    "rss_peak_mib",
    "peak_allocated_mib",
    "page_faults_per_step",
    "energy_j",
    "prefill_j",
    "decode_j",
    "mean_power_w",
    "j_per_token",
    "j_per_prompt_token",
    "j_per_decode_token",
)

#: How a metric is named for people, and its unit: the CLI's table and the report's (a report
#: showed the raw keys, `ttft_ms`, issue 59). In the order the tables list them.
METRIC_LABELS: dict[str, tuple[str, str]] = {
    "ttft_ms": ("prefill (TTFT)", "ms"),
    "tpot_ms": ("decode per token (TPOT)", "ms"),
    "itl_ms": ("inter-token latency", "ms"),
    "decode_ms": ("decode total", "ms"),
    "total_ms": ("total", "ms"),
    "tokens_per_s": ("throughput", "tok/s"),
    "decode_tokens_per_s": ("decode throughput", "tok/s"),
    "rss_peak_mib": ("peak RSS (process)", "MiB"),
    "peak_allocated_mib": ("peak allocated (device)", "MiB"),
    "page_faults_per_step": ("page faults per decode step", "faults"),
    "energy_j": ("energy per sample", "J"),
    "prefill_j": ("energy: prefill", "J"),
    "decode_j": ("energy: decode", "J"),
    "mean_power_w": ("mean power", "W"),
    "j_per_token": ("energy per generated token", "J/tok"),
    "j_per_prompt_token": ("energy per prompt token (prefill)", "J/tok"),
    "j_per_decode_token": ("energy per decode token", "J/tok"),
}

#: Energy metrics: None (not 0) when no source measured the sample; see run/energy.py.
ENERGY_METRICS = METRICS[-7:]


def _energy_metric(name: str, doc: str) -> property:
    def read(self: SampleResult) -> float | None:
        # (a metric's name, not a literal key: what the doc holds there is a float or None)
        return cast("float | None", self.energy.get(name)) if self.energy else None

    return property(read, doc=f"{doc}; None when no energy source measured the sample.")


#: What a run is: registered and measuring, done, stopped by an error or Ctrl-C, or found
#: `running` after its process had gone.
RunStatus = Literal["running", "finished", "failed", "crashed", "terminated"]


#: A knob's value as a run keeps it: a number, a name ("int8", "inf"), a flag, a list of layer
#: indices, or None (not set).
KnobValue = int | float | str | bool | None | list[int]


class MetricsDoc(TypedDict):
    """A sample's metrics (`METRICS`), by name; None where not measured (energy, a GPU's)."""

    ttft_ms: float
    tpot_ms: float
    decode_ms: float
    total_ms: float
    tokens_per_s: float
    decode_tokens_per_s: float
    rss_peak_mib: float | None
    peak_allocated_mib: float | None
    page_faults_per_step: float | None
    energy_j: float | None
    prefill_j: float | None
    decode_j: float | None
    mean_power_w: float | None
    j_per_token: float | None
    j_per_prompt_token: float | None
    j_per_decode_token: float | None


class SampleRowDoc(MetricsDoc):
    """One `all_samples` row of a run's JSON document: the sample, its metrics, its tokens."""

    sample_id: int
    warmup: bool
    config: dict[str, KnobValue]
    prefill_tokens: int
    vision_tokens: int
    new_tokens: int
    batch_size: int
    start_ms: float
    step_ms: list[float]
    memory: SampleMemoryDoc
    energy: SampleEnergyDoc | None
    output_text: list[str]


class _SpanDoc(TypedDict):
    name: str
    start_ms: float
    duration_ms: float


class SpanDoc(_SpanDoc, total=False):
    """A phase on a run's timeline, in ms from the run's start.

    Load, to_device, or a sample's prefill or decode (then with the sample's index and whether
    it was a warm-up).
    """

    sample: int
    warmup: bool


class RequestEnergyDoc(TypedDict):
    """A load request's energy (J; None where no source measured it)."""

    sample_id: int
    energy_j: float | None
    prefill_j: float | None
    decode_j: float | None


class ServerTimingDoc(TypedDict):
    """A load request as the server timed it (llama.cpp's `timings`); None where not given."""

    sample_id: int
    prefill_ms: float | None
    decode_ms_per_token: float | None


class _LoadSummaryDoc(TypedDict):
    requests: int
    failed: int
    wall_s: float
    throughput_rps: float
    output_tokens_per_s: float
    queue_ms: SummaryDoc
    ttft_ms: SummaryDoc
    ttst_ms: SummaryDoc
    tpot_ms: SummaryDoc
    e2e_ms: SummaryDoc
    itl_ms: SummaryDoc


class LoadSummaryDoc(_LoadSummaryDoc, total=False):
    """A load's summary (serving/load.py: `summarize_load` and what a run adds to it).

    Throughput and each latency's `SummaryDoc` are always there; a run adds its SLOs, warm-up,
    client, drift, latencies from the send, token counts and the server's timings; a
    continuous-batching run its batch state, a run with a power source its energy, a scraped
    server its metrics; a simulated one (`load predict`) what it could not simulate. The
    client's, drift's, batch's, energy's and metrics' documents are serving's own, kept as
    written (docs/serving.md).
    """

    slo: SLOReportDoc
    warmup_requests: int
    warmup_note: str | None
    client: ClientDoc
    drift: DriftDoc | None
    #: latencies from the send (`send_lag_ms`: the client's lateness) and the HTTP phases
    from_send: dict[str, SummaryDoc]
    tokens: TokenCountsDoc
    #: the server's own prefill and decode per token (llama.cpp's `timings`)
    server_timing: dict[str, SummaryDoc]
    batch: BatchDoc
    energy: LoadEnergyDoc
    server_metrics: ServerMetricsSummaryDoc
    not_simulated: int


class TokenCountsDoc(TypedDict):
    """Streamed tokens against the server's own counts, prompt tokens meant against sent."""

    #: completions whose only token was the EOS (no text streamed)
    eos_only: int
    server_counted_output: int
    output_differs: int
    output_extra_median: float | None
    server_counted_prompt: int
    #: a chat template's tokens on each prompt
    prompt_extra_median: float | None
    prompt_extra_max: int | None
    prompt_extra_min: int | None


class LoadCheckDoc(TypedDict, total=False):
    """What a load run keeps beside its samples (`checks["load"]`, serving/load.py).

    The summary, timeline, failures, workload, steps, server metrics and step state are the
    load document's own parts (docs/serving.md), declared in run/load_docs.py (the workload's
    in workloads/traffic.py); None where the run had none (no workload file, no scheduler
    steps, no `--metrics-url`).
    """

    summary: LoadSummaryDoc
    timeline: list[TimelineRowDoc]
    queue_ms: list[float]
    failed: list[FailedRequestDoc]
    workload: TrafficDoc | None
    steps: list[StepRowDoc] | None
    request_energy: list[RequestEnergyDoc]
    server_metrics: ServerMetricsDoc | None
    step_state: StepStateDoc | None
    server_timing: list[ServerTimingDoc] | None


class ChecksDoc(TypedDict, total=False):
    """`RunResult.checks`: per knob, the evidence that its value took effect; a load's record.

    Keyed by the knob's name (knobs/registry.py), as a sweep files them, so each knob's key is
    here (a test holds the two together); `speculation` is what a speculative run recorded,
    `cache` the KV cache a profile used (the cache knob's evidence when swept), `load` a load
    run's record.
    """

    load: LoadCheckDoc
    speculation: SpeculationDoc
    cache: KnobCheckDoc
    active_layers: KnobCheckDoc
    attn_implementation: KnobCheckDoc
    batch_size: KnobCheckDoc
    compile: KnobCheckDoc
    decoding: KnobCheckDoc
    dtype: KnobCheckDoc
    experts_implementation: KnobCheckDoc
    new_tokens: KnobCheckDoc
    prompt_kind: KnobCheckDoc
    prompt_tokens: KnobCheckDoc
    routing: KnobCheckDoc
    top_k: KnobCheckDoc
    vision_tokens: KnobCheckDoc


class LayerEnergyRowDoc(TypedDict):
    """A timed module's share of its phase's energy (`layer_energy`, run/energy.py)."""

    name: str
    kind: str
    layer: int | None
    phase: str
    pct_forward: float
    energy_j: float
    #: "apportioned": the phase's energy times the module's share of forward time
    basis: str


class LayersDoc(TypedDict, total=False):
    """`RunResult.layers`: a standard or deep run's per-layer tables, by name.

    Each a list of rows as the profiler's frames give them (None where a frame held NaN);
    only the tables a run measured are there. `live_layers` is the block rows of a run still
    running (the store drops it when the run finishes).
    """

    layers: list[LayerRowDoc]
    parts: list[PartRowDoc]
    activations: list[ActivationRowDoc]
    attention: list[AttentionRowDoc]
    attention_heads: list[AttentionHeadRowDoc]
    mlp_kill: list[KillRowDoc]
    moe_routing: list[RoutingRowDoc]
    moe_load: list[MoeLoadRowDoc]
    sections: list[SectionRowDoc]
    layer_energy: list[LayerEnergyRowDoc]
    collectives: list[CollectiveRowDoc]
    communication: list[CommunicationRowDoc]
    live_layers: list[LayerRowDoc]


def layer_table(layers: LayersDoc, name: str) -> list[Mapping[str, Any]]:
    """A per-layer table's rows by a name known only at run time ([] where not measured).

    For readers that walk tables and columns by name (a figure's panels, the CSV files); a
    reader of one table names it (`layers.get("parts")`) and gets its row type.
    """
    return cast("list[Mapping[str, Any]]", layers.get(name, []))


class RunMetaDoc(TypedDict):
    """A run document's `meta`: what ran, where, with which settings, and how it went."""

    run_id: str | None
    status: RunStatus
    error: str | None
    model: str | None
    model_info: ModelInfoDoc
    device: DeviceDoc
    versions: VersionsDoc
    created: str
    config: RunConfigDoc
    phases: dict[str, float]
    notes: list[str]
    energy: EnergyDoc | None
    sweep_id: str | None
    #: per knob, the evidence that its value took effect (knobs/base.py); a load run's `load`
    checks: ChecksDoc
    instrument_cost: dict[str, Any] | None


class RunSummaryRowDoc(TypedDict):
    """A run document's summary row: each metric's `SummaryDoc`, the run's knobs and SLOs."""

    config: dict[str, KnobValue]
    samples: int
    warmup_samples: int
    #: metrics whose spread is too large to trust the mean alone
    noisy: list[str]
    ttft_ms: SummaryDoc
    tpot_ms: SummaryDoc
    itl_ms: SummaryDoc
    decode_ms: SummaryDoc
    total_ms: SummaryDoc
    tokens_per_s: SummaryDoc
    decode_tokens_per_s: SummaryDoc
    rss_peak_mib: SummaryDoc
    peak_allocated_mib: SummaryDoc
    page_faults_per_step: SummaryDoc
    energy_j: SummaryDoc
    prefill_j: SummaryDoc
    decode_j: SummaryDoc
    mean_power_w: SummaryDoc
    j_per_token: SummaryDoc
    j_per_prompt_token: SummaryDoc
    j_per_decode_token: SummaryDoc
    slo: SLOReportDoc


class _RunJsonDoc(TypedDict):
    meta: RunMetaDoc
    summary: list[RunSummaryRowDoc]
    all_samples: list[SampleRowDoc]


class RunJsonDoc(_RunJsonDoc, total=False):
    """`RunResult.to_json`: the file shape of docs/design.md (meta, summary, all_samples).

    Standard and deep runs add their per-layer tables (`layers`), runs with a power source
    their readings (`power`).
    """

    layers: LayersDoc
    power: PowerDoc


class SampleDoc(TypedDict):
    """`RunResult.sample_dicts`: a sample's fields as the store keeps them."""

    index: int
    warmup: bool
    batch_size: int
    prompt_tokens: int
    new_tokens: int
    vision_tokens: int
    start_ms: float
    ttft_ms: float
    step_ms: tuple[float, ...]
    memory: SampleMemoryDoc
    output_text: tuple[str, ...]
    prompt_text: tuple[str, ...]
    energy: SampleEnergyDoc | None


class ResultStore(Protocol):
    """Anything that keeps a finished result and gives it an id (`infermeter.Store`)."""

    def save(self, result: RunResult) -> str:
        """Store `result`; return its id."""
        ...


@dataclass(frozen=True)
class SampleResult:
    """One measured (or warm-up) generation.

    Times in ms: `ttft_ms` from the generate call to the first token, `step_ms` every later
    inter-token latency, `tpot_ms` their mean, `decode_ms` first to last token, `total_ms` call
    to last token. `start_ms` places the sample on the run's timeline.
    """

    index: int
    warmup: bool
    batch_size: int
    prompt_tokens: int
    new_tokens: int
    vision_tokens: int
    start_ms: float
    ttft_ms: float
    step_ms: tuple[float, ...]
    memory: SampleMemoryDoc
    output_text: tuple[str, ...] = ()
    prompt_text: tuple[str, ...] = ()
    energy: SampleEnergyDoc | None = None

    energy_j = _energy_metric("energy_j", "J from the generate call to the last token")
    prefill_j = _energy_metric("prefill_j", "J during the TTFT window")
    decode_j = _energy_metric("decode_j", "J from the first to the last token")
    mean_power_w = _energy_metric("mean_power_w", "mean W over the sample")
    j_per_token = _energy_metric("j_per_token", "energy_j per generated token (all rows)")
    j_per_prompt_token = _energy_metric("j_per_prompt_token", "prefill_j per prompt token")
    j_per_decode_token = _energy_metric("j_per_decode_token", "decode_j per token after the first")

    @property
    def decode_ms(self) -> float:
        """First to last token."""
        return float(sum(self.step_ms))

    @property
    def total_ms(self) -> float:
        """Call to last token: TTFT plus decode."""
        return self.ttft_ms + self.decode_ms

    @property
    def tpot_ms(self) -> float:
        """Mean time per output token after the first; nan with a single token."""
        return self.decode_ms / len(self.step_ms) if self.step_ms else math.nan

    @property
    def tokens_per_s(self) -> float:
        """Generated tokens per second across the batch, over the whole call."""
        return self.batch_size * self.new_tokens / (self.total_ms / 1e3) if self.total_ms else 0.0

    @property
    def decode_tokens_per_s(self) -> float:
        """Tokens per second across the batch during decode only."""
        if not self.step_ms or not self.decode_ms:
            return math.nan
        return self.batch_size * len(self.step_ms) / (self.decode_ms / 1e3)

    @property
    def rss_peak_mib(self) -> float | None:
        """Process resident-set peak during the sample."""
        return self.memory.get("rss_peak_mib")

    @property
    def peak_allocated_mib(self) -> float | None:
        """Accelerator allocator peak during the sample (None on CPU)."""
        return self.memory.get("peak_allocated_mib")

    @property
    def page_faults_per_step(self) -> float | None:
        """Minor page faults of the process per decode step (None where not counted).

        A high count on a CPU means the KV cache is mapped afresh each step (measure/faults.py).
        """
        faults = self.memory.get("page_faults_decode")
        if faults is None or not self.step_ms:
            return None
        return float(faults) / len(self.step_ms)

    def metrics(self) -> MetricsDoc:
        """Every metric of METRICS, by name."""
        return cast(MetricsDoc, {m: getattr(self, m) for m in METRICS})

    def timeline(self) -> list[SpanDoc]:
        """Phases of this sample on the run's timeline (ms)."""
        return [
            {"name": "prefill", "start_ms": self.start_ms, "duration_ms": self.ttft_ms},
            {
                "name": "decode",
                "start_ms": self.start_ms + self.ttft_ms,
                "duration_ms": self.decode_ms,
            },
        ]


@dataclass
class RunResult:
    """A run as measured: config, model, device, phases and every sample (warm-up included)."""

    run_id: str | None
    config: RunConfigDoc
    knobs: dict[str, KnobValue]
    model_info: ModelInfoDoc
    device: DeviceDoc
    versions: VersionsDoc
    created: str
    phases: dict[str, float] = field(default_factory=dict)
    samples: list[SampleResult] = field(default_factory=list)
    status: RunStatus = "running"
    error: str | None = None
    notes: list[str] = field(default_factory=list)
    layers: LayersDoc = field(default_factory=lambda: LayersDoc())
    #: Packed per-call records of an instrumented run, for trace export (not in `to_json`).
    trace: TraceDoc | None = None
    #: Energy of the run (see run/energy.py): sources, methods, gaps, totals, or why none.
    energy: EnergyDoc | None = None
    #: The sweep this run is a point of.
    sweep_id: str | None = None
    #: Per knob: the evidence that its value took effect (see knobs/base.py).
    checks: ChecksDoc = field(default_factory=lambda: ChecksDoc())
    #: Power readings on the run's timeline: {"domains", "t_ms", "joules"} (cumulative J).
    power: PowerDoc | None = None
    #: What the profiler's instruments cost this run (instrument/cost.py), None without hooks.
    instrument_cost: InstrumentCost | None = None

    @property
    def measured(self) -> list[SampleResult]:
        """Samples that count (warm-up excluded)."""
        return [s for s in self.samples if not s.warmup]

    def summary(self) -> dict[str, Summary]:
        """Summary of every metric over the measured samples, plus pooled inter-token latency."""
        out = {m: summarize(getattr(s, m) for s in self.measured) for m in METRICS}
        out["itl_ms"] = summarize(x for s in self.measured for x in s.step_ms)
        return out

    def run_config(self) -> RunConfig | None:
        """The stored `config` as the `RunConfig` it was made from; None for a load run.

        A load run has a load spec, not a RunConfig (`config["load"]`). User prompts are kept
        by count only, so they come back as None (`prompts_source` says where they were from).
        """
        from infermeter.run.config import RunConfig

        return RunConfig.from_doc(self.config)

    def load_summary(self) -> LoadSummaryDoc | None:
        """A load run's summary (throughput, latencies, SLOs, client, ...); None for a profile."""
        load = self.checks.get("load")
        return load.get("summary") if load is not None else None

    def slo_report(self, slos: Sequence[Sequence[str | float]] | None = None) -> SLOReportDoc:
        """SLO attainment and goodput over the measured samples ({} without SLOs).

        Each row of a sample is a request with the sample's TTFT, TPOT and total (`e2e_ms`);
        goodput is over the samples' summed wall time. `slos` default: the run's config.
        """
        from infermeter.run.slo import slo_report

        load = self.load_summary()
        if load is not None and slos is None:  # a load run: goodput over its wall time
            slo = load.get("slo")  # absent in a summary stored before SLOs were kept
            return slo.copy() if slo else {}
        pairs = tuple((str(n), float(b)) for n, b in (slos or self.config.get("slos") or ()))
        rows: list[SLORowDoc] = [
            {"ttft_ms": s.ttft_ms, "tpot_ms": s.tpot_ms, "e2e_ms": s.total_ms, "error": None}
            for s in self.measured
            for _ in range(s.batch_size)
        ]
        wall_s = sum(s.total_ms for s in self.measured) / 1e3
        return slo_report(rows, pairs, wall_s) if rows else {}

    def noisy_metrics(self) -> list[str]:
        """Names of metrics whose sample-to-sample spread is too large to trust the mean alone.

        Pooled inter-token latency is left out: its spread within a sample is real (steps slow
        down as the context grows), not noise.
        """
        return [k for k, v in self.summary().items() if k != "itl_ms" and v.noisy]

    def timeline(self) -> list[SpanDoc]:
        """Run-level phases then each sample's prefill and decode, in ms from the run's start."""
        rows: list[SpanDoc] = []
        t = 0.0
        for name in ("load", "to_device"):
            if f"{name}_ms" in self.phases:
                rows.append({"name": name, "start_ms": t, "duration_ms": self.phases[f"{name}_ms"]})
                t += self.phases[f"{name}_ms"]
        for s in self.samples:
            for ph in s.timeline():
                rows.append({**ph, "sample": s.index, "warmup": s.warmup})
        return rows

    def sample_row(self, s: SampleResult) -> SampleRowDoc:
        """One `all_samples` row of the run's JSON document."""
        return {
            "sample_id": s.index,
            "warmup": s.warmup,
            "config": self.knobs,
            "prefill_tokens": s.prompt_tokens,
            "vision_tokens": s.vision_tokens,
            "new_tokens": s.new_tokens,
            "batch_size": s.batch_size,
            "start_ms": s.start_ms,
            **s.metrics(),
            "step_ms": list(s.step_ms),
            "memory": s.memory,
            "energy": s.energy,
            "output_text": list(s.output_text),
        }

    def to_json(self) -> RunJsonDoc:
        """The run as its JSON document (meta, summary, all_samples)."""
        summary = {k: v.to_dict() for k, v in self.summary().items()}
        row = cast(
            RunSummaryRowDoc,
            {
                "config": self.knobs,
                "samples": len(self.measured),
                "warmup_samples": len(self.samples) - len(self.measured),
                "noisy": self.noisy_metrics(),
                **summary,
                "slo": self.slo_report(),
            },
        )
        doc: RunJsonDoc = {
            "meta": {
                "run_id": self.run_id,
                "status": self.status,
                "error": self.error,
                "model": self.model_info.get("spec"),
                "model_info": self.model_info,
                "device": self.device,
                "versions": self.versions,
                "created": self.created,
                "config": self.config,
                "phases": self.phases,
                "notes": self.notes,
                "energy": self.energy,
                "sweep_id": self.sweep_id,
                "checks": self.checks,
                "instrument_cost": (
                    self.instrument_cost.to_dict() if self.instrument_cost else None
                ),
            },
            "summary": [row],
            "all_samples": [self.sample_row(s) for s in self.samples],
        }
        if self.layers:
            doc["layers"] = self.layers  # standard/deep modes: per-layer tables as records
        if self.power is not None:
            doc["power"] = self.power
        return doc

    def to_frame(self) -> pd.DataFrame:
        """One row per sample (warm-up included, flagged): tokens, latencies, rates, memory.

        A pandas DataFrame, for notebooks; `summary()` has the medians with their intervals.
        """
        import pandas as pd

        rows = []
        for s in self.samples:
            row: dict[str, object] = dict(self.sample_row(s))
            for key in ("config", "step_ms", "memory", "energy", "output_text"):
                row.pop(key, None)
            rows.append(row)
        return pd.DataFrame(rows)

    def __repr__(self) -> str:
        """One line: id, model, status, samples and the headline medians (not every sample)."""
        measured = self.measured
        head = [
            f"run_id={self.run_id!r}",
            f"model={self.model_info.get('spec')!r}",
            f"status={self.status!r}",
            f"samples={len(measured)} (+{len(self.samples) - len(measured)} warm-up)",
        ]
        if measured:
            summary = self.summary()
            head += [
                f"ttft_ms_median={summary['ttft_ms'].median:.4g}",
                f"tpot_ms_median={summary['tpot_ms'].median:.4g}",
            ]
        if self.layers:
            head.append(f"tables={sorted(self.layers)}")
        return f"RunResult({', '.join(head)})"

    def _repr_html_(self) -> str:
        """A notebook's view: the one-line summary, then the samples table."""
        from html import escape

        return f"<p>{escape(repr(self))}</p>{self.to_frame()._repr_html_()}"

    def layer_tables(self) -> dict[str, pd.DataFrame]:
        """Per-layer tables (standard and deep modes) as pandas DataFrames."""
        import pandas as pd

        return {name: pd.DataFrame(rows) for name, rows in self.layers.items()}

    def save(self, store: ResultStore) -> str:
        """Keep this run in `store` (an `infermeter.Store`); return its id."""
        return store.save(self)

    def sample_dicts(self) -> list[SampleDoc]:
        """Samples as plain dicts (for the store)."""
        return [cast(SampleDoc, asdict(s)) for s in self.samples]
