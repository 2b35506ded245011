"""Output folders, checked before any work is done (JSON writing lives in util.jsonio)."""

from __future__ import annotations

import contextlib
import os
import uuid
from pathlib import Path

from infermeter.errors import UserError


def _check_names(p: Path, option: str) -> None:
    """Each part of `p` no longer than the file system allows, else one line.

    A 300-character --junit name was an internal OSError ("File name too long").
    """
    most = 255
    with contextlib.suppress(OSError, ValueError, AttributeError):
        most = os.pathconf(
            next((a for a in p.absolute().parents if a.exists()), "/"), "PC_NAME_MAX"
        )
    for part in p.parts:
        size = len(part.encode("utf-8", "surrogateescape"))
        if size > most:
            raise UserError(
                f"{option} name {part[:40]!r}... is {size} bytes long",
                f"use names of at most {most} bytes",
            )


def writable_file(path: str | Path | None, option: str) -> Path | None:
    """`path` (None passes) when its folder can be written and it is not a folder itself."""
    if path is None:
        return None
    p = Path(path).expanduser()
    _check_names(p, option)
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


def writable_dir(path: str | Path, option: str = "--out") -> Path:
    """Create `path` if needed and prove it is writable, before any work is done."""
    p = Path(path).expanduser()
    _check_names(p, option)
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
