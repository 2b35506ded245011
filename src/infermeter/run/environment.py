"""Versions and host facts recorded with every run, so results can be compared honestly."""

from __future__ import annotations

import platform
import socket
import sys
from typing import Any


def library_versions() -> dict[str, Any]:
    """Python, torch (and its CUDA), transformers, infermeter and the OS."""
    import torch
    import transformers

    from infermeter._version import __version__

    return {
        "infermeter": __version__,
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "transformers": transformers.__version__,
        "platform": platform.platform(),
        "host": socket.gethostname(),
    }
