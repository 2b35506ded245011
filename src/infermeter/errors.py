"""Errors a user can cause, each carrying the one-line fix the CLI prints.

The CLI turns a `UserError` into ``error: <problem>; <fix>`` on stderr and exit code 2, never a
traceback. Anything else escaping the CLI is a bug in infermeter and is reported as such.
"""

from __future__ import annotations


class UserError(Exception):
    """A problem the user can fix: bad option, unknown model, locked database, ...

    Args:
        problem: what is wrong, naming the offending value.
        fix: what to do about it.
    """

    exit_code = 2

    def __init__(self, problem: str, fix: str = "") -> None:
        self.problem = problem
        self.fix = fix
        super().__init__(self.line())

    def line(self) -> str:
        """The one line shown to the user."""
        return f"{self.problem}; {self.fix}" if self.fix else self.problem


class GenerationFailed(Exception):
    """Generation raised inside a run; the run is stored as failed before this propagates."""

    exit_code = 1

    def __init__(self, run_id: str | None, cause: BaseException) -> None:
        self.run_id = run_id
        self.cause = cause
        where = f" (run {run_id} stored as failed)" if run_id else ""
        super().__init__(f"generation failed: {type(cause).__name__}: {cause}{where}")


class Terminated(KeyboardInterrupt):
    """A signal (SIGTERM from a scheduler or `docker stop`, or SIGHUP) ended the run.

    A KeyboardInterrupt, so every path that stores what was measured on Ctrl-C does the same
    for it; the run is stored as `terminated`, and the CLI exits 128 + the signal's number.
    """

    def __init__(self, signal_name: str, signal_number: int) -> None:
        super().__init__(signal_name)
        self.signal_name = signal_name
        self.exit_code = 128 + signal_number
