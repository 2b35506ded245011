"""A load's document (`LoadDoc`), its request row, its HTTP phases, and a rate sweep's point.

Apart from load.py so that the endpoint client, the peers' file readers and the load itself
name one row type without importing each other. The summary and the parts a stored run keeps
are run/results.py's and run/load_docs.py's: a stored run names them in its `checks`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict, cast

from infermeter.run.slo import SLORowDoc

if TYPE_CHECKING:
    from infermeter.measure.device import DeviceDoc
    from infermeter.models.info import ModelInfoDoc
    from infermeter.run.document import LoadResult
    from infermeter.run.environment import VersionsDoc
    from infermeter.run.load_docs import (
        LoadSpecDoc,
        ServerMetricsDoc,
        StepRowDoc,
        StepStateDoc,
        TimelineRowDoc,
    )
    from infermeter.run.results import LoadSummaryDoc
    from infermeter.workloads.traffic import TrafficDoc


class HttpPhasesDoc(TypedDict):
    """An endpoint request's HTTP phases in ms (endpoint.py: `http_phases`); NaN where missing.

    `http_build_ms`: the client's own work from the send to its first header write;
    `http_connect_ms`: 0 on a reused connection; `http_send_ms`: headers and body written;
    `http_wait_ms`: the body sent to the response's headers.
    """

    http_build_ms: float
    http_connect_ms: float
    http_send_ms: float
    http_wait_ms: float


class _RequestRowDoc(SLORowDoc):
    sample_id: int
    #: from the run's start
    arrival_ms: float
    #: arrival to its prefill's start (the client's lateness at an endpoint)
    queue_ms: float
    #: time to the second token
    ttst_ms: float
    itl_ms: list[float]
    prompt_tokens: int
    new_tokens_asked: int
    output_tokens: int
    #: output tokens the server counted (usage); None where it did not say
    server_output_tokens: int | None
    session: int | None
    turn: int


class RequestRowDoc(_RequestRowDoc, total=False):
    """A load's request row (`all_samples`): latencies in ms, NaN where not measured.

    Every row has the keys above; a request this client sent also has the `*_from_send_ms`
    latencies and the server's own account; an endpoint's, its HTTP phases (`http_phases`);
    a run with a power source, its joules. Rows imported from a peer's file (formats.py)
    have only the keys every row has.
    """

    ttft_from_send_ms: float
    e2e_from_send_ms: float
    server_prompt_tokens: int | None
    server_prefill_ms: float | None
    server_decode_ms_per_token: float | None
    server_index: int | None
    # the HTTP phases (`HttpPhasesDoc`)
    http_build_ms: float
    http_connect_ms: float
    http_send_ms: float
    http_wait_ms: float
    energy_j: float | None
    prefill_j: float | None
    decode_j: float | None


class SweepPointDoc(TypedDict):
    """One offered rate of a rate sweep, measured or simulated (load.py: `sweep_point`).

    Percentiles in ms; None where the run had no such figure (no SLO, no server timings, no
    power source).
    """

    rate: float
    offered: str
    throughput_rps: float
    output_tokens_per_s: float
    queue_ms_p50: float | None
    queue_ms_p99: float | None
    ttft_ms_p50: float | None
    ttft_ms_p99: float | None
    tpot_ms_p50: float | None
    tpot_ms_p99: float | None
    e2e_ms_p50: float | None
    e2e_ms_p99: float | None
    goodput_rps: float | None
    #: the server's own service time (llama.cpp's timings), where it reports one
    server_decode_ms_p50: float | None
    server_prefill_ms_p50: float | None
    drift_moved: bool
    slo_all_met_pct: float | None
    j_per_request_p50: float | None
    j_per_output_token: float | None
    j_per_goodput_request: float | None
    mean_power_w: float | None


class EndpointMetaDoc(TypedDict):
    """The server an endpoint load ran against: URLs masked, headers by name only."""

    url: str
    model: str
    #: "chat" or "completions"
    api: str
    #: stream chunks that carried more than one token
    multi_token_chunks: int
    urls: list[str]
    #: why the client stopped sending (--max-error-rate); None when it sent every request
    aborted: str | None
    headers: list[str]
    extra_body: dict[str, Any]


class _LoadMetaDoc(TypedDict):
    kind: str
    model: str
    model_info: ModelInfoDoc
    device: DeviceDoc
    versions: VersionsDoc
    spec: LoadSpecDoc


class LoadMetaDoc(_LoadMetaDoc, total=False):
    """A load document's `meta`.

    `interrupted` is the KeyboardInterrupt (or `Terminated`) that ended the run, for the
    caller to store it and then raise: never written to a file.
    """

    workload: TrafficDoc | None
    endpoint: EndpointMetaDoc
    step_state: StepStateDoc
    kept_run_id: str
    run_id: str
    interrupted: BaseException | str | None
    #: a peer's file this was read from (formats.py)
    imported_from: str
    notes: list[str]


class StackCostRowDoc(TypedDict):
    """What the serving stack adds at one metric's percentile (load.py: `stack_cost`)."""

    metric: str
    percentile: str
    endpoint_ms: float
    in_process_ms: float
    stack_ms: float
    #: of the endpoint's figure
    stack_share: float


class ReferenceDoc(TypedDict):
    """The same requests in this process (`load --reference`): its summary, the stack's cost."""

    model: str
    summary: LoadSummaryDoc
    stack_cost: list[StackCostRowDoc]


class _LoadDoc(TypedDict):
    meta: LoadMetaDoc
    summary: LoadSummaryDoc
    timeline: list[TimelineRowDoc]
    all_samples: list[RequestRowDoc]


class LoadDoc(_LoadDoc, total=False):
    """`run_load`'s document: one row per request, the summary, the in-flight timeline.

    A run with warm-up keeps those requests beside (`warmup_samples`, never in a statistic);
    continuous batching adds its scheduler steps, a scraped server its metrics. Python users
    get it as a `LoadResult` (a dict with `.to_frame()`); `as_load_doc` reads one back as this.
    """

    warmup_samples: list[RequestRowDoc]
    steps: list[StepRowDoc]
    server_metrics: ServerMetricsDoc
    reference: ReferenceDoc


class RateSweepMetaDoc(LoadMetaDoc, total=False):
    """A rate sweep's `meta`: its first run's (kind "load-sweep") and the rates it measured."""

    rates: list[float]


class _RateSweepDoc(TypedDict):
    meta: RateSweepMetaDoc
    #: one point per rate measured
    summary: list[SweepPointDoc]
    #: the highest rate whose p99 stayed within `factor` of the lowest rate's (None: none did)
    knee_rate: float | None
    runs: list[LoadResult]


class RateSweepDoc(_RateSweepDoc, total=False):
    """`run_rate_sweep`'s document: each rate's run, its point, the knee.

    `interrupted` holds the KeyboardInterrupt that stopped it (the caller stores the runs, then
    raises); never written to a file.
    """

    interrupted: BaseException | None


def as_load_doc(result: LoadResult) -> LoadDoc:
    """A load's document as the type its writer gave it (a `LoadResult` is a plain dict)."""
    return cast("LoadDoc", result)
