"""Every knob a sweep can turn, by name (one module per knob; base.py has the contract).

The names load on first use (`registry.py` imports every knob, and with them the model
loader): a module that needs one knob's constants, such as `run/config.py` the compile modes,
does not pay for all of them, nor does every CLI command that imports it.
"""

from typing import TYPE_CHECKING

from infermeter.util.lazy import lazy_exports

if TYPE_CHECKING:  # what the names are, for type checkers; at run time each loads on first use
    from infermeter.knobs.base import Knob, KnobNotApplied
    from infermeter.knobs.registry import KNOBS, get_knob

__getattr__, __dir__ = lazy_exports(
    globals(),
    {
        "KNOBS": "infermeter.knobs.registry",
        "get_knob": "infermeter.knobs.registry",
        "Knob": "infermeter.knobs.base",
        "KnobNotApplied": "infermeter.knobs.base",
    },
)

__all__ = ["KNOBS", "Knob", "KnobNotApplied", "get_knob"]
