"""Library noise off the user's terminal, unless `--verbose`.

Why: every command printed what its libraries had to say before its own output: transformers'
deprecation FutureWarnings, torchao's "Failed to load ..." per CUDA kernel library it cannot load,
torch's `_pytree` notices, tqdm bars from GGUF conversion. None of it is about the user's
measurement, and each new release adds some. Silencing each message where it comes from did not
keep up (a release moved a warning, the next import path skipped the filter), so this turns off
the channels themselves: Python warnings, and log records at WARNING and below from every
library, for this process and the Python processes it starts (torchrun ranks, Ray workers).
Errors still reach the terminal. A user's own settings win (PYTHONWARNINGS, TRANSFORMERS_VERBOSITY,
TQDM_DISABLE), and `--verbose` anywhere on the command line shows everything.

Standard library only: this runs before any command imports torch or transformers, which is when
they read the environment.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings

VERBOSE_FLAG = "--verbose"


def take_verbose(argv: list[str]) -> tuple[list[str], bool]:
    """`argv` without `--verbose` (accepted anywhere before `--`), and whether it was there."""
    try:
        end = argv.index("--")
    except ValueError:
        end = len(argv)
    head = [a for a in argv[:end] if a != VERBOSE_FLAG]
    return head + argv[end:], len(head) != end


def quiet_libraries(verbose: bool) -> None:
    """Silence library warnings and logs for this process and its children, unless `verbose`."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    if verbose:
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "warning")
        return
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TQDM_DISABLE", "1")  # GGUF conversion's per-tensor bar
    if not sys.warnoptions and "PYTHONWARNINGS" not in os.environ:
        warnings.simplefilter("ignore")
        os.environ["PYTHONWARNINGS"] = "ignore"  # torchrun ranks and Ray workers inherit it
    # Every logger, present and future, below ERROR: torchao's and torch's add their own handlers
    # at import, so per-logger levels set now would be undone by the import.
    logging.disable(logging.WARNING)
