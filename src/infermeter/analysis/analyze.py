"""Everything the analysis knows about one stored run, as one document (`infermeter analyze`)."""

from __future__ import annotations

from typing import Any

from infermeter.analysis.bottlenecks import evidence_of, find_bottlenecks
from infermeter.analysis.roofline import roofline
from infermeter.measure.ceilings import Ceilings, spec_ceilings


def analyze_run(run: Any, measured: Ceilings | None = None) -> dict[str, Any]:
    """Ceilings used (measured over spec, or none), roofline rows, the minima and findings."""
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
    }
