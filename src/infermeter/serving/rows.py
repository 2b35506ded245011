"""A load's request row (`RequestRowDoc`), its HTTP phases, and a rate sweep's point.

Apart from load.py so that the endpoint client, the peers' file readers and the load itself
name one row type without importing each other.
"""

from __future__ import annotations

from typing import TypedDict

from infermeter.run.slo import SLORowDoc


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
