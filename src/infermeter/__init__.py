"""infermeter: where the time, memory and energy of transformer inference go.

The public API, re-exported names only; see DESIGN.md for the layout.
"""

from infermeter.errors import UserError
from infermeter.models import PRESETS, LoadedModel, ModelInfo, load_model

__version__ = "0.1.0"

__all__ = ["PRESETS", "LoadedModel", "ModelInfo", "UserError", "__version__", "load_model"]
