"""JSON for files: NaN and infinities (not valid JSON) become null."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def clean_json(x: Any) -> Any:
    """Replace NaN/inf (not valid JSON) by None, recursively."""
    if isinstance(x, float) and (x != x or x in (float("inf"), float("-inf"))):
        return None
    if isinstance(x, dict):
        return {k: clean_json(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [clean_json(v) for v in x]
    return x


def dump_json(path: Path, doc: Any) -> Path:
    """Write `doc` as strict JSON (NaN as null), indented."""
    path.write_text(json.dumps(clean_json(doc), indent=1, allow_nan=False, default=str))
    return path
