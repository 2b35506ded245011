"""Everything the analysis knows about one stored run, as one document (`infermeter analyze`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from infermeter.analysis.bottlenecks import Finding, evidence_of, find_bottlenecks
from infermeter.analysis.communication import communication_roofline
from infermeter.analysis.predict import Learned, time_model_of_run
from infermeter.analysis.roofline import all_rows, roofline, unplaceable
from infermeter.analysis.timemodel import device_model
from infermeter.measure.ceilings import Ceilings, spec_ceilings
from infermeter.measure.curves import curves_of
from infermeter.run.document import Analysis

if TYPE_CHECKING:  # annotations only: the run's module imports numpy
    from infermeter.run.results import LoadCheckDoc, RunResult


def time_model(
    run: RunResult, measured: Ceilings | None, learned: Learned | None
) -> dict[str, Any]:
    """The curve time model's TTFT and TPOT beside the measured ones (needs `calibrate` curves).

    Without measured curves the section says why it is absent instead of guessing from
    datasheet efficiencies a CPU never reaches.
    """
    if measured is None or not curves_of(measured.details):
        return {
            "rows": [],
            "note": "no measured curves for this device: `infermeter calibrate` adds them",
        }
    dev = device_model(measured, str(run.model_info.get("dtype", "float32")))
    return time_model_of_run(run, dev, learned)


def analyze_run(
    run: RunResult, measured: Ceilings | None = None, learned: Learned | None = None
) -> Analysis:
    """Ceilings used (measured over spec, or none), roofline rows, the minima and findings.

    `learned`: factors from other stored runs on the device, for the time model's section.
    """
    device = str((run.device or {}).get("name"))
    ceilings = measured or spec_ceilings(device)
    why = unplaceable(run)
    if why is None:
        roof = roofline(run, ceilings)
        roof["above_ceiling"] = flag_above_ceiling(roof, measured)
        findings = find_bottlenecks(evidence_of(run, roof)) + speculation_findings(run)
        model = time_model(run, measured, learned)
    else:  # every stored run is analysable: what cannot exist says why, in one line
        roof = {"rows": [], "prefill": None, "decode": None, "approximate": [], "unavailable": why}
        findings = load_findings(run)
        model = {"rows": [], "note": why}
    return Analysis(
        {
            "run_id": run.run_id,
            "model": run.model_info.get("spec"),
            "device": device,
            "ceilings_source": (
                calibration_label(measured)
                if measured
                else "spec sheet"
                if ceilings
                else "unknown hardware: run `infermeter calibrate` for measured ceilings"
            ),
            "roofline": roof,
            "findings": [f.to_dict() for f in findings],
            "time_model": model,
            "communication": communication_roofline(run),
        }
    )


#: a calibration older than this is called stale where a run lands above its ceilings
STALE_DAYS = 30


def calibration_label(measured: Ceilings) -> str:
    """Which calibration the analysis used, how old it is, and whether it is to be trusted."""
    from infermeter.util.timestamps import age_text

    when = measured.details.get("calibrated_at")
    text = "measured (infermeter calibrate"
    if when:
        text += f" of {when[:16].replace('T', ' ')} UTC, {age_text(when)} ago"
    text += ")"
    stability = measured.details.get("stability") or {}
    if stability.get("stable") is False:
        text += "; UNSTABLE (no stable calibration of this device): " + "; ".join(
            stability.get("reasons") or []
        )
    return text


def flag_above_ceiling(roof: dict[str, Any], measured: Ceilings | None) -> list[str]:
    """Flag each roofline point above 100% of attainable with the reason; the flags, in order.

    Nothing measured runs faster than the device attains; a point above it says the ceilings
    are wrong for this run: an unstable calibration, a stale one, or none (spec sheet figures).
    """
    from infermeter.util.timestamps import age_seconds

    when = measured.details.get("calibrated_at") if measured is not None else None
    if measured is None:
        why = "the ceilings are spec-sheet figures, not measured: run `infermeter calibrate`"
    elif (measured.details.get("stability") or {}).get("stable") is False:
        why = "the calibration is unstable (see the ceilings line): calibrate again when quiet"
    elif when and age_seconds(when) > STALE_DAYS * 86400:
        why = "the calibration is stale: calibrate again (the software or the machine changed)"
    else:
        why = (
            "the calibration measured less than this run attains: calibrate again when the "
            "machine is quiet"
        )
    flags = []
    for row in all_rows(roof):
        pct = row.get("pct_attainable")
        if pct is not None and pct > 100:
            row["flag"] = f"{pct:.0f}% of attainable: {why}"
            flags.append(f"{row['phase']} {row['kind']}: {row['flag']}")
    return flags


#: queueing's share of a load run's median TTFT from which it is a finding, and a severe one
QUEUE_SHARE_MEDIUM, QUEUE_SHARE_HIGH = 0.5, 0.8


#: share of a load run's time with its KV cache full from which that is a finding
KV_FULL_MEDIUM, KV_FULL_HIGH = 10.0, 30.0


#: below this share of proposed tokens accepted, a speculative run mostly wastes its proposals
LOW_ACCEPTANCE = 0.3


def speculation_findings(run: RunResult) -> list[Finding]:
    """A speculative run that changed the greedy output, or whose proposals were mostly refused."""
    spec = run.checks.get("speculation")
    out: list[Finding] = []
    if spec is None:
        return out
    if spec.get("matches_greedy") is False:
        at = spec.get("first_difference_at_token")
        out.append(
            Finding(
                id="speculation-changed-output",
                severity="high",
                title=f"decoding {run.config.get('decoding')} changed the output: it differs "
                f"from plain greedy decoding from token {at}",
                evidence={"first_difference_at_token": at},
                advice="speculation verified greedily must reproduce greedy output: a "
                "difference is numerics in the batched verification (a lower-precision dtype "
                "turns near-ties) or a bug; compare in float32 before trusting its speed",
            )
        )
    rate = spec.get("acceptance_rate")
    if rate is not None and rate < LOW_ACCEPTANCE:
        out.append(
            Finding(
                id="speculation-low-acceptance",
                severity="medium",
                title=f"only {rate:.0%} of proposed tokens were accepted "
                f"({spec.get('tokens_per_target_forward', 0):.2f} tokens per target forward)",
                evidence={
                    k: spec.get(k)
                    for k in (
                        "acceptance_rate",
                        "proposed",
                        "accepted",
                        "draft_ms_per_step",
                        "verify_ms_per_step",
                    )
                },
                advice="the draft rarely agrees with the target here: propose fewer tokens, "
                "use a draft closer to the target (same family, distilled), or keep plain "
                "decoding for this kind of text; prompt lookup pays on repetitive text",
            )  # fmt: skip
        )
    return out


def load_findings(run: RunResult) -> list[Finding]:
    """A load run's bottlenecks: its KV cache full, and its requests' time spent waiting."""
    import statistics

    load = run.checks.get("load", {})
    queue = [q for q in load.get("queue_ms") or [] if q is not None]
    ttft = [s.ttft_ms for s in run.samples if s.ttft_ms is not None]
    if (run.config or {}).get("mode") != "load" or not queue or not ttft:
        return []
    q_ms, t_ms = statistics.median(queue), statistics.median(ttft)
    out = _kv_findings(load, q_ms)
    share = q_ms / t_ms if t_ms else 0.0
    if share < QUEUE_SHARE_MEDIUM:
        return out
    return out + [
        Finding(
            id="queueing",
            severity="high" if share >= QUEUE_SHARE_HIGH else "medium",
            title=f"requests waited: queueing is {share:.0%} of the median TTFT "
            f"({q_ms:.0f} of {t_ms:.0f} ms)",
            evidence={"queue_ms_median": q_ms, "ttft_ms_median": t_ms, "queue_share": share},
            advice="the server is saturated at this rate: lower --rate, batch more "
            "(--server continuous, a larger --static-batch) or add replicas; "
            "`infermeter load --rate a,b,c` finds the knee",
        )
    ]


def _kv_findings(load: LoadCheckDoc, queue_ms: float) -> list[Finding]:
    """The continuous batch's KV cache full for a share of the run (serving/batch_state.py)."""
    summary = load.get("summary")
    batch = summary.get("batch") if summary is not None else None
    full = batch.get("kv_full_time_pct") if batch is not None else None
    if batch is None or full is None or full < KV_FULL_MEDIUM:
        return []
    return [
        Finding(
            id="kv-cache-full",
            severity="high" if full >= KV_FULL_HIGH else "medium",
            title=f"KV cache full for {full:.0f}% of the run: requests waited {queue_ms:.0f} ms "
            f"(median) with {batch.get('batch_requests_mean') or 0:.1f} requests per step on "
            "average",
            evidence={
                "kv_full_time_pct": full,
                "waiting_time_pct": batch.get("waiting_time_pct"),
                "kv_used_pct_max": batch.get("kv_used_pct_max"),
                "offloads": batch.get("offloads"),
                "queue_ms_median": queue_ms,
            },
            advice="a larger cache (--kv-blocks, or more device memory), shorter contexts, or "
            "fewer requests at once would let waiting requests in; a quantized or "
            "grouped-query KV cache holds more tokens per byte",
        )
    ]
