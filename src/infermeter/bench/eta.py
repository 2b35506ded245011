"""How long a benchmark has left: each point's cost grows as a power of its sequence length.

Why: `bench model` over a few models and lengths ran 20 minutes with a bare "done" line per
point (issue 59). Counting points left is no estimate: a 4,096-token point costs many times a
512-token one (attention is quadratic, the rest linear), and a model's first point also pays
its load. So the time of each finished point is fitted per group (a model, or an attention
kind) as `seconds = c * seq_len ** b`, the exponent shared across groups (the median of the
groups' own fits, 1 until a group has two lengths), and the points left are summed from it. A
group not yet started is priced at the mean of the started groups' scales. A model's load is
timed apart (`skip`), so it does not inflate its first point. The estimate says
what it is: "about", and nothing before the first point ends.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field

#: the exponent's bounds: between linear-ish and beyond quadratic, whatever two noisy points say
EXPONENT_RANGE = (0.5, 2.5)


@dataclass(frozen=True)
class BenchProgress:
    """One finished point, where the benchmark stands, and the estimate of what is left."""

    group: str
    seq_len: int
    point_s: float
    done: int
    total: int
    elapsed_s: float
    left_s: float | None


@dataclass
class Eta:
    """The benchmark's planned points, in run order, and the time each finished one took."""

    planned: list[tuple[str, int]]
    finished: list[tuple[str, int, float]] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    _last: float | None = None

    def skip(self) -> None:
        """Time since the last point that belongs to none (a model's load): left out."""
        self._last = time.monotonic()

    def point_done(self, group: str, seq_len: int) -> BenchProgress:
        """Record a point that just ended (timed from the previous one, or the start)."""
        now = time.monotonic()
        took = now - (self._last if self._last is not None else self.started)
        self._last = now
        return self.observe(group, seq_len, took, now - self.started)

    def observe(
        self, group: str, seq_len: int, seconds: float, elapsed_s: float | None = None
    ) -> BenchProgress:
        """Record a point's time (given, as in tests) and say what is left."""
        self.finished.append((group, seq_len, seconds))
        done = len(self.finished)
        return BenchProgress(
            group,
            seq_len,
            seconds,
            done,
            len(self.planned),
            sum(s for *_, s in self.finished) if elapsed_s is None else elapsed_s,
            self.remaining_s(),
        )

    def exponent(self) -> float:
        """The shared power of the sequence length (1 until some group has two lengths)."""
        fits = []
        for group in {g for g, *_ in self.finished}:
            pts = [(math.log(n), math.log(s)) for g, n, s in self.finished if g == group and s > 0]
            if len({x for x, _ in pts}) < 2:
                continue
            mx, my = statistics.fmean(x for x, _ in pts), statistics.fmean(y for _, y in pts)
            sxx = sum((x - mx) ** 2 for x, _ in pts)
            fits.append(sum((x - mx) * (y - my) for x, y in pts) / sxx)
        if not fits:
            return 1.0
        return min(max(statistics.median(fits), EXPONENT_RANGE[0]), EXPONENT_RANGE[1])

    def remaining_s(self) -> float | None:
        """Seconds the points not yet finished should take; None before the first ends."""
        if not self.finished:
            return None
        b = self.exponent()
        scales: dict[str, list[float]] = {}
        for g, n, s in self.finished:
            scales.setdefault(g, []).append(s / n**b)
        scale = {g: statistics.median(v) for g, v in scales.items()}
        fallback = statistics.fmean(scale.values())
        left = self.planned[len(self.finished) :]
        return float(sum(scale.get(g, fallback) * n**b for g, n in left))


def duration_text(seconds: float) -> str:
    """The estimate as a person says it: "about 40 s", "about 3 min", "about 1 h 20 min"."""
    if seconds < 60:
        return f"about {max(1, round(seconds))} s"
    if seconds < 3600:
        return f"about {round(seconds / 60)} min"
    hours, minutes = divmod(round(seconds / 60), 60)
    return f"about {hours} h {minutes} min" if minutes else f"about {hours} h"
