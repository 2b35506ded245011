"""Everything the analysis knows about one stored run, as one document (`infermeter analyze`)."""

from __future__ import annotations

from typing import Any

from infermeter.analysis.bottlenecks import evidence_of, find_bottlenecks
from infermeter.analysis.communication import communication_roofline
from infermeter.analysis.predict import Learned, time_model_of_run
from infermeter.analysis.roofline import roofline
from infermeter.analysis.timemodel import device_model
from infermeter.measure.ceilings import Ceilings, spec_ceilings
from infermeter.measure.curves import curves_of


def time_model(run: Any, measured: Ceilings | None, learned: Learned | None) -> dict[str, Any]:
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
    run: Any, measured: Ceilings | None = None, learned: Learned | None = None
) -> dict[str, Any]:
    """Ceilings used (measured over spec, or none), roofline rows, the minima and findings.

    `learned`: factors from other stored runs on the device, for the time model's section.
    """
    device = str((run.device or {}).get("name"))
    ceilings = measured or spec_ceilings(device)
    roof = roofline(run, ceilings)
    findings = find_bottlenecks(evidence_of(run, roof))
    return {
        "run_id": run.run_id,
        "model": run.model_info.get("spec"),
        "device": device,
        "ceilings_source": (
            "measured (infermeter calibrate)"
            if measured
            else "spec sheet"
            if ceilings
            else "unknown hardware: run `infermeter calibrate` for measured ceilings"
        ),
        "roofline": roof,
        "findings": [f.to_dict() for f in findings],
        "time_model": time_model(run, measured, learned),
        "communication": communication_roofline(run),
    }
