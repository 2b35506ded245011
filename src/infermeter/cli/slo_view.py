"""SLO output shared by `load`, `profile`, `sweep` and `compare`: one line, and exit 3 on a miss."""

from __future__ import annotations

from infermeter.cli.guard import fail
from infermeter.run.slo import SLOReportDoc


def slo_line(report: SLOReportDoc) -> str | None:
    """'SLO attainment ttft_ms <= 500: 100.0%, ...; all met ...; goodput ...', or None."""
    if not report:
        return None
    parts = ", ".join(
        f"{m} <= {b:g}: {report['attainment_pct'][m]:.1f}%" for m, b in report["slos"].items()
    )
    return (
        f"SLO attainment {parts}; all met {report['all_met_pct']:.1f}%; "
        f"goodput {report['goodput_rps']:.2f} req/s"
    )


def fail_on_miss(report: SLOReportDoc, where: str = "") -> None:
    """Exit 3 naming every SLO some request missed (a CI gate)."""
    if not report or not report.get("missed"):
        return
    missed = ", ".join(
        f"{m} <= {report['slos'][m]:g} met by {report['attainment_pct'][m]:.1f}%"
        for m in report["missed"]
    )
    raise fail(f"SLO missed{where}: {missed}", 3)
