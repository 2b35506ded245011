"""The parts of a stored load run's record (`checks["load"]`), typed key by key.

Why here, in `run`: a stored run's `checks` is `run/results.py`'s `ChecksDoc`, and a lower layer
cannot name a higher one's types, so the documents `serving` writes (the client's self-check
and verdict, the server's drift, the batch's steps, energy, scraped metrics) are declared in
this layer and `serving` fills them. Each writer is named beside its document; the load tests
hold a real run's parts to these keys.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict


class AddedDoc(TypedDict):
    """The latency the client added at one share of its ceiling (serving/selfcheck.py `Added`)."""

    share_of_ceiling: float
    rate_rps: float
    requests: int
    ttft_ms_p50: float
    ttft_ms_p90: float
    itl_ms_p50: float
    itl_ms_p90: float
    #: how late the client sent its requests (p99, ms after their scheduled time)
    send_lag_ms_p99: float


class SelfCheckDoc(TypedDict):
    """The client's ceiling and added latency on this host, measured before the run."""

    tokens_per_request: int
    ceiling_rps: float
    ceiling_tokens_per_s: float
    client_cores_at_ceiling: float
    server_cores_at_ceiling: float
    added: Sequence[AddedDoc]


class ClientVerdictDoc(TypedDict):
    """The self-check held against the run (serving/selfcheck.py `ClientVerdict`)."""

    cores: float
    offered_share_of_ceiling: float
    delivered_share_of_ceiling: float
    #: the client's added latency as a share of the run's median TTFT and ITL
    ttft_share: float
    itl_share: float
    #: the warnings a user must see (empty when the client kept up)
    flagged: Sequence[str]


class _ClientDoc(TypedDict):
    #: CPU cores the client's process used while it measured (NaN in process)
    cores: float
    selfcheck: SelfCheckDoc | None
    verdict: ClientVerdictDoc | None


class ClientDoc(_ClientDoc, total=False):
    """What the client cost (serving/load.py `_add_client`); the lines where it self-checked."""

    selfcheck_line: str
    line: str


class DriftDoc(TypedDict):
    """Whether the server changed speed during the run (serving/drift.py `Drift`)."""

    #: "server" (its own decode ms per token) or "client" (TPOT as measured)
    source: str
    requests: int
    first_ms: float
    last_ms: float
    #: the first and last quarters' median 95% intervals, ms
    first_ci_ms: Sequence[float]
    last_ci_ms: Sequence[float]
    p_value: float
    moved: bool
    #: last quarter's median over the first's
    ratio: float
    line: str


class _BatchDoc(TypedDict):
    steps: int


class BatchDoc(_BatchDoc, total=False):
    """What the continuous batch did (serving/batch_state.py `summarize_steps`).

    Only `steps` when no step was recorded; a figure the installed transformers does not expose
    is None (and named in the step state's `missing`).
    """

    step_ms_p50: float
    batch_requests_mean: float | None
    batch_requests_max: int | None
    kv_used_pct_max: float | None
    kv_used_pct_p50: float | None
    #: share of the run's time with the KV cache at least 95% full
    kv_full_time_pct: float | None
    #: share of the run's time with a request waiting
    waiting_time_pct: float | None
    prefill_tokens: int
    decode_tokens: int
    offloads: int


class _StepRowDoc(TypedDict):
    #: the step's start from the run's first arrival
    t_ms: float
    #: the forward's time
    step_ms: float
    #: requests offloaded (preempted) so far
    offloads: int


class StepRowDoc(_StepRowDoc, total=False):
    """One scheduler step (serving/batch_state.py): a figure transformers hides is left out."""

    running: int
    waiting: int
    batch_requests: int
    prefill_tokens: int
    decode_tokens: int
    #: keys the step's attention reads: each request's cached tokens plus its new ones
    context_tokens: int
    kv_used_pct: float
    #: the step's joules, with a power source
    energy_j: float


class StepCacheDoc(TypedDict, total=False):
    """The limits the scheduler worked within (what `load --predict` simulates); None: hidden."""

    blocks: int | None
    page_tokens: int | None
    max_batch_tokens: int | None
    max_requests_per_step: int | None
    safety_margin: float | None
    scheduler: str | None
    #: who sized the cache: "--kv-blocks", "every request at once" (CPU), "transformers (memory)"
    sized: str


class StepStateDoc(TypedDict):
    """How the step rows were recorded: figures missing and why, thinning, the cache's limits."""

    missing: list[str]
    #: every `thinned`-th step kept (1: all)
    thinned: int
    cache: StepCacheDoc


class _LoadEnergyDoc(TypedDict):
    available: bool


class LoadEnergyDoc(_LoadEnergyDoc, total=False):
    """The run's energy (serving/energy.py): `reason` without a power source, else the figures.

    `total_j` is the whole run's; `in_steps_j` the scheduler steps' (shared among the requests
    in each step by their tokens); static batching has no steps, so no per-request figures.
    """

    reason: str
    source: str
    method: str
    total_j: float | None
    in_steps_j: float
    between_steps_j: float | None
    mean_power_w: float | None
    steps_uncovered: int
    readings: int
    prefill_j: float | None
    decode_j: float | None
    j_per_request_p50: float | None
    j_per_output_token: float | None
    j_per_output_token_all: float | None
    j_per_goodput_request: float | None
    note: str


class SeriesDoc(TypedDict):
    """One scraped Prometheus series on the run's clock."""

    name: str
    labels: dict[str, str]
    t_ms: list[float]
    values: list[float]


class _ScrapeCountsDoc(TypedDict):
    #: credentials masked
    url: str
    scrapes: int
    failures: int
    first_failure: str | None


class ServerMetricsDoc(_ScrapeCountsDoc):
    """The server's metrics as scraped (serving/server_metrics.py `Scraper.series`)."""

    interval_ms: float
    #: series past the cap, not kept
    series_dropped: int
    #: keyed by name and labels, as Prometheus writes them
    series: dict[str, SeriesDoc]


class StateMetricDoc(TypedDict):
    """An engine state metric's max and last value, summed over its labels."""

    name: str
    max: float
    last: float


class ServerMetricsSummaryDoc(_ScrapeCountsDoc):
    """The summary's account of the scrape: counts, series kept, the engine's state metrics."""

    series: int
    state: list[StateMetricDoc]


class TimelineRowDoc(TypedDict):
    """Requests in flight from `t_ms` (from the run's start) on."""

    t_ms: float
    in_flight: int


class FailedRequestDoc(TypedDict):
    """A request that ended without latencies (a timeout, an HTTP error), and why."""

    sample_id: int
    error: str


class LengthsSpecDoc(TypedDict):
    """A length distribution as a spec stores it (serving/load.py `Lengths`)."""

    #: "fixed" (a), "uniform" (a..b) or "normal" (mean a, sd b)
    kind: str
    a: float
    b: float


class _LoadSpecDoc(TypedDict):
    model: str
    #: requests per second offered; inf: all at once
    rate: float
    requests: int
    concurrency: int | None
    server: str
    #: {metric: bound in ms}
    slos: dict[str, float]


class LoadSpecDoc(_LoadSpecDoc, total=False):
    """A load spec as a run stores it (serving/load.py `spec_document`): LoadSpec's fields.

    A run's spec has every field (a test holds the keys to LoadSpec's); a peer's imported run
    only the required ones and `imported_from`. URLs are masked.
    """

    prompt_tokens: LengthsSpecDoc
    new_tokens: LengthsSpecDoc
    static_batch: int
    seed: int
    device: str
    dtype: str
    workload: str | None
    trace_speed: float
    kv_blocks: int | None
    kv_page_tokens: int | None
    energy: str
    power_interval_ms: float
    metrics_url: str | None
    metrics_interval_ms: float
    arrivals: str
    ramp_to_rate: float | None
    duration_s: float | None
    warmup_requests: int
    warmup_s: float
    imported_from: str
