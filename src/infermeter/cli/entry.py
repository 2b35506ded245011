"""The console script's entry point: Ctrl-C at any moment prints one line, imports included.

Commands catch Ctrl-C themselves (cli/guard.py) and store what was measured; this catches the
moments before and around them (importing the CLI, parsing options, printing help), where
Python would otherwise print a traceback of whatever module happened to be loading. Kept free
of imports beyond the standard library so that nothing can run before the handler is in place.
"""

from __future__ import annotations

import sys


def main() -> None:
    """Run the CLI; a KeyboardInterrupt that reaches here is one line and exit status 130."""
    try:
        from infermeter.cli.app import main as run_cli

        run_cli()
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        raise SystemExit(130) from None
