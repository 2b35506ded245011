"""`infermeter sweep` and `infermeter sweeps list|show`: grids over knob values, resumable."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.table import Table

from infermeter.cli.guard import fail, guard
from infermeter.cli.options import DB, JSON_OUT, config_option, spec_option
from infermeter.cli.output import writable_dir
from infermeter.cli.progress import SweepProgressView
from infermeter.cli.prompt_source import (
    DATASET,
    DATASET_FIELD,
    DATASET_SPLIT,
    WORKLOAD,
    prompt_fields,
)
from infermeter.experiments.placement import RayPlacement
from infermeter.run.sweep_spec import SweepSpec
from infermeter.util import fmt
from infermeter.util.jsonio import clean_json, print_json, write_json
from infermeter.util.settings import check_ranges

if TYPE_CHECKING:
    from infermeter.run.config import RunConfig


sweeps_app = typer.Typer(help="Stored sweeps.", no_args_is_help=True)


def _base_config(
    model: str | None, file_settings: dict[str, Any], cli: dict[str, Any]
) -> RunConfig:
    from infermeter.models.presets import DEFAULT_PRESET
    from infermeter.run.config import RunConfig

    merged = {**file_settings, **{k: v for k, v in cli.items() if v is not None}}
    merged.setdefault("model", model or DEFAULT_PRESET)
    if model:
        merged["model"] = model
    return RunConfig(**merged).validate()


def _interrupted(done: int, total: int) -> typer.Exit:
    return fail(
        f"interrupted: {done} of {total} points are stored; run the same command again to "
        "resume (finished points are skipped)",
        130,
    )


@guard
def sweep_command(
    model: str = config_option("model", "--model", "-m", default=None, note="Default tiny-llama."),
    knob: list[str] = spec_option(SweepSpec, "knobs", "--knob", "-k"),
    config: Path = typer.Option(None, help="YAML or TOML sweep file (model, knobs, settings)."),
    name: str = spec_option(SweepSpec, "name", default=None),
    prompt_tokens: int = config_option(
        "prompt_tokens", default=None, note="The base, when not a knob."
    ),
    new_tokens: int = config_option("new_tokens", default=None, note="The base, when not a knob."),
    batch_size: int = config_option("batch_size", default=None, note="The base, when not a knob."),
    samples: int = config_option("samples", default=None, note="Per point (default 5)."),
    warmup: int = config_option("warmup", default=None, note="Per point (default 1)."),
    dtype: str = config_option("dtype", default=None, note="The base, when not a knob."),
    device: str = config_option("device", default=None),
    threads: int = config_option("threads", note="Of every point."),
    mode: str = config_option("mode", default=None, note="Of every point."),
    energy: str = config_option("energy", default=None),
    prompts: Path = config_option("prompts_file"),
    workload: str = WORKLOAD,
    dataset: str = DATASET,
    dataset_split: str = DATASET_SPLIT,
    dataset_field: str = DATASET_FIELD,
    interleave: bool = spec_option(SweepSpec, "interleave"),
    slo: list[str] = config_option("slos", note="Each point's."),
    db: str = DB,
    out: Path = typer.Option(None, help="Write DIR/sweep-ID.json there."),
    json_out: bool = JSON_OUT,
    ray: str = spec_option(RayPlacement, "address", "--ray"),
    cpus_per_point: float = spec_option(RayPlacement, "cpus_per_point"),
    gpus_per_point: float = spec_option(RayPlacement, "gpus_per_point"),
    accelerator_type: str = spec_option(RayPlacement, "accelerator_type"),
    node_label: list[str] = spec_option(RayPlacement, "node_labels"),
    ray_cpus: int = spec_option(RayPlacement, "local_cpus"),
) -> None:
    """Run a grid over knob values; every point is stored, and a rerun resumes."""
    # Long because typer declares each of the command's options as a parameter.
    from infermeter.run.slo import parse_slos
    from infermeter.run.sweep_file import parse_knob_option, read_sweep_file
    from infermeter.run.sweep_spec import SweepSpec
    from infermeter.store import Store

    # the placement's ranges first: a typo is named before the sweep file or the knobs
    check_ranges(
        RayPlacement(
            cpus_per_point=cpus_per_point, gpus_per_point=gpus_per_point, local_cpus=ray_cpus
        )
    )
    file = read_sweep_file(config) if config else None
    knobs = dict(file.knob_texts()) if file else {}
    for text in knob or []:
        k, values = parse_knob_option(text)
        knobs[k] = values
    base = _base_config(
        model or (file.model if file else None),
        file.settings() if file else {},
        {
            "prompt_tokens": prompt_tokens,
            "new_tokens": new_tokens,
            "batch_size": batch_size,
            "samples": samples,
            "warmup": warmup,
            "dtype": dtype,
            "device": device,
            "threads": threads,
            "mode": mode,
            "energy": energy,
            "prompts_file": str(prompts) if prompts else None,
            **prompt_fields(prompts, workload, dataset, dataset_split, dataset_field),
            "slos": parse_slos(slo) or None,
        },
    )
    spec = SweepSpec(
        base,
        knobs,
        name=name or (file.name if file else None) or "sweep",
        interleave=interleave or bool(file and file.interleave),
    )
    spec.points()  # parse every value now: a bad one fails before the model loads
    out_dir = writable_dir(out) if out else None
    placement = _placement(
        ray, cpus_per_point, gpus_per_point, accelerator_type, node_label, ray_cpus
    )
    store = Store(db)
    if placement is not None:
        result = _run_on_ray(spec, store, placement)
    else:
        result = _run_with_progress(spec, store)
    _print_sweep(spec, result, store.where, out_dir, json_out)


def bare_ray_option(argv: list[str]) -> list[str]:
    """`sweep ... --ray` with no address (last, or before another option) -> `--ray local`."""
    if len(argv) < 2 or argv[1] != "sweep":
        return argv
    out = []
    for i, token in enumerate(argv):
        out.append(token)
        if token == "--ray" and (i + 1 == len(argv) or argv[i + 1].startswith("-")):
            out.append("local")
    return out


def _placement(
    ray: str | None,
    cpus: float,
    gpus: float,
    accelerator: str | None,
    labels: list[str] | None,
    ray_cpus: int | None,
) -> Any:
    """The Ray placement the options ask for; None without --ray (options checked first)."""
    from infermeter.errors import UserError

    if ray is None:
        if accelerator or labels or ray_cpus is not None or gpus or cpus != 1.0:
            raise UserError(
                "--cpus/--gpus-per-point, --accelerator-type, --node-label and "
                "--ray-cpus place Ray tasks",
                "add --ray",
            )
        return None
    pairs = {}
    for text in labels or []:
        key, eq, value = text.partition("=")
        if not eq or not key.strip():
            raise UserError(f"--node-label {text!r} is not KEY=VALUE", "e.g. --node-label zone=a")
        pairs[key.strip()] = value.strip()
    from infermeter.experiments.ray_sweep import import_ray

    placement = RayPlacement(
        address=None if ray == "local" else ray,
        cpus_per_point=cpus,
        gpus_per_point=gpus,
        accelerator_type=accelerator,
        node_labels=pairs,
        local_cpus=ray_cpus,
    ).validate()
    import_ray()  # says how to install it before anything else happens
    return placement


def _run_on_ray(spec: Any, store: Any, placement: Any) -> Any:
    """The sweep on Ray, each finished point printed as it lands; Ctrl-C cancels the rest."""
    from infermeter.errors import UserError
    from infermeter.experiments.ray_sweep import run_sweep_on_ray

    if spec.interleave:
        raise UserError(
            "--interleave measures the points together in one process; Ray spreads them out",
            "drop --ray or --interleave",
        )
    console = Console(stderr=True, soft_wrap=True)
    where = placement.address or "a local Ray instance"
    console.print(f"sweep {spec.sweep_id} on {where}", style="dim", markup=False)
    done = [0, 0]

    def progress(i: int, total: int, label: str, skipped: bool) -> None:
        done[:] = [i, total]

    def point(p: dict[str, Any]) -> None:
        why = f": {p['error']}" if p.get("error") else ""
        console.print(
            f"[{done[0] + 1}/{done[1] or len(spec.points())}] {p['label']}: {p['status']} "
            f"(run {p.get('run_id')}, {p.get('host', '?')} pid {p.get('pid', '?')}){why}",
            markup=False,
        )

    try:
        return run_sweep_on_ray(spec, store, placement, on_progress=progress, on_point=point)
    except KeyboardInterrupt:
        raise fail(
            f"interrupted: outstanding Ray tasks cancelled; {done[0]} of "
            f"{done[1] or len(spec.points())} points are stored; run the same command again to "
            "resume (finished points are skipped)",
            130,
        ) from None


def _print_sweep(spec: Any, result: Any, where: str, out_dir: Path | None, json_out: bool) -> None:
    """The sweep's table (or JSON), its files, and how to compare interleaved points."""
    doc = clean_json(result.to_json())
    if out_dir is not None:
        write_json(out_dir / f"sweep-{result.sweep_id}.json", doc)
    if json_out:
        print_json(doc)
        return
    console = Console(soft_wrap=True)
    console.print(sweep_table(doc))
    if spec.interleave and len(result.runs) >= 2:
        first = result.runs[0].run_id
        console.print(
            f"samples interleaved: compare pairs them, e.g. infermeter compare {first} "
            f"{result.runs[1].run_id}",
            markup=False,
        )
    console.print(
        f"sweep {result.sweep_id}: {len(result.runs)} points, {result.skipped} already done; "
        f"stored in {where}"
        + (f"; wrote {out_dir / f'sweep-{result.sweep_id}.json'}" if out_dir else ""),
        markup=False,
        style="dim",
    )


def _run_with_progress(spec: Any, store: Any) -> Any:
    """Run the sweep under a progress bar; Ctrl-C says what is stored and how to resume."""
    from infermeter.run.sweep import run_sweep

    view = SweepProgressView(f"sweep {spec.sweep_id}")
    done = [0, 0]

    def progress(i: int, total: int, label: str, skipped: bool) -> None:
        done[:] = [i, total]
        view(i, total, label, skipped)

    try:
        with view.progress:
            return run_sweep(spec, store, on_progress=progress)
    except KeyboardInterrupt:
        if spec.interleave:
            raise fail(
                "interrupted: the interleaved points are stored as terminated; run the same "
                "command again to measure them again (finished points are skipped)",
                130,
            ) from None
        raise _interrupted(done[0], done[1] or len(spec.points())) from None


def sweep_table(doc: dict[str, Any]) -> Table:
    """One row per configuration: the knob values and the main medians."""
    knobs = list((doc["meta"].get("knobs") or {}).keys())
    table = Table(
        title=f"sweep {doc['meta']['sweep_id']} · {doc['meta']['model']} · "
        + ("samples interleaved · " if doc["meta"].get("interleave") else "")
        + "medians "
        "(⚠ noisy: spread over 10% or an outlier)",
        title_justify="left",
    )
    for k in knobs:
        table.add_column(k)
    metrics = (
        ("ttft_ms", "TTFT ms"),
        ("tpot_ms", "TPOT ms"),
        ("tokens_per_s", "tok/s"),
        ("j_per_token", "J/tok"),
    )
    for _, label in metrics:
        table.add_column(label, justify="right")
    for row in doc["summary"]:
        cells = [str(row["config"].get(k)) for k in knobs]
        for key, _ in metrics:
            v = (row.get(key) or {}).get("p50")  # the median: the headline statistic
            mark = " ⚠" if key in (row.get("noisy") or []) else ""
            cells.append((fmt.sig3(v) if key == "j_per_token" else fmt.fixed(v)) + mark)
        table.add_row(*cells)
    return table


@sweeps_app.command("list")
@guard
def sweeps_list(
    db: str = DB,
    json_out: bool = JSON_OUT,
) -> None:
    """Stored sweeps, newest first."""
    from infermeter.store import Store

    rows = Store(db, create=False).list_sweeps()
    if json_out:
        print_json({"sweeps": rows})
        return
    table = Table(title=f"{len(rows)} sweeps", title_justify="left")
    for col in ("id", "name", "created", "points", "knobs"):
        table.add_column(col)
    for r in rows:
        knobs = "; ".join(f"{k}={','.join(map(str, v))}" for k, v in (r["knobs"] or {}).items())
        table.add_row(r["id"], r["name"], r["created"][:16], str(r["runs"]), knobs)
    Console(soft_wrap=True).print(table)


@sweeps_app.command("show")
@guard
def sweeps_show(
    sweep_id: str = typer.Argument(..., help="Sweep id or unique prefix."),
    db: str = DB,
    json_out: bool = JSON_OUT,
) -> None:
    """A stored sweep's table (or its JSON document)."""
    from infermeter.run.sweep import stored_sweep
    from infermeter.store import Store

    doc = clean_json(stored_sweep(Store(db, create=False), sweep_id))
    if json_out:
        print_json(doc)
        return
    Console(soft_wrap=True).print(sweep_table(doc))
