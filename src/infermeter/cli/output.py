"""Output folders, checked before any work is done (JSON writing lives in util.jsonio)."""

from __future__ import annotations

import uuid
from pathlib import Path

from infermeter.errors import UserError


def writable_file(path: str | Path | None, option: str) -> Path | None:
    """`path` (None passes) when its folder can be written and it is not a folder itself."""
    if path is None:
        return None
    p = Path(path).expanduser()
    if p.is_dir():
        raise UserError(f"{option} {str(p)!r} is a folder", f"give {option} a file name")
    try:
        writable_dir(p.parent)
    except UserError:
        raise UserError(
            f"cannot write {option} {str(p)!r}: its folder is not writable",
            f"point {option} at a writable folder",
        ) from None
    return p


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
