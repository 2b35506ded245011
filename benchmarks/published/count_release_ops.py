"""Operations a block dispatches under one transformers release, per model family: shipped data.

Why: `predict --stack hf@VERSION` answers for a release the user runs, not the one installed
here, and the operations a forward dispatches change between releases (gemma-2b's decode block:
94 under 4.42, 80 under 5.24): on a launch-bound GPU they are most of a decode step. A release
cannot be imported beside another, so each is counted once, in a virtual environment holding
it, on a small model of each family (1 and 2 blocks: what one block adds, and what the model
has once), and the counts ship in src/infermeter/analysis/data/op_counts_by_release.json.
`predict` adds the difference between the asked release and the installed one, per block and
once, to the counts of the user's own model under the installed release (analysis/releases.py).

    python3 -m venv /tmp/tf && /tmp/tf/bin/pip install torch==2.13.0 transformers==4.46.3
    /tmp/tf/bin/python benchmarks/published/count_release_ops.py      # writes that release
    .venv/bin/python benchmarks/published/count_release_ops.py        # and the installed one

The count is src/infermeter/models/opcount.py's `count_ops` (it imports nothing but torch at
run time, so it runs under an old release): one prefill of 8 tokens and the decode step after
it, float32 on the CPU, SDPA attention where the release has it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "src"))
TARGET = HERE.parents[1] / "src" / "infermeter" / "analysis" / "data" / "op_counts_by_release.json"

_ATTENTION = {
    "hidden_size": 64,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 128,
    "vocab_size": 256,
    "max_position_embeddings": 512,
    "bos_token_id": 0,
    "eos_token_id": 0,
    "pad_token_id": 0,
}
#: a small model of each family: only the block's structure matters to the count
FAMILIES: dict[str, dict[str, Any]] = {
    "llama": _ATTENTION,
    "mistral": _ATTENTION,
    "qwen2": _ATTENTION,
    "gemma": {**_ATTENTION, "head_dim": 16},
    "mixtral": {**_ATTENTION, "num_local_experts": 4, "num_experts_per_tok": 2},
    "gemma2": {**_ATTENTION, "head_dim": 16},
    "phi3": _ATTENTION,
    "qwen3": {**_ATTENTION, "head_dim": 16},
    "qwen2_moe": {
        **_ATTENTION,
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 32,
        "shared_expert_intermediate_size": 32,
    },
    "gpt2": {
        "n_embd": 64,
        "n_head": 4,
        "n_inner": 128,
        "vocab_size": 256,
        "n_positions": 512,
        "bos_token_id": 0,
        "eos_token_id": 0,
    },
}


def _count(family: str, layers: int) -> tuple[dict[str, Any], str] | None:
    import torch
    import transformers

    from infermeter.models.opcount import count_ops

    if family not in transformers.CONFIG_MAPPING:
        return None  # the family is newer than the release
    raw = dict(FAMILIES[family])
    raw["n_layer" if family == "gpt2" else "num_hidden_layers"] = layers
    cfg = transformers.CONFIG_MAPPING[family](**raw)
    torch.manual_seed(0)
    auto = transformers.AutoModelForCausalLM
    try:  # transformers >= 4.36 chooses the attention; older ones have one
        model = auto.from_config(cfg, attn_implementation="sdpa")
    except (TypeError, ValueError, ImportError):
        try:  # a family without SDPA in that release (gemma2 in some): its eager path
            model = auto.from_config(cfg, attn_implementation="eager")
        except (TypeError, ValueError, ImportError):
            model = auto.from_config(cfg)
    counted = count_ops(model.eval())
    if counted is None:
        return None
    return counted, getattr(model.config, "_attn_implementation", None) or "eager"


def count_family(family: str) -> dict[str, Any] | None:
    """One family's counts: what a block adds, what the model has once, and its attention.

    {"block": per phase and kind, "fixed": the rest, "attention": the path counted, and
    "keys_copied": whether the attention kernel was handed keys copied to every query head}.
    """
    one, two = _count(family, 1), _count(family, 2)
    if one is None or two is None:
        return None
    (c1, attention), (c2, _) = one, two
    block = {p: {k: c2[p][k] - c1[p][k] for k in c1[p]} for p in ("prefill", "decode")}
    fixed = {p: {k: c1[p][k] - block[p][k] for k in c1[p]} for p in ("prefill", "decode")}
    out: dict[str, Any] = {"block": block, "fixed": fixed, "attention": attention}
    heads = c2.get("attention_heads")
    if heads and family != "gpt2":  # 4 query heads, 2 key heads: were the keys copied out?
        out["keys_copied"] = heads["query"] == heads["key"]
    return out


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0
    import transformers

    release = transformers.__version__
    doc = json.loads(TARGET.read_text()) if TARGET.exists() else {}
    doc.setdefault("made_by", "benchmarks/published/count_release_ops.py")
    counts = doc.setdefault("releases", {}).setdefault(release, {})
    for family in FAMILIES:
        got = count_family(family)
        if got is not None:
            counts[family] = got
        print(release, family, json.dumps(got), flush=True)
    TARGET.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
