"""Prompts and images that drive a run: built-in corpus, exact-length prompts, prompt files."""

from infermeter.workloads.corpus import builtin_prompts, builtin_texts, read_prompts_file
from infermeter.workloads.prompts import PromptBatch, VisionInput, WorkloadSpec, build_batches

__all__ = [
    "PromptBatch",
    "VisionInput",
    "WorkloadSpec",
    "build_batches",
    "builtin_prompts",
    "builtin_texts",
    "read_prompts_file",
]
