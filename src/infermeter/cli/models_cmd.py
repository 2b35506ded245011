"""`infermeter models`: the built-in presets and the trained PyPI reference models, with sizes."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from infermeter.cli.guard import guard
from infermeter.cli.options import JSON_OUT
from infermeter.util.jsonio import print_json


def model_rows() -> list[dict[str, Any]]:
    """One row per model a user can name without a download."""
    from infermeter.models.preset_params import PRESET_PARAMS
    from infermeter.models.presets import PRESETS
    from infermeter.models.trained import TRAINED, installed

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
    for model in TRAINED.values():
        missing = "" if installed(model) else f" - not installed: {model.install}"
        rows.append(
            {
                "name": model.name,
                "kind": "trained",
                "family": model.family,
                "params": model.params,
                "description": model.description + missing,
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
