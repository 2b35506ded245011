"""Timestamps as the store and every file keep them: UTC, ISO 8601, to the second.

ISO strings sort as time does, so the store can filter and order runs by comparing text.
"""

from __future__ import annotations

import datetime as dt


def now_iso() -> str:
    """The current UTC time, e.g. '2026-11-23T15:51:00+00:00'."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
