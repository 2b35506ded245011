"""The built-in prompt corpus (package data) and user prompt files.

The corpus is ~100 English prompts written for this project: short questions, instructions and
passages of a paragraph or more, so both "realistic chat" and "exact N-token" workloads are made
of real text.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from infermeter.errors import UserError


@lru_cache(maxsize=1)
def builtin_prompts() -> tuple[dict[str, Any], ...]:
    """Records {id, kind, prompt} of the built-in corpus, in a fixed order."""
    from importlib import resources  # 8 ms: not on the path of `--help` (run/config imports us)

    text = resources.files("infermeter.workloads").joinpath("data/prompts.jsonl").read_text("utf-8")
    return tuple(json.loads(line) for line in text.splitlines() if line.strip())


def builtin_texts() -> list[str]:
    """Just the prompt texts of the built-in corpus."""
    return [r["prompt"] for r in builtin_prompts()]


#: the kinds of built-in prompt: the corpus as written, or its passages repeated
PROMPT_KINDS = ("natural", "repetitive")
#: how many times a repetitive prompt says each passage
REPEATS = 8


def repetitive_texts(rows: int, min_chars: int = 0) -> tuple[str, ...]:
    """Prompts that repeat themselves, as code under edit or a document quoted back does.

    Each is one of the corpus's shorter prompts (a sentence or two, 40 to 200 characters) said
    `REPEATS` times, so the prompt's own n-grams predict what follows them (the text prompt
    lookup decoding pays on), and any window of 32 tokens or more sees a repeat. At least
    `rows` prompts and, for exact-length prompts cut from them, `min_chars` characters in all.
    """
    texts = [t for t in builtin_texts() if 40 <= len(t) <= 200] or builtin_texts()
    out: list[str] = []
    while len(out) < rows or sum(map(len, out)) < min_chars:
        passage = texts[len(out) % len(texts)]
        out.append(" ".join([passage] * REPEATS))
    return tuple(out)


#: Characters per token beyond which no tokenizer goes in practice (English averages about 4):
#: a prompt with more than this many characters per position of the context cannot fit it.
MAX_CHARS_PER_TOKEN = 64


def _prompt_of(line: str, n: int, name: str, jsonl: bool) -> str | None:
    """The prompt a line holds (None for a blank line); UserError on a bad JSONL line."""
    if not line.strip():
        return None
    if not jsonl:
        return line.strip()
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise UserError(
            f"{name} line {n} is not valid JSON ({exc.msg})", "write one JSON object per line"
        ) from None
    if not isinstance(record, dict) or not isinstance(record.get("prompt"), str):
        raise UserError(
            f"{name} line {n} has no string field 'prompt'", 'write lines like {"prompt": "..."}'
        )
    return str(record["prompt"])


def read_prompts_file(
    path: str | Path,
    *,
    max_prompts: int | None = None,
    enough_chars: int | None = None,
    max_prompt_chars: int | None = None,
) -> list[str]:
    """Prompts from a `.txt` file (one per non-empty line) or `.jsonl` (a `prompt` field each).

    The file is streamed and read only as far as the run needs: at most `max_prompts`
    prompts, and no further once `enough_chars` characters are in hand (each prompt is then
    cut to that too: exact-length prompts take windows of the text, so more text only adds
    variety). A prompt over `max_prompt_chars` characters is refused (it cannot fit the
    model's context), before anything is tokenized: a 10 MB file cost 27 s and 2.3 GB of
    tokenizing before the context check refused it.

    Raises:
        UserError: missing or unreadable file, bad JSON, missing field, no prompts at all, or a
            prompt longer than `max_prompt_chars`.
    """
    p = Path(path)
    jsonl = p.suffix.lower() == ".jsonl"
    prompts: list[str] = []
    chars = 0
    try:
        with p.open(encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                prompt = _prompt_of(line, n, p.name, jsonl)
                if prompt is None:
                    continue
                if max_prompt_chars is not None and len(prompt) > max_prompt_chars:
                    raise UserError(
                        f"{p.name} line {n}: a prompt of {len(prompt):,} characters cannot fit "
                        f"the model's context (at most about {max_prompt_chars:,})",
                        "shorten it, or give --prompt-tokens to cut prompts to a length",
                    )
                if enough_chars is not None:
                    prompt = prompt[: max(1, enough_chars - chars)]
                prompts.append(prompt)
                chars += len(prompt)
                if max_prompts is not None and len(prompts) >= max_prompts:
                    break
                if enough_chars is not None and chars >= enough_chars:
                    break
    except FileNotFoundError:
        raise UserError(f"prompts file {str(p)!r} does not exist", "check the path") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(
            f"cannot read prompts file {str(p)!r}: {exc}", "give a readable UTF-8 file"
        ) from None
    if not prompts:
        raise UserError(f"prompts file {str(p)!r} holds no prompts", "add at least one prompt")
    return prompts
