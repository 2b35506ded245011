"""Serving under load (`infermeter load`, issue 18): request arrivals, batching, SLOs, goodput.

One process drives a stream of requests through a model and records, per request, when it
arrived, left the queue, got its first token and every later one, and finished. Two servers:
- `continuous`: transformers' own continuous batching (`model.init_continuous_batching()`,
  a `ContinuousBatchingManager` with its background thread): requests join and leave the
  running batch at every step. Token times come from the manager's own records
  (`record_timestamps`), on the same `perf_counter` clock as the arrivals.
- `static`: the baseline: whenever the model is free, the requests that have arrived (up to
  `static_batch`) run as one padded `generate` call, every token marked; a request's last token
  is its own `new_tokens`-th, though the call runs to the longest one in the batch.
Arrivals are Poisson at `rate` requests per second (seeded exponential gaps; `inf` = all at
once), or a closed loop of `concurrency` requests in flight. Prompt and output lengths are
`fixed:N`, `uniform:A-B` or `normal:MEAN,STD` (seeded, clipped to 1 or more). Or a `workload`
(workloads/traffic.py) gives the requests: a trace's at its own times (`trace_speed` faster),
conversations' first turns at `rate`, and each later turn of a session the moment the turn
before it ends.

SLOs (`ttft_ms`, `tpot_ms`, `e2e_ms`, upper bounds) give each request a pass or fail, each SLO
its attainment, and the run its goodput: requests per second that met every SLO, over the
run's wall time (DistServe's definition).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal, cast

from infermeter.errors import UserError
from infermeter.measure.device import DeviceDoc
from infermeter.models.info import ModelInfoDoc
from infermeter.run.document import LoadResult
from infermeter.run.environment import VersionsDoc
from infermeter.run.progress import ProgressFn
from infermeter.run.slo import SLO_METRICS, check_slos, parse_slos, slo_report
from infermeter.serving.batch_state import one_instant
from infermeter.serving.endpoint import Endpoint, Served, ServerTiming, http_phases
from infermeter.serving.rows import (
    EndpointMetaDoc,
    LoadDoc,
    LoadMetaDoc,
    RateSweepDoc,
    RateSweepMetaDoc,
    RequestRowDoc,
    StackCostRowDoc,
    SweepPointDoc,
    as_load_doc,
)
from infermeter.util.fmt import or_nan
from infermeter.util.settings import Range, check_ranges, setting
from infermeter.util.urls import masked_url

if TYPE_CHECKING:  # run/config.py loads the model presets, which a load run needs not
    import numpy as np

    from infermeter.models import LoadedModel
    from infermeter.run.config import RunConfigDoc
    from infermeter.run.load_docs import (
        ClientDoc,
        FailedRequestDoc,
        LoadEnergyDoc,
        LoadSpecDoc,
        StepRowDoc,
        TimelineRowDoc,
    )
    from infermeter.run.results import LoadCheckDoc, LoadSummaryDoc, TokenCountsDoc
    from infermeter.run.sink import RunSink
    from infermeter.workloads.traffic import TrafficDoc

SERVERS = ("continuous", "static")
__all__ = ["SLO_METRICS", "Endpoint", "parse_slos", "slo_report"]  # re-exported for `load`


@dataclass(frozen=True)
class Lengths:
    """A distribution of token counts: fixed, uniform or normal (clipped to 1..limit)."""

    kind: str = "fixed"
    a: float = 64
    b: float = 0

    @property
    def upper(self) -> int:
        """The longest length it gives but rarely: fixed a, uniform's top, normal's mean + 3 sd."""
        if self.kind == "uniform":
            return int(max(self.a, self.b))
        if self.kind == "normal":
            return int(self.a + 3 * self.b)
        return int(self.a)

    @classmethod
    def parse(cls, text: str, option: str) -> Lengths:
        """`64`, `fixed:64`, `uniform:32-128` or `normal:64,16`; one line on anything else."""
        t = text.strip()
        m = re.fullmatch(r"(?:fixed:)?(\d+)", t)
        if m:
            return cls("fixed", int(m.group(1)))
        m = re.fullmatch(r"uniform:(\d+)-(\d+)", t)
        if m and int(m.group(1)) <= int(m.group(2)):
            return cls("uniform", int(m.group(1)), int(m.group(2)))
        m = re.fullmatch(r"normal:(\d+(?:\.\d+)?),(\d+(?:\.\d+)?)", t)
        if m:
            return cls("normal", float(m.group(1)), float(m.group(2)))
        raise UserError(
            f"{option} {text!r} is not a length distribution",
            f"use e.g. {option} 64, uniform:32-128 or normal:64,16",
        )

    def sample(self, n: int, rng: np.random.Generator, limit: int) -> list[int]:
        """`n` lengths, each within 1..limit."""
        if self.kind == "fixed":
            raw = [self.a] * n
        elif self.kind == "uniform":
            raw = rng.integers(int(self.a), int(self.b) + 1, size=n).tolist()
        else:
            raw = rng.normal(self.a, self.b, size=n).round().tolist()
        return [int(min(max(1, v), limit)) for v in raw]

    def most(self) -> int:
        """The largest length it can give (normal: mean + 4 std)."""
        return int(
            self.b
            if self.kind == "uniform"
            else self.a + 4 * self.b
            if self.kind == "normal"
            else self.a
        )


@dataclass(frozen=True)
class LoadSpec:
    """One load run; each field's help, option and range are the CLI's (`util/settings.py`)."""

    model: str = setting("tiny-llama", option="--model", help="Any --model spec.")
    rate: float = setting(
        4.0,
        option="--rate",
        help="Poisson arrivals per second (default 4), or inf (all at once); several "
        "(0.5,1,2,4) sweep the rate: latency vs throughput, knee.",
        within=Range(0, math.inf, open_low=True),
    )
    requests: int = setting(
        16,
        option="--requests",
        help="Requests to send (default 16; with --duration, the most to send).",
        within=Range(1, 100_000),
    )
    concurrency: int | None = setting(
        None,
        option="--concurrency",
        help="Closed loop: this many in flight (no --rate).",
        within=Range(1, 4096),
    )
    prompt_tokens: Lengths = setting(
        Lengths("fixed", 64),
        option="--prompt-tokens",
        help="Prompt lengths (default 64): 64, uniform:32-128, normal:64,16.",
    )
    new_tokens: Lengths = setting(
        Lengths("fixed", 16), option="--new-tokens", help="Output lengths (default 16), as above."
    )
    server: str = setting(
        "continuous",
        option="--server",
        help="continuous (transformers' continuous batching) or static (padded generate batches).",
    )
    static_batch: int = setting(
        8, option="--static-batch", help="Largest static batch.", within=Range(1, 1024)
    )
    slos: tuple[tuple[str, float], ...] = setting(
        (),
        option="--slo",
        help="ttft_ms=500, tpot_ms=80 or e2e_ms=2000 (repeatable): pass/fail per request, "
        "attainment, goodput.",
    )
    seed: int = setting(
        0,
        option="--seed",
        help="Seeds arrivals, lengths and prompts.",
        within=Range(0, 2**31 - 1),
    )
    device: str = setting("cpu", option="--device", help="cpu, cuda, cuda:N, mps or auto.")
    dtype: str = setting("auto", option="--dtype", help="auto, float32, bfloat16, float16.")
    workload: str | None = setting(
        None,
        option="--workload",
        help="Real traffic instead of --prompt-tokens and --new-tokens: sharegpt:FILE "
        "(ShareGPT JSON), chat:FILE (multi-turn sessions, JSONL), azure:FILE (Azure or "
        "BurstGPT trace CSV, replayed at its times), mooncake:FILE (trace JSONL with shared "
        "prefixes), or a shipped sample: sharegpt-sample, chat-sample, azure-sample, "
        "mooncake-sample.",
    )
    trace_speed: float = setting(
        1.0,
        option="--trace-speed",
        help="Replay a trace this many times faster than recorded.",
        within=Range(0, 1e6, open_low=True),
    )
    kv_blocks: int | None = setting(
        None,
        option="--kv-blocks",
        help="Continuous batching's KV cache size in blocks (default: transformers' own, "
        "from memory).",
        within=Range(1, 10_000_000),
    )
    kv_page_tokens: int | None = setting(
        None,
        option="--kv-page-tokens",
        help="Tokens per KV-cache block (default: transformers' own, 256).",
        within=Range(1, 65536),
    )
    #: power source for energy per request (measure/energy/select.py), in-process runs only
    energy: str = setting(
        "auto",
        option="--energy",
        help="Power source for joules per request: auto, nvml, rapl, powermetrics or off "
        "(in-process runs).",
    )
    power_interval_ms: float = setting(
        100.0,
        option="--power-interval-ms",
        help="Power sampling interval (10 ms or more).",
        within=Range(10, 60_000, unit="ms"),
    )
    #: a server's Prometheus metrics to scrape during the run (serving/server_metrics.py)
    metrics_url: str | None = setting(
        None,
        option="--metrics-url",
        help="A server's Prometheus metrics (vLLM, SGLang, TGI: http://HOST:PORT/metrics), "
        "scraped during the run and stored under their own names.",
    )
    metrics_interval_ms: float = setting(
        1000.0,
        option="--metrics-interval-ms",
        help="Scrape interval (100 ms or more).",
        within=Range(100, 3_600_000, unit="ms"),
    )
    arrivals: str = setting(
        "poisson",
        option="--arrivals",
        help="How requests arrive at --rate: poisson, constant, or gamma:SHAPE (the same mean "
        "rate; SHAPE under 1 is bursty, 1 is Poisson).",
    )
    duration_s: float | None = setting(
        None,
        option="--duration",
        help="Seconds: send only the requests that arrive within them (an open loop at a "
        "finite --rate); --requests then defaults to what the rate can bring.",
        within=Range(0, 1e6, open_low=True, unit="seconds"),
    )
    warmup_requests: int = setting(
        0,
        option="--warmup-requests",
        help="The first N requests (by arrival) run but are left out of every statistic.",
        within=Range(0, 100_000),
    )
    warmup_s: float = setting(
        0.0,
        option="--warmup-s",
        help="Requests arriving within this many seconds of the first run but are left out "
        "of every statistic (with --warmup-requests: either makes a request warm-up).",
        within=Range(0, 1e6, unit="seconds"),
    )
    ramp_to_rate: float | None = setting(
        None,
        option="--ramp-up-to",
        help="The rate rises linearly from --rate to this over the run's requests (an open loop).",
        within=Range(0, 1e6, open_low=True),
    )

    def validate(self) -> LoadSpec:
        """Every setting in range (from its field), then against the others, before loading."""
        check_ranges(self)
        checks = [
            (self.server in SERVERS, f"--server must be one of {', '.join(SERVERS)}"),
            (
                self.prompt_tokens.most() <= 65536 and self.new_tokens.most() <= 65536,
                "lengths must stay within 65536 tokens",
            ),
            (
                (self.kv_blocks is None and self.kv_page_tokens is None)
                or self.server == "continuous",
                "--kv-blocks and --kv-page-tokens size "
                "continuous batching's cache: use --server continuous",
            ),
            (
                self.duration_s is None
                or (self.concurrency is None and math.isfinite(self.rate) and not self.workload),
                "--duration bounds an open loop at a finite --rate without --workload: "
                "give --requests for a closed loop, all-at-once arrivals or a workload",
            ),
            (
                self.warmup_requests < self.requests,
                "--warmup-requests must be within 0..--requests - 1",
            ),
            (
                self.ramp_to_rate is None
                or (self.concurrency is None and math.isfinite(self.rate)),
                "--ramp-up-to is a rate an open loop at a finite --rate rises to",
            ),
        ]
        for ok, message in checks:
            if not ok:
                raise UserError(message, "see `infermeter load --help`")
        parse_arrivals(self.arrivals)
        check_slos(self.slos)
        from infermeter.measure.energy.select import CHOICES

        if self.energy not in CHOICES:
            raise UserError(
                f"--energy {self.energy!r} is not a source", f"use one of {', '.join(CHOICES)}"
            )
        if self.metrics_url is not None:
            from infermeter.serving.server_metrics import check_url

            check_url(self.metrics_url)
        return self


def parse_arrivals(text: str) -> tuple[str, float]:
    """`poisson`, `constant` or `gamma:SHAPE` as (kind, shape); one line on anything else.

    A gamma process with shape k has the same mean gap (1/rate) and a coefficient of
    variation 1/sqrt(k): k = 1 is Poisson, k < 1 bursty (vLLM's `--burstiness`), k > 1
    smoother; constant is the limit of no variation.
    """
    t = text.strip().lower()
    if t in ("poisson", "constant"):
        return t, 1.0
    m = re.fullmatch(r"gamma:(\d+(?:\.\d+)?)", t)
    if m and 0.01 <= float(m.group(1)) <= 1000:
        return "gamma", float(m.group(1))
    raise UserError(
        f"--arrivals {text!r} is not an arrival process",
        "use poisson, constant or gamma:SHAPE (0.01..1000; under 1 is bursty)",
    )


def arrival_offsets_s(
    rate: float, n: int, seed: int, arrivals: str = "poisson", ramp_to: float | None = None
) -> list[float]:
    """Arrival times (s from the start) at `rate` by `arrivals`; `inf`: all at 0.

    The first request arrives after one gap, as a Poisson process's does. With `ramp_to`, the
    rate rises linearly from `rate` to `ramp_to` with the requests sent (vLLM's linear ramp:
    request i of n arrives at rate + (ramp_to - rate) * i / (n - 1)).
    """
    import numpy as np

    if math.isinf(rate):
        return [0.0] * n
    kind, shape = parse_arrivals(arrivals)
    rng = np.random.default_rng(seed)
    end = rate if ramp_to is None else ramp_to
    rates = np.linspace(rate, end, n) if n > 1 else np.full(n, rate)
    if kind == "constant":
        gaps = 1.0 / rates
    elif kind == "gamma":
        gaps = rng.gamma(shape, 1.0, size=n) / (rates * shape)
    else:
        gaps = rng.exponential(1.0, size=n) / rates
    return [float(x) for x in np.cumsum(gaps)]


@dataclass
class Request:
    """One request and what happened to it; times in seconds on the run's perf_counter."""

    index: int
    prompt_ids: list[int]
    new_tokens: int
    arrival_s: float = math.nan
    start_s: float = math.nan  # left the queue (its prefill began)
    token_s: list[float] = field(default_factory=list)
    end_s: float = math.nan
    error: str | None = None
    #: output tokens the server counted (an endpoint's usage), when it says
    server_tokens: int | None = None
    #: prompt tokens the server counted (usage): a chat template's tokens show up here
    server_prompt_tokens: int | None = None
    #: when an endpoint client sent it (NaN in-process: nothing is sent)
    sent_s: float = math.nan
    #: the first streamed chunk with a choice (an EOS-only completion's first token time)
    first_event_s: float = math.nan
    #: when the endpoint client's last read of the response body returned (its chunks' time)
    read_s: float = math.nan
    #: the server's own prefill and decode times, where it reports them (llama.cpp)
    server_timing: ServerTiming | None = None
    #: which of the endpoint's servers it went to (round robin over several URLs)
    server_index: int | None = None
    #: an endpoint request's traced HTTP events (name, time), for its phases
    http_events: list[tuple[str, float]] = field(default_factory=list)
    #: the request this one is sent after (its session's previous turn); None: by arrival
    follows: int | None = None
    session: int | None = None
    turn: int = 0
    #: a session's messages up to this turn (sent as they are to a chat endpoint)
    messages: list[dict[str, str]] | None = None

    def row(self, origin: float) -> RequestRowDoc:
        """The request's sample row: latencies in ms, times from the run's start.

        Latencies run from the request's arrival (its scheduled send time in an open loop),
        and `*_from_send_ms` from when it was sent: the two differ by the client's lateness
        (`queue_ms` at an endpoint), which an arrival-based figure keeps (coordinated
        omission). In-process nothing is sent: those two are NaN.
        """
        first = self.token_s[0] if self.token_s else self.first_event_s
        ttft = (first - self.arrival_s) * 1e3
        itl = [(b - a) * 1e3 for a, b in zip(self.token_s, self.token_s[1:], strict=False)]
        timing = self.server_timing
        row: RequestRowDoc = {
            "sample_id": self.index,
            "arrival_ms": (self.arrival_s - origin) * 1e3,
            "queue_ms": (self.start_s - self.arrival_s) * 1e3,
            "ttft_ms": ttft,
            "tpot_ms": sum(itl) / len(itl) if itl else math.nan,
            "e2e_ms": (self.end_s - self.arrival_s) * 1e3,
            "ttft_from_send_ms": (first - self.sent_s) * 1e3,
            "e2e_from_send_ms": (self.end_s - self.sent_s) * 1e3,
            "ttst_ms": itl[0] if itl else math.nan,
            "itl_ms": itl,
            "prompt_tokens": len(self.prompt_ids),
            "new_tokens_asked": self.new_tokens,
            "output_tokens": len(self.token_s),
            "server_output_tokens": self.server_tokens,
            "server_prompt_tokens": self.server_prompt_tokens,
            "server_prefill_ms": timing.prefill_ms if timing else None,
            "server_decode_ms_per_token": timing.decode_ms_per_token if timing else None,
            "error": self.error,
            "server_index": self.server_index,
            "session": self.session,
            "turn": self.turn,
        }
        if self.http_events:
            phases = http_phases(self.http_events, self.sent_s)
            row["http_build_ms"] = phases["http_build_ms"]
            row["http_connect_ms"] = phases["http_connect_ms"]
            row["http_send_ms"] = phases["http_send_ms"]
            row["http_wait_ms"] = phases["http_wait_ms"]
        return row


@dataclass
class Plan:
    """The requests of a run, when each arrives, and the workload they came from."""

    requests: list[Request]
    #: arrival from the start (s) of each request; NaN for a turn sent after the one before
    offsets_s: list[float]
    #: the workload's description (workloads/traffic.py), None for the length distributions
    workload: TrafficDoc | None = None


def plan_requests(spec: LoadSpec, tokenizer: Any, limit: int) -> Plan:
    """The run's requests and arrivals: from `spec.workload`, or the asked lengths at `rate`.

    With no tokenizer (`load --predict`: a model without weights) and no workload, the requests
    have the asked lengths and placeholder prompts.
    """
    if spec.workload is None:
        made = (
            make_requests(spec, tokenizer, limit)
            if tokenizer is not None
            else [Request(i, [0] * p, n) for i, (p, n) in enumerate(request_lengths(spec, limit))]
        )
        offsets = arrival_offsets_s(
            spec.rate, len(made), spec.seed, spec.arrivals, spec.ramp_to_rate
        )
        if spec.duration_s is not None:  # only what arrives within the run's duration
            keep = max(1, sum(at <= spec.duration_s + 1e-9 for at in offsets))
            made, offsets = made[:keep], offsets[:keep]
        return Plan(made, offsets)
    from infermeter.workloads.traffic import load_traffic

    traffic = load_traffic(
        spec.workload, tokenizer, limit, spec.requests, spec.seed, spec.trace_speed
    )
    reqs: list[Request] = []
    last_of: dict[int, int] = {}
    for i, t in enumerate(traffic.turns):
        follows = last_of.get(t.session) if t.turn > 0 else None
        reqs.append(
            Request(
                i,
                t.prompt_ids,
                t.new_tokens,
                follows=follows,
                session=t.session,
                turn=t.turn,
                messages=t.messages,
            )
        )
        last_of[t.session] = i
    if traffic.timed:
        offsets = [t.offset_s or 0.0 for t in traffic.turns]
    else:
        firsts = [i for i, r in enumerate(reqs) if r.follows is None]
        poisson = arrival_offsets_s(
            spec.rate, len(firsts), spec.seed, spec.arrivals, spec.ramp_to_rate
        )
        offsets = [math.nan] * len(reqs)
        for i, at in zip(firsts, poisson, strict=True):
            offsets[i] = at
    return Plan(reqs, offsets, traffic.describe())


def request_lengths(spec: LoadSpec, limit: int) -> list[tuple[int, int]]:
    """Seeded (prompt, new) token counts of the run's requests, each checked against `limit`.

    `make_requests` builds its prompts at these lengths, and `load --predict` simulates the
    same requests without a tokenizer, so both read them here.
    """
    import numpy as np

    asked = (("--prompt-tokens", spec.prompt_tokens), ("--new-tokens", spec.new_tokens))
    for option, lens in asked:
        # a normal distribution's tail is clamped; a length asked for is never silently cut
        # (5000 prompt tokens were reported as "a request of 4096 prompt")
        if lens.kind != "normal" and lens.most() >= limit:
            raise UserError(
                f"{option} {lens.most()} does not fit the context of {limit} positions",
                f"keep prompt + new tokens <= {limit}",
            )
    rng = np.random.default_rng(spec.seed)
    prompt_lens = spec.prompt_tokens.sample(spec.requests, rng, limit)
    new_lens = spec.new_tokens.sample(spec.requests, rng, limit)
    for p, n in zip(prompt_lens, new_lens, strict=True):
        if p + n > limit:
            raise UserError(
                f"a request of {p} prompt + {n} new tokens exceeds the context ({limit})",
                "use shorter --prompt-tokens or --new-tokens",
            )
    return list(zip(prompt_lens, new_lens, strict=True))


def make_requests(spec: LoadSpec, tokenizer: Any, limit: int) -> list[Request]:
    """Seeded prompts of the asked lengths from the built-in corpus, and their output lengths."""
    from infermeter.workloads.prompts import WorkloadSpec, build_batches

    out = []
    for i, (p, n) in enumerate(request_lengths(spec, limit)):
        work = WorkloadSpec(batch_size=1, prompt_tokens=p, chat=False, seed=spec.seed + i)
        (batch,) = build_batches(tokenizer, work, 1)
        out.append(Request(i, batch.input_ids[0, -p:].tolist(), n))
    return out


class _Arrivals:
    """Which requests have arrived by now: open loop (offsets) or closed loop.

    `finished(request)` is told as each request ends: a session's next turn arrives then, and
    the live page's line (a `run.progress.LiveProgress`, when a store was given) is kept up to
    date: requests served of the total, tokens so far, requests in flight.
    """

    def __init__(
        self,
        reqs: list[Request],
        offsets: list[float],
        concurrency: int | None,
        live: Any = None,
        keeper: Any = None,
    ) -> None:
        self.reqs, self.offsets, self.concurrency = reqs, offsets, concurrency
        self.keeper = keeper
        #: requests that arrive on their own (not after an earlier turn), in arrival order
        self.order = [i for i, r in enumerate(reqs) if r.follows is None]
        self.next_turn = {r.follows: i for i, r in enumerate(reqs) if r.follows is not None}
        #: later turns whose previous turn has ended, waiting to be sent
        self.ready: list[Request] = []
        self.next = 0
        self.in_flight = 0
        self.served = 0
        self.live = live

    def finished(self, request: Request) -> None:
        """`request` ended: its session's next turn arrives now."""
        self.in_flight -= 1
        self.served += 1
        if self.keeper is not None:
            self.keeper.finished(request)
        nxt = self.next_turn.get(request.index)
        if nxt is not None:
            self.reqs[nxt].arrival_s = (
                request.end_s if math.isfinite(request.end_s) else (time.perf_counter())
            )
            self.ready.append(self.reqs[nxt])
        if self.live is not None:  # the progress row's `steps` holds a load's in-flight count
            steps = self.live.state.get("steps") or {}  # a new dict: a row is a snapshot
            self.live.state["steps"] = one_instant({**steps, "in_flight": self.in_flight})
            self.live.state["tokens"] += len(request.token_s)
            self.live("requests", self.served, len(self.reqs))

    def _room(self) -> bool:
        return self.concurrency is None or self.in_flight < self.concurrency

    def due(self, t0: float) -> list[Request]:
        """Requests arriving now (their arrival time set); none once all have come."""
        out = []
        while self.ready and self._room():
            out.append(self.ready.pop(0))
            self.in_flight += 1
        now = time.perf_counter()
        while self.next < len(self.order) and self._room():
            r = self.reqs[self.order[self.next]]
            arrival = now if self.concurrency is not None else t0 + self.offsets[r.index]
            if arrival > now:
                break
            r.arrival_s = arrival
            out.append(r)
            self.next += 1
            self.in_flight += 1
        return out

    def wait_s(self, t0: float) -> float:
        """How long until the next open-loop arrival (a short poll in a closed loop)."""
        if self.ready:
            return 0.0
        if self.concurrency is not None or self.next >= len(self.order):
            return 0.02
        return max(0.0, t0 + self.offsets[self.order[self.next]] - time.perf_counter())


def serve_continuous(loaded: Any, arrivals: _Arrivals, spec: LoadSpec | None = None) -> Any:
    """Requests through transformers' continuous batching; token times from its own records.

    Returns the `serving.batch_state.StepRecorder` that watched every scheduler step.
    """
    from transformers import GenerationConfig

    from infermeter.errors import GenerationFailed
    from infermeter.serving.batch_state import StepRecorder

    model = loaded.model
    most = max(r.new_tokens for r in arrivals.reqs)
    pad = loaded.tokenizer.pad_token_id if loaded.tokenizer.pad_token_id is not None else 0
    make: Any = GenerationConfig  # transformers leaves its constructor untyped
    gen = make(max_new_tokens=most, do_sample=False, eos_token_id=-1, pad_token_id=pad)
    saved_attn = getattr(model.config, "_attn_implementation", None)
    cb_config, sized = _cb_config(spec, arrivals.reqs, model)
    manager = model.init_continuous_batching(
        generation_config=gen, continuous_batching_config=cb_config
    )
    recorder = StepRecorder(manager, arrivals.live)
    recorder.cache["sized"] = sized
    manager.start()
    try:
        warm = manager.add_request(
            arrivals.reqs[0].prompt_ids[:8], request_id="warm-up", max_new_tokens=2, eos_token_id=-1
        )
        _collect(manager, {warm: None}, arrivals, timeout_s=600.0)
        pending: dict[str, Request] = {}
        t0 = time.perf_counter()
        done = 0
        while done < len(arrivals.reqs):
            for r in arrivals.due(t0):
                rid = manager.add_request(
                    r.prompt_ids,
                    request_id=f"r{r.index}",
                    max_new_tokens=r.new_tokens,
                    record_timestamps=True,
                    eos_token_id=-1,
                )
                if rid is None:
                    raise GenerationFailed(None, RuntimeError("the manager refused a request"))
                pending[rid] = r
            done += _collect(manager, pending, arrivals, timeout_s=arrivals.wait_s(t0))
            fatal = manager.background_thread_status.fatal_error
            if fatal is not None:
                raise GenerationFailed(None, RuntimeError(f"continuous batching: {fatal}"))
    finally:
        manager.stop(block=True)
        if hasattr(model, "destroy_cached_continuous_batching_manager"):
            model.destroy_cached_continuous_batching_manager()
        if saved_attn is not None:
            model.config._attn_implementation = saved_attn
    return recorder


#: share of the KV blocks transformers' FIFO scheduler keeps free before it admits a prefill
CB_SAFETY_MARGIN = 0.15


def _cb_config(spec: LoadSpec | None, reqs: list[Request], model: Any) -> tuple[Any, str]:
    """The run's ContinuousBatchingConfig (transformers'), and how its cache was sized.

    --kv-blocks / --kv-page-tokens when given. Otherwise on a CPU the cache holds every request
    of the run at once (with the scheduler's 15% margin and some room): transformers sizes it
    from free memory, and zeroing gigabytes of RAM took 7 of a 2-request run's 12 s here,
    for a cache that can never fill. On a GPU its own sizing stands (what a server would do).
    """
    from transformers.generation.configuration_utils import ContinuousBatchingConfig

    sizes: dict[str, Any] = {}
    if spec is not None and spec.kv_page_tokens is not None:
        sizes["page_size"] = spec.kv_page_tokens
    if spec is not None and spec.kv_blocks is not None:
        return ContinuousBatchingConfig(num_blocks=spec.kv_blocks, **sizes), "--kv-blocks"
    blocks = (
        _blocks_for_all(reqs, model, sizes.get("page_size") or ContinuousBatchingConfig().page_size)
        if model.device.type == "cpu"
        else None
    )
    if blocks is None:
        return (ContinuousBatchingConfig(**sizes) if sizes else None), "transformers (memory)"
    return ContinuousBatchingConfig(num_blocks=blocks, **sizes), "every request at once"


def _blocks_for_all(reqs: list[Request], model: Any, page: int) -> int | None:
    """KV blocks for every request in flight at once; None when that is not far below memory."""
    import psutil

    from infermeter.models.info import config_value

    c = (
        model.config.get_text_config()
        if hasattr(model.config, "get_text_config")
        else (model.config)
    )
    heads = int(config_value(c, "num_attention_heads", "n_head", default=0) or 0)
    hidden = int(config_value(c, "hidden_size", "n_embd", "d_model", default=0) or 0)
    layers = int(config_value(c, "num_hidden_layers", "n_layer", default=0) or 0)
    if not (heads and hidden and layers):
        return None  # a config of its own: transformers knows its cache better
    kv_heads = int(config_value(c, "num_key_value_heads", default=heads) or heads)
    head_dim = int(config_value(c, "head_dim", default=hidden // heads) or hidden // heads)
    per_token = 2 * layers * kv_heads * head_dim * next(model.parameters()).element_size()
    need = sum(math.ceil((len(r.prompt_ids) + r.new_tokens) / page) for r in reqs) + 1
    blocks = math.ceil(need / (1 - CB_SAFETY_MARGIN)) + 2
    if blocks * page * per_token > 0.25 * psutil.virtual_memory().available:
        return None
    return blocks


def _collect(manager: Any, pending: dict[str, Any], arrivals: _Arrivals, timeout_s: float) -> int:
    """Take finished results for `pending` until the timeout; how many finished."""
    done = 0
    deadline = time.perf_counter() + max(timeout_s, 0.001)
    while True:
        left = deadline - time.perf_counter()
        result = manager.get_result(timeout=max(left, 0.001))
        if result is not None and result.is_finished() and result.request_id in pending:
            r = pending.pop(result.request_id)
            if r is not None:
                r.start_s, r.end_s = result.lifespan
                r.token_s = list(result.timestamps or [])
                r.error = result.error
                arrivals.finished(r)
            done += 1
        if left <= 0 or not pending or arrivals.ready:
            return done


def serve_static(loaded: Any, arrivals: _Arrivals, batch: int) -> None:
    """The baseline: arrived requests, up to `batch`, as one padded generate call.

    Whenever the model is free, the requests that have arrived run together; every token is
    marked, and a request's last token is its own `new_tokens`-th.
    """
    import torch

    from infermeter.measure.clock import PerfCounterClock
    from infermeter.run.generation import generation_config, timed_generate

    clock = PerfCounterClock()
    pad = loaded.tokenizer.pad_token_id if loaded.tokenizer.pad_token_id is not None else 0
    device = next(loaded.model.parameters()).device
    queue: list[Request] = []
    served = 0
    t0 = time.perf_counter()
    while served < len(arrivals.reqs):
        queue += arrivals.due(t0)
        if not queue:
            time.sleep(arrivals.wait_s(t0))
            continue
        take, queue = queue[:batch], queue[batch:]
        width = max(len(r.prompt_ids) for r in take)
        ids = torch.full((len(take), width), pad, dtype=torch.long)
        mask = torch.zeros((len(take), width), dtype=torch.long)
        for row, r in enumerate(take):
            ids[row, width - len(r.prompt_ids) :] = torch.tensor(r.prompt_ids)
            mask[row, width - len(r.prompt_ids) :] = 1
        most = max(r.new_tokens for r in take)
        gen = generation_config(loaded.tokenizer, most)
        kw = {"input_ids": ids.to(device), "attention_mask": mask.to(device)}
        timed = timed_generate(loaded.model, kw, gen, clock, most)
        start_s = timed.start / 1e9
        marks_s = [m / 1e9 for m in timed.marks]
        for r in take:
            r.start_s, r.token_s = start_s, marks_s[: r.new_tokens]
            r.end_s = r.token_s[-1] if r.token_s else start_s
            arrivals.finished(r)
        served += len(take)


def _timeline(rows: list[RequestRowDoc]) -> list[TimelineRowDoc]:
    """Requests in flight over time: +1 at each arrival, -1 at each end (ms from the start)."""
    events = [(r["arrival_ms"], 1) for r in rows] + [
        (r["arrival_ms"] + r["e2e_ms"], -1) for r in rows if not math.isnan(r["e2e_ms"])
    ]
    level = 0
    out: list[TimelineRowDoc] = []
    for t, step in sorted(events):
        level += step
        out.append({"t_ms": t, "in_flight": level})
    return out


def summarize_load(rows: list[RequestRowDoc], wall_s: float) -> LoadSummaryDoc:
    """Throughput and the median, p90 and p99 of every latency (with the median's interval)."""
    from infermeter.measure.stats import summarize

    rate = wall_s > 0
    return {
        "requests": len(rows),
        "failed": sum(r["error"] is not None for r in rows),
        "wall_s": wall_s,
        "throughput_rps": len(rows) / wall_s if rate else math.nan,
        "output_tokens_per_s": sum(r["output_tokens"] for r in rows) / wall_s if rate else math.nan,
        "queue_ms": summarize(r["queue_ms"] for r in rows).to_dict(),
        "ttft_ms": summarize(r["ttft_ms"] for r in rows).to_dict(),
        "ttst_ms": summarize(r["ttst_ms"] for r in rows).to_dict(),
        "tpot_ms": summarize(r["tpot_ms"] for r in rows).to_dict(),
        "e2e_ms": summarize(r["e2e_ms"] for r in rows).to_dict(),
        "itl_ms": summarize(x for r in rows for x in r["itl_ms"]).to_dict(),
    }


def run_load(
    spec: LoadSpec,
    loaded: LoadedModel | None = None,
    sink: RunSink | None = None,
    endpoint: Endpoint | None = None,
    keep: bool = False,
    on_progress: ProgressFn | None = None,
) -> LoadResult:
    """Drive the requests through the chosen server: the run's document.

    `on_progress("requests", served, total)` hears each finished request (the CLI's bar).

    Shape: {"meta": {kind, spec, model, device}, "summary": {throughput, latencies, slo},
    "timeline": in-flight requests over time, "all_samples": one row per request}.

    Ctrl-C, SIGTERM or SIGHUP mid-run end it as a profile's do: the requests that finished are
    the document, `meta["interrupted"]` holds the KeyboardInterrupt (`Terminated` for a signal)
    for the caller to store the run and then raise; nothing finished re-raises at once. An
    interrupted load stored nothing before (issue 35).

    With `endpoint`, the same requests go to that server (serving/endpoint.py); `spec.model` then
    only names the tokenizer that builds the prompts and counts streamed tokens.

    With `keep` (and a store as `sink`), the run is in the store from its first finished request
    on (serving/keeper.py), so a kill keeps what was served; `store_load` then finishes that run
    instead of adding another.

    Long because it wires the run's instruments (live line, keeper, power sampler, metrics
    scrape) around one serve call, each torn down in the one `finally`.
    """
    if endpoint is not None:
        return _endpoint_load(spec, endpoint, sink, keep, on_progress)
    import torch

    from infermeter.measure.device import describe_device
    from infermeter.models.loader import load_model
    from infermeter.run.signals import stop_on_signals

    spec.validate()
    lm = loaded or load_model(spec.model, dtype=spec.dtype, device=spec.device, seed=spec.seed)
    limit = lm.info.max_positions or 10**9
    plan = plan_requests(spec, lm.tokenizer, limit)
    reqs = plan.requests
    from infermeter.run.progress import LiveProgress

    live = LiveProgress(sink, lm.info.spec, on_progress) if sink or on_progress else None
    device = describe_device(next(lm.model.parameters()).device)
    versions: VersionsDoc = {"torch": torch.__version__}
    keeper = _keeper(sink if keep else None, spec, reqs, lm.info.to_dict(), device, versions)
    arrivals = _Arrivals(reqs, plan.offsets_s, spec.concurrency, live, keeper)
    interrupted: KeyboardInterrupt | None = None
    recorder = None
    sampler, energy_off = _power_sampler(spec)
    scraper = _scraper(spec)
    try:
        if live is not None:
            live.state["steps"] = {"in_flight": 0}
            live("requests", 0, len(reqs))
        with stop_on_signals(), torch.inference_mode():
            if spec.server == "continuous":
                recorder = serve_continuous(lm, arrivals, spec)
            else:
                serve_static(lm, arrivals, spec.static_batch)
    except KeyboardInterrupt as exc:  # Terminated too (SIGTERM, SIGHUP)
        interrupted = exc
    finally:
        stops = [live.end] if live is not None else []
        if sampler is not None:  # powermetrics runs a process: never leave it behind
            stops += [sampler.stop, sampler.source.close]
        kept, late = _tear_down([*stops, *([scraper.stop] if scraper else [])], keeper)
        interrupted = interrupted or late
    meta: LoadMetaDoc = {
        "kind": "load",
        "model": lm.info.spec,
        "model_info": lm.info.to_dict(),
        "device": device,
        "versions": versions,
        "spec": spec_document(spec),
        "workload": plan.workload,
    }
    if kept is not None:
        meta["kept_run_id"] = kept
    doc = _document(spec, reqs, meta, interrupted)
    origin = min(r.arrival_s for r in reqs if math.isfinite(r.arrival_s))
    members = _add_steps(doc, recorder, origin) if recorder is not None else []
    doc["summary"]["energy"] = _energy(doc, sampler, energy_off, members, origin)
    _add_metrics(doc, scraper, origin)
    return LoadResult(doc)


def _tear_down(stops: list[Any], keeper: Any) -> tuple[str | None, KeyboardInterrupt | None]:
    """Every stop run, then the keeper closed: (the kept run's id, a Ctrl-C that came meanwhile).

    A Ctrl-C during the last metrics scrape escaped the run, so the requests that had finished
    were never stored although the CLI said they were (issue 58): each stop runs whatever the
    one before it met, and the interrupt is handed back to be stored with the run.
    """
    late: KeyboardInterrupt | None = None
    for stop in stops:
        try:
            stop()
        except KeyboardInterrupt as exc:
            late = late or exc
    while True:  # the writer's queue drained even through a second Ctrl-C
        try:
            return (keeper.close() if keeper is not None else None), late
        except KeyboardInterrupt as exc:
            late = late or exc


def spec_document(spec: LoadSpec) -> LoadSpecDoc:
    """The spec as a run stores it (lengths as objects, SLOs by name, URLs masked).

    Every field of LoadSpec, by its name: a test holds LoadSpecDoc's keys to the fields.
    """
    doc = {
        **asdict(spec),
        "prompt_tokens": asdict(spec.prompt_tokens),
        "new_tokens": asdict(spec.new_tokens),
        "slos": dict(spec.slos),
        "metrics_url": masked_url(spec.metrics_url) if spec.metrics_url else None,
    }
    return cast("LoadSpecDoc", doc)


def _config_of(spec_doc: LoadSpecDoc) -> RunConfigDoc:
    """A stored load run's `config`: the model, mode `load`, its SLOs and the whole spec."""
    return {
        "model": spec_doc["model"],
        "mode": "load",
        "slos": [list(p) for p in spec_doc["slos"].items()],
        "load": spec_doc,
    }


def _knobs_of(spec_doc: LoadSpecDoc) -> dict[str, Any]:
    rate = spec_doc["rate"]
    return {"rate": rate if math.isfinite(rate) else "inf", "server": spec_doc["server"]}


def _keeper(
    sink: Any,
    spec: LoadSpec,
    reqs: list[Request],
    model_info: ModelInfoDoc,
    device: DeviceDoc,
    versions: VersionsDoc,
) -> Any:
    """A `Keeper` of the run in `sink` as requests finish (None without a store to keep it)."""
    from infermeter.run.sink import LiveSink

    if not isinstance(sink, LiveSink):  # no store, or one that keeps nothing as it goes
        return None
    from infermeter.run.results import RunResult
    from infermeter.serving.keeper import Keeper
    from infermeter.util.timestamps import now_iso

    asked = spec_document(spec)
    skeleton = RunResult(
        run_id=None,
        config=_config_of(asked),
        knobs=_knobs_of(asked),
        model_info=model_info,
        device=device,
        versions=versions,
        created=now_iso(),
        notes=["load run in progress: each sample is one request, kept as it finished"],
    )
    return Keeper(sink, skeleton, reqs)


def store_load(result: LoadResult, store: Any, interrupted: Any = None) -> str:
    """Keep a load run's document in `store` (one sample per request); its run id.

    A run kept as it went (`run_load(keep=True)`) is finished in place, its samples replaced
    by the document's; any other is added.
    """
    doc = as_load_doc(result)
    kept = doc["meta"].pop("kept_run_id", None)
    run = as_run({**doc, "meta": {**doc["meta"], "interrupted": interrupted}})
    if kept is not None:
        run.run_id = kept
        store.finish_run(run, replace=True)
    else:
        kept = store.save(run)
    doc["meta"]["run_id"] = kept
    return str(kept)


def _scraper(spec: LoadSpec) -> Any:
    """A started scrape of `spec.metrics_url` (None without one)."""
    if spec.metrics_url is None:
        return None
    from infermeter.serving.server_metrics import Scraper

    return Scraper(spec.metrics_url, spec.metrics_interval_ms / 1e3).start()


def _add_metrics(doc: LoadDoc, scraper: Any, origin: float) -> None:
    """The scraped series on the run's clock, and the engine's state metrics summarised."""
    if scraper is None:
        return
    from infermeter.serving.server_metrics import state_summary

    scraped = doc["server_metrics"] = scraper.series(origin)
    doc["summary"]["server_metrics"] = {
        "url": scraped["url"],
        "scrapes": scraped["scrapes"],
        "failures": scraped["failures"],
        "first_failure": scraped["first_failure"],
        "series": len(scraped["series"]),
        "state": state_summary(scraped),
    }


def _power_sampler(spec: LoadSpec) -> tuple[Any, str | None]:
    """A started power sampler for the run, or None and why (no source, --energy off)."""
    from infermeter.measure.energy.sampler import PowerSampler
    from infermeter.measure.energy.select import open_source

    sources, missing = open_source(spec.energy, spec.power_interval_ms)
    if sources is None:
        return None, "; ".join(m.reason for m in missing) or "no power source"
    return PowerSampler(sources, spec.power_interval_ms).start(), None


def _energy(
    doc: LoadDoc,
    sampler: Any,
    why_not: str | None,
    members: list[list[tuple[str, int, bool]]],
    origin: float,
) -> LoadEnergyDoc:
    """Per request joules (written into the rows) and the run's energy figures."""
    from infermeter.serving.energy import attribute, energy_summary, no_energy

    if sampler is None:
        return no_energy(why_not or "no power source")
    trace = sampler.trace(origin_ns=int(origin * 1e9))
    steps = doc.get("steps") or []
    per, totals = attribute(steps, members, trace, doc["summary"]["wall_s"] * 1e3)
    for row in doc["all_samples"]:
        got = per.get(f"r{row['sample_id']}")
        row["energy_j"] = got["energy_j"] if got else None
        row["prefill_j"] = got["prefill_j"] if got else None
        row["decode_j"] = got["decode_j"] if got else None
    out = energy_summary(doc["all_samples"], totals)
    if not steps:
        out["note"] = "no scheduler steps (static batching): the run's energy only, not per request"
    return out


def _add_steps(doc: LoadDoc, recorder: Any, origin: float) -> list[list[tuple[str, int, bool]]]:
    """The batch's state per step (serving/batch_state.py), from the run's first arrival on.

    Returns who was in each step (request id, tokens, prefill or not), for energy shares.
    """
    from infermeter.serving.batch_state import summarize_steps

    steps: list[StepRowDoc] = [s for s in recorder.rows(origin) if s["t_ms"] >= 0]
    # who was in each step: energy shares need them, the stored row does not
    members = [cast("dict[str, Any]", s).pop("_members", []) for s in steps]
    doc["steps"] = steps
    doc["summary"]["batch"] = summarize_steps(steps, doc["summary"]["wall_s"] * 1e3)
    doc["meta"]["step_state"] = {
        "missing": sorted(recorder.missing),
        "thinned": recorder.thinned,
        "cache": recorder.cache,
    }
    return members


def _document(spec: LoadSpec, reqs: list[Request], meta: LoadMetaDoc, interrupted: Any) -> LoadDoc:
    """A load run's document from its requests (only the finished ones when interrupted)."""
    from infermeter.serving.endpoint import failed_latencies

    if interrupted is not None:
        reqs = [r for r in reqs if math.isfinite(r.end_s)]
        if not reqs:
            raise interrupted
    by_arrival = sorted(reqs, key=lambda r: r.arrival_s)
    warm = {r.index for r in by_arrival[: spec.warmup_requests]}
    if spec.warmup_s > 0 and by_arrival:
        start = by_arrival[0].arrival_s
        warm |= {r.index for r in by_arrival if r.arrival_s - start < spec.warmup_s}
    measured = [r for r in reqs if r.index not in warm]
    covered = None
    if not measured:  # a warm-up as long as the run: measure all, and say so
        covered = (
            f"the warm-up (--warmup-s {spec.warmup_s:g}) covered all {len(reqs)} requests: "
            "none were left out; give a shorter warm-up or more requests"
        )
        measured, warm = list(reqs), set()
    origin = min(r.arrival_s for r in measured)
    wall_s = max(r.end_s for r in measured) - origin
    rows = [failed_latencies(r.row(origin)) for r in measured]
    warmup_rows = [failed_latencies(r.row(origin)) for r in reqs if r.index in warm]
    summary = summarize_load(rows, wall_s)
    summary["warmup_requests"] = len(warmup_rows)
    summary["warmup_note"] = covered
    summary["slo"] = slo_report(rows, spec.slos, wall_s)
    if interrupted is not None:
        meta["interrupted"] = interrupted
    doc: LoadDoc = {
        "meta": meta,
        "summary": summary,
        "timeline": _timeline(rows),
        "all_samples": rows,
    }
    if warmup_rows:  # kept beside, never in a statistic (their arrival_ms is negative)
        doc["warmup_samples"] = warmup_rows
    return doc


def _endpoint_load(
    spec: LoadSpec,
    endpoint: Endpoint,
    sink: Any,
    keep: bool,
    on_progress: ProgressFn | None = None,
) -> LoadResult:
    """`run_load` against an OpenAI-compatible server.

    Long because, as `run_load`, it wires the live line, keeper and scrape around one serve
    call and builds the endpoint's own meta (masked URLs, headers by name only).
    """
    from infermeter.models.tokenizer import tokenizer_of
    from infermeter.run.progress import LiveProgress
    from infermeter.run.signals import stop_on_signals
    from infermeter.serving.endpoint import base_url, serve_endpoint

    spec.validate()
    tokenizer = tokenizer_of(spec.model)
    plan = plan_requests(spec, tokenizer, 10**9)  # the server says what fits (HTTP 400)
    reqs = plan.requests
    texts = [tokenizer.decode(r.prompt_ids, skip_special_tokens=True) for r in reqs]
    name = endpoint.model or masked_url(endpoint.url)
    live = LiveProgress(sink, name, on_progress) if sink or on_progress else None
    url = masked_url(base_url(endpoint.url))  # shown and stored: never its credentials
    device: DeviceDoc = {"name": f"endpoint {url}", "kind": "endpoint"}
    info: ModelInfoDoc = {
        "spec": f"{endpoint.model or '?'} @ {url}",
        "endpoint": url,
        "tokenizer": spec.model,
    }
    keeper = _keeper(sink if keep else None, spec, reqs, info, device, {})
    done: list[int] = []

    def finished(request: Request) -> None:
        done.append(len(request.token_s))
        if keeper is not None:
            keeper.finished(request)
        if live is not None:
            live.state["tokens"] += len(request.token_s)
            live("requests", len(done), len(reqs))

    check = _probe(endpoint, tokenizer, reqs, spec)
    interrupted: KeyboardInterrupt | None = None
    served: Served | None = None
    scraper = _scraper(spec)
    try:
        if live is not None:
            live("requests", 0, len(reqs))
        with stop_on_signals():
            served = serve_endpoint(
                reqs,
                texts,
                plan.offsets_s,
                spec.concurrency,
                endpoint,
                tokenizer,
                on_finished=finished,
            )
    except KeyboardInterrupt as exc:
        interrupted = exc
    finally:
        stops = [live.end] if live is not None else []
        kept, late = _tear_down([*stops, *([scraper.stop] if scraper else [])], keeper)
        interrupted = interrupted or late
    name = served.model if served is not None else (endpoint.model or "?")
    endpoint_meta: EndpointMetaDoc = {
        "url": url,
        "model": name,
        "api": endpoint.api,
        "multi_token_chunks": served.multi_token_chunks if served is not None else 0,
        "urls": [masked_url(base_url(u)) for u in endpoint.urls],
        "aborted": served.aborted if served is not None else None,
        # names only: a header's value may be a credential
        "headers": sorted(endpoint.headers),
        "extra_body": dict(endpoint.extra_body),
    }
    meta: LoadMetaDoc = {
        "kind": "load",
        "model": name,
        "model_info": {
            "spec": f"{name} @ {url}",
            "name": name,
            "endpoint": url,
            "tokenizer": spec.model,
        },
        "device": device,
        "versions": {},
        "spec": spec_document(spec),
        "endpoint": endpoint_meta,
        "workload": plan.workload,
    }
    if kept is not None:
        meta["kept_run_id"] = kept
    doc = _document(spec, reqs, meta, interrupted)
    _add_client(doc, served, check, spec)
    if any(math.isfinite(r.arrival_s) for r in reqs):
        _add_metrics(doc, scraper, min(r.arrival_s for r in reqs if math.isfinite(r.arrival_s)))
    return LoadResult(doc)


def _probe(endpoint: Endpoint, tokenizer: Any, reqs: list[Request], spec: LoadSpec) -> Any:
    """The client's short self-check before the run (None with --no-selfcheck)."""
    if not endpoint.selfcheck:
        return None
    import statistics

    from infermeter.serving.selfcheck import probe

    tokens = int(statistics.median(r.new_tokens for r in reqs))
    return probe(tokenizer, tokens, spec.rate if spec.concurrency is None else math.inf)


def _add_client(doc: LoadDoc, served: Served | None, check: Any, spec: LoadSpec) -> None:
    """What the client cost, the server's drift, latency from the send, and token counts."""
    from infermeter.measure.stats import summarize
    from infermeter.serving.drift import drift_verdict
    from infermeter.serving.selfcheck import verdict

    s, rows = doc["summary"], doc["all_samples"]
    cores = served.client_cores if served is not None else math.nan
    client: ClientDoc = {"cores": cores, "selfcheck": None, "verdict": None}
    if check is not None:
        v = verdict(check, s, cores, spec.rate if spec.concurrency is None else math.inf)
        client["selfcheck"], client["selfcheck_line"] = check.to_doc(), check.line()
        client["verdict"], client["line"] = v.to_doc(), v.line()
    s["client"] = client
    d = drift_verdict(rows)
    s["drift"] = None if d is None else d.to_doc()
    s["from_send"] = {
        "send_lag_ms": summarize(r["queue_ms"] for r in rows).to_dict(),
        "ttft_ms": summarize(r["ttft_from_send_ms"] for r in rows).to_dict(),
        "e2e_ms": summarize(r["e2e_from_send_ms"] for r in rows).to_dict(),
        "http_build_ms": summarize(r.get("http_build_ms", math.nan) for r in rows).to_dict(),
        "http_connect_ms": summarize(r.get("http_connect_ms", math.nan) for r in rows).to_dict(),
        "http_send_ms": summarize(r.get("http_send_ms", math.nan) for r in rows).to_dict(),
        "http_wait_ms": summarize(r.get("http_wait_ms", math.nan) for r in rows).to_dict(),
    }
    s["tokens"] = token_counts(rows)
    s["server_timing"] = {
        "prefill_ms": summarize(r.get("server_prefill_ms") for r in rows).to_dict(),
        "decode_ms_per_token": summarize(
            r.get("server_decode_ms_per_token") for r in rows
        ).to_dict(),
    }


def token_counts(rows: list[RequestRowDoc]) -> TokenCountsDoc:
    """Streamed tokens against the server's own counts, and prompt tokens meant against sent.

    A chat template adds tokens to every prompt (about 13 in one server's case), and a server
    counts the EOS it stopped at, which streams no text: both are said, never silently mixed.
    """
    import numpy as np

    done = [r for r in rows if r["error"] is None]
    out_diff = [
        counted - r["output_tokens"]
        for r in done
        if (counted := r.get("server_output_tokens")) is not None
    ]
    in_diff = [
        counted - r["prompt_tokens"]
        for r in done
        if (counted := r.get("server_prompt_tokens")) is not None
    ]
    return {
        "eos_only": sum(r["output_tokens"] == 0 for r in done),
        "server_counted_output": len(out_diff),
        "output_differs": sum(d != 0 for d in out_diff),
        "output_extra_median": float(np.median(out_diff)) if out_diff else None,
        "server_counted_prompt": len(in_diff),
        "prompt_extra_median": float(np.median(in_diff)) if in_diff else None,
        "prompt_extra_max": max(in_diff) if in_diff else None,
        "prompt_extra_min": min(in_diff) if in_diff else None,
    }


def stack_cost(endpoint: LoadSummaryDoc, in_process: LoadSummaryDoc) -> list[StackCostRowDoc]:
    """Per metric and percentile: the endpoint's latency less the in-process one's.

    What the serving stack (HTTP, tokenisation, its scheduler, streaming) adds to what the
    model costs on its own, for the same requests at the same arrivals; its share of the
    endpoint's figure. Percentiles of two runs, not request by request: each run's own
    distribution, so a difference is the stack's at that percentile.
    """
    out: list[StackCostRowDoc] = []
    metrics: tuple[Literal["ttft_ms", "tpot_ms", "e2e_ms"], ...] = ("ttft_ms", "tpot_ms", "e2e_ms")
    percentiles: tuple[Literal["p50", "p90", "p99"], ...] = ("p50", "p90", "p99")
    for metric in metrics:
        for q in percentiles:
            e, i = or_nan(endpoint[metric][q]), or_nan(in_process[metric][q])
            out.append(
                {
                    "metric": metric,
                    "percentile": q,
                    "endpoint_ms": e,
                    "in_process_ms": i,
                    "stack_ms": e - i,
                    "stack_share": (e - i) / e if e else math.nan,
                }
            )
    return out


def knee(points: Sequence[SweepPointDoc], factor: float = 2.0) -> float | None:
    """The highest offered rate whose p99 end-to-end latency stays within `factor` of the lowest.

    Past the knee requests queue and latency climbs; None with fewer than two rates, or when
    no request of the lowest rate finished. A rate none of whose requests finished (its p99
    None: it crashed the search before) is past the knee.

    Latency, not throughput: over a finite run throughput trails the offered rate even when
    the server keeps up (the last requests' service time is in the denominator).
    """
    ordered = sorted((p for p in points if math.isfinite(p["rate"])), key=lambda p: p["rate"])
    floor = ordered[0]["e2e_ms_p99"] if len(ordered) >= 2 else None
    if floor is None or math.isnan(floor):
        return None
    best = None
    for p in ordered:
        p99 = p["e2e_ms_p99"]
        if p99 is None or p99 > factor * floor:
            break
        best = p["rate"]
    return best


def _server_p50(s: LoadSummaryDoc, key: str) -> float | None:
    timing = s.get("server_timing")
    got = timing[key]["p50"] if timing is not None and key in timing else None
    return float(got) if got is not None and math.isfinite(got) else None


def server_across(points: Sequence[SweepPointDoc]) -> str | None:
    """One line on the server's own decode time across a sweep's rates (None without it)."""
    own = [(p["rate"], v) for p in points if (v := p["server_decode_ms_p50"])]
    if len(own) < 2:
        return None
    lo, hi = min(v for _, v in own), max(v for _, v in own)
    drifted = [f"{p['rate']:g}/s" for p in points if p.get("drift_moved")]
    within = f"; it drifted within the runs at {', '.join(drifted)}" if drifted else ""
    moved = hi / lo > 1 + 0.10
    return (
        f"server's own decode time per token across the rates: {lo:.3g}-{hi:.3g} ms"
        + (
            f" (x{hi / lo:.2f}: compare the rates by TPOT/server, not raw TPOT)"
            if moved
            else " (steady)"
        )
        + within
    )


def sweep_point(rate: float, s: LoadSummaryDoc) -> SweepPointDoc:
    """One offered rate's row of a sweep from its run's summary (measured or simulated)."""
    slo = s.get("slo") or {}
    energy: LoadEnergyDoc = s.get("energy") or {"available": False}
    drift = s.get("drift")
    return {
        "rate": rate,
        "offered": f"{rate:g}/s" if math.isfinite(rate) else "all at once",
        "throughput_rps": s["throughput_rps"],
        "output_tokens_per_s": s["output_tokens_per_s"],
        "queue_ms_p50": s["queue_ms"]["p50"],
        "queue_ms_p99": s["queue_ms"]["p99"],
        "ttft_ms_p50": s["ttft_ms"]["p50"],
        "ttft_ms_p99": s["ttft_ms"]["p99"],
        "tpot_ms_p50": s["tpot_ms"]["p50"],
        "tpot_ms_p99": s["tpot_ms"]["p99"],
        "e2e_ms_p50": s["e2e_ms"]["p50"],
        "e2e_ms_p99": s["e2e_ms"]["p99"],
        "goodput_rps": slo.get("goodput_rps"),
        # the server's own service time (llama.cpp's timings), where it reports one: steps
        # compared by TPOT over it are not misled by a server that changed speed between them
        "server_decode_ms_p50": _server_p50(s, "decode_ms_per_token"),
        "server_prefill_ms_p50": _server_p50(s, "prefill_ms"),
        "drift_moved": bool(drift is not None and drift["moved"]),
        "slo_all_met_pct": slo.get("all_met_pct"),
        "j_per_request_p50": energy.get("j_per_request_p50"),
        "j_per_output_token": energy.get("j_per_output_token"),
        "j_per_goodput_request": energy.get("j_per_goodput_request"),
        "mean_power_w": energy.get("mean_power_w"),
    }


def run_rate_sweep(
    spec: LoadSpec,
    rates: list[float],
    loaded: Any = None,
    sink: Any = None,
    endpoint: Endpoint | None = None,
    keep: bool = False,
    on_progress: ProgressFn | None = None,
) -> RateSweepDoc:
    """The same seeded requests at each rate: the throughput-latency curve, goodput, knee.

    Interrupted, it stops at that rate: the rates measured so far are the document, and
    `"interrupted"` holds the KeyboardInterrupt for the caller to raise once they are stored.
    """
    from dataclasses import replace

    from infermeter.models.loader import load_model

    lm = loaded
    if lm is None and endpoint is None:
        lm = load_model(spec.model, dtype=spec.dtype, device=spec.device, seed=spec.seed)
    runs: list[LoadResult] = []
    interrupted: BaseException | None = None
    for r in rates:
        try:
            runs.append(
                run_load(
                    replace(spec, rate=r),
                    loaded=lm,
                    sink=sink,
                    endpoint=endpoint,
                    keep=keep,
                    on_progress=on_progress,
                )
            )
        except KeyboardInterrupt as exc:  # nothing finished at this rate
            interrupted = exc
            break
        late = as_load_doc(runs[-1])["meta"].get("interrupted")
        if isinstance(late, BaseException):
            interrupted = late
            break
    if interrupted is not None and not runs:
        raise interrupted
    rates = rates[: len(runs)]
    docs = [as_load_doc(run) for run in runs]
    points = [sweep_point(rate, doc["summary"]) for rate, doc in zip(rates, docs, strict=True)]
    meta: RateSweepMetaDoc = {**docs[0]["meta"], "kind": "load-sweep", "rates": rates}
    meta.pop("kept_run_id", None)  # each run's own
    meta.pop("interrupted", None)
    return {
        "meta": meta,
        "summary": points,
        "knee_rate": knee(points),
        "runs": runs,
        "interrupted": interrupted,
    }


def _interrupt_name(exc: Any) -> str:
    """The interruption's name: "SIGTERM" for a signal, "Ctrl-C" for a KeyboardInterrupt."""
    return str(getattr(exc, "signal_name", "Ctrl-C"))


def _as_run_notes(meta: LoadMetaDoc, finished: int) -> list[str]:
    """What a stored load run's samples are, and how many requests an interruption kept."""
    spec = meta["spec"]
    notes = [
        f"load run: {finished} requests, {spec['server']} batching; each sample is one "
        "request (TTFT from its arrival)"
    ]
    if meta.get("interrupted"):
        notes.append(
            f"interrupted ({_interrupt_name(meta['interrupted'])}): the {finished} of "
            f"{spec['requests']} requests that finished"
        )
    return notes


def as_run(doc: LoadDoc) -> Any:
    """A load run as a stored run (mode `load`): one sample per request, in arrival order.

    A request's sample: `start_ms` its arrival, `ttft_ms` arrival to first token (queue
    included), `step_ms` its inter-token latencies, so `total_ms` is its end-to-end latency.
    The load's own summary, SLO report, in-flight timeline and queue times go in
    `checks["load"]`, which `runs show --json` and `report` carry.
    """
    from infermeter.run.results import RunResult
    from infermeter.serving.keeper import sample_of
    from infermeter.util.timestamps import now_iso

    meta, all_rows = doc["meta"], doc["all_samples"]
    spec = meta["spec"]
    # a failed request (an endpoint's timeout, HTTP error) has no latencies to store: it is
    # kept in `checks["load"]["failed"]` with its reason, and in the summary's count
    rows = [r for r in all_rows if r.get("error") is None]
    failed: list[FailedRequestDoc] = [
        {"sample_id": r["sample_id"], "error": err} for r in all_rows if (err := r["error"])
    ]
    warm = [(r, True) for r in doc.get("warmup_samples") or [] if r.get("error") is None]
    samples = [sample_of(r, is_warm) for r, is_warm in [*warm, *((r, False) for r in rows)]]
    config = _config_of(spec)
    return RunResult(
        run_id=None,
        config=config,
        knobs=_knobs_of(spec),
        model_info=meta["model_info"],
        device=meta["device"],
        versions=meta["versions"],
        created=now_iso(),
        samples=samples,
        status="terminated" if meta.get("interrupted") is not None else "finished",
        notes=_as_run_notes(meta, len(rows)),
        checks={"load": _load_checks(doc, rows, failed)},
    )


def _load_checks(
    doc: LoadDoc, rows: list[RequestRowDoc], failed: list[FailedRequestDoc]
) -> LoadCheckDoc:
    """What a stored load run keeps beside its samples (`checks["load"]`)."""
    meta = doc["meta"]
    return {
        "summary": doc["summary"],
        "timeline": doc["timeline"],
        "queue_ms": [r["queue_ms"] for r in rows],
        "failed": failed,
        "workload": meta.get("workload"),
        "steps": doc.get("steps"),
        "request_energy": [
            {
                "sample_id": r["sample_id"],
                "energy_j": r.get("energy_j"),
                "prefill_j": r.get("prefill_j"),
                "decode_j": r.get("decode_j"),
            }
            for r in rows
        ],
        "server_metrics": doc.get("server_metrics"),
        "step_state": meta.get("step_state"),
        # the server's own account of each request (llama.cpp's `timings`), so a
        # later `compare` can divide by the server's speed: None where it gave none
        "server_timing": [
            {
                "sample_id": r["sample_id"],
                "prefill_ms": r.get("server_prefill_ms"),
                "decode_ms_per_token": r.get("server_decode_ms_per_token"),
            }
            for r in rows
        ]
        if any(r.get("server_decode_ms_per_token") is not None for r in rows)
        else None,
    }
