"""One line and an exit code for every error, never a traceback from the CLI.

`UserError` -> "error: <problem>; <fix>", exit 2. `GenerationFailed` -> its message, exit 1 (the
run is already stored as failed). Anything else is an infermeter bug: one line, exit 1, and the
traceback only when INFERMETER_DEBUG=1.
"""

from __future__ import annotations

import errno
import functools
import math
import os
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

import typer
from rich.console import Console

from infermeter.errors import GenerationFailed, Terminated, UserError

F = TypeVar("F", bound=Callable[..., Any])
err_console = Console(stderr=True, highlight=False, soft_wrap=True)


def fail(message: str, code: int) -> typer.Exit:
    """Print `message` on stderr and return the Exit to raise."""
    err_console.print(message, markup=False)
    return typer.Exit(code)


def _option_name(param: str) -> str:
    """The flag a user typed for parameter `param` ("--max-age-days"), from click's context."""
    import click

    ctx = click.get_current_context(silent=True)
    for p in ctx.command.params if ctx is not None else []:
        if p.name == param and getattr(p, "opts", None):
            return str(max(p.opts, key=len))
    return "--" + param.replace("_", "-")


def check_finite(kwargs: dict[str, Any]) -> None:
    """No command takes NaN or an infinity: one line naming the option, before any work.

    Every numeric option of every command passes here (the guard calls it), so a new option
    is covered without a line of its own; ranges stay with each command.
    """
    for name, value in kwargs.items():
        values = value if isinstance(value, list | tuple) else [value]
        for v in values:
            if isinstance(v, float) and not math.isfinite(v):
                raise UserError(
                    f"{_option_name(name)} {v} is not a finite number",
                    "give a finite number",
                )


def guard(fn: F) -> F:
    """Wrap a command so user-caused errors print one line and exit non-zero."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            check_finite(kwargs)
            return fn(*args, **kwargs)
        except UserError as exc:
            raise fail(f"error: {exc.line()}", exc.exit_code) from None
        except GenerationFailed as exc:
            raise fail(f"error: {exc}", exc.exit_code) from None
        except Terminated as exc:
            raise fail(
                f"terminated by {exc.signal_name}; what was measured so far is stored",
                exc.exit_code,
            ) from None
        except KeyboardInterrupt:
            raise fail("interrupted; what was measured so far is stored", 130) from None
        except (typer.Exit, typer.Abort):
            raise
        except OSError as exc:
            line = os_error_line(exc)
            if line is None:
                raise fail(_internal(exc), 1) from None
            raise fail(f"error: {line}", 2) from None
        except Exception as exc:  # last line of defence, reported as a bug
            raise fail(_internal(exc), 1) from None

    return wrapper  # type: ignore[return-value]


def _internal(exc: BaseException) -> str:
    """The line for an error nobody foresaw: a bug, with how to see its traceback."""
    if os.environ.get("INFERMETER_DEBUG"):
        traceback.print_exc()
    return (
        f"internal error: {type(exc).__name__}: {exc} "
        "(a bug in infermeter; set INFERMETER_DEBUG=1 for the traceback)"
    )


#: what the machine, not infermeter, refused: (problem, fix) by errno
_OS_ERRORS = {
    errno.ENOSPC: ("no space left on the device", "free some space, or write elsewhere (--out)"),
    errno.EDQUOT: ("the disk quota is used up", "free some space, or write elsewhere (--out)"),
    errno.EROFS: ("the file system is read-only", "write elsewhere (--out)"),
    errno.EACCES: ("permission denied", "write elsewhere (--out), or fix the permissions"),
}


def os_error_line(exc: OSError) -> str | None:
    """One line for a full disk, a quota, a read-only or forbidden place; None for the rest.

    A full disk gave "internal error" and left 0-byte files (issue 35); files are now written
    whole or not at all (util/atomic.py), and the error names the file and what to do.
    """
    known = _OS_ERRORS.get(exc.errno or -1)
    if known is None:
        return None
    problem, fix = known
    where = exc.filename or exc.filename2
    return f"{problem}{f' (writing {where})' if where else ''}; {fix}"
