"""The progress bar every long command shows on stderr (only on a terminal), with an ETA."""

from __future__ import annotations

from typing import Any

from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from infermeter.cli.guard import err_console


def progress_bar(*extra: Any, enabled: bool | None = None) -> Progress:
    """Description, bar, done/total, elapsed, remaining, then `extra` columns."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        *extra,
        console=err_console,
        transient=True,
        disable=not (err_console.is_terminal if enabled is None else enabled),
    )
