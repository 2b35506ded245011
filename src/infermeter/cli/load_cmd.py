"""`infermeter load`: a stream of requests through one model, with SLOs and goodput."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from infermeter.cli import load_options as O
from infermeter.cli.guard import guard
from infermeter.cli.load_options import LoadArgs
from infermeter.cli.options import DB, JSON_OUT, JUNIT, SUMMARY
from infermeter.cli.output import writable_dir, writable_file
from infermeter.cli.slo_view import fail_on_miss, slo_line
from infermeter.errors import UserError
from infermeter.util import fmt


def _rate(text: str) -> float:
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


@guard
def load_command(
    ctx: typer.Context,
    model: str = O.MODEL,
    rate: str = O.RATE,
    requests: int = O.REQUESTS,
    arrivals: str = O.ARRIVALS,
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
    metrics_url: str = O.METRICS_URL,
    metrics_interval_ms: float = O.METRICS_INTERVAL_MS,
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
    endpoint: str = O.ENDPOINT,
    endpoint_model: str = O.ENDPOINT_MODEL,
    api_key_env: str = O.API_KEY_ENV,
    timeout: float = O.TIMEOUT,
    endpoint_api: str = O.ENDPOINT_API,
    ignore_eos: bool = O.IGNORE_EOS,
    extra_body: str = O.EXTRA_BODY,
    header: list[str] = O.HEADER,
    selfcheck: bool = O.SELFCHECK,
    reference: bool = O.REFERENCE,
    find_max_rate: bool = O.FIND_MAX_RATE,
    slo_target: float = O.SLO_TARGET,
    max_requests_per_step: int = O.MAX_REQUESTS_PER_STEP,
    bisect: int = O.BISECT,
    predict: bool = O.PREDICT,
    hardware: str = O.HARDWARE,
    stack: str = O.STACK,
) -> None:
    """Load on a model or a server: run, endpoint URL, capacity, predict, selfcheck.

    Options given to `load` itself are the old spelling, kept for one release.
    """
    # Long because the options are the signature (a comment: the docstring is the --help)
    if ctx.invoked_subcommand is not None:
        return  # a subcommand does the work
    args = LoadArgs.given(locals())
    run_load_args(args)
    Console(stderr=True, soft_wrap=True).print(f"note: {old_spelling_note(args)}", style="dim")


def old_spelling_note(a: LoadArgs) -> str:
    """The new spelling of an old `load --...` command line (said once it has run)."""
    if a.predict:
        new = "load predict"
    elif a.find_max_rate:
        new = "load capacity" + (" --endpoint URL" if a.endpoint else "")
    elif a.endpoint:
        new = "load endpoint URL"
    else:
        new = "load run"
    return f"`infermeter load --...` is now `infermeter {new}` (this spelling goes next release)"


def run_load_args(a: LoadArgs) -> None:
    """Every load mode from one record: check it all, open the store, then run and render."""
    # Long because it wires every mode's checks in the order a user needs them (refusals first)
    from infermeter.models.spec import check_model_spec
    from infermeter.serving.load import Lengths, LoadSpec, parse_slos

    _check_workload_options(a.workload, a.rate, a.prompt_tokens, a.new_tokens, a.trace_speed)
    _capacity_ranges(a)  # first: `load capacity` spells the request counts its own way
    rate = a.rate or "4"
    rates = [_rate(r) for r in rate.split(",") if r.strip()] or [_rate(rate)]
    spec = LoadSpec(
        model=a.model,
        rate=rates[0],
        requests=_request_count(a.requests, a.duration, rates[0]),
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
    target = _target(
        a.endpoint,
        a.endpoint_model,
        a.api_key_env,
        a.timeout,
        a.reference,
        len(rates),
        a.endpoint_api,
        a.ignore_eos,
        _extras(a.endpoint, a.extra_body, list(a.header), a.selfcheck),
        a.more_endpoints,
        a.max_error_rate,
    )
    if (target is not None or a.predict) and spec.energy not in ("auto", "off"):
        where = (
            "the endpoint's server runs elsewhere"
            if target is not None
            else ("--predict runs nothing")
        )
        raise UserError(
            f"--energy {spec.energy} reads this machine's power; {where}",
            "drop --energy (energy per request is measured in-process)",
        )
    if a.fail_if_slo_missed and not spec.slos:
        raise UserError("--fail-if-slo-missed needs an --slo", "add e.g. --slo ttft_ms=500")
    gate = LoadGate(
        a.fail_if_slo_missed,
        writable_file(a.junit, "--junit"),
        writable_file(a.summary, "--summary"),
    )
    from infermeter.store import Store

    folder = writable_dir(a.out) if a.out is not None else None
    store = Store(a.db)  # opened first: a locked or unreadable database fails before the work
    if a.predict:
        from infermeter.cli.load_predict_view import check_predict_options, run_prediction

        check_predict_options(spec, a.endpoint, a.reference)
        cap = (
            _capacity_spec(spec, rate, rates, a.slo_target, a.max_requests_per_step, a.bisect)
            if a.find_max_rate
            else None
        )
        run_prediction(spec, rates, a.hardware, a.stack, cap, store, folder, a.json_out)
        return
    if a.find_max_rate:
        from infermeter.cli.capacity_view import run_capacity

        cap = _capacity_spec(spec, rate, rates, a.slo_target, a.max_requests_per_step, a.bisect)
        run_capacity(spec, cap, store, target, folder, a.json_out, lambda d, i: _store(d, store, i))
        return
    if len(rates) > 1:
        _sweep(spec, rates, folder, a.json_out, gate, store, target)
        return
    _run_once(spec, store, target, a.reference, folder, a.json_out, gate)


@guard
def selfcheck_command(
    model: str = typer.Option(
        "tiny-llama", "--model", "-m", help="The tokenizer that counts streamed tokens."
    ),
    tokens: int = typer.Option(16, help="Tokens a request (1..256)."),
    requests: int = typer.Option(64, help="Requests for the ceiling (16..2000)."),
    json_out: bool = JSON_OUT,
) -> None:
    """Measure the endpoint client itself against a null server on 127.0.0.1.

    Its ceiling (requests/s) and the TTFT and ITL it adds at 10%, 50% and 90% of it.
    """
    from dataclasses import asdict

    from infermeter.models.spec import check_model_spec
    from infermeter.models.tokenizer import tokenizer_of
    from infermeter.serving.selfcheck import self_check
    from infermeter.util.jsonio import print_json

    if not 1 <= tokens <= 256:
        raise UserError(f"--tokens {tokens} is out of range", "use 1..256")
    if not 16 <= requests <= 2000:
        raise UserError(f"--requests {requests} is out of range", "use 16..2000")
    check_model_spec(model)
    check = self_check(tokenizer_of(model), tokens=tokens, requests=requests)
    if json_out:
        print_json({**asdict(check), "server_bound": check.server_bound})
        return
    console = Console(soft_wrap=True)
    console.print(
        f"client ceiling: {check.ceiling_rps:.3g} req/s ({check.ceiling_tokens_per_s:.3g} "
        f"tokens/s at {check.tokens_per_request} a request); client "
        f"{check.client_cores_at_ceiling:.2f} cores, null server "
        f"{check.server_cores_at_ceiling:.2f} cores"
        + (" (the server bound it: a lower bound)" if check.server_bound else ""),
        markup=False,
    )
    t = Table(title="latency the client adds (null server: known delays)", title_justify="left")
    for c in (
        "share of ceiling",
        "req/s",
        "TTFT p50 ms",
        "TTFT p90 ms",
        "ITL p50 ms",
        "ITL p90 ms",
        "send lag p99 ms",
    ):
        t.add_column(c, justify="right")
    for a in check.added:
        t.add_row(
            f"{a.share_of_ceiling:.0%}",
            f"{a.rate_rps:.3g}",
            f"{a.ttft_ms_p50:.2f}",
            f"{a.ttft_ms_p90:.2f}",
            f"{a.itl_ms_p50:.3f}",
            f"{a.itl_ms_p90:.3f}",
            f"{a.send_lag_ms_p99:.2f}",
        )
    console.print(t)
    console.print(
        "a run at an endpoint is held against this: keep its rate under half the ceiling; a "
        "negative ITL figure means the client read several tokens at once",
        style="dim",
        markup=False,
    )


@guard
def import_command(
    file: Path = typer.Argument(..., help="A peer's result file (JSON)."),
    format: str = typer.Option(
        None,
        "--format",
        "-f",
        help="vllm (bench serve --save-result), guidellm (benchmarks JSON) or aiperf "
        "(profile_export.jsonl); default: told from the file's keys.",
    ),
    db: str = DB,
) -> None:
    """Store a peer's load results (vLLM's bench serve, GuideLLM, AIPerf) as load runs.

    `compare`, `history` and the dashboard then read them beside infermeter's own.
    """
    from infermeter.serving.formats import read_peer_file
    from infermeter.serving.load import as_run
    from infermeter.store import Store

    docs = read_peer_file(file, format)
    store = Store(db)
    console = Console(soft_wrap=True)
    for doc in docs:
        run = as_run(doc, doc["meta"]["model_info"])
        run.notes.extend(doc["meta"].get("notes") or [])
        run.notes.append(f"imported from {doc['meta']['imported_from']} ({file.name})")
        run_id = store.save(run)
        s = doc["summary"]
        console.print(
            f"stored run {run_id}: {s['requests']} requests from {doc['meta']['imported_from']}, "
            f"TTFT p50 {fmt.fixed(s['ttft_ms']['p50'])} ms, TPOT p50 "
            f"{fmt.fixed(s['tpot_ms']['p50'])} ms",
            markup=False,
        )


@dataclass(frozen=True)
class LoadGate:
    """`--fail-if-slo-missed` and where its CI outputs go (`--junit`, `--summary`)."""

    fail_on_slo: bool
    junit: Path | None = None
    summary: Path | None = None

    def close(self, runs: list[dict[str, Any]]) -> None:
        """Write the CI outputs of these runs, then exit 3 on a missed SLO when gated."""
        from infermeter.report.gate_outputs import write_gate_outputs

        several = len(runs) > 1
        where = [f" at rate {r['meta']['spec']['rate']:g}" if several else "" for r in runs]
        model = runs[0]["meta"].get("model") if runs else "?"
        write_gate_outputs(
            self.junit,
            self.summary,
            "load",
            f"infermeter load {model}",
            load_cases(runs, where, self.fail_on_slo),
            [("per rate", [_summary_row(r) for r in runs])],
        )
        if self.fail_on_slo:
            for run, at in zip(runs, where, strict=True):
                fail_on_miss(run["summary"]["slo"], at)


def load_cases(runs: list[dict[str, Any]], where: list[str], gated: bool) -> list[Any]:
    """One check per SLO and run: every request met it (what --fail-if-slo-missed judges)."""
    from infermeter.report.gate_outputs import GateCase

    cases = []
    for run, at in zip(runs, where, strict=True):
        report = run["summary"].get("slo") or {}
        for metric, bound in (report.get("slos") or {}).items():
            met = metric not in (report.get("missed") or [])
            share = report["attainment_pct"][metric]
            name = f"{metric} <= {bound:g}{at}"
            cases.append(GateCase(name, met, f"met by {share:.1f}% of requests", gated=gated))
    return cases


def _summary_row(run: dict[str, Any]) -> dict[str, Any]:
    s, rate = run["summary"], run["meta"]["spec"]["rate"]
    slo = s.get("slo") or {}
    return {
        "rate/s": rate if math.isfinite(rate) else "inf",
        "requests": s["requests"],
        "req/s": s["throughput_rps"],
        "TTFT p50 ms": s["ttft_ms"]["p50"],
        "TTFT p99 ms": s["ttft_ms"]["p99"],
        "TPOT p50 ms": s["tpot_ms"]["p50"],
        "e2e p99 ms": s["e2e_ms"]["p99"],
        "goodput req/s": slo.get("goodput_rps"),
    }


def _run_once(
    spec: Any,
    store: Any,
    target: Any,
    reference: bool,
    folder: Path | None,
    json_out: bool,
    gate: LoadGate,
) -> None:
    """One load run: measured, stored (also when interrupted), written and printed."""
    from infermeter.serving.load import run_load
    from infermeter.util.jsonio import print_json, write_json

    doc = run_load(spec, sink=store, endpoint=target, keep=True)  # live page; kill keeps it
    _check_some_served(doc)
    if reference:
        _add_reference(doc, spec)
    interrupted = _take_interrupt(doc["meta"])
    stored = _store(doc, store, interrupted)
    if folder is not None:
        write_json(folder / "load.json", doc)
    if interrupted is not None:  # stored: now end as Ctrl-C or the signal does
        Console(stderr=True, soft_wrap=True).print(stored, style="dim", markup=False)
        raise interrupted
    if json_out:
        print_json(doc)
    else:
        _print(doc)
        if "reference" in doc:
            _print_reference(doc)
        Console(soft_wrap=True).print(stored, style="dim", markup=False)
    gate.close([doc])


def _request_count(requests: int | None, duration: float | None, rate: float) -> int:
    """--requests, or with --duration enough for the rate to fill it (Poisson's tail too)."""
    if requests is not None:
        return requests
    if duration is None or not math.isfinite(rate) or not duration > 0:
        return 16
    expected = rate * duration
    return int(min(100_000, math.ceil(expected + 5 * math.sqrt(expected) + 10)))


def _capacity_ranges(a: LoadArgs) -> None:
    """The capacity settings in range, searched for or not (named before the model loads).

    Each is named as the command at hand spells it.
    """
    from dataclasses import replace

    from infermeter.serving.capacity import CapacitySpec

    given = replace(CapacitySpec(), target=a.slo_target, bisect=a.bisect)
    given = replace(given, max_requests=a.max_requests_per_step)
    if a.find_max_rate and a.requests is not None:
        given = replace(given, requests=a.requests)
    given.validate(dict(a.capacity_spelling))


def _capacity_spec(
    spec: Any, rate: str, rates: list[float], target: float, most: int, bisect: int
) -> Any:
    """The capacity search's settings, checked in one line each."""
    from infermeter.serving.capacity import CapacitySpec

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
        target=target,
        start_rate=rates[0],
        requests=spec.requests,
        max_requests=max(most, spec.requests),
        bisect=bisect,
    )


def _check_workload_options(
    workload: str | None,
    rate: str | None,
    prompt_tokens: str | None,
    new_tokens: str | None,
    trace_speed: float,
) -> None:
    """A workload gives lengths (and a trace its times): options that would be ignored, refused."""
    if workload is None:
        if trace_speed != 1.0:
            raise UserError(
                "--trace-speed replays a trace",
                "add --workload azure:FILE or mooncake:FILE, or drop --trace-speed",
            )
        return
    given = [
        o
        for o, v in (("--prompt-tokens", prompt_tokens), ("--new-tokens", new_tokens))
        if v is not None
    ]
    if given:
        raise UserError(
            f"--workload gives each request's lengths; {' and '.join(given)} would be ignored",
            f"drop {' and '.join(given)}",
        )
    from infermeter.workloads.traffic import resolve

    kind, _ = resolve(workload)  # a missing file is one line before the model loads
    timed = kind in ("azure", "mooncake")
    if timed and rate is not None:
        raise UserError(
            f"a {kind} trace arrives at its own times; --rate would be ignored",
            "drop --rate (--trace-speed 2 replays it twice as fast)",
        )
    if not timed and trace_speed != 1.0:
        raise UserError(
            f"--trace-speed replays a trace; a {kind} workload has no times",
            "drop --trace-speed (--rate sets its sessions' arrivals)",
        )


def _target(
    endpoint: str | None,
    model: str | None,
    key_env: str,
    timeout: float,
    reference: bool,
    n_rates: int,
    api: str = "completions",
    ignore_eos: bool = False,
    extras: tuple[dict[str, object], dict[str, str], bool] = ({}, {}, True),
    more: tuple[str, ...] = (),
    max_error_rate: float | None = None,
) -> Any:
    """The endpoint to load (None: the model in-process), checked below (`Endpoint.validate`)."""
    from infermeter.serving.load import Endpoint

    if endpoint is None:
        if ignore_eos:
            raise UserError(
                "--ignore-eos is sent to an endpoint (in-process runs never stop at EOS)",
                "add --endpoint URL, or drop --ignore-eos",
            )
        if reference:
            raise UserError(
                "--reference compares an endpoint with the model in-process",
                "add --endpoint URL, or drop --reference",
            )
        if max_error_rate is not None:
            raise UserError(
                "--max-error-rate stops the requests sent to an endpoint",
                "add --endpoint URL, or drop --max-error-rate",
            )
        return None
    if reference and n_rates > 1:
        raise UserError("--reference takes one --rate", "give one rate, or drop --reference")
    body, headers, check = extras
    return Endpoint(
        endpoint,
        model,
        key_env,
        timeout,
        api,
        ignore_eos,
        body,
        headers,
        check,
        more_urls=tuple(more),
        max_error_rate=max_error_rate,
    ).validate()


def _extras(
    endpoint: str | None, extra_body: str | None, headers: list[str] | None, selfcheck: bool
) -> tuple[dict[str, object], dict[str, str], bool]:
    """--extra-body and --header parsed, each refused in one line; only with --endpoint."""
    import json

    if endpoint is None:
        if extra_body is not None or headers:
            raise UserError(
                "--extra-body and --header are sent to an endpoint",
                "add --endpoint URL, or drop them",
            )
        return {}, {}, selfcheck
    body: dict[str, object] = {}
    if extra_body is not None:
        try:
            parsed = json.loads(extra_body)
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
        body = parsed
    out: dict[str, str] = {}
    for h in headers or []:
        name, sep, value = h.partition(":")
        if not sep or not name.strip() or any(c in name for c in " \t\r\n"):
            raise UserError(
                f"--header {name.strip()[:40]!r}... is not 'Name: value'",
                "e.g. --header 'X-Tenant: a' (repeat it for several)",
            )
        out[name.strip()] = value.strip()
    return body, out, selfcheck


def _add_reference(doc: dict[str, Any], spec: Any) -> None:
    """The same requests in this process on --model, and what the serving stack adds."""
    from infermeter.serving.load import run_load, stack_cost

    ref = run_load(spec)
    doc["reference"] = {
        "model": ref["meta"]["model"],
        "summary": ref["summary"],
        "stack_cost": stack_cost(doc["summary"], ref["summary"]),
    }


def _print_reference(doc: dict[str, Any]) -> None:
    """Per percentile: the endpoint's latency, the in-process one, and the difference."""
    ref = doc["reference"]
    t = Table(
        title=f"what the serving stack adds: endpoint vs {ref['model']} in this process "
        "(same requests, same arrivals)",
        title_justify="left",
    )
    for c in ("metric", "pct", "endpoint ms", "in-process ms", "stack adds ms", "share"):
        t.add_column(c, justify="left" if c in ("metric", "pct") else "right")
    for row in ref["stack_cost"]:
        t.add_row(
            row["metric"],
            row["percentile"],
            fmt.fixed(row["endpoint_ms"], 1),
            fmt.fixed(row["in_process_ms"], 1),
            fmt.fixed(row["stack_ms"], 1),
            f"{row['stack_share'] * 100:.0f}%" if row["stack_share"] == row["stack_share"] else "-",
        )
    Console(soft_wrap=True).print(t)


def _sweep(
    spec: Any,
    rates: list[float],
    folder: Path | None,
    json_out: bool,
    gate: LoadGate,
    store: Any,
    endpoint: Any = None,
) -> None:
    """The same requests at every rate: a table, the knee, and with --out the figures."""
    from infermeter.report.load_figures import load_sweep_figures
    from infermeter.serving.load import run_rate_sweep
    from infermeter.util.jsonio import print_json, write_json

    doc = run_rate_sweep(spec, rates, sink=store, endpoint=endpoint, keep=True)
    interrupted = doc.pop("interrupted", None)
    for run in doc["runs"]:
        _store(run, store, _take_interrupt(run["meta"]))
    if interrupted is not None:  # the rates measured are stored: end as the interrupt does
        raise interrupted
    if folder is not None:
        write_json(folder / "load_sweep.json", doc)
        load_sweep_figures(doc, folder)
    if json_out:
        print_json(doc)
    else:
        t = Table(
            title=f"{doc['meta']['model']} · {spec.server} batching · {spec.requests} "
            "requests per rate",
            title_justify="left",
        )
        cols = (
            "rate/s",
            "req/s",
            "tok/s",
            "TTFT p50",
            "TTFT p99",
            "TPOT p50",
            "e2e p99",
            "goodput",
        )
        own = any(p.get("server_decode_ms_p50") for p in doc["summary"])
        for c in cols + (("server ms/tok", "TPOT/server") if own else ()):
            t.add_column(c, justify="right")
        for p in doc["summary"]:
            server = p.get("server_decode_ms_p50")
            extra = (
                (fmt.fixed(server), fmt.fixed(p["tpot_ms_p50"] / server) if server else "-")
                if own
                else ()
            )
            t.add_row(
                f"{p['rate']:g}",
                fmt.fixed(p["throughput_rps"]),
                fmt.fixed(p["output_tokens_per_s"], 1),
                fmt.fixed(p["ttft_ms_p50"], 1),
                fmt.fixed(p["ttft_ms_p99"], 1),
                fmt.fixed(p["tpot_ms_p50"], 1),
                fmt.fixed(p["e2e_ms_p99"], 1),
                fmt.fixed(p["goodput_rps"]),
                *extra,
            )
        console = Console(soft_wrap=True)
        console.print(t)
        from infermeter.serving.load import server_across

        across = server_across(doc["summary"])
        if across:
            console.print(across, markup=False)
        knee_rate = doc["knee_rate"]
        console.print(
            f"knee: {knee_rate:g} req/s offered (the highest rate whose p99 "
            "end-to-end latency stays within 2x of the lowest rate's)"
            if knee_rate is not None
            else "knee: none (fewer than two rates)",
            markup=False,
        )
    gate.close(doc["runs"])


def _check_some_served(doc: dict[str, Any]) -> None:
    """Every request failed (a server down, a model it does not know): one line, exit 2."""
    rows = doc["all_samples"]
    if rows and all(r["error"] for r in rows):
        where = (doc["meta"].get("endpoint") or {}).get("url", "the model")
        raise UserError(
            f"all {len(rows)} requests to {where} failed (first: {rows[0]['error']})",
            "check the server is up and serves that model (--endpoint-model)",
        )


def _take_interrupt(meta: dict[str, Any]) -> Any:
    """The run's interrupt (None if it ran to the end), left in `meta` as its name only."""
    interrupted = meta.pop("interrupted", None)
    if interrupted is not None:
        meta["interrupted"] = str(getattr(interrupted, "signal_name", "Ctrl-C"))
    return interrupted


def _store(doc: dict[str, Any], store: Any, interrupted: Any = None) -> str:
    """Keep the load run in the store (one sample per request); say where."""
    from infermeter.serving.load import store_load

    return f"stored as run {store_load(doc, store, interrupted)} in {store.where}"


def _print(doc: dict[str, Any]) -> None:
    s, spec = doc["summary"], doc["meta"]["spec"]
    console = Console(soft_wrap=True)
    arrivals = "all at once" if math.isinf(spec["rate"]) else f"{spec['rate']:g}/s"
    if spec["concurrency"] is not None:
        arrivals = f"a closed loop of {spec['concurrency']} in flight"
    serving = "endpoint" if doc["meta"].get("endpoint") else f"{spec['server']} batching"
    console.print(
        f"{doc['meta']['model']} · {serving} · {fmt.plural(s['requests'], 'request')}, "
        f"{arrivals} · {s['throughput_rps']:.2f} req/s, {s['output_tokens_per_s']:.1f} output "
        f"tokens/s over {s['wall_s']:.2f} s",
        markup=False,
    )
    if s.get("warmup_note"):
        console.print(s["warmup_note"], style="yellow", markup=False)
    t = Table(title="latency per request", title_justify="left")
    for c in ("metric", "median", "95% CI", "p90", "p99", "mean"):
        t.add_column(c, justify="left" if c == "metric" else "right")
    for m in ("queue_ms", "ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"):
        v = s[m]
        t.add_row(
            m,
            fmt.fixed(v["p50"]),
            f"{fmt.fixed(v['median_ci95_low'])}-{fmt.fixed(v['median_ci95_high'])}",
            fmt.fixed(v["p90"]),
            fmt.fixed(v["p99"]),
            fmt.fixed(v["mean"]),
        )
    console.print(t)
    line = slo_line(s["slo"])
    if line:
        console.print(line, markup=False)
    if doc["meta"].get("workload"):
        console.print(workload_line(doc["meta"]["workload"]), style="dim", markup=False)
    if "batch" in s:
        console.print(batch_line(s["batch"], doc["meta"].get("step_state") or {}), markup=False)
    if (s.get("energy") or {}).get("available"):
        console.print(energy_line(s["energy"]), markup=False)
    if s.get("server_metrics"):
        console.print(metrics_line(s["server_metrics"]), markup=False)
    ep = doc["meta"].get("endpoint")
    if ep:
        failed = [r for r in doc["all_samples"] if r["error"]]
        said = f"; {len(failed)} failed (first: {failed[0]['error']})" if failed else ""
        short = sum(
            1
            for r in doc["all_samples"]
            if not r["error"] and r["output_tokens"] < r["new_tokens_asked"]
        )
        if short:
            said += (
                f"; {short} stopped at the server's EOS before their asked length "
                "(--ignore-eos asks servers that know it not to)"
            )
        for line, style in endpoint_lines(s):
            console.print(line, style=style, markup=False)
        if ep.get("aborted"):
            console.print(f"stopped sending: {ep['aborted']}", style="yellow", markup=False)
        if len(ep.get("urls") or []) > 1:
            console.print(
                f"requests went round robin over {len(ep['urls'])} servers: "
                + ", ".join(ep["urls"]),
                style="dim",
                markup=False,
            )
        console.print(
            f"endpoint {ep['url']} serving {ep['model']}: {ep['multi_token_chunks']} streamed "
            f"chunks carried several tokens (counted with {doc['meta']['model_info']['tokenizer']}"
            f"'s tokenizer, their gaps 0){said}",
            style="dim",
            markup=False,
        )


def endpoint_lines(s: dict[str, Any]) -> list[tuple[str, str]]:
    """(line, style) for an endpoint run.

    The client's cost, the server's drift, late sends, and token counts that differ from what
    was meant.
    """
    out: list[tuple[str, str]] = []
    client = s.get("client") or {}
    if client.get("line"):
        flagged = bool((client.get("verdict") or {}).get("flagged"))
        out.append((client["line"], "yellow" if flagged else ""))
        out.append((client["selfcheck_line"], "dim"))
    elif client:
        out.append(
            (
                f"client: {client['cores']:.2f} cores while measuring (no self-check: "
                "--no-selfcheck)",
                "dim",
            )
        )
    drift = s.get("drift")
    if drift:
        out.append((drift["line"], "yellow" if drift["moved"] else ""))
    lag = (s.get("from_send") or {}).get("send_lag_ms") or {}
    if lag.get("n") and lag["p99"] > 10:
        out.append(
            (
                f"the client sent requests late (p99 {lag['p99']:.1f} ms after their scheduled "
                "time): latencies count from the scheduled time; `from_send` in --json has "
                "them from the send",
                "yellow",
            )
        )
    t = s.get("tokens") or {}
    if t.get("eos_only"):
        out.append((f"{t['eos_only']} requests completed with only an EOS (no text)", "dim"))
    extra = t.get("prompt_extra_median")
    if extra:
        why = (
            "a chat template or BOS it adds"
            if extra > 0
            else "it tokenizes differently: is --model its tokenizer?"
        )
        out.append(
            (
                f"the server counted {extra:+g} prompt tokens a request against those meant "
                f"(median; most {t['prompt_extra_max']:+d}): {why}",
                "dim" if extra > 0 else "yellow",
            )
        )
    return out


def workload_line(w: dict[str, Any]) -> str:
    """One line on the workload: its requests, sessions, lengths, prefix reuse, trace rate."""
    p, o = w["prompt_tokens"], w["output_tokens"]
    sessions = (
        f" in {w['sessions']} sessions ({w['multi_turn_sessions']} multi-turn)"
        if w["multi_turn_sessions"]
        else ""
    )
    trace = (
        f"; trace of {w['duration_s']:.1f} s at {w['speed']:g}x, {w['mean_rate_rps']:.2f} "
        "req/s mean"
        if "duration_s" in w
        else ""
    )
    skipped = (
        "; left out: " + ", ".join(f"{n} {why}" for why, n in w["skipped"].items())
        if (w["skipped"])
        else ""
    )
    return (
        f"workload {w['kind']} ({w['source']}): {w['requests']} requests{sessions}; prompt "
        f"tokens p50 {p['p50']:.0f} p90 {p['p90']:.0f} max {p['max']:.0f}; output tokens p50 "
        f"{o['p50']:.0f} p90 {o['p90']:.0f} max {o['max']:.0f}; prefix reuse "
        f"{w['prefix_reuse']:.0%} (16-token blocks){trace}{skipped}"
    )


def batch_line(b: dict[str, Any], state: dict[str, Any]) -> str:
    """One line on the continuous batch over the run (serving/batch_state.py), and what it lacks."""
    if not b.get("steps"):
        return "batch: no scheduler step was seen"

    def pct(v: float | None) -> str:
        return "not exposed" if v is None else f"{v:.0f}%"

    cache = state.get("cache") or {}
    size = (
        f" of {cache['blocks']} blocks x {cache['page_tokens']} tokens"
        if cache.get("blocks") and cache.get("page_tokens")
        else ""
    )
    if cache.get("sized"):
        size += f" (sized by {cache['sized']})"
    line = (
        f"batch: {b['steps']} steps (p50 {b['step_ms_p50']:.1f} ms), "
        f"{fmt.fixed(b['batch_requests_mean'])} requests per step (max "
        f"{b['batch_requests_max']}); {b['prefill_tokens']} prefill / {b['decode_tokens']} "
        f"decode tokens; KV cache{size} used p50 {pct(b['kv_used_pct_p50'])} max "
        f"{pct(b['kv_used_pct_max'])}, full {pct(b['kv_full_time_pct'])} of the run; requests "
        f"waiting {pct(b['waiting_time_pct'])} of the run; {b['offloads']} offloads"
    )
    if state.get("missing"):
        line += "; not exposed by this transformers: " + ", ".join(state["missing"])
    if state.get("thinned", 1) > 1:
        line += f"; every {state['thinned']}th step kept"
    return line


def energy_line(e: dict[str, Any]) -> str:
    """One line on the run's energy: per request (step shares), per token, between steps."""

    def j(v: float | None, unit: str = "J") -> str:
        return "-" if v is None else f"{v:.3g} {unit}"

    line = (
        f"energy ({e['source']}, {e['method']}): {j(e['total_j'])} over the run at "
        f"{j(e['mean_power_w'], 'W')}; per request p50 {j(e['j_per_request_p50'])} "
        f"(prefill {j(e['prefill_j'])}, decode {j(e['decode_j'])} in all); "
        f"{j(e['j_per_output_token'], 'J/token')} in steps, "
        f"{j(e['j_per_output_token_all'], 'J/token')} with the time between steps "
        f"({j(e['between_steps_j'])})"
    )
    if e.get("j_per_goodput_request") is not None:
        line += f"; {j(e['j_per_goodput_request'])} per request that met every SLO"
    if e.get("note"):
        line += f"; {e['note']}"
    return line


def metrics_line(m: dict[str, Any]) -> str:
    """One line on the scraped server metrics: how many, and the engine's state ones."""
    if not m["scrapes"]:
        return f"server metrics ({m['url']}): every scrape failed (first: {m['first_failure']})"
    state = "; ".join(f"{r['name']} max {r['max']:g}, last {r['last']:g}" for r in m["state"])
    failed = f", {m['failures']} failed (first: {m['first_failure']})" if m["failures"] else ""
    return (
        f"server metrics ({m['url']}): {m['series']} series from {m['scrapes']} scrapes"
        f"{failed}" + (f"; {state}" if state else "; no engine state metric among them")
    )
