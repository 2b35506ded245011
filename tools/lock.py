"""Record the versions a passing test suite ran with, so the next fresh install gets exactly them.

Why: a transformers release renamed one argument and every decode step became "prefill" on a
fresh install, silently, because `transformers>=4.50` took whatever was newest that day. Now
`make demo` and `make test` install with `constraints.txt` (pip's `-c`), and the package states
an upper bound on transformers at the newest release the suite passed with.

    make test-latest                          # newest releases into .venv-latest, whole suite
    python tools/lock.py --venv .venv-latest  # it passed: record them (`make lock` does this)

Writes constraints.txt (every installed distribution but torch, which `TORCH_SPEC` pins, and the
project itself) and raises the transformers bound in pyproject.toml to the installed release.
"""

from __future__ import annotations

import argparse
import datetime
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: pinned elsewhere: torch by TORCH_SPEC (a bare pin would pull CUDA wheels), the project itself
SKIP = {"torch", "infermeter"}
_REQ = re.compile(r'^(\s*)"transformers[^"]*"', re.M)


def _run(venv: Path, code: str) -> str:
    python = venv / "bin" / "python"
    return subprocess.run(
        [str(python), "-c", code], check=True, capture_output=True, text=True
    ).stdout.strip()


def frozen(venv: Path) -> list[str]:
    """`name==version` of every distribution in `venv` but the ones in SKIP, sorted."""
    python = venv / "bin" / "python"
    out = subprocess.run(
        [str(python), "-m", "pip", "freeze", "--exclude-editable", "--disable-pip-version-check"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    pins = []
    for line in out.splitlines():
        name, sep, version = line.partition("==")
        if not sep or name.strip().lower() in SKIP:
            continue  # editable or URL installs, and the pins made elsewhere
        pins.append(f"{name.strip()}=={version.split('+')[0].strip()}")
    return sorted(pins, key=str.lower)


def write_constraints(venv: Path, path: Path) -> str:
    """Write `path` from `venv`; returns the transformers version recorded."""
    pins = frozen(venv)
    python = _run(venv, "import platform; print(platform.python_version())")
    torch = _run(venv, "import torch; print(torch.__version__)")
    header = [
        "# The versions `make test` passed with; `make demo` and `make test` install these.",
        f"# Recorded {datetime.date.today()} by tools/lock.py on Python {python}, torch {torch}",
        "# (torch is pinned by the Makefile's TORCH_SPEC). Newer releases: `make test-latest`,",
        "# then `make lock` when it passes. Without these pins: `make CONSTRAINTS= test`.",
    ]
    path.write_text("\n".join(header + pins) + "\n")
    return next(p.split("==")[1] for p in pins if p.lower().startswith("transformers=="))


def raise_bound(pyproject: Path, version: str) -> None:
    """Set the transformers requirement's upper bound to `version`, keeping its lower bound."""
    text = pyproject.read_text()
    match = _REQ.search(text)
    if match is None:
        raise SystemExit(f"no transformers requirement in {pyproject}")
    lower = re.search(r">=\s*([\w.]+)", match.group(0))
    spec = f">={lower.group(1)}," if lower else ""
    text = _REQ.sub(f'{match.group(1)}"transformers{spec}<={version}"', text, count=1)
    pyproject.write_text(text)


def main() -> None:
    """Command line: --venv FOLDER (default .venv-latest)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", type=Path, default=ROOT / ".venv-latest")
    args = parser.parse_args()
    if not (args.venv / "bin" / "python").exists():
        sys.exit(f"error: no virtual environment at {args.venv}; run `make test-latest` first")
    version = write_constraints(args.venv, ROOT / "constraints.txt")
    raise_bound(ROOT / "pyproject.toml", version)
    print(f"recorded {ROOT / 'constraints.txt'}; transformers <= {version} in pyproject.toml")


if __name__ == "__main__":
    main()
