"""Output folders and machine-readable output shared by commands."""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path
from typing import Any

from infermeter.errors import UserError
from infermeter.report.jsonio import clean_json  # noqa: F401  (re-exported)


def writable_dir(path: str | Path) -> Path:
    """Create `path` if needed and prove it is writable, before any work is done."""
    p = Path(path).expanduser()
    try:
        p.mkdir(parents=True, exist_ok=True)
        probe = p / f".infermeter-{uuid.uuid4().hex[:8]}"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise UserError(
            f"cannot write to output folder {str(p)!r} ({exc.strerror or exc})",
            "choose a writable --out folder",
        ) from None
    return p


def write_json(path: Path, doc: Any) -> None:
    """Write `doc` as indented JSON, atomically (no half-written files on Ctrl-C)."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2, allow_nan=False, default=str) + "\n")
    tmp.replace(path)


def print_json(doc: Any) -> None:
    """Exactly one JSON document on stdout (NaN written as null)."""
    sys.stdout.write(json.dumps(clean_json(doc), default=str) + "\n")
    sys.stdout.flush()
