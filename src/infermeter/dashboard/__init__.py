"""The live dashboard (`infermeter serve`): runs, sweeps and a live page, safe by default."""

from typing import TYPE_CHECKING

from infermeter.util.lazy import lazy_exports

if TYPE_CHECKING:  # what the names are, for type checkers; at run time each loads on first use
    from infermeter.dashboard.app import create_app

__getattr__, __dir__ = lazy_exports(
    globals(),
    {
        "create_app": "infermeter.dashboard.app",
    },
)

__all__ = ["create_app"]
