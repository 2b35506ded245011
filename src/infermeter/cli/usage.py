"""Click's usage errors in the CLI's own form: one line, `error: ...; see ... --help`, exit 2.

An unknown option, a value of the wrong kind, a missing argument. Why: every other error is
one line starting `error: `; click's came as five lines in a box titled `Error` (issue 59:
"Error:" and "error:" both appear), which scripts and people read differently. Help asked for,
or given because nothing was (`no_args_is_help`), stays as click shows it.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

# typer carries its own copy of click: its exceptions are these, not the `click` package's
from typer._click.exceptions import ClickException, NoArgsIsHelpError
from typer.core import TyperGroup
from typer.exceptions import Abort


def usage_line(exc: Exception) -> str:
    """The one line for a click exception: its message, lower-cased first, and where to look."""
    message = exc.format_message() if isinstance(exc, ClickException) else str(exc)
    message = " ".join(message.split())  # click wraps long messages over lines
    message = message[:1].lower() + message[1:]
    ctx = getattr(exc, "ctx", None)
    where = ctx.command_path if ctx is not None else "infermeter"
    return f"error: {message.rstrip('.')}; see `{where} --help`"


class OneLineErrors(TyperGroup):
    """The application's top group: its usage errors as one line (see the module)."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        """Run the CLI as click does, but a usage error is one line (exit 2)."""
        if not standalone_mode:
            return super().main(
                args, prog_name, complete_var, standalone_mode, windows_expand_args, **extra
            )
        try:
            rv = super().main(args, prog_name, complete_var, False, windows_expand_args, **extra)
        except NoArgsIsHelpError as exc:  # help, not an error: as click shows it
            exc.show()
            sys.exit(exc.exit_code)
        except ClickException as exc:
            sys.stderr.write(usage_line(exc) + "\n")
            sys.exit(exc.exit_code)
        except Abort:  # Ctrl-C at a prompt
            sys.stderr.write("interrupted\n")
            sys.exit(130)
        sys.exit(rv if isinstance(rv, int) and not isinstance(rv, bool) else 0)
