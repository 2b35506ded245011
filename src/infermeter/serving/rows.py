"""A load's request row (`RequestRowDoc`) and its HTTP phases: what every part of a load reads.

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
