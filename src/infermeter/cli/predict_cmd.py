"""`infermeter predict`: will this model fit on that hardware, and how fast will it be?"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from infermeter.cli.guard import guard
from infermeter.cli.options import DB, JSON_OUT
from infermeter.util import fmt
from infermeter.util.jsonio import clean_json, print_json

#: largest values accepted, so a typo is one line and not an hour of arithmetic
MAX_TOKENS = 10_000_000
MAX_BATCH = 1_000_000
MAX_GPUS = 65_536


def _with_release(stack: str, version: str | None) -> str:
    """`--stack hf --transformers-version V` as `hf@V`; a release of no transformers refused."""
    from infermeter.errors import UserError

    if version is None:
        return stack
    name, _, named = stack.partition("@")
    if not name.startswith("hf"):
        raise UserError(
            f"--transformers-version names the release an hf stack runs; --stack {name} runs "
            "its own engine",
            f"drop --transformers-version, or give the engine's release as --stack {name}@VERSION",
        )
    if named and named != version.strip():
        raise UserError(
            f"--stack {stack} and --transformers-version {version} name two releases",
            "give one of them",
        )
    return f"{name}@{version.strip()}"


def _within(value: float | None, option: str, low: float, high: float) -> None:
    from infermeter.errors import UserError

    if value is not None and not low <= value <= high:
        raise UserError(f"{option} {value} is out of range", f"use {low}..{high}")


def _batches(text: str) -> tuple[int, ...]:
    from infermeter.errors import UserError

    out = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            b = int(part)
        except ValueError:
            raise UserError(
                f"--batch {part!r} is not a whole number", "e.g. --batch 1,8,32"
            ) from None
        _within(b, "--batch", 1, MAX_BATCH)
        out.append(b)
    if not out:
        raise UserError("--batch is empty", "e.g. --batch 1,8,32")
    return tuple(dict.fromkeys(out))


@guard
def predict_command(
    model: str = typer.Option(
        "tiny-llama",
        "--model",
        "-m",
        help="A preset, a trained model (smollm2-135m, gemma3-270m), a folder, a hub id in the "
        "local cache, or a config.json.",
    ),
    hardware: str = typer.Option(
        "cpu-this", help="h100-sxm, a100-80gb, l4, rtx-4090, m2-max, ... or cpu-this (calibrated)."
    ),
    gpus: int = typer.Option(1, help="GPUs in all: tensor-parallel groups x replicas."),
    tp: int = typer.Option(1, help="Tensor-parallel degree (GPUs sharing one copy)."),
    dtype: str = typer.Option(
        "auto",
        help="auto, float32, bfloat16, float16; int8 or fp8 (8-bit weights, 16-bit compute); "
        "int8-w8a8 or fp8-w8a8 (8-bit GEMMs: GPUs with that tensor rate).",
    ),
    stack: str = typer.Option(
        "hf",
        help="What runs the model: hf (transformers' eager generate with SDPA, as profiled), "
        "hf-fa2 (the same with flash_attention_2), hf-compile (static cache + torch.compile), "
        "vllm, sglang, tensorrt-llm, lmdeploy, tgi, llama.cpp; NAME@VERSION names a release "
        "(tgi@1.0, vllm@0.2: before their CUDA graphs, kernels launched from Python); one its "
        "constants were not fitted on is said, and widens the interval; "
        "hf@4.46 counts that transformers release's operations where they ship. "
        "Each is a documented profile (CUDA graphs, fused kernels, paged KV, scheduler cost) "
        "fitted to published measurements: docs/analysis.md.",
    ),
    cache: str = typer.Option(
        "dynamic",
        help="The KV cache's form under transformers' generate: dynamic, static (allocated "
        "for the whole generation, attended in full), quantized (4-bit quanto), offloaded "
        "(GPU: in host memory), sliding_window.",
    ),
    batch: str = typer.Option("1,8,32", help="Sequences per replica, comma-separated."),
    prompt_tokens: int = typer.Option(2048, help="Prompt tokens per sequence."),
    new_tokens: int = typer.Option(256, help="Generated tokens per sequence."),
    top_k: int = typer.Option(None, "--top-k", help="MoE experts per token (default: config's)."),
    host_us_per_op: float = typer.Option(
        None,
        "--host-us-per-op",
        help="Host microseconds per framework operation dispatched (eager stacks; default: the "
        "stack's fitted 11 on a server, 4.8 on the RTX 4090, assumed in a desktop; about "
        "60% of operations launch a kernel). An eager step is often launch-bound, so the host "
        "CPU sets it: servers measured 9.5 to 13.8.",
    ),
    transformers_version: str = typer.Option(
        None,
        "--transformers-version",
        help="The transformers release an hf stack runs (default: the installed one): its "
        "operations are counted where they ship (4.38.2, 4.42.0, 4.46.3, 4.51.3, 5.24.0), "
        "else said. The same as --stack hf@VERSION.",
    ),
    learn: bool = typer.Option(True, help="Refine with stored runs on the same device."),
    out: Path = typer.Option(None, "--out", help="Write predict.json and the figures here."),
    db: str = DB,
    json_out: bool = JSON_OUT,
) -> None:
    """Memory fit, roofline bounds and predicted TTFT, TPOT and throughput, without weights.

    The times are for the serving stack --stack names; every answer says which, and where its
    constants come from (published measurements: benchmarks/published/).
    """
    # Long because typer declares each of the command's options as a parameter (a comment: the
    # docstring is the command's --help)
    from infermeter.errors import UserError
    from infermeter.models.spec import check_model_spec

    _within(gpus, "--gpus", 1, MAX_GPUS)
    _within(tp, "--tp", 1, MAX_GPUS)
    _within(prompt_tokens, "--prompt-tokens", 1, MAX_TOKENS)
    _within(new_tokens, "--new-tokens", 1, MAX_TOKENS)
    _within(top_k, "--top-k", 1, 4096)
    _within(host_us_per_op, "--host-us-per-op", 0.1, 1000)
    if gpus % tp:
        raise UserError(
            f"--gpus {gpus} is not a multiple of --tp {tp}",
            "give --gpus as tensor-parallel groups x replicas (e.g. --gpus 8 --tp 4)",
        )
    batches = _batches(batch)
    stack = _with_release(stack.strip().lower(), transformers_version)
    check_model_spec(model)  # a typo is answered before the heavy imports below
    from infermeter.analysis.predict import Workload
    from infermeter.experiments.whatif import what_if
    from infermeter.run.document import Prediction
    from infermeter.store import Store

    if out is not None:
        from infermeter.cli.output import writable_dir

        out = writable_dir(out)
    store = Store(db)
    w = Workload(
        batches, prompt_tokens, new_tokens, dtype.strip().lower(), gpus, tp, top_k, cache.strip()
    )
    doc = Prediction(  # clean_json gives plain dicts: the document's class is put back
        clean_json(
            what_if(
                model,
                hardware,
                w,
                store,
                learn=learn,
                stack=stack,
                host_op_seconds=host_us_per_op * 1e-6 if host_us_per_op else None,
            )
        )
    )
    doc["id"] = store.save_prediction(doc)
    files: list[Path] = []
    if out is not None:
        from infermeter.report.predict_figures import predict_figures
        from infermeter.util.jsonio import write_json

        files = [write_json(out / "predict.json", doc), *predict_figures(doc, out)]
    if json_out:
        print_json(doc)
        return
    _print(doc, files, store.where)


def _gb(nbytes: float | None) -> str:
    return "-" if nbytes is None else f"{nbytes / 1e9:.2f} GB"


def _gb_interval(nbytes: float, interval: list[float] | tuple[float, float] | None) -> str:
    """`15.35 GB (10.4-22.6)`: a predicted memory with its interval, in GB."""
    if not interval:
        return _gb(nbytes)
    return f"{_gb(nbytes)} ({interval[0] / 1e9:.3g}-{interval[1] / 1e9:.3g})"


def _bound(phase: dict[str, Any]) -> str:
    b = phase.get("bound")
    parts = {
        "compute": phase.get("compute_bound_s"),
        "memory": phase.get("memory_bound_s"),
        "communication": phase.get("comm_bound_s"),
    }
    s = parts.get(b) if b else None
    return f"{b} ({s * 1e3:.3g} ms)" if b and s else "-"


def _interval_lines(doc: dict[str, Any]) -> list[str]:
    """Where the intervals come from, and what the prediction lies outside of."""
    band = doc["rows"][0].get("interval")
    if not band:
        return []
    out = [
        f"intervals ({band['confidence']:.0%}): from {band['rows']} held-out errors of "
        f"{band['sources']} published sources ({band['group']}), split conformal "
        "(docs/analysis.md: their coverage, one source left out at a time)"
    ]
    mem = doc["rows"][0].get("memory_interval")
    if mem:
        out.append(
            f"memory intervals ({mem['confidence']:.0%}): from {mem['rows']} held-out errors of "
            f"{mem['sources']} published peak-memory sources (benchmarks/published/memory.json)"
            + (f"; widened: {'; '.join(mem['widened'])}" if mem["widened"] else "")
        )
    if doc.get("out_of_scope"):
        out.append("each interval is widened (x1.5 a reason): " + "; ".join(doc["out_of_scope"]))
    return out


def _print(doc: dict[str, Any], files: list[Path], where: str) -> None:
    from infermeter.analysis.intervals import interval_text

    console = Console(soft_wrap=True, width=max(Console().width, 150))
    hw, w = doc["hardware"], doc["workload"]
    par = f", {w['gpus']} GPUs (TP {w['tp']} x {w['replicas']} replicas)" if w["gpus"] > 1 else ""
    t = Table(
        title=f"{doc['model']} ({fmt.count(doc['params'])} parameters) on {hw['name']}{par}, "
        f"{doc['dtype']}, prompt {w['prompt_tokens']} + {w['new_tokens']} new tokens, "
        f"served by {doc['stack']['key']}"
        + (f", {w['cache']} KV cache" if w.get("cache", "dynamic") != "dynamic" else ""),
        title_justify="left",
        box=box.SIMPLE_HEAD,
    )
    cols = (
        "batch",
        "fits",
        "KV cache",
        "activations",
        "total (90%)",
        "free",
        "TTFT ms (90%)",
        "prefill bound",
        "TPOT ms (90%)",
        "decode bound",
        "tokens/s (90%)",
    )
    for c in cols:
        t.add_column(c, justify="right")
    for r in doc["rows"]:
        m = r["memory"]
        t.add_row(
            str(r["batch"]),
            {True: "yes", False: "NO", None: "?"}[m["fits"]],
            _gb(m["kv_cache_bytes"]),
            _gb(m["activations_bytes"]),
            _gb_interval(m["total_bytes"], m.get("total_bytes_interval")),
            _gb(m["free_bytes"]),
            interval_text(r["ttft_ms"], r.get("ttft_ms_interval"), level=False),
            _bound(r["prefill"]),
            interval_text(r["tpot_ms"], r.get("tpot_ms_interval"), level=False),
            _bound(r["decode"]),
            interval_text(r["throughput_tok_s"], r.get("throughput_tok_s_interval"), level=False)
            if r["throughput_tok_s"]
            else "-",
        )
    console.print(t)
    first = doc["rows"][0]["memory"]
    say = [
        f"per {'GPU' if hw['kind'] == 'gpu' else 'device'}: weights "
        f"{_gb(first['weights_bytes'])}, runtime {_gb(first['runtime_bytes'])}, "
        f"capacity {_gb(hw['memory_bytes'])}; largest batch that fits: {doc['largest_batch']}"
        + (
            f"; KV cache in host memory {_gb(first['kv_host_bytes'])}"
            if first.get("kv_host_bytes")
            else ""
        ),
        f"stack: {doc['stack']['title']}: {doc['stack']['what']}",
        f"stack release: {doc['stack']['release_asked'] or 'none named'}; the constants "
        f"describe {doc['stack']['release_assumed']}",
        f"precision: {doc['precision']}",
        "device model, steps applied in order: "
        + " -> ".join(step["name"] for step in hw.get("steps") or []),
        f"efficiency: {hw['efficiency']}; "
        + "; ".join(f"{k}: {v}" for k, v in hw["sources"].items()),
        f"learnt from {doc['learned']['runs']} stored runs ({doc['learned']['from']})",
    ]
    short = [r for r in doc["rows"] if r["memory"]["fits"] is False]
    for r in short:
        say.append(
            f"batch {r['batch']} does not fit: short by {_gb(-r['memory']['free_bytes'])} per GPU"
        )
    say += [f"batch {r['batch']}: {n}" for r in doc["rows"] for n in r.get("notes") or []]
    say += [f"approximate: {a}" for a in doc["approximate"]]
    say += _interval_lines(doc)
    say.append(f"stored as prediction {doc['id']} in {where}")
    say += [f"wrote {f}" for f in files]
    for line in say:
        console.print(line, style="dim", markup=False)
