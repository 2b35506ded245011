"""The built-in prompt corpus (package data) and user prompt files.

The corpus is ~100 English prompts written for this project: short questions, instructions and
passages of a paragraph or more, so both "realistic chat" and "exact N-token" workloads are made
of real text.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from infermeter.errors import UserError


@lru_cache(maxsize=1)
def builtin_prompts() -> tuple[dict[str, Any], ...]:
    """Records {id, kind, prompt} of the built-in corpus, in a fixed order."""
    text = resources.files("infermeter.workloads").joinpath("data/prompts.jsonl").read_text("utf-8")
    return tuple(json.loads(line) for line in text.splitlines() if line.strip())


def builtin_texts() -> list[str]:
    """Just the prompt texts of the built-in corpus."""
    return [r["prompt"] for r in builtin_prompts()]


def read_prompts_file(path: str | Path) -> list[str]:
    """Prompts from a `.txt` file (one per non-empty line) or `.jsonl` (a `prompt` field each).

    Raises:
        UserError: missing or unreadable file, bad JSON, missing field, or no prompts at all.
    """
    p = Path(path)
    try:
        raw = p.read_text("utf-8")
    except FileNotFoundError:
        raise UserError(f"prompts file {str(p)!r} does not exist", "check the path") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(
            f"cannot read prompts file {str(p)!r}: {exc}", "give a readable UTF-8 file"
        ) from None
    prompts: list[str] = []
    if p.suffix.lower() == ".jsonl":
        for n, line in enumerate(raw.splitlines(), 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise UserError(
                    f"{p.name} line {n} is not valid JSON ({exc.msg})",
                    "write one JSON object per line",
                ) from None
            if not isinstance(record, dict) or not isinstance(record.get("prompt"), str):
                raise UserError(
                    f"{p.name} line {n} has no string field 'prompt'",
                    'write lines like {"prompt": "..."}',
                )
            prompts.append(record["prompt"])
    else:
        prompts = [line.strip() for line in raw.splitlines() if line.strip()]
    if not prompts:
        raise UserError(f"prompts file {str(p)!r} holds no prompts", "add at least one prompt")
    return prompts
