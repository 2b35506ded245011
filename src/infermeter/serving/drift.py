"""Did the server change speed during the run? The drift verdict.

Why: two runs minutes apart on one llama.cpp server read 28 and 52 ms of decode per token, by
the server's own account; no load client noticed, and raw comparisons of the two runs were
2x apart for a reason that was not the knob being compared. A run says, from its own data,
whether the server's service time in its last quarter differs from its first.

What is compared: the server's own decode time per token where it reports one (llama.cpp's
`timings`, kept per request as `server_decode_ms_per_token`), else the client-measured TPOT
(which also moves with batching and queueing: said beside the verdict). The requests are
ordered by arrival; the first and last quarters' medians are compared. The verdict is
"moved" only when all three hold: the two quarters' median 95% intervals do not overlap (each
quarter's own noise cannot explain the change; the whole run's interval is no yardstick, since
a server that moved halfway makes that interval span both speeds), the two quarters differ by
a Mann-Whitney test at 5%, and the change is over 10% (smaller moves are within what a busy
host does to any server).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from infermeter.run.load_docs import DriftDoc
    from infermeter.serving.rows import RequestRowDoc

#: a move smaller than this share is never called drift
MIN_RELATIVE_MOVE = 0.10
#: requests needed with a service time (4 a quarter: a rank test can reach 5% then)
MIN_REQUESTS = 16


@dataclass(frozen=True)
class Drift:
    """The drift verdict of one run."""

    #: what was compared: "server" (its own decode ms per token) or "client" (measured TPOT)
    source: str
    requests: int
    first_ms: float
    last_ms: float
    #: the first and last quarters' median 95% intervals, ms
    first_ci_ms: tuple[float, float]
    last_ci_ms: tuple[float, float]
    p_value: float
    moved: bool

    @property
    def ratio(self) -> float:
        """Last quarter's median over the first's."""
        return self.last_ms / self.first_ms if self.first_ms > 0 else math.nan

    def line(self) -> str:
        """One line for the run's output."""
        what = (
            "the server's own decode time per token"
            if self.source == "server"
            else "TPOT as the client measured it (the server reports no timings; batching and "
            "queueing move it too)"
        )
        head = (
            f"drift: {what}, first quarter {self.first_ms:.3g} ms, last {self.last_ms:.3g} ms "
            f"(x{self.ratio:.2f}; intervals {self.first_ci_ms[0]:.3g}-{self.first_ci_ms[1]:.3g} "
            f"and {self.last_ci_ms[0]:.3g}-{self.last_ci_ms[1]:.3g} ms, "
            f"rank test p={self.p_value:.2g})"
        )
        if self.moved:
            return (
                head + ": the server changed speed during the run; compare runs by their "
                "service time, not their raw latencies"
            )
        return head + ": steady"

    def to_doc(self) -> DriftDoc:
        """As stored in a load's summary (`drift`): the fields, the ratio and the line."""
        return {
            "source": self.source,
            "requests": self.requests,
            "first_ms": self.first_ms,
            "last_ms": self.last_ms,
            "first_ci_ms": self.first_ci_ms,
            "last_ci_ms": self.last_ci_ms,
            "p_value": self.p_value,
            "moved": self.moved,
            "ratio": self.ratio,
            "line": self.line(),
        }


def _values(rows: list[RequestRowDoc]) -> tuple[str, list[float]]:
    served = sorted((r for r in rows if r.get("error") is None), key=lambda r: r["arrival_ms"])
    server = [r.get("server_decode_ms_per_token") for r in served]
    own = [float(v) for v in server if v is not None and math.isfinite(v) and v > 0]
    if len(own) >= MIN_REQUESTS:
        return "server", own
    client = [float(r["tpot_ms"]) for r in served if math.isfinite(r["tpot_ms"])]
    return "client", client


def drift_verdict(rows: list[RequestRowDoc]) -> Drift | None:
    """The run's drift verdict; None with fewer than `MIN_REQUESTS` requests timed."""
    import numpy as np
    from scipy.stats import mannwhitneyu

    from infermeter.measure.stats import median_ci

    source, values = _values(rows)
    if len(values) < MIN_REQUESTS:
        return None
    q = len(values) // 4
    first, last = values[:q], values[-q:]
    a, b = float(np.median(first)), float(np.median(last))
    first_ci, last_ci = median_ci(first), median_ci(last)
    apart = first_ci[1] < last_ci[0] or last_ci[1] < first_ci[0]
    p = float(mannwhitneyu(first, last, alternative="two-sided").pvalue)
    moved = apart and p < 0.05 and abs(b - a) > MIN_RELATIVE_MOVE * max(min(a, b), 1e-9)
    return Drift(source, len(values), a, b, first_ci, last_ci, p, moved)
