"""Sweep config files (YAML or TOML), validated with pydantic before anything runs.

    model: tiny-qwen3-moe
    name: topk-vs-context
    samples: 3
    new_tokens: 16
    knobs:
      top_k: [1, 2, 4]
      prompt_tokens: [64, 256]

Unknown keys are errors (a typo must not silently fall back to a default). Values given on the
command line win over the file's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import tomllib
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from infermeter.errors import UserError

Scalar = str | int | float | bool


class SweepFile(BaseModel):
    """The keys a sweep file may have."""

    model_config = ConfigDict(extra="forbid")

    model: str | None = None
    name: str | None = None
    interleave: bool = False
    knobs: dict[str, list[Scalar] | Scalar] = Field(default_factory=dict)
    prompt_tokens: int | None = None
    new_tokens: int | None = None
    batch_size: int | None = None
    samples: int | None = None
    warmup: int | None = None
    dtype: str | None = None
    device: str | None = None
    mode: str | None = None
    energy: str | None = None
    seed: int | None = None
    prompts_file: str | None = None

    def knob_texts(self) -> dict[str, list[str]]:
        """Knob values as the text the knobs parse (booleans as on/off)."""
        out = {}
        for name, values in self.knobs.items():
            seq = values if isinstance(values, list) else [values]
            out[name] = [("on" if v else "off") if isinstance(v, bool) else str(v) for v in seq]
        return out

    def settings(self) -> dict[str, Any]:
        """RunConfig fields the file sets."""
        return {
            k: v
            for k, v in self.model_dump().items()
            if k not in ("knobs", "name", "interleave") and v is not None
        }


def read_sweep_file(path: Path) -> SweepFile:
    """Parse and validate a .yaml/.yml/.toml sweep file; UserError naming the bad key."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"sweep config {str(path)!r} does not exist", "check the --config path")
    text = path.read_text()
    try:
        if path.suffix == ".toml":
            data = tomllib.loads(text)
        elif path.suffix in (".yaml", ".yml"):
            data = yaml.safe_load(text) or {}
        else:
            raise UserError(
                f"sweep config {path.name!r} is neither YAML nor TOML", "use .yaml, .yml or .toml"
            )
    except (tomllib.TOMLDecodeError, yaml.YAMLError) as exc:
        first = str(exc).splitlines()[0]
        raise UserError(
            f"sweep config {path.name} is not valid: {first}", "fix its syntax"
        ) from None
    if not isinstance(data, dict):
        raise UserError(f"sweep config {path.name} is not a mapping", "write key: value lines")
    try:
        return SweepFile.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise UserError(
            f"sweep config {path.name}: {where}: {err['msg']}",
            "see `infermeter sweep --help` for the keys",
        ) from None


def parse_knob_option(text: str) -> tuple[str, list[str]]:
    """'top_k=1,2,4' -> ('top_k', ['1', '2', '4'])."""
    name, sep, values = text.partition("=")
    if not sep or not name.strip() or not values.strip():
        raise UserError(f"--knob {text!r} is not NAME=V1,V2", "e.g. --knob top_k=1,2,4")
    return name.strip(), [v.strip() for v in values.split(",") if v.strip()]
