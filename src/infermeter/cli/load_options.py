"""The options of `infermeter load` and its subcommands, each defined once.

Why: `load`, `load run`, `load endpoint`, `load capacity` and `load predict` share most of their
options; each is defined here once with its help, and `LoadArgs` is the one typed record of what
a command was given (its defaults are the options' defaults). Ranges are checked once, below the
CLI (`serving.load.LoadSpec.validate`, `serving.capacity.CapacitySpec.validate`).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import typer

MODEL = typer.Option("tiny-llama", "--model", "-m", help="Any --model spec.")
RATE = typer.Option(
    None,
    help="Poisson arrivals per second (default 4), or inf (all "
    "at once); several (0.5,1,2,4) sweep the rate: latency vs "
    "throughput, knee.",
)
REQUESTS = typer.Option(
    None, help="Requests to send (default 16; with --duration, the most to send)."
)
ARRIVALS = typer.Option(
    "poisson",
    help="How requests arrive at --rate: poisson, constant, or gamma:SHAPE (the same mean "
    "rate; SHAPE under 1 is bursty, 1 is Poisson).",
)
DURATION = typer.Option(
    None,
    help="Seconds: send only the requests that arrive within them (an open loop at a "
    "finite --rate); --requests then defaults to what the rate can bring.",
)
WARMUP_REQUESTS = typer.Option(
    0,
    "--warmup-requests",
    help="The first N requests (by arrival) run but are left out of every statistic.",
)
WARMUP_S = typer.Option(
    0.0,
    "--warmup-s",
    help="Requests arriving within this many seconds of the first run but are left out of "
    "every statistic (with --warmup-requests: either makes a request warm-up).",
)
CONCURRENCY = typer.Option(None, help="Closed loop: this many in flight (no --rate).")
PROMPT_TOKENS = typer.Option(
    None,
    "--prompt-tokens",
    help="Prompt lengths (default 64): 64, uniform:32-128, normal:64,16.",
)
NEW_TOKENS = typer.Option(None, "--new-tokens", help="Output lengths (default 16), as above.")
WORKLOAD = typer.Option(
    None,
    help="Real traffic instead of --prompt-tokens and "
    "--new-tokens: sharegpt:FILE (ShareGPT JSON), chat:FILE "
    "(multi-turn sessions, JSONL), azure:FILE (Azure or BurstGPT "
    "trace CSV, replayed at its times), mooncake:FILE (trace JSONL "
    "with shared prefixes), or a shipped sample: sharegpt-sample, "
    "chat-sample, azure-sample, mooncake-sample.",
)
TRACE_SPEED = typer.Option(
    1.0, "--trace-speed", help="Replay a trace this many times faster than recorded."
)
SERVER = typer.Option(
    "continuous",
    help="continuous (transformers' continuous batching) or static (padded generate batches).",
)
STATIC_BATCH = typer.Option(8, "--static-batch", help="Largest static batch.")
KV_BLOCKS = typer.Option(
    None,
    "--kv-blocks",
    help="Continuous batching's KV cache size in blocks (default: transformers' own, from memory).",
)
KV_PAGE_TOKENS = typer.Option(
    None,
    "--kv-page-tokens",
    help="Tokens per KV-cache block (default: transformers' own, 256).",
)
METRICS_URL = typer.Option(
    None,
    "--metrics-url",
    help="A server's Prometheus metrics "
    "(vLLM, SGLang, TGI: http://HOST:PORT/metrics), scraped "
    "during the run and stored under their own names.",
)
METRICS_INTERVAL_MS = typer.Option(
    1000.0, "--metrics-interval-ms", help="Scrape interval (100 ms or more)."
)
ENERGY = typer.Option(
    "auto",
    help="Power source for joules per request: auto, nvml, "
    "rapl, powermetrics or off (in-process runs).",
)
POWER_INTERVAL_MS = typer.Option(
    100.0, "--power-interval-ms", help="Power sampling interval (10 ms or more)."
)
SLO = typer.Option(
    None,
    help="ttft_ms=500, tpot_ms=80 or e2e_ms=2000 "
    "(repeatable): pass/fail per request, attainment, goodput.",
)
FAIL_IF_SLO_MISSED = typer.Option(
    False, "--fail-if-slo-missed", help="Exit 3 when any request misses an SLO."
)
SEED = typer.Option(0, help="Seeds arrivals, lengths and prompts.")
DEVICE = typer.Option("cpu", help="cpu, cuda, cuda:N, mps or auto.")
DTYPE = typer.Option("auto", help="auto, float32, bfloat16, float16.")
OUT = typer.Option(None, help="Also write DIR/load.json.")
ENDPOINT = typer.Option(
    None,
    help="Load an OpenAI-compatible server instead (vLLM, "
    "SGLang, TGI, llama.cpp, Ollama, transformers serve): its URL, "
    "e.g. http://127.0.0.1:8000; --model then names the tokenizer.",
)
ENDPOINT_MODEL = typer.Option(
    None,
    "--endpoint-model",
    help="The model name the server knows (default: the first it lists).",
)
API_KEY_ENV = typer.Option(
    "OPENAI_API_KEY",
    "--api-key-env",
    help="Environment variable holding the endpoint's API key (never stored).",
)
TIMEOUT = typer.Option(
    300.0,
    help="Seconds a whole endpoint request may take, first byte to last, before it fails "
    "(a response is also cut off past 16 MiB of text).",
)
ENDPOINT_API = typer.Option(
    "completions",
    "--endpoint-api",
    help="completions "
    "(/v1/completions) or chat (/v1/chat/completions: "
    "sessions' messages, the server's chat template).",
)
IGNORE_EOS = typer.Option(
    False,
    "--ignore-eos",
    help="Ask the endpoint to generate "
    "every asked token (vLLM, SGLang, llama.cpp; transformers "
    "serve refuses it); otherwise requests stop at its EOS.",
)
EXTRA_BODY = typer.Option(
    None,
    "--extra-body",
    help="At an endpoint: a JSON object merged into every request's body, e.g. "
    "'{\"min_tokens\": 64}' (llama.cpp's server ignores ignore_eos but honours min_tokens).",
)
HEADER = typer.Option(
    None,
    "--header",
    help="At an endpoint: 'Name: value', sent with every request (repeat it); values are "
    "never stored or printed.",
)
SELFCHECK = typer.Option(
    True,
    "--selfcheck/--no-selfcheck",
    help="At an endpoint: measure the client first against a null server on 127.0.0.1 "
    "(its ceiling and the latency it adds, about 2 s) and hold the run against it.",
)
REFERENCE = typer.Option(
    False,
    "--reference",
    help="At an endpoint: also run the "
    "same requests in-process on --model (the same weights) and "
    "show what the serving stack adds to TTFT, TPOT and e2e.",
)
FIND_MAX_RATE = typer.Option(
    False,
    "--find-max-rate",
    help="Search for the highest "
    "rate whose SLO attainment stays above --slo-target "
    "(ramp from --rate, then bisect); needs --slo.",
)
SLO_TARGET = typer.Option(
    0.99,
    "--slo-target",
    help="The capacity search: the share of requests that must meet every SLO.",
)
MAX_REQUESTS_PER_STEP = typer.Option(
    512,
    "--max-requests-per-step",
    help="With "
    "--find-max-rate: a rate is run again (counts "
    "pooled) while undecided, up to this many.",
)
BISECT = typer.Option(4, help="The capacity search: bisections after the ramp.")
PREDICT = typer.Option(
    False,
    "--predict",
    help="Simulate the load instead of running "
    "it: arrivals, transformers' continuous-batching scheduler and "
    "each step's cost from the time model (learnt from stored "
    "loads on the device); no weights are loaded.",
)
HARDWARE = typer.Option(
    "cpu-this",
    help="With --predict: cpu-this (calibrated) or a GPU from `infermeter predict --help`.",
)
STACK = typer.Option(
    "hf", help="With --predict on a GPU: the stack's step costs (`infermeter predict --help`)."
)


@dataclass(frozen=True)
class LoadArgs:
    """What a `load` command was given: every option, by its Python name."""

    @classmethod
    def given(cls, options: dict[str, Any], **renamed: Any) -> LoadArgs:
        """The record from a command's parameters (its `locals()`), by name.

        Options a command spells differently come in `renamed`; repeatable ones become tuples.
        """
        names = {f.name for f in fields(cls)}
        kw = {k: v for k, v in options.items() if k in names}
        for k in ("slo", "header"):
            if k in kw:
                kw[k] = tuple(kw[k] or ())
        return cls(**{**kw, **renamed})

    model: str = "tiny-llama"
    rate: str | None = None
    requests: int | None = None
    arrivals: str = "poisson"
    duration: float | None = None
    warmup_requests: int = 0
    warmup_s: float = 0.0
    concurrency: int | None = None
    prompt_tokens: str | None = None
    new_tokens: str | None = None
    workload: str | None = None
    trace_speed: float = 1.0
    server: str = "continuous"
    static_batch: int = 8
    kv_blocks: int | None = None
    kv_page_tokens: int | None = None
    metrics_url: str | None = None
    metrics_interval_ms: float = 1000.0
    energy: str = "auto"
    power_interval_ms: float = 100.0
    slo: tuple[str, ...] = ()
    fail_if_slo_missed: bool = False
    seed: int = 0
    device: str = "cpu"
    dtype: str = "auto"
    out: Path | None = None
    db: str | None = None
    json_out: bool = False
    junit: Path | None = None
    summary: Path | None = None
    endpoint: str | None = None
    endpoint_model: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    timeout: float = 300.0
    endpoint_api: str = "completions"
    ignore_eos: bool = False
    extra_body: str | None = None
    header: tuple[str, ...] = ()
    selfcheck: bool = True
    reference: bool = False
    find_max_rate: bool = False
    slo_target: float = 0.99
    max_requests_per_step: int = 512
    bisect: int = 4
    predict: bool = False
    hardware: str = "cpu-this"
    stack: str = "hf"
    more_endpoints: tuple[str, ...] = ()
    ramp_up_to: float | None = None
    max_error_rate: float | None = None


# the subcommands' own spellings (names that say what they do)
URL = typer.Argument(
    ...,
    help="The OpenAI-compatible server (vLLM, SGLang, TGI, llama.cpp, Ollama, transformers "
    "serve), e.g. http://127.0.0.1:8000; several (replicas of one model) take the requests "
    "round robin.",
)
MAX_ERROR_RATE = typer.Option(
    None,
    "--max-error-rate",
    help="Stop sending once more than this share of finished requests failed (judged from 8 "
    "on); the rest are kept as not sent, with the reason.",
)
TOKENIZER = typer.Option(
    "tiny-llama",
    "--model",
    "-m",
    help="The tokenizer (any --model spec) that builds the prompts and counts streamed tokens; "
    "with --reference also the model run in-process.",
)
CAPACITY_ENDPOINT = typer.Option(
    None, "--endpoint", help="Search a running server's capacity instead of the model's here."
)
START_RATE = typer.Option(1.0, "--start-rate", help="The search's first rate (requests/s).")
REQUESTS_PER_STEP = typer.Option(
    32, "--requests-per-rate", help="Requests run at each rate (more while it is undecided)."
)
MOST_REQUESTS_PER_RATE = typer.Option(
    512,
    "--most-requests-per-rate",
    help="A rate is run again (counts pooled) while its attainment straddles the target, up "
    "to this many requests.",
)
CAPACITY = typer.Option(
    False, "--capacity", help="Also search the simulated capacity under the --slo."
)
RAMP_UP_TO = typer.Option(
    None,
    "--ramp-up-to",
    help="The rate rises linearly from --rate to this over the run's requests (an open loop).",
)
