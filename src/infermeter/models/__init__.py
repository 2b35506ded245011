"""Models: presets, loading (preset | smollm2-135m | hub id | folder), tokenizer, ModelInfo."""

from infermeter.models.info import ModelInfo, VisionInfo, model_info
from infermeter.models.loader import LoadedModel, load_model
from infermeter.models.presets import DEFAULT_PRESET, PRESETS, Preset, get_preset

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
