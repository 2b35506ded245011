"""`infermeter load run | endpoint | capacity | predict`: one command per mode.

Each has only its options (defined once in `cli/load_options.py`) and goes through
`run_load_args`.

Why: `load` had 40 options across five modes; a user reading `load --help` for an endpoint
saw in-process batching and prediction options beside the ones that applied. The old spelling
(`load --endpoint URL`, `--find-max-rate`, `--predict`) keeps working for one release.
"""

from __future__ import annotations

from pathlib import Path

from infermeter.cli import load_options as O
from infermeter.cli.guard import guard
from infermeter.cli.load_cmd import run_load_args
from infermeter.cli.load_options import LoadArgs
from infermeter.cli.options import DB, JSON_OUT, JUNIT, SUMMARY


@guard
def load_run_command(
    model: str = O.MODEL,
    rate: str = O.RATE,
    requests: int = O.REQUESTS,
    arrivals: str = O.ARRIVALS,
    ramp_up_to: float = O.RAMP_UP_TO,
    duration: float = O.DURATION,
    warmup_requests: int = O.WARMUP_REQUESTS,
    warmup_s: float = O.WARMUP_S,
    concurrency: int = O.CONCURRENCY,
    prompt_tokens: str = O.PROMPT_TOKENS,
    new_tokens: str = O.NEW_TOKENS,
    workload: str = O.WORKLOAD,
    trace_speed: float = O.TRACE_SPEED,
    server: str = O.SERVER,
    static_batch: int = O.STATIC_BATCH,
    kv_blocks: int = O.KV_BLOCKS,
    kv_page_tokens: int = O.KV_PAGE_TOKENS,
    energy: str = O.ENERGY,
    power_interval_ms: float = O.POWER_INTERVAL_MS,
    slo: list[str] = O.SLO,
    fail_if_slo_missed: bool = O.FAIL_IF_SLO_MISSED,
    seed: int = O.SEED,
    device: str = O.DEVICE,
    dtype: str = O.DTYPE,
    out: Path = O.OUT,
    db: str = DB,
    json_out: bool = JSON_OUT,
    junit: Path = JUNIT,
    summary: Path = SUMMARY,
) -> None:
    """Serve requests through the model in this process: TTFT, TPOT, e2e, SLOs, goodput.

    Continuous or static batching, energy per request; several --rate values sweep the rate.
    """
    run_load_args(LoadArgs.given(locals()))


@guard
def load_endpoint_command(
    url: list[str] = O.URL,
    model: str = O.TOKENIZER,
    rate: str = O.RATE,
    requests: int = O.REQUESTS,
    arrivals: str = O.ARRIVALS,
    ramp_up_to: float = O.RAMP_UP_TO,
    duration: float = O.DURATION,
    warmup_requests: int = O.WARMUP_REQUESTS,
    warmup_s: float = O.WARMUP_S,
    concurrency: int = O.CONCURRENCY,
    prompt_tokens: str = O.PROMPT_TOKENS,
    new_tokens: str = O.NEW_TOKENS,
    workload: str = O.WORKLOAD,
    trace_speed: float = O.TRACE_SPEED,
    slo: list[str] = O.SLO,
    fail_if_slo_missed: bool = O.FAIL_IF_SLO_MISSED,
    seed: int = O.SEED,
    endpoint_model: str = O.ENDPOINT_MODEL,
    api_key_env: str = O.API_KEY_ENV,
    timeout: float = O.TIMEOUT,
    endpoint_api: str = O.ENDPOINT_API,
    ignore_eos: bool = O.IGNORE_EOS,
    extra_body: str = O.EXTRA_BODY,
    header: list[str] = O.HEADER,
    selfcheck: bool = O.SELFCHECK,
    max_error_rate: float = O.MAX_ERROR_RATE,
    metrics_url: str = O.METRICS_URL,
    metrics_interval_ms: float = O.METRICS_INTERVAL_MS,
    reference: bool = O.REFERENCE,
    device: str = O.DEVICE,
    dtype: str = O.DTYPE,
    out: Path = O.OUT,
    db: str = DB,
    json_out: bool = JSON_OUT,
    junit: Path = JUNIT,
    summary: Path = SUMMARY,
) -> None:
    """Load an OpenAI-compatible server: TTFT, TPOT, e2e, SLOs, goodput.

    What the client cost (it checks itself first against a null server) and whether the
    server drifted during the run; several --rate values sweep the rate.
    """
    # Long because the options are the signature (a comment: the docstring is the --help)
    run_load_args(LoadArgs.given(locals(), endpoint=url[0], more_endpoints=tuple(url[1:])))


@guard
def load_capacity_command(
    slo: list[str] = O.SLO,
    slo_target: float = O.SLO_TARGET,
    endpoint: str = O.CAPACITY_ENDPOINT,
    model: str = O.MODEL,
    start_rate: float = O.START_RATE,
    requests_per_rate: int = O.REQUESTS_PER_STEP,
    most_requests_per_rate: int = O.MOST_REQUESTS_PER_RATE,
    bisect: int = O.BISECT,
    arrivals: str = O.ARRIVALS,
    prompt_tokens: str = O.PROMPT_TOKENS,
    new_tokens: str = O.NEW_TOKENS,
    workload: str = O.WORKLOAD,
    trace_speed: float = O.TRACE_SPEED,
    server: str = O.SERVER,
    static_batch: int = O.STATIC_BATCH,
    kv_blocks: int = O.KV_BLOCKS,
    kv_page_tokens: int = O.KV_PAGE_TOKENS,
    endpoint_model: str = O.ENDPOINT_MODEL,
    api_key_env: str = O.API_KEY_ENV,
    timeout: float = O.TIMEOUT,
    endpoint_api: str = O.ENDPOINT_API,
    ignore_eos: bool = O.IGNORE_EOS,
    extra_body: str = O.EXTRA_BODY,
    header: list[str] = O.HEADER,
    selfcheck: bool = O.SELFCHECK,
    seed: int = O.SEED,
    device: str = O.DEVICE,
    dtype: str = O.DTYPE,
    out: Path = O.OUT,
    db: str = DB,
    json_out: bool = JSON_OUT,
) -> None:
    """The highest request rate whose SLO attainment stays above --slo-target.

    Ramp from --start-rate, then bisect; in this process or at --endpoint; every rate stored.
    """
    run_load_args(
        LoadArgs.given(
            locals(),
            find_max_rate=True,
            rate=f"{start_rate!r}",
            requests=requests_per_rate,
            max_requests_per_step=most_requests_per_rate,
            capacity_spelling=(),
        )
    )


@guard
def load_predict_command(
    model: str = O.MODEL,
    rate: str = O.RATE,
    requests: int = O.REQUESTS,
    arrivals: str = O.ARRIVALS,
    concurrency: int = O.CONCURRENCY,
    prompt_tokens: str = O.PROMPT_TOKENS,
    new_tokens: str = O.NEW_TOKENS,
    workload: str = O.WORKLOAD,
    trace_speed: float = O.TRACE_SPEED,
    kv_blocks: int = O.KV_BLOCKS,
    kv_page_tokens: int = O.KV_PAGE_TOKENS,
    slo: list[str] = O.SLO,
    capacity: bool = O.CAPACITY,
    slo_target: float = O.SLO_TARGET,
    most_requests_per_rate: int = O.MOST_REQUESTS_PER_RATE,
    bisect: int = O.BISECT,
    hardware: str = O.HARDWARE,
    stack: str = O.STACK,
    seed: int = O.SEED,
    dtype: str = O.DTYPE,
    out: Path = O.OUT,
    db: str = DB,
    json_out: bool = JSON_OUT,
) -> None:
    """Simulate a load without running it (no weights are loaded).

    Arrivals, transformers' continuous-batching scheduler and each step's cost from the time
    model, learnt from stored loads on this device.
    """
    run_load_args(
        LoadArgs.given(
            locals(),
            predict=True,
            find_max_rate=capacity,
            max_requests_per_step=most_requests_per_rate,
            capacity_spelling=(("requests", "--requests"),),
        )
    )
