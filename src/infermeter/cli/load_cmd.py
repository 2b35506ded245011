"""`infermeter load`: a stream of requests through one model, with SLOs and goodput."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.table import Table

from infermeter.cli import load_options as O
from infermeter.cli.guard import guard
from infermeter.cli.load_options import LoadArgs
from infermeter.cli.options import DB, JSON_OUT, JUNIT, SUMMARY, spec_option
from infermeter.cli.output import writable_dir, writable_file
from infermeter.cli.slo_view import fail_on_miss, slo_line
from infermeter.errors import UserError
from infermeter.serving.selfcheck import SelfCheckSpec
from infermeter.util import fmt

if TYPE_CHECKING:
    from collections.abc import Sequence

    from infermeter.run.document import LoadResult
    from infermeter.serving.plan import LoadPlan
    from infermeter.serving.rows import SweepPointDoc
    from infermeter.store import Store


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
    """Every load mode from one record: the plan checked whole, the store opened, then run."""
    from infermeter.serving.plan import plan_load
    from infermeter.store import Store

    plan = plan_load(a)  # every refusal that needs only the arguments, before any work
    if a.fail_if_slo_missed and not plan.spec.slos:
        raise UserError("--fail-if-slo-missed needs an --slo", "add e.g. --slo ttft_ms=500")
    gate = LoadGate(
        a.fail_if_slo_missed,
        writable_file(a.junit, "--junit"),
        writable_file(a.summary, "--summary"),
    )
    folder = writable_dir(a.out) if a.out is not None else None
    store = Store(a.db)  # opened first: a locked or unreadable database fails before the work
    if plan.mode == "predict":
        from infermeter.cli.load_predict_view import run_prediction

        run_prediction(plan, store, folder, a.json_out)
    elif plan.mode == "capacity":
        from infermeter.cli.capacity_view import run_capacity

        run_capacity(plan, store, folder, a.json_out)
    elif plan.mode == "sweep":
        _sweep(plan, store, folder, a.json_out, gate)
    else:
        _run_once(plan, store, folder, a.json_out, gate)


@guard
def selfcheck_command(
    model: str = spec_option(SelfCheckSpec, "model", "--model", "-m"),
    tokens: int = spec_option(SelfCheckSpec, "tokens"),
    requests: int = spec_option(SelfCheckSpec, "requests"),
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

    SelfCheckSpec(model, tokens, requests).validate()  # each range once, below the CLI
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
    from infermeter.serving.formats import import_peer_file
    from infermeter.store import Store

    store = Store(db)
    console = Console(soft_wrap=True)
    for run_id, doc in import_peer_file(file, format, store):
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

    def close(self, runs: Sequence[LoadResult]) -> None:
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


def load_cases(runs: Sequence[LoadResult], where: list[str], gated: bool) -> list[Any]:
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
    plan: LoadPlan, store: Store, folder: Path | None, json_out: bool, gate: LoadGate
) -> None:
    """One load run: measured and stored below; written and printed here."""
    from infermeter.cli.progress import StageProgressView
    from infermeter.serving.plan import run_once
    from infermeter.util.jsonio import print_json, write_json

    view = StageProgressView()
    with view.progress:
        done = run_once(plan, store, view)  # stored also when interrupted
    doc, stored = done.doc, _where(done.stored, store)
    if folder is not None:
        write_json(folder / "load.json", doc)
    if done.interrupted is not None:  # stored: now end as Ctrl-C or the signal does
        Console(stderr=True, soft_wrap=True).print(stored, style="dim", markup=False)
        raise done.interrupted
    if json_out:
        print_json(doc)
    else:
        _print(doc)
        if "reference" in doc:
            _print_reference(doc)
        Console(soft_wrap=True).print(stored, style="dim", markup=False)
    gate.close([doc])


def _where(ids: list[str], store: Store) -> str:
    """Where the runs went, for the user."""
    return f"stored as run {', '.join(ids)} in {store.where}"


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
    plan: LoadPlan, store: Store, folder: Path | None, json_out: bool, gate: LoadGate
) -> None:
    """The same requests at every rate: a table, the knee, and with --out the figures."""
    from infermeter.cli.progress import StageProgressView
    from infermeter.report.load_figures import load_sweep_figures
    from infermeter.serving.plan import sweep_rates
    from infermeter.util.jsonio import print_json, write_json

    view = StageProgressView()
    with view.progress:
        done = sweep_rates(plan, store, view)
    doc, spec = done.doc, plan.spec
    if done.interrupted is not None:  # the rates measured are stored: end as the interrupt does
        raise done.interrupted
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
        points: list[SweepPointDoc] = doc["summary"]
        own = any(p["server_decode_ms_p50"] for p in points)
        for c in cols + (("server ms/tok", "TPOT/server") if own else ()):
            t.add_column(c, justify="right")
        for p in points:
            server, tpot = p["server_decode_ms_p50"], p["tpot_ms_p50"]
            # no TPOT (one-token outputs, or none finished): no ratio
            ratio = fmt.fixed(tpot / server) if server and tpot is not None else "-"
            extra = (fmt.fixed(server), ratio) if own else ()
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
        # the extreme on the median's side: "most -13" beside a median of -19.5 read wrong
        far = t["prompt_extra_max"] if extra > 0 else t.get("prompt_extra_min", extra)
        out.append(
            (
                f"the server counted {extra:+g} prompt tokens a request against those meant "
                f"(median; furthest {far:+g}): {why}",
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
