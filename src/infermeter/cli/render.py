"""Rich tables and cards for people; commands print these, or JSON with --json."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from infermeter.util import fmt

if TYPE_CHECKING:
    from infermeter.run.results import RunResult
    from infermeter.store.queries import RunRowDoc


def run_header(run: RunResult, where: str | None = None) -> Text:
    """Three lines saying what was run, where, and where it is kept."""
    info, cfg = run.model_info, run.config
    shape = f"{info.get('layers')} layers, {fmt.count(info.get('params'))} params"
    if info.get("experts"):
        # a top_k knob overrides the config's top-k: show what the run ran with
        top_k = run.knobs.get("top_k", info.get("top_k"))
        shape += f", {info['experts']} experts top-{top_k}"
    prompt = cfg.get("prompt_tokens") or "natural"
    from infermeter.measure.gpu_identity import identity_label

    gpu = identity_label(run.device)  # cuda:0 = GPU 3 of 8 (CUDA_VISIBLE_DEVICES=3,5)
    quant = info.get("quantization") or {}
    dtype = (  # the weights' real storage, not only the compute dtype
        f"{quant['scheme']} weights, {info.get('dtype')} compute"
        if quant.get("scheme")
        else str(info.get("dtype"))
    )
    line1 = (
        f"run {run.run_id or '(not stored)'} · {info.get('spec')} ({shape}) · "
        f"{run.device.get('name')}{f' [{gpu}]' if gpu else ''} · {dtype}"
    )
    line2 = (
        f"prompt tokens {prompt} · new tokens {cfg.get('new_tokens')} · batch "
        f"{cfg.get('batch_size')} · {fmt.plural(len(run.measured), 'sample')} + "
        f"{len(run.samples) - len(run.measured)} warm-up · {cfg.get('decoding')}"
    )
    load = cfg.get("load")
    if load:  # `infermeter load`: each sample is a request
        rate = "all at once" if load.get("rate") in (None, float("inf")) else f"{load['rate']:g}/s"
        line2 = (
            f"{fmt.plural(len(run.samples), 'request')} arriving {rate} · "
            f"{load.get('server')} batching "
            "· each sample is one request, TTFT from its arrival"
        )
    from infermeter.instrument.config import MODE_COST

    mode = str(cfg.get("mode"))
    cost = f" (costs {MODE_COST[mode]} on smollm2-135m, CPU)" if mode in MODE_COST else ""
    if run.instrument_cost:  # this run's own estimate replaces the canned figure
        cost = ""
    compiled = cfg.get("compile")
    line3 = f"mode {mode}{cost}"
    if compiled:
        line3 += " · compiled" + (f" ({compiled})" if isinstance(compiled, str) else "")
    if cfg.get("nvtx"):
        line3 += " · NVTX ranges"
    changed = {k: v for k, v in run.knobs.items() if k not in cfg}  # set on the model
    if changed:
        line3 += " · knobs " + ", ".join(f"{k}={v}" for k, v in changed.items())
    line2 += f"\n{line3}"
    text = Text(f"{line1}\n{line2}", style="bold")
    if run.instrument_cost is not None:
        text.append(f"\n{run.instrument_cost.line()}", style="dim")
    tokenizer = str(info.get("tokenizer") or "")
    if tokenizer.endswith("in the checkpoint)"):  # the built-in tokenizer stood in
        text.append(f"\ntokenizer: {tokenizer}", style="yellow")
    quant_doc = info.get("quantization")
    if quant_doc:
        q = quant_doc.get("quality")
        agree, kl = (q["top1_agreement"], q["kl_nats"]) if q else (float("nan"), float("nan"))
        text.append(
            f"\nweights: {quant_doc['converted_linear']} linear layers as {quant_doc['scheme']} "
            f"({quant_doc['method']}); vs unquantized: top-1 agreement "
            f"{100 * agree:.1f}%, KL {kl:.2g} nats",
            style="yellow",
        )
    if where:
        text.append(f"\nstored in {where}", style="dim")
    return text


def summary_table(run: RunResult) -> Table:
    """Phase, median with its 95% interval, mean, unit: the card `profile` prints.

    The median is the headline (one slow sample cannot move it); the mean is kept beside it,
    so a gap between the two shows an outlier at a glance. Percentiles are in the JSON.
    """
    table = Table(title="summary (median over measured samples)", title_justify="left")
    for col in ("phase", "median", "95% CI", "mean", "unit"):
        table.add_column(
            col, justify="left" if col in ("phase", "unit") else "right", no_wrap=col == "phase"
        )
    for key, label in (
        ("load_ms", "load"),
        ("gguf_conversion_ms", "GGUF conversion (first load only)"),
        ("to_device_ms", "move to device"),
        ("compile_first_call_ms", "compile: first call (cold)"),
        ("compile_ms", "compile: cost over a warm call"),
    ):
        if run.phases.get(key):
            v = fmt.fixed(run.phases[key])
            table.add_row(label, v, "-", v, "ms")
    s = run.summary()
    noisy = set(run.noisy_metrics())
    from infermeter.run.results import METRIC_LABELS

    rows = [(key, label, unit) for key, (label, unit) in METRIC_LABELS.items()]
    # a load run's samples are requests: a request's own rate is not what the server delivered
    load = run.load_summary()
    delivered = load["output_tokens_per_s"] if load is not None else None
    for key, label, unit in rows:
        st = s[key]
        if st.n == 0:
            continue
        if key == "tokens_per_s" and delivered is not None:
            v = fmt.fixed(delivered, 1)
            table.add_row("delivered throughput (all requests)", v, "-", v, "tok/s")
        if key in ("tokens_per_s", "decode_tokens_per_s") and delivered is not None:
            label = f"{label} of one request"
        if unit.startswith("J") and _estimated(run, key):
            label += " (est.)"
        mark = " ⚠" if key in noisy else ""
        ci = (
            f"{fmt.compact(st.median_ci95_low)}-{fmt.compact(st.median_ci95_high)}"
            if st.n > 1
            else "-"
        )
        table.add_row(label + mark, fmt.fixed(st.median), ci, fmt.fixed(st.mean), unit)
    return table


def page_fault_line(run: RunResult) -> Text | None:
    """The page-faults finding, where it fires, right under the table that counts them.

    Why here and not only in `analyze`: the fix is an environment variable away, and a user
    reading "35,397 page faults per decode step" should not have to know what it costs.
    """
    from infermeter.analysis.bottlenecks import evidence_of, page_faults

    found = page_faults(evidence_of(run, None))
    if found is None:
        return None
    return Text(f"{found.severity}: {found.title}; {found.advice}", style="yellow")


#: metrics whose outlier samples the card names (the rest follow from these)
OUTLIER_METRICS = ("ttft_ms", "tpot_ms", "total_ms")


def outlier_lines(run: RunResult) -> list[str]:
    """One line per outlier sample of the timing metrics, by the run's sample index."""
    from infermeter.measure.stats import outlier_notes

    ids = [s.index for s in run.measured]
    out = []
    for metric in OUTLIER_METRICS:
        out += outlier_notes([getattr(s, metric) for s in run.measured], metric, ids)
    return out


def _estimated(run: RunResult, key: str) -> bool:
    """Whether any measured sample's window for `key` was estimated (shorter than the sensor)."""
    field = {"energy_j": "energy_j", "prefill_j": "prefill_j", "decode_j": "decode_j"}.get(
        key, "prefill_j" if "prompt" in key else "decode_j" if "decode" in key else "energy_j"
    )
    return any(s.energy and s.energy["quality"].get(field) == "estimated" for s in run.measured)


def energy_line(run: RunResult) -> Text | None:
    """Where energy came from (source, method, CO2), or why there is none; never a silent 0."""
    e = run.energy
    if not e:
        return None
    if not e.get("available"):
        if "--energy off" in str(e.get("reason")):
            return Text("energy: not measured (--energy off)", style="dim")
        # the reasons per source are in the JSON and `energy probe`; one short line here
        return Text("energy: unavailable here; `infermeter energy probe` says why", style="dim")
    parts = [f"energy: {e['source']} ({e['method']}), {len(e['domains'])} domain(s)"]
    parts.append(f"{e['readings']} readings every {e['interval_ms']:g} ms")
    if e.get("sampled_mean_power_w") is not None:
        parts.append(f"{e['sampled_j']:.1f} J over {e['sampled_s']:.1f} s sampled")
    if e.get("co2_g") is not None:
        parts.append(f"{e['co2_g']:.3g} g CO2 at {e['grid_g_per_kwh']:g} g/kWh")
    if e.get("gaps"):
        parts.append(f"⚠ {len(e['gaps'])} gap(s) in the readings")
    return Text(" · ".join(parts), style="dim")


def host_line(run: RunResult) -> Text | None:
    """A warning when other processes competed for the run's cores, with the figures."""
    from infermeter.measure.host import HostLoad

    doc = run.device.get("host")
    if not isinstance(doc, dict):
        return None
    verdict = HostLoad.from_dict(doc).verdict()
    return Text(f"⚠ {verdict}", style="yellow") if verdict else None


def speculation_line(run: RunResult) -> Text | None:
    """A speculative run in one line: what was accepted, and where a step's time went."""
    spec = (run.checks or {}).get("speculation")
    if not spec:
        return None
    rate = spec.get("acceptance_rate")
    accepted = f"{rate:.0%} of {spec['proposed']} proposed tokens accepted" if rate is not None \
        else "no token proposed"  # fmt: skip
    same = {True: "same output as greedy", False: "OUTPUT DIFFERS FROM GREEDY", None: ""}
    text = (
        f"speculation ({run.config.get('decoding')}): {accepted}, "
        f"{spec['tokens_per_target_forward']:.2f} tokens per target forward; per step "
        f"draft {spec['draft_ms_per_step']:.2f} ms, verify {spec['verify_ms_per_step']:.2f} ms"
        + (f"; {same[spec.get('matches_greedy')]}" if spec.get("matches_greedy") is not None
           else "")
    )  # fmt: skip
    return Text(text, style="red" if spec.get("matches_greedy") is False else "")


def run_card(run: RunResult, where: str | None = None, show_text: bool = False) -> Group:
    """Header, summary table, warnings and optionally the last sample's text."""
    from infermeter.cli.render_layers import layer_tables

    parts: list[Any] = [run_header(run, where)]
    busy = host_line(run)
    if busy is not None:  # above the table: every figure in it is inflated
        parts.append(busy)
    parts.append(summary_table(run))
    noisy = run.noisy_metrics()
    if noisy:
        parts.append(
            Text(
                f"⚠ noisy: {', '.join(noisy)} vary by more than 10% between samples or "
                "hold an outlier; use more --samples or a quieter machine",
                style="yellow",
            )
        )
    for outlier in outlier_lines(run):
        parts.append(Text(f"⚠ outlier kept in the data: {outlier}", style="yellow"))
    line = energy_line(run)
    if line is not None:
        parts.append(line)
    from infermeter.cli.slo_view import slo_line

    slo = slo_line(run.slo_report())
    if slo is not None:
        parts.append(Text(slo))
    spec = speculation_line(run)
    if spec is not None:
        parts.append(spec)
    parts.extend(layer_tables(run))
    faults = page_fault_line(run)
    if faults is not None:
        parts.append(faults)
    for note in run.notes:
        parts.append(Text(f"note: {note}", style="dim"))
    if run.status != "finished":
        parts.append(Text(f"status {run.status}: {run.error}", style="red"))
    if show_text and run.samples:
        last = run.samples[-1]
        for i, (p, o) in enumerate(zip(last.prompt_text, last.output_text, strict=False)):
            parts.append(Text(f"\n[row {i}] prompt: ", style="bold").append(p, style=""))
            parts.append(Text(f"[row {i}] output: ", style="bold").append(o, style="green"))
    return Group(*parts)


def runs_table(rows: list[RunRowDoc], width: int = 80) -> Table:
    """`infermeter runs list`, fitting `width` columns (80 by default).

    Ids and numbers never wrap; the model cell (model, then mode and knobs) takes what is left
    there: when it does not fit, the model's name keeps its line and the mode and knobs wrap
    below it. Cut as one line at 80 columns it hid the model's own name ("tiny-qwen3-moe…")
    and every mode and knob (issue 59).
    """
    table = Table(
        title=f"{fmt.plural(len(rows), 'run')}: model (mode, knobs); medians over measured samples",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        show_edge=False,
        collapse_padding=True,
    )
    cells: list[list[Any]] = []  # strings, and the model cell's (model, what) until drawn
    for r in rows:
        knobs = " ".join(f"{k}={v}" for k, v in (r.get("label") or r.get("knobs") or {}).items())
        what = ", ".join(x for x in (str(r.get("mode") or ""), knobs) if x)
        cells.append(
            [
                r["id"],
                str(r["created"])[5:16].replace("T", " "),  # MM-DD HH:MM (UTC)
                r["status"],
                (str(r["model"]), what),
                str(r["samples"]),
                fmt.fixed(r["ttft_ms"]),
                fmt.fixed(r["tpot_ms"]),
                fmt.fixed(r["tokens_per_s"], 1),
            ]
        )
    heads = ["id", "created", "status", "model", "n", "TTFT ms", "TPOT ms", "tok/s"]
    widths = [max([len(h)] + [len(_flat(c[i])) for c in cells]) for i, h in enumerate(heads)]
    room = width - sum(w for i, w in enumerate(widths) if i != 3) - 2 * (len(heads) - 1)
    if any(len(_flat(c[3])) > room for c in cells):  # narrow: the model's words before the date
        heads.pop(1)
        cells = [c[:1] + c[2:] for c in cells]
        room += widths[1] + 2
        table.caption = "created: in a wider terminal, `runs show` or --json"
    for i, head in enumerate(heads):
        if head == "model":
            table.add_column(head, overflow="fold", max_width=max(8, room))
        else:
            table.add_column(head, no_wrap=True, justify="right" if i >= 3 else "left")
    at = heads.index("model")
    for c in cells:
        model, what = c[at]
        table.add_row(*c[:at], _model_cell(model, what, max(8, room)), *c[at + 1 :])
    return table


def _flat(cell: Any) -> str:
    """A cell's one-line text (the model cell is (model, mode and knobs))."""
    if isinstance(cell, tuple):
        return f"{cell[0]} ({cell[1]})" if cell[1] else cell[0]
    return str(cell)


def _model_cell(model: str, what: str, room: int) -> Text:
    """`model (what)` on one line when it fits; else the model, and `what` wrapped below it."""
    one = f"{model} ({what})" if what else model
    if len(one) <= room:
        return Text(one)
    return Text.assemble(model, "\n", (what, "dim"))


def models_table(rows: list[dict[str, Any]]) -> Table:
    """`infermeter models`."""
    table = Table(title="models", title_justify="left")
    for col in ("name", "kind", "family", "params", "description"):
        table.add_column(col, justify="right" if col == "params" else "left")
    for r in rows:
        table.add_row(r["name"], r["kind"], r["family"], fmt.count(r["params"]), r["description"])
    return table
