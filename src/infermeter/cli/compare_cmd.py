"""`infermeter compare BASE VARIANT`: speedup per phase and layer, predicted vs actual."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich import box
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from infermeter.cli.guard import guard
from infermeter.cli.options import DB, JSON_OUT, JUNIT, SUMMARY
from infermeter.cli.output import writable_file
from infermeter.errors import UserError
from infermeter.util import fmt
from infermeter.util.jsonio import clean_json, print_json

if TYPE_CHECKING:
    from infermeter.report.gate_outputs import GateCase


@guard
def compare_command(
    baseline: str = typer.Argument(
        ..., help="Baseline run id (or prefix); with --against-history, the run to judge."
    ),
    variant: str = typer.Argument(None, help="Variant run id (or prefix)."),
    db: str = DB,
    fail_if_slower: bool = typer.Option(
        False,
        "--fail-if-slower",
        help="Exit 1 when the variant is significantly slower, by more than --tolerance (for "
        "CI; noise alone does not fail it).",
    ),
    tolerance: float = typer.Option(
        0.05, help="Slowdown of the median tolerated by --fail-if-slower (0.05: 5%)."
    ),
    phases: str = typer.Option(
        "all",
        "--phases",
        help="What --fail-if-slower judges: all (prefill, decode and the total, each on its "
        "own) or a comma list of prefill, decode, total.",
    ),
    json_out: bool = JSON_OUT,
    slo: list[str] = typer.Option(
        None,
        help="ttft_ms=500, tpot_ms=80 or e2e_ms=2000 "
        "(repeatable): attainment of both runs; default: each "
        "run's own SLOs.",
    ),
    fail_if_slo_missed: bool = typer.Option(
        False, "--fail-if-slo-missed", help="Exit 3 when the variant misses an SLO."
    ),
    junit: Path = JUNIT,
    summary: Path = SUMMARY,
    against_history: bool = typer.Option(
        False,
        "--against-history",
        help="Judge one run against the recent runs of its configuration (`history`): "
        "within their spread, or slower or faster than it.",
    ),
) -> None:
    """Speedup of VARIANT over BASELINE per phase and layer, predicted vs actual."""
    # Long because typer declares each of the gate's options as a parameter (a comment: the
    # docstring is the command's --help)
    from infermeter.analysis.compare import compare_runs, parse_gate_phases, slower_rows
    from infermeter.cli.guard import fail
    from infermeter.report.gate_outputs import write_gate_outputs
    from infermeter.store import Store

    judged = parse_gate_phases(phases)  # a bad name is refused before the store opens
    if not 0 <= tolerance < 10:
        raise fail(f"error: --tolerance {tolerance} is outside 0..10; use e.g. 0.05 for 5%", 2)
    junit_path, summary_path = writable_file(junit, "--junit"), writable_file(summary, "--summary")
    if against_history or variant is None:
        if not against_history or variant is not None:
            raise UserError(
                "compare takes two runs (BASELINE VARIANT), or one with --against-history",
                "e.g. `infermeter compare abc123 def456` or `compare def456 --against-history`",
            )
        gate = (fail_if_slower, junit_path, summary_path)
        return judge_against_history(Store(db, create=False), baseline, json_out, gate)
    store = Store(db, create=False)
    base, var = store.get(baseline), store.get(variant)
    measured = store.measured_ceilings(str((base.device or {}).get("name")))
    from infermeter.measure.ceilings import spec_ceilings

    ceil = measured or spec_ceilings(str((base.device or {}).get("name")))
    from infermeter.cli.slo_view import fail_on_miss
    from infermeter.run.slo import parse_slos

    slos = parse_slos(slo)
    doc = clean_json(compare_runs(base, var, ceil))
    doc["slo"] = {"baseline": base.slo_report(slos), "variant": var.slo_report(slos)}
    _show(doc, json_out)
    if fail_if_slo_missed and not doc["slo"]["variant"]:
        raise fail("--fail-if-slo-missed needs an --slo (or runs profiled with --slo)", 2)
    write_gate_outputs(
        junit_path,
        summary_path,
        "compare",
        f"infermeter compare {doc['baseline']['run_id']} {doc['variant']['run_id']}",
        compare_cases(doc, judged, tolerance, fail_if_slower, fail_if_slo_missed),
        [("per phase (ms: medians over measured samples)", _phase_rows(doc))],
    )
    if fail_if_slo_missed:
        fail_on_miss(doc["slo"]["variant"], " by the variant")
    slower = slower_rows(doc, tolerance, judged) if fail_if_slower else []
    if slower:
        which = "; ".join(
            f"{r['phase']} {r['speedup']:.3f}x [{r['ci95_low']:.3f}, {r['ci95_high']:.3f}]"
            + (f", p = {r['p_value']:.3g}" if r.get("p_value") is not None else "")
            for r in slower
        )
        raise fail(
            f"variant is slower: {which}; beyond the {tolerance:.0%} tolerance "
            f"(judged: {', '.join(judged)})",
            1,
        )


def judge_against_history(
    store: Any, run_id: str, json_out: bool, gate: tuple[bool, Path | None, Path | None]
) -> None:
    """`compare RUN --against-history`: per metric, the run against its configuration's past."""
    from infermeter.analysis.history import against_history
    from infermeter.cli.guard import fail
    from infermeter.report.gate_outputs import GateCase, write_gate_outputs

    run = store.get(run_id)
    rows = store.history(str(run.model_info.get("spec")))
    mine = next((r for r in rows if r["id"] == run.run_id), None)
    if mine is None:
        raise UserError(
            f"run {run.run_id} is not a finished profile run",
            "judge a finished `infermeter profile` run (load runs have no history here)",
        )
    verdicts = [against_history(rows, mine, m) for m in ("ttft_ms", "tpot_ms", "total_ms")]
    doc = {"run_id": run.run_id, "label": mine["label"], "metrics": verdicts}
    fail_if_slower, junit, summary = gate
    cases = [
        GateCase(
            f"{v['metric']} against history",
            not v["verdict"].startswith("slower"),
            _history_line(v),
            gated=fail_if_slower,
        )
        for v in verdicts
    ]
    table = [
        {k: v.get(k) for k in ("metric", "median", "recent_median", "recent_min", "recent_max")}
        | {"verdict": v["verdict"]}
        for v in verdicts
    ]
    title = f"infermeter compare {run.run_id} --against-history"
    write_gate_outputs(junit, summary, "history", title, cases, [(mine["label"], table)])
    if json_out:
        print_json(clean_json(doc))
    else:
        console = Console(soft_wrap=True)
        console.print(f"run {run.run_id} against the recent runs of {mine['label']}:")
        for v in verdicts:
            console.print(f"  {_history_line(v)}", markup=False)
    slower = [v["metric"] for v, c in zip(verdicts, cases, strict=True) if not c.passed]
    if fail_if_slower and slower:
        raise fail(f"run {run.run_id} is slower than its history: {', '.join(slower)}", 1)


def _history_line(v: dict[str, Any]) -> str:
    """'tpot_ms 12.3 vs recent 10.1 (9.8-10.4 over 8 runs): slower than history (+21.8%)'."""
    if "recent_median" not in v:
        return f"{v['metric']} {fmt.compact(v['median'])}: {v['verdict']} ({v['why']})"
    return (
        f"{v['metric']} {fmt.compact(v['median'])} vs recent {fmt.compact(v['recent_median'])} "
        f"({fmt.compact(v['recent_min'])}-{fmt.compact(v['recent_max'])} over "
        f"{len(v['recent_runs'])} runs): {v['verdict']} ({v['change_pct']:+.1f}%)"
    )


def _show(doc: dict[str, Any], json_out: bool) -> None:
    """The comparison as one JSON document, or the card and each side's SLO line."""
    from infermeter.cli.slo_view import slo_line

    if json_out:
        print_json(doc)
        return
    console = Console(soft_wrap=True)
    console.print(compare_card(doc))
    if doc.get("server"):
        console.print(doc["server"]["line"], markup=False)
    for side, report in doc["slo"].items():
        line = slo_line(report)
        if line:
            console.print(f"{side}: {line}", markup=False)


def compare_cases(
    doc: dict[str, Any], judged: tuple[str, ...], tolerance: float, speed: bool, slo: bool
) -> list[GateCase]:
    """The compare gate's checks: each judged phase not slower, each SLO met by the variant."""
    from infermeter.analysis.compare import slower_rows
    from infermeter.report.gate_outputs import GateCase

    slower = {r["phase"] for r in slower_rows(doc, tolerance, judged)}
    cases = []
    for r in [*doc["phases"], {"phase": "total", **doc["total"]}]:
        if r["phase"] not in judged:
            continue
        interval = (
            f" [{r['ci95_low']:.3f}, {r['ci95_high']:.3f}]" if r.get("ci95_low") is not None else ""
        )
        speedup = f"{r['speedup']:.3f}x" if r.get("speedup") else "no speedup"
        cases.append(
            GateCase(
                f"{r['phase']} not slower by more than {tolerance:.0%}",
                r["phase"] not in slower,
                f"{speedup}{interval}: {r['verdict']}",
                gated=speed,
            )
        )
    report = (doc.get("slo") or {}).get("variant") or {}
    for metric, bound in (report.get("slos") or {}).items():
        met = metric not in (report.get("missed") or [])
        share = report["attainment_pct"][metric]
        cases.append(
            GateCase(f"variant {metric} <= {bound:g}", met, f"met by {share:.1f}%", gated=slo)
        )
    return cases


def _phase_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "phase": r["phase"],
            "baseline_ms": r.get("baseline_ms"),
            "variant_ms": r.get("variant_ms"),
            "speedup": r.get("speedup"),
            "ci95_low": r.get("ci95_low"),
            "ci95_high": r.get("ci95_high"),
            "verdict": r.get("verdict"),
        }
        for r in [*doc["phases"], {"phase": "total", **doc["total"]}]
    ]


def compare_card(doc: dict[str, Any]) -> Group:
    """The comparison for people."""
    parts: list[Any] = [
        Text(
            f"baseline {doc['baseline']['run_id']} vs variant {doc['variant']['run_id']}",
            style="bold",
        )
    ]
    if doc["changed"]:
        parts.append(
            Text("changed: " + ", ".join(f"{k} {a} -> {b}" for k, (a, b) in doc["changed"].items()))
        )
    for side in ("baseline", "variant"):  # a difference may be the host's, not the change's
        if doc[side].get("busy_host"):
            parts.append(Text(f"⚠ the {side}: {doc[side]['busy_host']}", style="yellow"))
    t = Table(box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for col in ("phase", "base ms", "variant ms", "speedup", "95% CI", "verdict"):  # fits 80
        t.add_column(col, justify="left" if col in ("phase", "verdict") else "right", no_wrap=True)
    rows = [*doc["phases"], {"phase": "total", **doc["total"]}]
    for p in rows:
        t.add_row(
            p["phase"],
            fmt.fixed(p["baseline_ms"]),
            fmt.fixed(p["variant_ms"]),
            f"{p['speedup']:.3f}x" if p.get("speedup") else "-",
            f"{p['ci95_low']:.3f}-{p['ci95_high']:.3f}" if p.get("ci95_low") is not None else "-",
            p["verdict"],
        )
    parts.append(t)
    predicted = [
        f"{p['phase']} {p['predicted_speedup']:.3f}x ({p['prediction_error_pct']:+.1f}%)"
        for p in doc["phases"]
        if p.get("predicted_speedup") and p.get("prediction_error_pct") is not None
    ]
    if predicted:
        parts.append(Text("predicted speedup (error vs measured): " + ", ".join(predicted)))
    parts.append(Text(f"ms: medians over measured samples; speedup: {doc['statistic']}"))
    if doc.get("paired"):
        parts.append(
            Text(
                f"samples interleaved (group {doc['interleaved_group']}): each round's pair is "
                "compared, so a drift of the machine between rounds cancels"
            )
        )
    elif any(r["verdict"] in ("faster", "slower") for r in rows):
        parts.append(
            Text(
                "the intervals cover the noise between samples of each run, not a drift of the "
                "machine between the two runs: on a shared machine, repeat the pair in the "
                "other order, or as a sweep with --interleave, before acting on it",
                style="yellow",
            )
        )
    for p in [*doc["phases"], {"phase": "total", **doc["total"]}]:
        if p.get("samples_to_resolve"):
            parts.append(
                Text(
                    f"{p['phase']}: a difference of this size needs about "
                    f"{p['samples_to_resolve']} samples per run to resolve "
                    f"(have {min(p['samples'])})"
                )
            )
    parts.append(Text(f"prediction: {doc['prediction']}"))
    if doc["where"]:
        parts.append(
            Text(
                "where the difference comes from (ms per sample, variant - baseline; "
                "verdict on the per-sample totals):",
                style="bold",
            )
        )
        for r in doc["where"]:
            parts.append(
                Text(
                    f"  {r['phase']:8} {'  ' * r.get('depth', 0) + r['name']:32} "
                    f"{r['delta_ms']:+8.2f} ms  {r['verdict']}"
                )
            )
    return Group(*parts)
