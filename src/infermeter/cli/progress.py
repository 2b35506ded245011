"""The progress bar every long command shows on stderr (only on a terminal), with an ETA."""

from __future__ import annotations

from typing import Any

from rich.progress import (
    BarColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

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


#: what each stage of a run is called on its bar
STAGE_LABELS = {
    "load": "loading model",
    "warmup": "warm-up",
    "sample": "measuring",
    "requests": "requests served",
}


class StageProgressView:
    """A bar per stage (loading, warm-up, measuring, requests served) fed by a ProgressFn."""

    def __init__(self, enabled: bool | None = None) -> None:
        self.progress = progress_bar(enabled=enabled)
        self.tasks: dict[str, TaskID] = {}

    def __call__(self, stage: str, done: int, total: int) -> None:
        """Advance `stage` to `done` of `total` (a new stage gets its own bar)."""
        if stage not in self.tasks:
            self.tasks[stage] = self.progress.add_task(STAGE_LABELS.get(stage, stage), total=total)
        self.progress.update(self.tasks[stage], completed=done, total=total)


class SweepProgressView:
    """Rich progress over a sweep's points with an ETA (on stderr, only on a terminal)."""

    def __init__(self, title: str) -> None:
        self.progress = progress_bar(TextColumn("{task.fields[point]}"))
        self.title = title
        self.task: Any = None

    def __call__(self, done: int, total: int, label: str, skipped: bool) -> None:
        """Advance to `done` of `total` points, showing the point's knob values."""
        if self.task is None:
            self.task = self.progress.add_task(self.title, total=total, point="")
        note = f"{label} (already done)" if skipped else label
        self.progress.update(self.task, completed=done, total=total, point=note)
