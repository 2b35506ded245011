"""Where infermeter keeps its files: user cache (converted models, tokenizer) and data (runs).

`INFERMETER_CACHE` and `INFERMETER_HOME` override the platform folders, which tests use to keep
each run in a temporary folder.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs


def cache_dir() -> Path:
    """Folder for rebuildable files: the offline tokenizer, trained GGUF models as safetensors."""
    root = os.environ.get("INFERMETER_CACHE") or platformdirs.user_cache_dir("infermeter")
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def data_dir() -> Path:
    """Folder for data that must survive: the default SQLite database of runs."""
    root = os.environ.get("INFERMETER_HOME") or platformdirs.user_data_dir("infermeter")
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path
