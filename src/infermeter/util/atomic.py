"""Every file infermeter writes appears whole or not at all.

A Ctrl-C or a full disk mid-write left 0-byte reports and exports beside the run (issue 35):
the bytes now go to a temporary file beside the target (same folder, so the rename cannot cross
file systems), which replaces the target only once it is complete; on any failure the temporary
file is removed and the target is as it was.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_path(target: str | os.PathLike[str]) -> Iterator[Path]:
    """A temporary path to write `target`'s content to; it becomes `target` on success.

    The temporary name keeps the target's suffix, so writers that choose a format from it
    (matplotlib's savefig, pandas) write the same format.
    """
    final = Path(target)
    tmp = final.with_name(f".{final.stem}.{uuid.uuid4().hex[:8]}.tmp{final.suffix}")
    try:
        yield tmp
        os.replace(tmp, final)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        if exc.filename in (None, str(tmp)):  # name the file the user asked for, not ours
            raise OSError(exc.errno, exc.strerror, str(final)) from exc
        raise
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text_atomic(target: str | os.PathLike[str], text: str) -> Path:
    """Write `text` (UTF-8) to `target` whole or not at all; return the path."""
    with atomic_path(target) as tmp, open(tmp, "x", encoding="utf-8") as fh:
        fh.write(text)
    return Path(target)
