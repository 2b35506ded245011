"""The operations of another transformers release: what `predict --stack hf@VERSION` counts.

Why: eager `generate` on a GPU is launch-bound, so its decode step is about operations x host
time per operation, and the operations a block dispatches change between releases (a llama
block's decode step: 94 under 4.42.0, 72 under 5.24.0). `predict` counts them on the user's
model with the transformers installed here; a user on another release asked for a prediction
of that release's, and was told the installed one's was used.

How: a release cannot be imported beside another, so each shipped release was counted once, in
a virtual environment holding it, on a small model of each family (1 and 2 blocks: what one
block adds, and what the model has once), by benchmarks/published/count_release_ops.py into
data/op_counts_by_release.json. For the user's model: its own counts under the installed
release plus, per phase and kind, the asked release's minus the installed one's, once for
the fixed part and once per block. Approximate, and said so: the user's config may differ
from the family's small one in what a release treats differently (a sliding window, biases).
The attention path is the asked release's too (whether keys were copied to every query head).
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any, TypedDict, cast

PHASES = ("prefill", "decode")
KINDS = ("gemm", "attention", "other")


class _FamilyOpsDoc(TypedDict):
    #: what one block adds, per phase and kind
    block: dict[str, dict[str, int]]
    #: what the model has once (embeddings, final norm, LM head, masks), per phase and kind
    fixed: dict[str, dict[str, int]]
    #: the attention path counted ("sdpa" or "eager")
    attention: str


class FamilyOpsDoc(_FamilyOpsDoc, total=False):
    """One family's counts under one release; `keys_copied` where the family groups heads."""

    keys_copied: bool


@cache
def _releases() -> dict[str, dict[str, FamilyOpsDoc]]:
    text = resources.files("infermeter.analysis").joinpath("data/op_counts_by_release.json")
    doc = json.loads(text.read_text())
    return cast("dict[str, dict[str, FamilyOpsDoc]]", doc["releases"])


def shipped_releases() -> list[str]:
    """The transformers releases whose operations ship with infermeter, oldest first."""
    from packaging.version import Version

    return sorted(_releases(), key=Version)


def match_release(asked: str) -> str | None:
    """The shipped release `asked` names: itself, or the newest of a prefix ("4.46")."""
    from packaging.version import Version

    have = shipped_releases()
    if asked in have:
        return asked
    prefixed = [r for r in have if r.startswith(asked + ".")]
    return max(prefixed, key=Version) if prefixed else None


def ops_under_release(
    op_counts: dict[str, Any],
    model_type: str | None,
    layers: int,
    asked: str,
    installed: str,
) -> tuple[dict[str, Any] | None, str]:
    """The model's counts moved from `installed` to the `asked` release, and the line to say.

    None (and why) where the data lack the asked release, the installed one, or the family.
    """
    shipped = ", ".join(shipped_releases())
    release = match_release(asked)
    if release is None:
        return None, (
            f"no operation counts ship for transformers {asked} (shipped: {shipped}): the "
            f"installed {installed}'s are used"
        )
    base = match_release(installed)
    data = _releases()
    family = model_type or "?"
    if base is None or family not in data[release] or family not in data[base]:
        missing = f"the installed {installed}" if base is None else f"the {family} family in them"
        return None, (
            f"transformers {release}'s operation counts lack {missing} (shipped: {shipped}): "
            f"the installed {installed}'s are used"
        )
    want, have = data[release][family], data[base][family]
    out: dict[str, Any] = {
        k: v for k, v in op_counts.items() if k not in PHASES and k != "attention_heads"
    }
    for phase in PHASES:
        ours = op_counts[phase]
        out[phase] = {
            kind: max(
                0,
                int(ours.get(kind, 0))
                + want["fixed"][phase][kind]
                - have["fixed"][phase][kind]
                + layers * (want["block"][phase][kind] - have["block"][phase][kind]),
            )
            for kind in KINDS
        }
    heads = op_counts.get("attention_heads")
    if heads and "keys_copied" in want:
        query = int(heads["query"])
        out["attention_heads"] = {
            "query": query,
            "key": query if want["keys_copied"] else int(heads["key"]),
        }
    elif heads:
        out["attention_heads"] = heads
    out["transformers"] = release
    out["release_moved_from"] = installed
    decode = sum(out["decode"].values())
    return out, (
        f"framework operations of transformers {release}: this model's count under "
        f"{installed} ({sum(op_counts['decode'].values())} a decode step) moved by what a "
        f"{family} block and the model around it dispatch under each release, counted on a "
        f"small {family} model (benchmarks/published/count_release_ops.py): {decode}"
    )
