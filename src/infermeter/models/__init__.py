"""Models: presets, loading (preset | smollm2-135m | hub id | folder), tokenizer, ModelInfo."""

from typing import TYPE_CHECKING

from infermeter.util.lazy import lazy_exports

if TYPE_CHECKING:  # what the names are, for type checkers; at run time each loads on first use
    from infermeter.models.info import ModelInfo, VisionInfo, model_info
    from infermeter.models.loader import LoadedModel, load_model
    from infermeter.models.presets import DEFAULT_PRESET, PRESETS, Preset, get_preset

__getattr__, __dir__ = lazy_exports(
    globals(),
    {
        "ModelInfo": "infermeter.models.info",
        "VisionInfo": "infermeter.models.info",
        "model_info": "infermeter.models.info",
        "LoadedModel": "infermeter.models.loader",
        "load_model": "infermeter.models.loader",
        "DEFAULT_PRESET": "infermeter.models.presets",
        "PRESETS": "infermeter.models.presets",
        "Preset": "infermeter.models.presets",
        "get_preset": "infermeter.models.presets",
    },
)

__all__ = [
    "DEFAULT_PRESET",
    "PRESETS",
    "LoadedModel",
    "ModelInfo",
    "Preset",
    "VisionInfo",
    "get_preset",
    "load_model",
    "model_info",
]
