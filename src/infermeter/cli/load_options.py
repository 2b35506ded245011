"""The options of `infermeter load` and its subcommands, each defined once.

Why: `load`, `load run`, `load endpoint`, `load capacity` and `load predict` share most of their
options. An option that sets a spec field (`LoadSpec`, `CapacitySpec`, `Endpoint`) takes its
spelling, help and default from the field (`spec_option`), whose range is checked once, below the
CLI (`util/settings.check_ranges`); the rest (where results go, which mode) are defined here
once. `LoadArgs` is the one typed record of what a command was given.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import typer

from infermeter.cli.options import spec_option
from infermeter.serving.capacity import CapacitySpec
from infermeter.serving.endpoint import Endpoint
from infermeter.serving.load import LoadSpec
from infermeter.serving.plan import LoadAsk

MODEL = spec_option(LoadSpec, "model", "--model", "-m")
RATE = spec_option(LoadSpec, "rate", default=None)
REQUESTS = spec_option(LoadSpec, "requests", default=None)
ARRIVALS = spec_option(LoadSpec, "arrivals")
DURATION = spec_option(LoadSpec, "duration_s")
WARMUP_REQUESTS = spec_option(LoadSpec, "warmup_requests")
WARMUP_S = spec_option(LoadSpec, "warmup_s")
CONCURRENCY = spec_option(LoadSpec, "concurrency")
PROMPT_TOKENS = spec_option(LoadSpec, "prompt_tokens", default=None)
NEW_TOKENS = spec_option(LoadSpec, "new_tokens", default=None)
WORKLOAD = spec_option(LoadSpec, "workload")
TRACE_SPEED = spec_option(LoadSpec, "trace_speed")
SERVER = spec_option(LoadSpec, "server")
STATIC_BATCH = spec_option(LoadSpec, "static_batch")
KV_BLOCKS = spec_option(LoadSpec, "kv_blocks")
KV_PAGE_TOKENS = spec_option(LoadSpec, "kv_page_tokens")
METRICS_URL = spec_option(LoadSpec, "metrics_url")
METRICS_INTERVAL_MS = spec_option(LoadSpec, "metrics_interval_ms")
ENERGY = spec_option(LoadSpec, "energy")
POWER_INTERVAL_MS = spec_option(LoadSpec, "power_interval_ms")
SLO = spec_option(LoadSpec, "slos")
FAIL_IF_SLO_MISSED = typer.Option(
    False, "--fail-if-slo-missed", help="Exit 3 when any request misses an SLO."
)
SEED = spec_option(LoadSpec, "seed")
DEVICE = spec_option(LoadSpec, "device")
DTYPE = spec_option(LoadSpec, "dtype")
OUT = typer.Option(None, help="Also write DIR/load.json.")
ENDPOINT = typer.Option(
    None,
    help="Load an OpenAI-compatible server instead (vLLM, "
    "SGLang, TGI, llama.cpp, Ollama, transformers serve): its URL, "
    "e.g. http://127.0.0.1:8000; --model then names the tokenizer.",
)
ENDPOINT_MODEL = spec_option(Endpoint, "model")
API_KEY_ENV = spec_option(Endpoint, "key_env")
TIMEOUT = spec_option(Endpoint, "timeout_s")
ENDPOINT_API = spec_option(Endpoint, "api")
IGNORE_EOS = spec_option(Endpoint, "ignore_eos")
EXTRA_BODY = spec_option(Endpoint, "extra_body")
HEADER = spec_option(Endpoint, "headers")
SELFCHECK = spec_option(Endpoint, "selfcheck", "--selfcheck/--no-selfcheck")
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
SLO_TARGET = spec_option(CapacitySpec, "target")
MAX_REQUESTS_PER_STEP = spec_option(
    CapacitySpec,
    "max_requests",
    "--max-requests-per-step",
    note="(The old spelling of --most-requests-per-rate.)",
)
BISECT = spec_option(CapacitySpec, "bisect")
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
    "hf",
    help="With --predict on a GPU: the stack's step costs, NAME@VERSION for a release "
    "(`infermeter predict --help`).",
)


@dataclass(frozen=True)
class LoadArgs(LoadAsk):
    """What a `load` command was given: the settings (`LoadAsk`) and where results go."""

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

    fail_if_slo_missed: bool = False
    out: Path | None = None
    db: str | None = None
    json_out: bool = False
    junit: Path | None = None
    summary: Path | None = None


# the subcommands' own spellings (names that say what they do)
URL = typer.Argument(
    ...,
    help="The OpenAI-compatible server (vLLM, SGLang, TGI, llama.cpp, Ollama, transformers "
    "serve), e.g. http://127.0.0.1:8000; several (replicas of one model) take the requests "
    "round robin.",
)
MAX_ERROR_RATE = spec_option(Endpoint, "max_error_rate")
TOKENIZER = spec_option(
    LoadSpec,
    "model",
    "--model",
    "-m",
    note="At an endpoint: the tokenizer that builds the prompts and counts streamed tokens; "
    "with --reference also the model run in-process.",
)
CAPACITY_ENDPOINT = typer.Option(
    None, "--endpoint", help="Search a running server's capacity instead of the model's here."
)
START_RATE = spec_option(CapacitySpec, "start_rate")
REQUESTS_PER_STEP = spec_option(CapacitySpec, "requests")
MOST_REQUESTS_PER_RATE = spec_option(CapacitySpec, "max_requests")
CAPACITY = typer.Option(
    False, "--capacity", help="Also search the simulated capacity under the --slo."
)
RAMP_UP_TO = spec_option(LoadSpec, "ramp_to_rate")
