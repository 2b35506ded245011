"""`infermeter inspect structure|moe|shapes|verify-topk`: what a model is, without a profile."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from infermeter.cli.guard import guard
from infermeter.cli.options import JSON_OUT
from infermeter.cli.output import writable_dir
from infermeter.util import fmt
from infermeter.util.jsonio import clean_json, print_json, write_json

inspect_app = typer.Typer(
    help="What a model is made of: structure, MoE layers, shapes, top-k check.",
    no_args_is_help=True,
)

_MODEL = typer.Option("tiny-llama", "--model", "-m", help="Any --model spec (preset, folder...).")
_DEVICE = typer.Option("cpu", help="cpu, cuda, cuda:N, mps or auto.")


def _load(model: str, device: str) -> Any:
    from infermeter.models.loader import load_model

    return load_model(model, device=device)


@inspect_app.command("structure")
@guard
def structure_command(
    model: str = _MODEL,
    depth: int = typer.Option(3, help="Levels below the model to show (1 or more)."),
    device: str = _DEVICE,
    json_out: bool = JSON_OUT,
) -> None:
    """Module tree with parameter counts, dtypes, devices and shares; repeats collapsed."""
    from infermeter.models.inspect import structure

    if not 1 <= depth <= 64:
        from infermeter.errors import UserError

        raise UserError(f"--depth {depth} is outside 1..64", "use e.g. 3")
    lm = _load(model, device)
    rows = structure(lm.model, depth)
    if json_out:
        print_json(
            {
                "kind": "inspect-structure",
                "model": lm.info.spec,
                "modules": [r.to_dict() for r in rows],
            }
        )
        return
    Console(soft_wrap=True).print(structure_table(lm.info.spec, rows))


def structure_table(spec: str, rows: list[Any]) -> Table:
    """The tree for people: short names indented, dtype and device once when uniform."""
    dtypes = sorted({d for r in rows for d in r.dtypes})
    devices = sorted({d for r in rows for d in r.devices})
    uniform = len(dtypes) <= 1 and len(devices) <= 1
    title = f"{spec}: {fmt.count(rows[0].params)} parameters"
    if uniform:
        title += f" · {', '.join(dtypes)} · {', '.join(devices)}"
    t = Table(title=title + " · (each): per member of the row above", title_justify="left")
    for col in ("module", "type", "params", "share", *(() if uniform else ("dtype", "device"))):
        t.add_column(col, justify="right" if col in ("params", "share") else "left")
    for r in rows:
        short = r.name if r.depth <= 1 else r.name.rsplit(".", 2 if r.repeat > 1 else 1)[-1]
        if r.repeat > 1 and r.depth > 1:  # "layers.0-3" keeps its list's name
            short = ".".join(r.name.split(".")[-2:])
        name = "  " * r.depth + short + (f" x{r.repeat}" if r.repeat > 1 else "")
        name += " (each)" if r.each else ""
        name += f" (tied to {', '.join(r.tied_to)})" if r.tied_to else ""
        cells = [name, r.type, fmt.count(r.params), f"{100 * r.share:.1f}%"]
        if not uniform:
            cells += [",".join(r.dtypes), ",".join(r.devices)]
        t.add_row(*cells)
    return t


@inspect_app.command("moe")
@guard
def moe_command(model: str = _MODEL, device: str = _DEVICE, json_out: bool = JSON_OUT) -> None:
    """Per MoE layer: router, experts, top-k, shared experts, expert width, normalisation."""
    from infermeter.models.inspect import moe_layers

    lm = _load(model, device)
    layers = moe_layers(lm.model)
    if json_out:
        print_json({"kind": "inspect-moe", "model": lm.info.spec, "moe_layers": layers})
        return
    t = Table(title=f"{lm.info.spec}: {len(layers)} MoE layers", title_justify="left")
    for col in ("layer", "router", "experts", "top-k", "shared", "expert width"):
        t.add_column(col)
    for r in layers:
        t.add_row(
            str(r["layer"]),
            f"{r['router']} ({r['router_type']})",
            str(r["experts"]),
            str(r["top_k"]),
            ", ".join(r["shared_experts"]) or "-",
            str(r["expert_width"]),
        )
    console = Console(soft_wrap=True)
    console.print(t)
    console.print(f"routing weights: {layers[0]['routing_normalised']}", markup=False)


@inspect_app.command("shapes")
@guard
def shapes_command(
    model: str = _MODEL,
    prompt_tokens: int = typer.Option(16, help="Prompt length of the prefill (1..4096)."),
    depth: int = typer.Option(3, help="Levels below the model to print (the JSON has all)."),
    device: str = _DEVICE,
    out: Path = typer.Option(None, help="Also write DIR/shapes.json."),
    json_out: bool = JSON_OUT,
) -> None:
    """Input and output shapes and dtypes of every module: one prefill, one decode step."""
    from infermeter.errors import UserError
    from infermeter.instrument.shapes import record_shapes
    from infermeter.workloads.prompts import WorkloadSpec, build_batches

    if not 1 <= prompt_tokens <= 4096:
        raise UserError(f"--prompt-tokens {prompt_tokens} is outside 1..4096", "use e.g. 16")
    if not 0 <= depth <= 64:
        raise UserError(f"--depth {depth} is outside 0..64", "use e.g. 3")
    out_dir = writable_dir(out) if out else None
    lm = _load(model, device)
    if lm.info.vision is not None:
        raise UserError("shapes of a vision-language model need images", "use a text model")
    (batch,) = build_batches(lm.tokenizer, WorkloadSpec(prompt_tokens=prompt_tokens), 1)
    rows = record_shapes(lm.model, batch.input_ids.to(next(lm.model.parameters()).device))
    doc = clean_json(
        {
            "kind": "inspect-shapes",
            "model": lm.info.spec,
            "prompt_tokens": prompt_tokens,
            "modules": [r.to_dict() for r in rows],
        }
    )
    if out_dir is not None:
        write_json(out_dir / "shapes.json", doc)
    if json_out:
        print_json(doc)
        return
    t = Table(
        title=f"{lm.info.spec}: shapes (prefill of {prompt_tokens} tokens, then one decode step)",
        title_justify="left",
    )
    for col in ("phase", "module", "type", "calls", "inputs", "outputs"):
        t.add_column(col)
    for r in rows:
        if r.depth <= depth:
            short = r.name if r.depth <= 1 else r.name.rsplit(".", 1)[-1]
            t.add_row(
                r.phase,
                "  " * r.depth + short,
                r.type,
                str(r.calls),
                "; ".join(r.inputs),
                "; ".join(r.outputs),
            )
    Console(soft_wrap=True).print(t)


@inspect_app.command("verify-topk")
@guard
def verify_topk_command(
    k: int = typer.Argument(..., help="The top-k to set on every router."),
    model: str = typer.Option("tiny-qwen3-moe", "--model", "-m", help="A MoE model."),
    device: str = _DEVICE,
    json_out: bool = JSON_OUT,
) -> None:
    """Set the MoE top-k knob to K, run one forward, show the experts each token really got."""
    from infermeter.knobs import get_knob
    from infermeter.knobs.moe_topk import experts_per_token_by_router

    knob = get_knob("top_k")
    lm = _load(model, device)
    assert knob.check is not None and knob.apply is not None
    knob.check(k, lm)
    with knob.apply(lm, k):
        seen = experts_per_token_by_router(lm)
    ok = all(v == [k] for v in seen.values()) and bool(seen)
    if json_out:
        print_json(
            {
                "kind": "inspect-verify-topk",
                "model": lm.info.spec,
                "top_k": k,
                "routers": seen,
                "verified": ok,
            }
        )
    else:
        t = Table(
            title=f"{lm.info.spec}: top_k={k}, distinct experts per token, measured",
            title_justify="left",
        )
        t.add_column("router")
        t.add_column("experts per token")
        for name, counts in seen.items():
            t.add_row(name, ", ".join(map(str, counts)))
        console = Console(soft_wrap=True)
        console.print(t)
        console.print(
            f"verified: every token went to exactly {k} experts at every router"
            if ok
            else f"NOT verified: tokens went to {sorted({c for v in seen.values() for c in v})}",
            markup=False,
        )
    if not ok:
        raise typer.Exit(1)


@inspect_app.command("tokens")
@guard
def tokens_command(
    model: str = _MODEL,
    prompt: list[str] = typer.Option(None, "--prompt", "-p", help="A prompt (repeatable)."),
    prompts_file: Path = typer.Option(None, help="Prompts file (.txt or .jsonl), first 1000."),
    chat: bool = typer.Option(True, "--chat/--no-chat", help="Count the chat template too."),
    json_out: bool = JSON_OUT,
) -> None:
    """How the model's tokenizer cuts prompts: tokens per word, specials, chat template.

    Also characters per token, and the image tokens of a vision-language model.
    """
    from infermeter.errors import UserError
    from infermeter.workloads.corpus import builtin_texts, read_prompts_file
    from infermeter.workloads.prompts import token_report

    if prompt and prompts_file:
        raise UserError("give --prompt or --prompts-file, not both", "pick one")
    texts = list(prompt or [])
    if prompts_file is not None:
        texts = read_prompts_file(prompts_file, max_prompts=1000)
    lm = _load(model, "cpu")
    doc = token_report(lm.tokenizer, texts or builtin_texts()[:5], chat=chat)
    doc["kind"], doc["model"], doc["tokenizer"] = "inspect-tokens", lm.info.spec, lm.info.tokenizer
    vision = lm.info.vision
    doc["image_tokens"] = (
        {"per_image": vision.tokens_per_image, "image_size": vision.image_size} if vision else None
    )
    if json_out:
        print_json(doc)
        return
    t = Table(title=f"{lm.info.spec}: tokenizer {lm.info.tokenizer}", title_justify="left")
    for col in ("prompt", "chars", "words", "tokens", "tokens/word", "first tokens"):
        t.add_column(col, justify="left" if col in ("prompt", "first tokens") else "right")
    for i, r in enumerate(doc["prompts"], 1):
        per_word = f"{r['tokens'] / r['words']:.2f}" if r["words"] else "-"
        t.add_row(
            str(i),
            str(r["chars"]),
            str(r["words"]),
            str(r["tokens"]),
            per_word,
            " | ".join(r["first_tokens"][:6]),
        )
    console = Console(soft_wrap=True)
    console.print(t)
    lines = [
        f"all prompts: {doc['tokens']} tokens, {doc['tokens_per_word'] or 0:.2f} per word, "
        f"{doc['chars_per_token'] or 0:.2f} characters per token",
        "added around plain text: " + (", ".join(doc["special_prefix"]) or "nothing"),
        f"chat template: {doc['chat_template_tokens']} tokens per prompt"
        if doc["chat_template"]
        else "chat template: none (or --no-chat)",
    ]
    if vision:
        lines.append(f"images: {vision.tokens_per_image} tokens each at {vision.image_size} px")
    for line in lines:
        console.print(line, markup=False)
