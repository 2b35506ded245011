"""`infermeter bench attention|model`: microbenchmarks beside a profile, with their tables.

List options take values the way the reference suite's scripts did (`--seq-lens 512 1024`)
as well as comma-separated (`--seq-lens 512,1024`) or repeated; `spread_list_options` turns
the first form into the second before typer parses the command line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from infermeter.bench.eta import BenchProgress, duration_text
from infermeter.cli.guard import guard
from infermeter.cli.options import JSON_OUT
from infermeter.cli.output import writable_dir
from infermeter.errors import UserError
from infermeter.util import fmt

bench_app = typer.Typer(
    help="Microbenchmarks: attention kernels, whole-model forward and training step.",
    no_args_is_help=True,
)

#: options of `bench` commands that take several values
LIST_OPTIONS = {"--seq-lens", "--kinds", "--model", "-m"}


def spread_list_options(argv: list[str]) -> list[str]:
    """`bench ... --seq-lens 512 1024 --kinds eager sdpa` -> `--seq-lens 512,1024 --kinds ...`.

    Only for `bench` commands, whose only positional argument is the command's name, so a bare
    word after a list option can only be another value of it.
    """
    if len(argv) < 3 or argv[1] != "bench":
        return argv
    out = argv[:3]
    i = 3
    while i < len(argv):
        token = argv[i]
        out.append(token)
        i += 1
        if token in LIST_OPTIONS:
            values = []
            while i < len(argv) and not argv[i].startswith("-"):
                values.append(argv[i])
                i += 1
            if values:
                out.append(",".join(values))
    return out


def _ints(values: list[str], option: str) -> tuple[int, ...]:
    """Comma-separated or repeated integers, each checked; one line on a bad one."""
    out = []
    for v in (x.strip() for item in values for x in item.split(",")):
        if not v:
            continue
        try:
            out.append(int(v))
        except ValueError:
            raise UserError(
                f"{option} {v!r} is not a whole number", f"e.g. {option} 512 1024"
            ) from None
    return tuple(out)


def _words(values: list[str]) -> tuple[str, ...]:
    return tuple(x.strip() for item in values for x in item.split(",") if x.strip())


def _wide_console() -> Console:
    """Tables of ten columns need more than 80: at least 140 wide, more on a wider terminal."""
    return Console(soft_wrap=True, width=max(Console().width, 140))


def _bench(
    run: Any, spec: Any, table: Any, out: Path | None, filename: str, json_out: bool
) -> None:
    """Run a benchmark with a line per finished point, then its table or JSON, and its files.

    The output folder is checked before the work; progress goes to stderr under --json so
    stdout stays one document.
    """
    from infermeter.util.jsonio import print_json

    if out is not None:
        writable_dir(out)
    console = Console(stderr=json_out, soft_wrap=True)

    def progress(p: BenchProgress) -> None:
        left = "" if p.left_s is None or p.done == p.total else f"; {duration_text(p.left_s)} left"
        console.print(
            f"  {p.group} at {p.seq_len} tokens: {p.point_s:.1f} s ({p.done} of {p.total}{left})",
            markup=False,
            style="dim",
        )

    doc = run(spec, on_progress=progress)
    if json_out:
        print_json(doc)
    else:
        _wide_console().print(table(doc))
    _write(doc, out, filename, console)


def _write(doc: dict[str, Any], out: Path | None, name: str, console: Console) -> None:
    """The document and its report (tables, figures) into `out`, when asked."""
    if out is None:
        return
    from infermeter.report.file_report import file_report
    from infermeter.util.jsonio import write_json

    folder = writable_dir(out)
    write_json(folder / name, doc)
    files = file_report(doc, folder)
    console.print(
        f"wrote {folder / name} and {len(files)} report files "
        f"(report.md, report.html, CSV, PNG) in {folder}",
        markup=False,
    )


@bench_app.command("attention")
@guard
def attention_command(
    seq_lens: list[str] = typer.Option(
        ["512", "1024", "2048", "4096"],
        "--seq-lens",
        help="Sequence lengths (512 1024 or 512,1024).",
    ),
    batch: int = typer.Option(1, help="Batch size."),
    heads: int = typer.Option(8, help="Query heads."),
    kv_heads: int = typer.Option(None, "--kv-heads", help="Key/value heads (GQA); default heads."),
    head_dim: int = typer.Option(64, "--head-dim", help="Head dimension."),
    kinds: list[str] = typer.Option(
        ["eager", "sdpa", "flex-causal", "sliding-window", "block-sparse"],
        "--kinds",
        help="eager, sdpa (every backend on the device), "
        "sdpa-math|flash|efficient|cudnn, flex-causal, "
        "sliding-window, block-sparse.",
    ),
    window: int = typer.Option(256, help="Keys back of the sliding window."),
    block_size: int = typer.Option(128, "--block-size", help="Block (tile) size of FlexAttention."),
    density: float = typer.Option(0.25, help="Kept fraction of key blocks, block-sparse."),
    dtype: str = typer.Option("float32", help="float32, bfloat16 or float16."),
    device: str = typer.Option("cpu", help="cpu, cuda, cuda:N or auto."),
    warmup: int = typer.Option(2, help="Untimed calls first."),
    samples: int = typer.Option(10, help="Timed calls per point."),
    flex_compile: str = typer.Option(
        "auto",
        "--flex-compile",
        help="auto, on or off: torch.compile FlexAttention (off: "
        "torch's unfused fallback computes every score).",
    ),
    seed: int = typer.Option(0, help="Seeds q, k, v and the block-sparse pattern."),
    out: Path = typer.Option(None, help="Write bench_attention.json and its report here."),
    json_out: bool = JSON_OUT,
) -> None:
    """Attention kinds over sequence lengths: latency, memory, sparsity, FLOPs, accuracy.

    Every kind is checked against float64 dense attention under the same mask.
    """
    from infermeter.bench.attention import AttentionSpec, run_benchmark

    spec = AttentionSpec(
        seq_lens=_ints(seq_lens, "--seq-lens"),
        batch=batch,
        heads=heads,
        kv_heads=heads if kv_heads is None else kv_heads,
        head_dim=head_dim,
        kinds=_words(kinds),
        window=window,
        block_size=block_size,
        density=density,
        dtype=dtype,
        device=device,
        warmup=warmup,
        samples=samples,
        flex_compile=flex_compile,
        seed=seed,
    )
    _bench(run_benchmark, spec, attention_table, out, "bench_attention.json", json_out)


def attention_table(doc: dict[str, Any]) -> Table:
    """The attention results for people: medians with intervals, memory, sparsity, FLOP/s."""
    from infermeter.report.file_report import attention_rows

    s = doc["meta"]["spec"]
    t = Table(
        title=f"attention · batch {s['batch']}, {s['heads']} heads ({s['kv_heads']} kv), "
        f"head dim {s['head_dim']}, {s['dtype']}, {doc['meta']['device'].get('name', '')}",
        title_justify="left",
    )
    cols = (
        "kind",
        "seq",
        "ms (median)",
        "95% CI",
        "peak MiB",
        "masked",
        "skipped",
        "useful GFLOP",
        "GFLOP/s useful",
        "max |diff|",
    )
    for c in cols:
        t.add_column(c, justify="left" if c == "kind" else "right", no_wrap=c == "kind")
    rows = attention_rows(doc)
    for r in rows:
        t.add_row(
            r["kind"],
            str(r["seq_len"]),
            _flagged(r["latency_ms"], r["noisy"]),
            r["ci95"],
            fmt.significant(r["peak_memory_mib"]),
            f"{100 * r['mask_sparsity']:.1f}%",
            f"{100 * r['skipped_fraction']:.1f}%",
            fmt.significant(r["useful_gflop"]),
            fmt.significant(r["useful_gflop_per_s"]),
            f"{r['max_abs_diff_vs_dense']:.1e}",
        )
    _noise_caption(t, any(r["noisy"] for r in rows))
    return t


def _flagged(ms: float | None, noisy: bool) -> str:
    """A median, marked when its samples spread over 10% or hold an outlier (as runs are)."""
    return f"⚠ {fmt.significant(ms)}" if noisy else fmt.significant(ms)


def _noise_caption(table: Table, any_noisy: bool) -> None:
    if any_noisy:
        table.caption = (
            "⚠ noisy: the timed calls vary by more than 10% or hold an outlier; use more "
            "--samples or a quieter machine"
        )
        table.caption_justify = "left"


@bench_app.command("model")
@guard
def model_command(
    model: list[str] = typer.Option(
        ["tiny-llama"], "--model", "-m", help="Any --model spec; several allowed."
    ),
    seq_lens: list[str] = typer.Option(
        ["128", "256", "512"], "--seq-lens", help="Sequence lengths (128 256 or 128,256)."
    ),
    batch: int = typer.Option(1, help="Batch size."),
    train: bool = typer.Option(False, "--train", help="Also forward + backward with the loss."),
    steps: int = typer.Option(0, help="AdamW steps after timing (needs --train): loss falls?"),
    lr: float = typer.Option(1e-3, help="Learning rate of those steps."),
    dtype: str = typer.Option("auto", help="auto, float32, bfloat16 or float16."),
    device: str = typer.Option("cpu", help="cpu, cuda, cuda:N, mps or auto."),
    warmup: int = typer.Option(1, help="Untimed calls first."),
    samples: int = typer.Option(5, help="Timed calls per point."),
    seed: int = typer.Option(0, help="Seeds preset weights and picks the corpus text."),
    out: Path = typer.Option(None, help="Write bench_model.json and its report here."),
    json_out: bool = JSON_OUT,
) -> None:
    """Whole-model forward (and training step) latency and peak memory over lengths.

    Inputs are exact-length windows of the built-in corpus; the loss is the causal-LM loss.
    """
    from infermeter.bench.model import ModelBenchSpec, run_benchmark

    spec = ModelBenchSpec(
        models=_words(model),
        seq_lens=_ints(seq_lens, "--seq-lens"),
        batch=batch,
        train=train,
        steps=steps,
        lr=lr,
        dtype=dtype,
        device=device,
        warmup=warmup,
        samples=samples,
        seed=seed,
    )
    _bench(run_benchmark, spec, model_table, out, "bench_model.json", json_out)


def model_table(doc: dict[str, Any]) -> Table:
    """Forward and training medians with intervals, peaks, ratio and loss."""
    from infermeter.report.file_report import model_rows

    t = Table(
        title=f"models · batch {doc['meta']['spec']['batch']} · "
        f"{doc['meta']['device'].get('name', '')}",
        title_justify="left",
    )
    cols = (
        "model",
        "seq",
        "forward ms",
        "95% CI",
        "peak MiB",
        "train ms",
        "95% CI ",
        "peak MiB ",
        "train/fwd",
        "loss",
        "after steps",
    )
    for c in cols:
        t.add_column(c, justify="left" if c == "model" else "right", no_wrap=c == "model")
    rows = model_rows(doc)
    for r in rows:
        t.add_row(
            r["model"],
            str(r["seq_len"]),
            _flagged(r["forward_ms"], r["forward_noisy"]),
            r["forward_ci95"],
            fmt.significant(r["forward_peak_mib"]),
            _flagged(r["train_ms"], r["train_noisy"]),
            r["train_ci95"],
            fmt.significant(r["train_peak_mib"]),
            fmt.significant(r["train_over_forward"]),
            fmt.significant(r["loss"]),
            fmt.significant(r["loss_after_steps"]),
        )
    _noise_caption(t, any(r["forward_noisy"] or r["train_noisy"] for r in rows))
    return t
