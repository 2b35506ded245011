"""Where a live view stands in an autoincrement id sequence whose ids may commit out of order.

On PostgreSQL two writers take ids 5 and 6 from a sequence and may commit 6 first. A view that
moved its cursor to 6 as soon as it saw 6 would never send 5: a sample lost from the live page.
So the cursor (`floor`) only moves past ids it has seen; ids above it that were already sent
are remembered and not sent again. An id that never shows up (a rolled-back transaction, a row
deleted before it was seen) holds the floor for at most `gap_wait_s`, then it is given up.
Nothing waits on the floor: every row is sent the poll it first appears; the floor only bounds
what the next poll re-reads.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

#: a row with an integer `id` (a live sample, a live layer table's row)
Row = TypeVar("Row", bound=Mapping[str, Any])


class IdCursor:
    """Ids sent after a starting point; `fresh(rows)` keeps those not sent yet."""

    def __init__(
        self,
        start: int,
        gap_wait_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.floor = start  # every id <= floor was sent or given up
        self.gap_wait_s = gap_wait_s
        self._clock = clock
        self._sent_above: set[int] = set()
        self._stuck_since: float | None = None

    def fresh(self, rows: list[Row]) -> list[Row]:
        """The rows (read with id > floor) not sent before, in their order; moves the floor."""
        new = [r for r in rows if int(r["id"]) > self.floor]
        new = [r for r in new if int(r["id"]) not in self._sent_above]
        self._sent_above.update(int(r["id"]) for r in new)
        self._advance()
        return new

    def _advance(self) -> None:
        while True:
            while self.floor + 1 in self._sent_above:
                self._sent_above.remove(self.floor + 1)
                self.floor += 1
            if not self._sent_above:  # nothing above the floor: no gap
                self._stuck_since = None
                return
            now = self._clock()
            if self._stuck_since is None:
                self._stuck_since = now
                return
            if now - self._stuck_since < self.gap_wait_s:
                return
            self.floor = min(self._sent_above) - 1  # the gap never filled: give it up
            self._stuck_since = None
