"""What a `load` command was asked, checked into a plan, and the plan carried out.

Why: the CLI parses and renders; the work happens below it. `load` and its subcommands
(`run`, `endpoint`, `capacity`, `predict`) fill one typed record, `LoadAsk`. `plan_load`
checks it whole before anything loads or connects (every refusal that needs only the
arguments comes first, named as the command at hand spells its options) and returns a
`LoadPlan`: the `LoadSpec`, the rates, the endpoint, the capacity search's settings, the mode.
`run_once`, `sweep_rates` and `search_capacity` carry a plan out into a store (any object
with the `Store` methods `store_load` uses: serving sits below the store's layer), each run
stored as it ends, also when interrupted (the interrupt is handed back to re-raise once the
caller has said where the data went).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from infermeter.errors import UserError
from infermeter.run.document import LoadResult
from infermeter.run.progress import ProgressFn
from infermeter.serving.capacity import CapacityDoc, CapacitySpec, Step
from infermeter.serving.endpoint import Endpoint
from infermeter.serving.load import Lengths, LoadSpec, parse_slos
from infermeter.serving.rows import LoadMetaDoc, RateSweepDoc, as_load_doc

if TYPE_CHECKING:
    from infermeter.serving.rows import LoadDoc

Mode = Literal["once", "sweep", "capacity", "predict"]


@dataclass(frozen=True)
class LoadAsk:
    """Every setting a `load` command was given, by its Python name (the CLI's outputs aside)."""

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
    seed: int = 0
    device: str = "cpu"
    dtype: str = "auto"
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
    #: CapacitySpec field -> this command's option, where it spells one otherwise (`load`'s
    #: old `--find-max-rate` took --requests and --max-requests-per-step)
    capacity_spelling: tuple[tuple[str, str], ...] = (
        ("requests", "--requests"),
        ("max_requests", "--max-requests-per-step"),
    )


@dataclass(frozen=True)
class LoadPlan:
    """A checked `load`: what to run and how; nothing loaded or connected yet."""

    mode: Mode
    spec: LoadSpec
    rates: list[float]
    endpoint: Endpoint | None = None
    capacity: CapacitySpec | None = None
    reference: bool = False
    hardware: str = "cpu-this"
    stack: str = "hf"


#: what an outcome holds: a load's document, a rate sweep's, or a capacity search's
_Doc = TypeVar("_Doc", LoadResult, RateSweepDoc, CapacityDoc)


@dataclass
class Outcome(Generic[_Doc]):
    """Runs carried out and stored; an interrupt to re-raise once the caller has said so."""

    doc: _Doc
    stored: list[str] = field(default_factory=list)
    interrupted: BaseException | None = None


def parse_rate(text: str) -> float:
    """Requests per second, or `inf` (all at once)."""
    t = text.strip().lower()
    if t in ("inf", "infinity"):
        return math.inf
    try:
        rate = float(t)
    except ValueError:
        rate = math.nan
    if not (rate > 0 and math.isfinite(rate)):
        raise UserError(f"--rate {text!r} is not a rate", "give requests per second, or inf")
    return rate


def plan_load(a: LoadAsk) -> LoadPlan:
    """Every check that needs only the arguments, in the order a user needs them; the plan."""
    from infermeter.models.spec import check_model_spec

    _check_workload_options(a)
    _capacity_ranges(a)  # first: `load capacity` spells the request counts its own way
    rate = a.rate or "4"
    rates = [parse_rate(r) for r in rate.split(",") if r.strip()] or [parse_rate(rate)]
    spec = LoadSpec(
        model=a.model,
        rate=rates[0],
        requests=request_count(a.requests, a.duration, rates[0]),
        concurrency=a.concurrency,
        prompt_tokens=Lengths.parse(a.prompt_tokens or "64", "--prompt-tokens"),
        new_tokens=Lengths.parse(a.new_tokens or "16", "--new-tokens"),
        server=a.server,
        static_batch=a.static_batch,
        slos=parse_slos(list(a.slo)),
        seed=a.seed,
        device=a.device,
        dtype=a.dtype,
        workload=a.workload,
        trace_speed=a.trace_speed,
        kv_blocks=a.kv_blocks,
        kv_page_tokens=a.kv_page_tokens,
        energy=a.energy,
        power_interval_ms=a.power_interval_ms,
        metrics_url=a.metrics_url,
        metrics_interval_ms=a.metrics_interval_ms,
        arrivals=a.arrivals,
        duration_s=a.duration,
        warmup_requests=a.warmup_requests,
        warmup_s=a.warmup_s,
        ramp_to_rate=a.ramp_up_to,
    ).validate()
    check_model_spec(a.model)  # after the ranges: a bad value is named before the model
    target = _target(a, len(rates))
    if (target is not None or a.predict) and spec.energy not in ("auto", "off"):
        where = (
            "the endpoint's server runs elsewhere"
            if target is not None
            else "--predict runs nothing"
        )
        raise UserError(
            f"--energy {spec.energy} reads this machine's power; {where}",
            "drop --energy (energy per request is measured in-process)",
        )
    if a.predict:
        _check_predict(spec, a)
    cap = _capacity_spec(spec, rate, rates, a) if a.find_max_rate else None
    mode: Mode = (
        "predict"
        if a.predict
        else "capacity"
        if a.find_max_rate
        else "sweep"
        if len(rates) > 1
        else "once"
    )
    return LoadPlan(mode, spec, rates, target, cap, a.reference, a.hardware, a.stack)


def request_count(requests: int | None, duration: float | None, rate: float) -> int:
    """--requests, or with --duration enough for the rate to fill it (Poisson's tail too)."""
    if requests is not None:
        return requests
    if duration is None or not math.isfinite(rate) or not duration > 0:
        return 16
    expected = rate * duration
    return int(min(100_000, math.ceil(expected + 5 * math.sqrt(expected) + 10)))


def _capacity_ranges(a: LoadAsk) -> None:
    """The capacity settings in range, searched for or not (named before the model loads).

    Each is named as the command at hand spells it.
    """
    given = replace(CapacitySpec(), target=a.slo_target, bisect=a.bisect)
    given = replace(given, max_requests=a.max_requests_per_step)
    if a.find_max_rate and a.requests is not None:
        given = replace(given, requests=a.requests)
    given.validate(dict(a.capacity_spelling))


def _capacity_spec(spec: LoadSpec, rate: str, rates: list[float], a: LoadAsk) -> CapacitySpec:
    """The capacity search's settings, checked in one line each."""
    if not spec.slos:
        raise UserError(
            "the capacity search (load capacity) searches under SLOs",
            "add e.g. --slo e2e_ms=2000",
        )
    if spec.concurrency is not None:
        raise UserError(
            "--find-max-rate searches over arrival rates; --concurrency is a closed loop",
            "drop --concurrency",
        )
    if len(rates) > 1 or math.isinf(rates[0]):
        raise UserError(
            f"--find-max-rate starts from one finite --rate, not {rate}",
            "give one start rate, e.g. --rate 1",
        )
    if spec.workload is not None:
        from infermeter.workloads.traffic import resolve

        if resolve(spec.workload)[0] in ("azure", "mooncake"):
            raise UserError(
                "a trace arrives at its own times: --find-max-rate cannot set them",
                "use a sharegpt or chat workload, or --trace-speed by hand",
            )
    return CapacitySpec(
        target=a.slo_target,
        start_rate=rates[0],
        requests=spec.requests,
        max_requests=max(a.max_requests_per_step, spec.requests),
        bisect=a.bisect,
    )


def _check_predict(spec: LoadSpec, a: LoadAsk) -> None:
    """Refuse what a simulation of transformers' continuous batching cannot honour."""
    if a.endpoint is not None or a.reference:
        raise UserError(
            "--predict simulates transformers' continuous batching in this "
            "process, not an endpoint",
            "drop --endpoint and --reference",
        )
    if spec.server != "continuous":
        raise UserError("--predict simulates continuous batching only", "drop --server static")
    if spec.metrics_url is not None:
        raise UserError("--predict runs no server to scrape", "drop --metrics-url")


def _check_workload_options(a: LoadAsk) -> None:
    """A workload gives lengths (and a trace its times): options that would be ignored, refused."""
    if a.workload is None:
        if a.trace_speed != 1.0:
            raise UserError(
                "--trace-speed replays a trace",
                "add --workload azure:FILE or mooncake:FILE, or drop --trace-speed",
            )
        return
    given = [
        o
        for o, v in (("--prompt-tokens", a.prompt_tokens), ("--new-tokens", a.new_tokens))
        if v is not None
    ]
    if given:
        raise UserError(
            f"--workload gives each request's lengths; {' and '.join(given)} would be ignored",
            f"drop {' and '.join(given)}",
        )
    from infermeter.workloads.traffic import resolve

    kind, _ = resolve(a.workload)  # a missing file is one line before the model loads
    timed = kind in ("azure", "mooncake")
    if timed and a.rate is not None:
        raise UserError(
            f"a {kind} trace arrives at its own times; --rate would be ignored",
            "drop --rate (--trace-speed 2 replays it twice as fast)",
        )
    if not timed and a.trace_speed != 1.0:
        raise UserError(
            f"--trace-speed replays a trace; a {kind} workload has no times",
            "drop --trace-speed (--rate sets its sessions' arrivals)",
        )


def _target(a: LoadAsk, n_rates: int) -> Endpoint | None:
    """The endpoint to load (None: the model in-process), checked below (`Endpoint.validate`)."""
    if a.endpoint is None:
        if a.ignore_eos:
            raise UserError(
                "--ignore-eos is sent to an endpoint (in-process runs never stop at EOS)",
                "add --endpoint URL, or drop --ignore-eos",
            )
        if a.reference:
            raise UserError(
                "--reference compares an endpoint with the model in-process",
                "add --endpoint URL, or drop --reference",
            )
        if a.max_error_rate is not None:
            raise UserError(
                "--max-error-rate stops the requests sent to an endpoint",
                "add --endpoint URL, or drop --max-error-rate",
            )
        if a.extra_body is not None or a.header:
            raise UserError(
                "--extra-body and --header are sent to an endpoint",
                "add --endpoint URL, or drop them",
            )
        return None
    if a.reference and n_rates > 1:
        raise UserError("--reference takes one --rate", "give one rate, or drop --reference")
    return Endpoint(
        a.endpoint,
        a.endpoint_model,
        a.api_key_env,
        a.timeout,
        a.endpoint_api,
        a.ignore_eos,
        _extra_body(a.extra_body),
        _headers(a.header),
        a.selfcheck,
        more_urls=tuple(a.more_endpoints),
        max_error_rate=a.max_error_rate,
    ).validate()


def _extra_body(text: str | None) -> dict[str, object]:
    """--extra-body as a JSON object, refused in one line otherwise."""
    if text is None:
        return {}
    try:
        parsed = json.loads(text)
    except ValueError as exc:
        raise UserError(
            f"--extra-body is not JSON ({exc.args[0] if exc.args else exc})",
            """give a JSON object, e.g. --extra-body '{"min_tokens": 64}'""",
        ) from None
    if not isinstance(parsed, dict):
        raise UserError(
            "--extra-body must be a JSON object",
            """e.g. --extra-body '{"min_tokens": 64}'""",
        )
    return parsed


def _headers(given: tuple[str, ...]) -> dict[str, str]:
    """--header 'Name: value' (repeated), each refused in one line when malformed."""
    out: dict[str, str] = {}
    for h in given:
        name, sep, value = h.partition(":")
        if not sep or not name.strip() or any(c in name for c in " \t\r\n"):
            raise UserError(
                f"--header {name.strip()[:40]!r}... is not 'Name: value'",
                "e.g. --header 'X-Tenant: a' (repeat it for several)",
            )
        out[name.strip()] = value.strip()
    return out


def run_once(
    plan: LoadPlan, store: Any, on_progress: ProgressFn | None = None
) -> Outcome[LoadResult]:
    """One load run: measured, (with --reference) held against the model here, stored."""
    from infermeter.serving.load import run_load, store_load

    doc = run_load(  # kept in the store from its first request: the live page, a kill
        plan.spec, sink=store, endpoint=plan.endpoint, keep=True, on_progress=on_progress
    )
    _check_some_served(as_load_doc(doc))
    if plan.reference:
        _add_reference(as_load_doc(doc), plan.spec)
    interrupted = take_interrupt(as_load_doc(doc)["meta"])
    return Outcome(doc, [store_load(doc, store, interrupted)], interrupted)


def sweep_rates(
    plan: LoadPlan, store: Any, on_progress: ProgressFn | None = None
) -> Outcome[RateSweepDoc]:
    """The same requests at every rate, each rate's run stored as it ends."""
    from infermeter.serving.load import run_rate_sweep, store_load

    doc = run_rate_sweep(
        plan.spec,
        plan.rates,
        sink=store,
        endpoint=plan.endpoint,
        keep=True,
        on_progress=on_progress,
    )
    interrupted = doc.pop("interrupted", None)
    stored = [
        store_load(run, store, take_interrupt(as_load_doc(run)["meta"])) for run in doc["runs"]
    ]
    return Outcome(doc, stored, interrupted)


def search_capacity(
    plan: LoadPlan, store: Any, on_step: Callable[[Step], None] | None = None
) -> Outcome[CapacityDoc]:
    """The capacity search with `load` runs as its steps, each stored as it ends."""
    from infermeter.models.loader import load_model
    from infermeter.serving.capacity import find_capacity, server_line
    from infermeter.serving.load import run_load, store_load

    assert plan.capacity is not None, "plan_load sets capacity for mode 'capacity'"
    spec = plan.spec
    lm = None
    if plan.endpoint is None:
        lm = load_model(spec.model, dtype=spec.dtype, device=spec.device, seed=spec.seed)
    tries = 0
    stored: list[str] = []

    def measure(rate: float, n: int) -> LoadResult:
        nonlocal tries
        tries += 1  # a step run again takes fresh requests (another seed)
        doc = run_load(
            replace(spec, rate=rate, requests=n, seed=spec.seed + tries),
            loaded=lm,
            sink=store,
            endpoint=plan.endpoint,
            keep=True,
        )
        interrupted = as_load_doc(doc)["meta"].pop("interrupted", None)
        stored.append(store_load(doc, store, interrupted))
        if isinstance(interrupted, BaseException):
            raise interrupted
        return doc

    result = find_capacity(plan.capacity, measure, on_step)
    result["meta"] = {
        "model": result["runs"][0]["meta"]["model"],
        "spec": result["runs"][0]["meta"]["spec"],
        "slos": dict(spec.slos),
    }
    result["run_ids"] = [d["meta"].get("run_id") for d in result.pop("runs")]
    result["server_line"] = server_line(result)
    return Outcome(result, stored)


def _check_some_served(doc: LoadDoc) -> None:
    """Every request failed (a server down, a model it does not know): one line, exit 2."""
    rows = doc["all_samples"]
    if rows and all(r["error"] for r in rows):
        endpoint = doc["meta"].get("endpoint")
        where = endpoint["url"] if endpoint is not None else "the model"
        raise UserError(
            f"all {len(rows)} requests to {where} failed (first: {rows[0]['error']})",
            "check the server is up and serves that model (--endpoint-model)",
        )


def take_interrupt(meta: LoadMetaDoc) -> Any:
    """The run's interrupt (None if it ran to the end), left in `meta` as its name only."""
    interrupted = meta.pop("interrupted", None)
    if interrupted is not None:
        meta["interrupted"] = str(getattr(interrupted, "signal_name", "Ctrl-C"))
    return interrupted


def _add_reference(doc: LoadDoc, spec: LoadSpec) -> None:
    """The same requests in this process on --model, and what the serving stack adds."""
    from infermeter.serving.load import run_load, stack_cost

    ref = as_load_doc(run_load(spec))
    doc["reference"] = {
        "model": ref["meta"]["model"],
        "summary": ref["summary"],
        "stack_cost": stack_cost(doc["summary"], ref["summary"]),
    }
