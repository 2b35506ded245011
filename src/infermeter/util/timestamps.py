"""Timestamps as the store and every file keep them: UTC, ISO 8601, to the millisecond.

ISO strings sort as time does, so the store can filter and order runs by comparing text. To the
second, a profile and the sweep point started after it in the same second tied, and "newest
first" put them in the order of their random ids (seen as a dashboard test opening the wrong
run). Older rows, kept to the second, still sort among these: '+' sorts before '.'.
"""

from __future__ import annotations

import datetime as dt


def now_iso() -> str:
    """The current UTC time, e.g. '2026-11-23T15:51:00.042+00:00'."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")


def age_seconds(iso: str, now: dt.datetime | None = None) -> float:
    """Seconds since an ISO timestamp (a naive one is taken as UTC)."""
    then = dt.datetime.fromisoformat(iso)
    if then.tzinfo is None:
        then = then.replace(tzinfo=dt.timezone.utc)
    return ((now or dt.datetime.now(dt.timezone.utc)) - then).total_seconds()


def age_text(iso: str, now: dt.datetime | None = None) -> str:
    """How long ago an ISO timestamp was, in words a person reads at a glance ("3 h", "12 days")."""
    seconds = age_seconds(iso, now)
    for unit, size in (("days", 86400), ("h", 3600), ("min", 60)):
        if seconds >= 2 * size or (unit == "min" and seconds >= size):
            return f"{seconds / size:.0f} {unit}"
    return f"{max(seconds, 0):.0f} s"
