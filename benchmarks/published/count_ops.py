"""Count a model's framework operations under the transformers release a published figure ran.

Why: eager `generate` on a GPU is launch-bound, so its time is about operations x host time
per operation, and the operations a block dispatches change between transformers releases
(gemma-2b's decode block: 94 under 4.42, 80 under 5.24). `predict` counts them with the
transformers installed (what its user runs); a published figure ran an older release, so
`predict_published.py` reads that release's counts from `op_counts.json`, written by this
script run in a virtual environment holding that release:

    python3 -m venv /tmp/tf && /tmp/tf/bin/pip install torch==2.13.0 transformers==4.42.0
    /tmp/tf/bin/python benchmarks/published/count_ops.py google/gemma-2b

The count is src/infermeter/models/opcount.py's `count_ops` (it and models/forward_args.py
import nothing but torch at run time, so an old release runs them without our dependencies,
and they pass the cache by the name that release's forward takes): aten operations by
kind, one prefill of 8 tokens and the decode step after it, on 1 and 2 blocks of the model's
config (small vocabulary, narrow MLP: neither changes the count) extrapolated to all its
blocks. Attention
is SDPA where the release has it (flash-attn does not run on a CPU: an `hf-fa2` figure is
counted with SDPA, its attention's own launches aside), else eager.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
# the project's own counter (models/opcount.py), which imports nothing at module level: it
# runs under an old release without infermeter's dependencies
sys.path.insert(0, str(HERE.parents[1] / "src"))


def _model(config_path: Path, layers: int):
    import torch
    import transformers

    raw = json.loads(config_path.read_text())
    raw.pop("auto_map", None)
    cls = transformers.CONFIG_MAPPING[raw["model_type"]]
    cfg = cls(**{k: v for k, v in raw.items() if k != "model_type"})
    for name in ("num_hidden_layers", "n_layer"):
        if hasattr(cfg, name):
            setattr(cfg, name, layers)
    cfg.vocab_size = 256
    heads = raw.get("num_attention_heads") or raw.get("n_head")
    if raw.get("hidden_size", 0) >= 12288 and "head_dim" not in raw and heads:
        cfg.hidden_size = heads * 16  # BLOOM's 14336 wide blocks: 10 GB for one in float32
    for name in ("intermediate_size", "n_inner"):
        if isinstance(getattr(cfg, name, None), int):
            setattr(cfg, name, min(getattr(cfg, name), 128))
    torch.manual_seed(0)
    auto = transformers.AutoModelForCausalLM
    try:  # transformers >= 4.36 chooses the attention; older ones have one
        model = auto.from_config(cfg, attn_implementation="sdpa")
    except (TypeError, ValueError, ImportError):
        model = auto.from_config(cfg)
    return model.eval(), getattr(model.config, "_attn_implementation", None) or "eager"


def _counts(config_path: Path, layers: int) -> tuple[dict[str, Any], str]:
    from infermeter.models.opcount import count_ops

    model, attention = _model(config_path, layers)
    counted = count_ops(model)  # one prefill of 8 tokens and the decode step after it
    if counted is None:
        raise SystemExit(f"{config_path.name}: the model did not run a forward under this release")
    return counted, attention


def count(hub_id: str) -> dict[str, object]:
    """The model's counts for all its blocks, as opcount.count_ops_of_config writes them."""
    path = HERE / "models" / (hub_id.replace("/", "--") + ".json")
    raw = json.loads(path.read_text())
    layers = int(raw.get("num_hidden_layers") or raw.get("n_layer"))
    (one, attention), (two, _) = _counts(path, 1), _counts(path, 2)
    out: dict[str, object] = {
        phase: {k: v + (layers - 1) * (two[phase][k] - v) for k, v in one[phase].items()}
        for phase in ("prefill", "decode")
    }
    if "attention_heads" in two:  # what the attention kernel was handed (the release is the key)
        out["attention_heads"] = two["attention_heads"]
    out["extrapolated"] = True
    out["attention"] = attention
    return out


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0
    import transformers

    target = HERE / "op_counts.json"
    doc = json.loads(target.read_text()) if target.exists() else {}
    version = transformers.__version__
    for hub_id in sys.argv[1:]:
        doc.setdefault(version, {})[hub_id] = count(hub_id)
        print(version, hub_id, json.dumps(doc[version][hub_id]), flush=True)
    target.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
