"""The prompt-source options `profile`, `sweep`, `experiment` and `systems-analysis` share.

`--workload` (a sharegpt or chat file, or a shipped sample) and `--dataset` (a Hugging Face data
set from the local cache, a saved folder or a data file) give the prompts instead of the
built-in corpus (workloads/sources.py); declared once here so the four commands say the same.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

WORKLOAD = typer.Option(
    None,
    "--workload",
    help="Prompts from a workload: sharegpt:FILE, "
    "chat:FILE (each conversation's first user turn) or a shipped sample "
    "(sharegpt-sample, chat-sample).",
)
DATASET = typer.Option(
    None,
    "--dataset",
    help="Prompts from a Hugging Face data set in the "
    "local cache (e.g. wikitext, or NAME:CONFIG), a folder saved with "
    "save_to_disk, or a .json/.jsonl/.csv/.parquet/.txt file.",
)
DATASET_SPLIT = typer.Option(
    None,
    "--dataset-split",
    help="Its split (default: test, validation or train, the first it has).",
)
DATASET_FIELD = typer.Option(
    None,
    "--dataset-field",
    help="Its text column (default: text, prompt, question, ... the first it has).",
)


def prompt_fields(
    prompts_file: Path | None,
    workload: str | None,
    dataset: str | None,
    split: str | None = None,
    field: str | None = None,
) -> dict[str, Any]:
    """RunConfig fields for the prompts the options name ({} for the built-in corpus)."""
    from infermeter.errors import UserError
    from infermeter.workloads.sources import prompt_texts

    if prompts_file is not None and (workload or dataset):
        raise UserError(
            "give one of --prompts, --workload and --dataset", "pick one source of prompts"
        )
    got = prompt_texts(workload, dataset, split, field)
    if got is None:
        return {}
    texts, source = got
    return {"prompts": texts, "prompts_source": source}
