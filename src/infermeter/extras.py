"""Optional extras: what each needs, and the one-line error when one is missing.

Most users profile, sweep and report; the dashboard's server stack, Parquet, Ray, PostgreSQL,
torchao, the endpoint client and the datasets library are extras (`pip install
'infermeter[dashboard]'`), so a plain install stays small. `make install` installs the
dashboard and parquet extras, `make install-dev` all of them. A command that needs a missing
extra stops before any work with the install line to run.
"""

from __future__ import annotations

import importlib.util
import sys

from infermeter.errors import UserError

#: extra -> the modules it installs (import names), as pyproject.toml declares them
EXTRAS: dict[str, tuple[str, ...]] = {
    "dashboard": ("fastapi", "uvicorn", "websockets", "plotly"),
    "parquet": ("pyarrow",),
    "ray": ("ray",),
    "postgres": ("psycopg",),
    "quant": ("torchao", "optimum.quanto"),
    "endpoint": ("openai", "prometheus_client", "h11"),
    "datasets": ("datasets",),
}


def missing_modules(extra: str) -> list[str]:
    """The modules of `extra` that cannot be imported here (found without importing them)."""
    return [m for m in EXTRAS[extra] if not _importable(m)]


def _importable(name: str) -> bool:
    if name in sys.modules:  # imported already, or set to None to hide it (tests do)
        return sys.modules[name] is not None
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def install_hint(extra: str) -> str:
    """The command that installs `extra`."""
    return f"pip install 'infermeter[{extra}]'"


def require(extra: str, what: str) -> None:
    """Raise a one-line UserError naming what needs `extra` and how to install it.

    Args:
        extra: a key of `EXTRAS`.
        what: the feature that needs it, as the user asked for it ("`infermeter serve`").
    """
    missing = missing_modules(extra)
    if missing:
        verb = "is" if len(missing) == 1 else "are"
        raise UserError(
            f"{what} needs {', '.join(missing)}, which {verb} not installed", install_hint(extra)
        )
