"""Prompts and images that drive a run: built-in corpus, exact-length prompts, prompt files."""

from typing import TYPE_CHECKING

from infermeter.util.lazy import lazy_exports

if TYPE_CHECKING:  # what the names are, for type checkers; at run time each loads on first use
    from infermeter.workloads.corpus import builtin_prompts, builtin_texts, read_prompts_file
    from infermeter.workloads.prompts import PromptBatch, VisionInput, WorkloadSpec, build_batches

__getattr__, __dir__ = lazy_exports(
    globals(),
    {
        "builtin_prompts": "infermeter.workloads.corpus",
        "builtin_texts": "infermeter.workloads.corpus",
        "read_prompts_file": "infermeter.workloads.corpus",
        "PromptBatch": "infermeter.workloads.prompts",
        "VisionInput": "infermeter.workloads.prompts",
        "WorkloadSpec": "infermeter.workloads.prompts",
        "build_batches": "infermeter.workloads.prompts",
    },
)

__all__ = [
    "PromptBatch",
    "VisionInput",
    "WorkloadSpec",
    "build_batches",
    "builtin_prompts",
    "builtin_texts",
    "read_prompts_file",
]
