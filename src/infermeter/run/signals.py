"""SIGTERM and SIGHUP end a run the way Ctrl-C does: what was measured is stored at once.

Schedulers and `docker stop` send SIGTERM; without a handler Python dies on the spot and the
run stays `running` until a later start marks it `crashed`. Here the first signal raises
`Terminated` (a KeyboardInterrupt) in the main thread, so the run is stored as `terminated`
with its samples; a second signal exits at once (someone means it).
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from infermeter.errors import Terminated

#: The signals that end a run like Ctrl-C (SIGHUP: the terminal went away).
STOP_SIGNALS = tuple(
    s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)) if s is not None
)


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """Within the block, SIGTERM and SIGHUP raise `Terminated`; handlers are put back after.

    Signal handlers can only be set from the main thread: elsewhere this does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []

    def handler(signum: int, _frame: Any) -> None:
        if received:
            os._exit(128 + signum)  # the second signal: exit now, as asked
        received.append(signum)
        raise Terminated(signal.Signals(signum).name, signum)

    previous = {sig: signal.signal(sig, handler) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
