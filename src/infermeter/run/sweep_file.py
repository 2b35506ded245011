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

import sys
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError

from infermeter.errors import UserError

if sys.version_info >= (3, 11):
    import tomllib
else:  # the package supports Python 3.10, whose standard library has no TOML reader
    import tomli as tomllib

Scalar = str | int | float | bool
#: a sweep file is a few lines; a larger one is a mistake (or a hostile file), refused unread
MAX_FILE_BYTES = 1_000_000


class _UniqueKeyLoader(yaml.SafeLoader):  # type: ignore[misc]  # PyYAML has no stubs here
    """YAML's safe loader refusing a key given twice (the last one silently won)."""


def _unique_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> Any:
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise UserError(
                f"sweep config key {key!r} is given twice (line {key_node.start_mark.line + 1})",
                "keep one of them",
            )
        seen.add(key)
    return loader.construct_mapping(node, deep)


_UniqueKeyLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
    _unique_mapping,
)


class SweepFile(BaseModel):
    """The keys a sweep file may have."""

    model_config = ConfigDict(extra="forbid")

    model: str | None = None
    name: str | None = Field(default=None, max_length=200)
    interleave: bool = False
    knobs: dict[str, list[Scalar] | Scalar] = Field(default_factory=dict)
    # strict: `samples: true` is not 1 sample
    prompt_tokens: StrictInt | None = None
    new_tokens: StrictInt | None = None
    batch_size: StrictInt | None = None
    samples: StrictInt | None = None
    warmup: StrictInt | None = None
    dtype: str | None = None
    device: str | None = None
    mode: str | None = None
    energy: str | None = None
    seed: StrictInt | None = None
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
    if not path.exists():
        raise UserError(f"sweep config {str(path)!r} does not exist", "check the --config path")
    if not path.is_file():
        raise UserError(
            f"sweep config {str(path)!r} is not a regular file (a folder, FIFO or device)",
            "give a .yaml or .toml file",
        )
    if path.suffix not in (".toml", ".yaml", ".yml"):
        raise UserError(
            f"sweep config {path.name!r} is neither YAML nor TOML", "use .yaml, .yml or .toml"
        )
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise UserError(
            f"sweep config {path.name} is {size:,} bytes",
            f"a sweep file is at most {MAX_FILE_BYTES:,}",
        )
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(
            f"sweep config {path.name} is not UTF-8 text (byte {exc.start})", "save it as UTF-8"
        ) from None
    try:
        if path.suffix == ".toml":
            data = tomllib.loads(text)
        else:
            data = yaml.load(text, Loader=_UniqueKeyLoader) or {}  # a safe loader
    except (tomllib.TOMLDecodeError, yaml.YAMLError) as exc:
        first = str(exc).splitlines()[0]
        raise UserError(
            f"sweep config {path.name} is not valid: {first}", "fix its syntax"
        ) from None
    except RecursionError:
        raise UserError(
            f"sweep config {path.name} is nested too deeply to read",
            "a sweep file is flat: keys, and knobs with lists of values",
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
