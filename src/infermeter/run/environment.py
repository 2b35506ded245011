"""Versions and host facts recorded with every run, so results can be compared honestly."""

from __future__ import annotations

import platform
import socket
import sys
from typing import TypedDict


class GitDoc(TypedDict):
    """The work tree a run was made in: its commit, whether it had changes, its root."""

    commit: str
    #: changes to tracked files (untracked ones left out); None if git could not say
    dirty: bool | None
    root: str | None


def git_state(folder: str | None = None) -> GitDoc | None:
    """The commit and dirty state of the git work tree `folder` (the current one) is in.

    None outside a repository or without git. Read with git itself (`rev-parse`, `status
    --porcelain`, untracked files left out, no lock taken), two seconds at most.
    """
    import os
    import subprocess

    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", *args],
                cwd=folder,
                capture_output=True,
                text=True,
                timeout=2,
                env=env,
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if not commit:
        return None
    status = git("status", "--porcelain", "--untracked-files=no")
    return {
        "commit": commit,
        "dirty": bool(status) if status is not None else None,
        "root": git("rev-parse", "--show-toplevel"),
    }


class VersionsDoc(TypedDict, total=False):
    """The stored record of what a run ran on (`RunResult.versions`): libraries, OS, commit.

    Every key optional to a reader: older stored runs lack some (the git state came later).
    """

    infermeter: str
    python: str
    torch: str
    torch_cuda: str | None
    transformers: str
    platform: str
    host: str
    git: GitDoc | None
    #: an imported run's: the peer tool that measured it and its version ("guidellm 0.8.1")
    peer: str


def library_versions() -> VersionsDoc:
    """Python, torch (and its CUDA), transformers, infermeter, the OS and the git state."""
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
        # the work tree the run was started from: history and compare say which commit
        "git": git_state(),
    }
