"""Per-layer tables of an instrumented run (standard or deep mode), narrow enough for 80 columns."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich import box
from rich.table import Table
from rich.text import Text

from infermeter.util import fmt

if TYPE_CHECKING:
    from infermeter.instrument.tables import LayerRowDoc, PartRowDoc
    from infermeter.measure.timer import SectionRowDoc
    from infermeter.run.results import RunResult


def _compact(title: str, columns: list[str], left: int = 1) -> Table:
    t = Table(
        title=title,
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        show_edge=False,
        collapse_padding=True,
    )
    for i, col in enumerate(columns):
        t.add_column(col, justify="left" if i < left else "right", no_wrap=True)
    return t


#: (title, [(table, field, label)]) of the per-block statistics tables, decode phase.
_STAT_TABLES = (
    (
        "per block: output activations in decode",
        [
            ("activations", "mean_abs", "mean|x|"),
            ("activations", "std", "std"),
            ("activations", "max_abs", "max|x|"),
            ("activations", "sparsity", "zero frac"),
        ],
    ),
    (
        "per block: attention, MLP and MoE in decode",
        [
            ("attention", "entropy", "attn entropy"),
            ("attention", "sparsity", "attn sparsity"),
            ("mlp_kill", "kill_ratio", "MLP kill"),
            ("moe_load", "imbalance", "MoE imbalance"),
        ],
    ),
)


#: One line for each row whose name does not say what it holds.
_EXPLAIN = {
    "generate call": "generate call: the phase's wall time (TTFT; decode), forward + outside",
    "outside forward": "outside forward: generate's own work (logits processing, sampling, "
    "stops, cache)",
    "choose_token": "choose token: a forward's end to its token (logits processing, sampling)",
    "prepare_step": "prepare step: a token to the next forward (stop checks, cache, inputs)",
    "rest of generate": "rest of generate: set-up before the first forward, call overhead",
    "other": "other: forward time outside timed modules (glue, cache, masks, hooks)",
    "rotary": "rotary: the rotary position tables (cos, sin), built once per forward",
    "rest of the block": "rest of the block: residual adds and glue between its timed parts",
    "rest of attention": "rest of attention: q/k/v projections, rotary, reshapes, masking",
    "rest of the MoE": "rest of the MoE: experts, dispatch and combine",
}


def _parts_table(parts: list[PartRowDoc]) -> list[Any]:
    """Where the time goes, as a tree: each part indented under the part it runs inside.

    Each row has its share of that parent (shares add to 100% at each level) and of the
    forward; rows whose name does not say what they hold are explained under the table.
    """
    from infermeter.run.components import part_tree

    t = _compact(
        "where the time goes (parts nested in what they run inside)",
        ["phase", "part", "calls", "total ms", "ms/call", "% parent", "% fwd"],
        left=2,
    )
    shown = set()
    for depth, r in part_tree(parts):
        shown.add(r["part"])
        t.add_row(
            r["phase"],
            "  " * depth + str(r["part"]).replace("_", " "),
            fmt.whole(r["calls"]),
            fmt.ms(r["total_ms"]),
            fmt.ms(r["mean_ms"]),
            fmt.pct(r.get("pct_parent")) if r.get("parent") else "",
            fmt.pct(r["pct_forward"]),
        )
    notes = [Text(why, style="dim") for part, why in _EXPLAIN.items() if part in shown]
    return [t, *notes]


def _block_times(rows: list[LayerRowDoc]) -> Table | None:
    times: dict[int, dict[str, Any]] = {}
    for r in rows:
        if r["kind"] == "block" and r["layer"] is not None:
            row = times.setdefault(int(r["layer"]), {})
            row[f"{r['phase']}_ms"] = r["mean_ms"]
            row[f"{r['phase']}_pct"] = r["pct_forward"]
    if not times:
        return None
    t = _compact(
        "per block: mean ms per call, % of the forward",
        ["block", "prefill ms", "prefill %", "decode ms", "decode %"],
    )
    for layer in sorted(times):
        b = times[layer]
        t.add_row(
            str(layer),
            fmt.ms(b.get("prefill_ms")),
            fmt.pct(b.get("prefill_pct")),
            fmt.ms(b.get("decode_ms")),
            fmt.pct(b.get("decode_pct")),
        )
    return t


def _stat_table(run: RunResult, title: str, fields: list[tuple[str, str, str]]) -> Table | None:
    from infermeter.run.results import layer_table

    present = [
        f for f in fields if any(r["phase"] == "decode" for r in layer_table(run.layers, f[0]))
    ]
    if not present:
        return None
    by_layer: dict[int, dict[tuple[str, str], Any]] = {}
    for table, field, _ in present:
        for r in layer_table(run.layers, table):
            if r["phase"] == "decode":
                by_layer.setdefault(int(r["layer"]), {})[(table, field)] = r.get(field)
    t = _compact(title, ["block"] + [label for _, _, label in present])
    for layer in sorted(by_layer):
        t.add_row(str(layer), *[fmt.sig3(by_layer[layer].get((tb, f))) for tb, f, _ in present])
    return t


def _sections_table(rows: list[SectionRowDoc]) -> Table | None:
    """A session's user regions: calls, median with its 95% interval, spread, total."""
    from infermeter.measure.timer import section_summary

    if not rows:
        return None
    t = _compact("user sections (ms)", ["section", "calls", "median", "95% CI", "max", "total"])
    for r in section_summary(rows):
        ci = (
            fmt.MISSING
            if fmt.is_missing(r["median_ci95_low_ms"])
            else f"{fmt.compact(r['median_ci95_low_ms'])}-{fmt.compact(r['median_ci95_high_ms'])}"
        )
        flag = f" ({r['outliers']} outlier)" if r["outliers"] else ""
        t.add_row(
            r["name"],
            str(r["calls"]),
            fmt.compact(r["median_ms"]),
            ci,
            fmt.compact(r["max_ms"]) + flag,
            fmt.compact(r["total_ms"]),
        )
    return t


def layer_tables(run: RunResult) -> list[Any]:
    """Part totals, per-block times, per-block statistics and user sections, when present."""
    from infermeter.run.components import with_generate_calls

    if not run.layers:
        return []
    out: list[Any] = []
    sections = _sections_table(run.layers.get("sections") or [])
    if sections is not None:
        out.append(sections)
    if run.layers.get("parts"):
        out.extend(_parts_table(with_generate_calls(run, run.layers["parts"])))
    times = _block_times(run.layers.get("layers", []))
    if times is not None:
        out.append(times)
    for title, fields in _STAT_TABLES:
        table = _stat_table(run, title, fields)
        if table is not None:
            out.append(table)
    return out
