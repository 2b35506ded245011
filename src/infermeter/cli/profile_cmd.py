"""`infermeter profile`: one configuration, measured and stored."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console

from infermeter.cli.guard import err_console, guard
from infermeter.cli.options import DB, JSON_OUT, config_option
from infermeter.cli.output import writable_dir
from infermeter.cli.progress import StageProgressView
from infermeter.cli.prompt_source import (
    DATASET,
    DATASET_FIELD,
    DATASET_SPLIT,
    WORKLOAD,
    prompt_fields,
)
from infermeter.cli.slo_view import fail_on_miss
from infermeter.errors import UserError
from infermeter.models.spec import check_model_spec
from infermeter.util.jsonio import clean_json, print_json, write_json

if TYPE_CHECKING:
    from infermeter.instrument.collectives import CommunicationRowDoc
    from infermeter.run import RunConfig


def parse_layers(text: str | None) -> tuple[int, ...] | None:
    """'0,5,29' -> (0, 5, 29)."""
    if not text:
        return None
    try:
        return tuple(sorted({int(x) for x in text.split(",") if x.strip()}))
    except ValueError:
        raise UserError(
            f"--layers {text!r} is not a list of block numbers", "use e.g. 0,5,29"
        ) from None


@guard
def profile_command(
    model: str = config_option("model", "--model", "-m"),
    prompt_tokens: int = config_option("prompt_tokens"),
    new_tokens: int = config_option("new_tokens"),
    batch_size: int = config_option("batch_size"),
    samples: int = config_option("samples"),
    warmup: int = config_option("warmup"),
    dtype: str = config_option("dtype"),
    device: str = config_option("device"),
    threads: int = config_option("threads"),
    compile: bool = typer.Option(
        False,
        "--compile/--no-compile",
        help="torch.compile the forward; first call reported apart.",
    ),
    compile_mode: str = typer.Option(
        None,
        "--compile-mode",
        help="torch.compile mode (implies --compile): default, "
        "reduce-overhead (CUDA graphs), max-autotune, max-autotune-no-cudagraphs.",
    ),
    nvtx: bool = config_option("nvtx"),
    attn: str = config_option("attn_implementation"),
    decoding: str = config_option("decoding"),
    temperature: float = config_option("temperature"),
    top_p: float = config_option("top_p"),
    sample_top_k: int = config_option("sample_top_k"),
    prompts: Path = config_option("prompts_file"),
    workload: str = WORKLOAD,
    dataset: str = DATASET,
    dataset_split: str = DATASET_SPLIT,
    dataset_field: str = DATASET_FIELD,
    chat: bool = config_option("chat", "--chat/--no-chat"),
    prompt_kind: str = config_option("prompt_kind"),
    cache: str = config_option("cache"),
    seed: int = config_option("seed"),
    mode: str = config_option("mode"),
    sample_every: int = config_option("sample_every"),
    layers: str = config_option("layers"),
    energy: str = config_option("energy"),
    power_interval_ms: float = config_option("power_interval_ms"),
    grid_intensity: float = config_option("grid_g_per_kwh", "--grid-intensity"),
    db: str = DB,
    out: Path = typer.Option(None, help="Also write the run's JSON into this folder."),
    json_out: bool = JSON_OUT,
    show_text: bool = typer.Option(False, help="Print the last sample's prompt and output."),
    slo: list[str] = config_option("slos"),
    fail_if_slo_missed: bool = typer.Option(
        False, "--fail-if-slo-missed", help="Exit 3 when a sample misses an SLO."
    ),
    tp: int = typer.Option(
        1,
        "--tp",
        help="Tensor-parallel processes (torchrun; gloo on CPU, NCCL on GPU): every "
        "collective counted and timed per block and phase. Models with a transformers TP plan.",
    ),
) -> None:
    """Load a model, generate, and report load, TTFT, TPOT, throughput and peak memory."""
    from infermeter.run import RunConfig
    from infermeter.run.slo import parse_slos

    # Long because typer declares each of the command's options as a parameter.
    if not 1 <= tp <= MAX_TP:
        raise UserError(f"--tp {tp} is out of range", f"give 1 (no tensor parallelism) to {MAX_TP}")
    config = RunConfig(
        model=model,
        prompt_tokens=prompt_tokens,
        new_tokens=new_tokens,
        batch_size=batch_size,
        samples=samples,
        warmup=warmup,
        dtype=dtype,
        device=device,
        threads=threads,
        compile=compile_mode.strip().lower() if compile_mode else compile,
        nvtx=nvtx,
        attn_implementation=attn,
        decoding=decoding,
        temperature=temperature,
        top_p=top_p,
        sample_top_k=sample_top_k,
        chat=chat,
        prompt_kind=prompt_kind,
        cache=cache,
        prompts_file=str(prompts) if prompts else None,
        **prompt_fields(prompts, workload, dataset, dataset_split, dataset_field),
        seed=seed,
        mode=mode,
        sample_every=sample_every,
        layers=parse_layers(layers),
        energy=energy,
        power_interval_ms=power_interval_ms,
        grid_g_per_kwh=grid_intensity,
        slos=parse_slos(slo),
    ).validate()
    if fail_if_slo_missed and not config.slos:
        raise UserError("--fail-if-slo-missed needs an --slo", "add e.g. --slo ttft_ms=500")
    check_model_spec(model)  # after the ranges, before torch: a typo answers in a blink
    if tp != 1:
        result = _run_tp(config, tp, db, out, json_out)
    else:
        result = _run_and_show(config, db, out, json_out, show_text)
    if fail_if_slo_missed:
        fail_on_miss(result.slo_report())


#: the most tensor-parallel processes `--tp` starts (one node's GPUs, or CPU processes)
MAX_TP = 64


def _run_and_show(
    config: RunConfig, db: str | None, out: Path | None, json_out: bool, show_text: bool
) -> Any:
    """Profile with a progress bar, store, then print the card or the JSON and write --out."""
    from infermeter.cli.render import run_card
    from infermeter.run import profile
    from infermeter.store import Store

    out_dir = writable_dir(out) if out else None
    store = Store(db)
    view = StageProgressView(enabled=err_console.is_terminal)
    with view.progress:
        result = profile(config, sink=store, on_progress=view)
    card = run_card(result, where=store.where, show_text=show_text)
    return _emit(result, out_dir, json_out, [card])


def _emit(result: Any, out_dir: Path | None, json_out: bool, shown: list[Any]) -> Any:
    """Write the run's JSON to --out, then print it (--json) or the renderables `shown`."""
    doc = clean_json(result.to_json())
    path = out_dir / f"run-{result.run_id}.json" if out_dir is not None else None
    if path is not None:
        write_json(path, doc)
    if json_out:
        print_json(doc)
        return result
    console = Console(soft_wrap=True)
    for item in shown:
        console.print(item)
    if path is not None:
        err_console.print(f"wrote {path}", markup=False)
    return result


def _run_tp(config: RunConfig, tp: int, db: str | None, out: Path | None, json_out: bool) -> Any:
    """The run over `tp` torchrun processes, then its card and the communication table."""
    from infermeter.cli.render import run_card
    from infermeter.experiments.tensor_parallel import check_plan, profile_tp
    from infermeter.store import Store

    check_plan(config.model, tp)  # before anything is printed or started
    out_dir = writable_dir(out) if out else None
    store = Store(db)
    err_console.print(f"profiling over {tp} tensor-parallel processes ...", markup=False)
    result = store.get(profile_tp(config, tp, store.url))
    comm = communication_table(result.layers.get("communication") or [])
    return _emit(result, out_dir, json_out, [run_card(result, where=store.where), comm])


def communication_table(rows: list[CommunicationRowDoc]) -> Any:
    """Per phase: forwards, collectives per forward, bytes, ms communicating vs computing."""
    from rich import box
    from rich.table import Table

    t = Table(
        title="tensor-parallel communication (all ranks in lockstep; rank 0's clock)",
        title_justify="left",
        box=box.SIMPLE_HEAD,
    )
    for col in ("phase", "forwards", "calls/fwd", "KB/fwd", "comm ms", "compute ms", "comm share"):
        t.add_column(col, justify="left" if col == "phase" else "right")
    for r in rows:
        n = r["forwards"] or 1
        share = r["comm_share"]
        t.add_row(
            r["phase"],
            str(r["forwards"]),
            f"{r['collectives'] / n:.1f}",
            f"{r['bytes'] / n / 1e3:.1f}",
            f"{r['comm_ms']:.1f}",
            f"{r['compute_ms']:.1f}",
            "-" if share is None else f"{share:.0%}",
        )
    return t
