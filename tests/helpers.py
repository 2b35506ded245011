"""Helpers shared by test modules (test modules never import each other)."""

from __future__ import annotations

import os
import subprocess
import sys


def cli(*args, env=None, timeout=600):
    """Run `python -m infermeter ARGS` in a real process."""
    return subprocess.run(
        [sys.executable, "-m", "infermeter", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def assert_one_line_error(result, *needles, code=2):
    """The CLI's error contract: exit `code`, one line 'error: ...' naming each needle."""
    stderr = result.stderr if hasattr(result, "stderr") else result.output
    assert result.returncode == code if hasattr(result, "returncode") else result.exit_code == code
    assert "Traceback" not in stderr
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error: ")
    for n in needles:
        assert n in lines[0], lines[0]
