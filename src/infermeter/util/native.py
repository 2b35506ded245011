"""Quieting what native libraries print to the process's standard error."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator


@contextlib.contextmanager
def native_stderr_silenced() -> Iterator[None]:
    """File descriptor 2 to /dev/null for the duration of the block.

    torch's profiler backend (kineto) writes "profiler_start/stop" lines there from C++ at
    every start and stop unless KINETO_LOG_LEVEL was 6 or more when it first ran; a run that
    starts the profiler once a sample would print them between its progress lines.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
