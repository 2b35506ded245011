"""The console script's entry point: Ctrl-C at any moment prints one line, imports included.

Commands catch Ctrl-C themselves (cli/guard.py) and store what was measured; this catches the
moments before and around them (importing the CLI, parsing options, printing help), where
Python would otherwise print a traceback of whatever module happened to be loading. Kept free
of imports beyond the standard library so that nothing can run before the handler is in place.
"""

from __future__ import annotations

import sys


def interrupted(exc: BaseException) -> bool:
    """Whether `exc` is Ctrl-C, or an error Python raised around it.

    A Ctrl-C that lands while a class is being created (an import's `__set_name__`) reaches us
    as `RuntimeError("Error calling __set_name__ ...")` with the KeyboardInterrupt as its cause
    (Python 3.11), and printed a traceback. The cause and context chain is walked, bounded.
    """
    seen: BaseException | None = exc
    for _ in range(16):
        if seen is None:
            return False
        if isinstance(seen, KeyboardInterrupt):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def main() -> None:
    """Run the CLI; a Ctrl-C that reaches here is one line and exit status 130.

    Once the command has ended (done, failed or interrupted), Ctrl-C is ignored: one landing
    in the interpreter's own shutdown (`threading._shutdown`) made Python print "Exception
    ignored in: <module 'threading'>" and a traceback after a command that had finished.
    """
    import signal

    try:
        from infermeter.cli.app import main as run_cli

        run_cli()
    except (KeyboardInterrupt, Exception) as exc:
        if not interrupted(exc):
            raise
        sys.stderr.write("interrupted\n")
        raise SystemExit(130) from None
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
