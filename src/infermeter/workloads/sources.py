"""Prompt texts from a workload file or a Hugging Face data set, for every command with prompts.

`profile`, `sweep`, `experiment` and `systems-analysis` take them; `load` reads whole workloads.

Why: the same prompts everywhere. A latency measured on the built-in corpus and a load test on
ShareGPT describe different traffic; the reference systems analysis ran `--dataset wikitext
--n_samples 100`. So:
- `workload_texts("sharegpt:FILE" | "chat:FILE" | a shipped sample)`: each conversation's first
  user turn (traces hold lengths and times, not text: refused, with where they work).
- `dataset_texts(NAME)`: a folder written by `datasets`' `save_to_disk`, a data file (.json,
  .jsonl, .csv, .parquet, .txt), or a hub id with an optional config (`wikitext` is
  `wikitext:wikitext-2-raw-v1`, as the reference used it) read from the local Hugging Face
  cache with the network off. Absent from the cache: one line naming the cache folder and how
  to fill it. The text column is `field`, or the first of text / prompt / question /
  instruction / content / input that holds strings; empty rows and wikitext's `= Heading =`
  lines are dropped.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from infermeter.errors import UserError

#: most texts read from a source (a run cycles through them; more only costs reading time)
MAX_TEXTS = 10_000
TEXT_FIELDS = ("text", "prompt", "question", "instruction", "content", "input")
#: configs the reference's short names stand for
DEFAULT_CONFIGS = {"wikitext": "wikitext-2-raw-v1"}
_FILE_BUILDERS = {
    ".json": "json",
    ".jsonl": "json",
    ".csv": "csv",
    ".parquet": "parquet",
    ".txt": "text",
}
_HEADING = re.compile(r"=+ .* =+")


def workload_texts(spec: str) -> list[str]:
    """The first user turn of each conversation of a sharegpt or chat workload."""
    from infermeter.workloads.traffic import _conversations, resolve

    kind, path = resolve(spec)
    if kind not in ("sharegpt", "chat"):
        raise UserError(
            f"--workload {spec}: a trace ({kind}) holds lengths and arrival times, not texts",
            "replay it with `infermeter load --workload`, or give a sharegpt or chat file here",
        )
    texts = []
    for messages in _conversations(path, kind):
        first = next((m["content"] for m in messages if m["role"] == "user"), "")
        if first.strip():
            texts.append(first)
        if len(texts) >= MAX_TEXTS:
            break
    if not texts:
        raise UserError(f"--workload {path} holds no user turn with text", "check the file")
    return texts


def _cache_dir() -> str:
    try:
        import datasets

        return str(datasets.config.HF_DATASETS_CACHE)
    except (ImportError, AttributeError):  # pragma: no cover - datasets always has it
        return "~/.cache/huggingface/datasets"


def _first_line(exc: BaseException) -> str:
    """The reason an exception gives, on one line: its own first line, or its cause's.

    `datasets` raises "An error occurred while generating the dataset" and keeps the parser's
    own message (the line and the column at fault) in the exception it wraps.
    """
    seen: BaseException | None = exc
    text = ""
    while seen is not None:
        text = str(seen).strip().splitlines()[0][:160] if str(seen).strip() else ""
        if text and "error occurred while generating" not in text:
            break
        seen = seen.__cause__ or seen.__context__
    return text or type(exc).__name__


def _load(name: str, split: str | None) -> Any:
    """The data set (one split) `name` stands for, read without the network."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    from infermeter.extras import require

    require("datasets", "--dataset")
    import datasets

    datasets.disable_progress_bars()  # the run's own progress is what the user watches
    # "Using the latest cached version ...", and a parse error logged before it is raised
    # (the refusal below names it once, on one line)
    datasets.utils.logging.set_verbosity(datasets.utils.logging.CRITICAL)
    path = Path(name).expanduser()
    if path.is_dir():
        try:
            data = datasets.load_from_disk(str(path))
        except FileNotFoundError:
            raise UserError(
                f"--dataset {path} is not a folder written by save_to_disk",
                "give such a folder, a data file, or a hub id",
            ) from None
        except Exception as exc:  # a damaged Arrow file or state document, of many kinds
            raise UserError(
                f"--dataset {path}: the saved folder cannot be read ({_first_line(exc)})",
                "save it again with save_to_disk, or give a data file",
            ) from None
    elif path.is_file():
        builder = _FILE_BUILDERS.get(path.suffix.lower())
        if builder is None:
            raise UserError(
                f"--dataset {name}: cannot read {path.suffix or 'a file without a'} suffix",
                f"give one of {', '.join(_FILE_BUILDERS)}",
            )
        try:
            data = datasets.load_dataset(builder, data_files=str(path))
        except Exception as exc:  # datasets wraps a parse error in its own kinds, many of them
            raise UserError(
                f"--dataset {name}: not a readable {path.suffix.lower()} file ({_first_line(exc)})",
                "fix the file (one record per row, one type per column), or give another",
            ) from None
    else:
        repo, _, given = name.partition(":")
        config = given or DEFAULT_CONFIGS.get(repo)
        try:
            data = datasets.load_dataset(repo, config)
        except Exception as exc:  # the library raises many kinds for "not cached"
            first = _first_line(exc)
            raise UserError(
                f"--dataset {name} is not a folder, a file, or a data set in the local cache "
                f"{_cache_dir()} ({first})",
                f'download it once where there is a network (python -c "import datasets; '
                f"datasets.load_dataset('{repo}'{', ' + repr(config) if config else ''})\"), "
                "or give a saved folder or a file",
            ) from None
    if isinstance(data, datasets.DatasetDict):
        names = list(data)
        pick = split or next((s for s in ("test", "validation", "train") if s in data), names[0])
        if pick not in data:
            raise UserError(
                f"--dataset {name} has no split {pick!r}",
                f"use --dataset-split {' or '.join(names)}",
            )
        return data[pick]
    return data


def dataset_texts(name: str, split: str | None = None, field: str | None = None) -> list[str]:
    """Up to MAX_TEXTS non-empty texts of the data set's text column."""
    data = _load(name, split)
    columns = [
        c
        for c, f in data.features.items()
        if getattr(f, "dtype", None) in ("string", "large_string")
    ]
    if field is not None and field not in data.column_names:
        raise UserError(
            f"--dataset {name} has no column {field!r}",
            f"use --dataset-field {' or '.join(data.column_names)}",
        )
    column = (
        field
        or next((c for c in TEXT_FIELDS if c in columns), None)
        or (columns[0] if columns else None)
    )
    if column is None:
        raise UserError(f"--dataset {name} has no text column", "name one with --dataset-field")
    texts = []
    for value in data.select_columns([column]).iter(batch_size=1000):
        for t in value[column]:
            if isinstance(t, str) and t.strip() and not _HEADING.fullmatch(t.strip()):
                texts.append(t.strip())
        if len(texts) >= MAX_TEXTS:
            break
    if not texts:
        raise UserError(f"--dataset {name}: column {column!r} holds no text", "pick another")
    return texts[:MAX_TEXTS]


def prompt_texts(
    workload: str | None,
    dataset: str | None,
    split: str | None = None,
    field: str | None = None,
) -> tuple[tuple[str, ...], str] | None:
    """(texts, where they came from) of --workload or --dataset; None when neither is given."""
    if workload and dataset:
        raise UserError("give --workload or --dataset, not both", "pick one source of prompts")
    if (split or field) and not dataset:
        raise UserError(
            "--dataset-split and --dataset-field choose within a --dataset",
            "add --dataset NAME, or drop them",
        )
    if workload:
        return tuple(workload_texts(workload)), f"workload {workload}"
    if dataset:
        texts = dataset_texts(dataset, split, field)
        return tuple(texts), f"dataset {dataset}" + (f" ({split})" if split else "")
    return None
