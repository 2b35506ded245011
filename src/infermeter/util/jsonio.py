"""The one way infermeter writes JSON: strict (NaN and infinities become null) and atomic.

Strict because NaN is not JSON: other tools (jq, browsers, pandas with `strict`) reject it.
Atomic because a Ctrl-C or a full disk mid-write must never leave a half file where a complete
one was: the text goes to a temporary file beside the target, which then replaces it.
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Any


def clean_json(x: Any) -> Any:
    """Replace NaN/inf (not valid JSON) by None, recursively; tuples become lists."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: clean_json(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [clean_json(v) for v in x]
    return x


def to_json_text(doc: Any, *, indent: int | None = None) -> str:
    """`doc` as strict JSON text (non-JSON values such as paths written as strings)."""
    return json.dumps(clean_json(doc), indent=indent, allow_nan=False, default=str)


def write_json(path: str | os.PathLike[str], doc: Any) -> Path:
    """Write `doc` to `path` as indented strict JSON, atomically; return the path."""
    from infermeter.util.atomic import write_text_atomic

    return write_text_atomic(path, to_json_text(doc, indent=1) + "\n")


def print_json(doc: Any) -> None:
    """Exactly one JSON document on one line of stdout (NaN written as null)."""
    sys.stdout.write(to_json_text(doc) + "\n")
    sys.stdout.flush()
