"""Speculative decoding on a real model: acceptance and speedup, prompt by prompt kind.

Each round profiles every decoding once per prompt kind (natural, repetitive), in turn, so a
drift of the machine hits them alike; greedy is the baseline of its own round. Printed per
prompt kind and decoding: the paired speedup of the decode time (greedy / speculative: above 1
is faster) with its 95% interval and verdict, the acceptance rate, tokens per target forward,
draft and verification ms per step, and whether the output matched greedy decoding; then a
JSON line.

The decodings: prompt lookup (3 and 5 tokens), self-speculation from the first third of the
blocks (`early_exit:10` of SmolLM2's 30, `early_exit:6` of Gemma 3's 18), and a separate draft
model: the first fifth of the blocks and the head saved as a checkpoint folder of their own
(`assisted:FOLDER`; the same tokenizer, its own KV cache), the weakest kind of draft, and the
only smaller one of either family there is offline.

    python benchmarks/speculation.py --rounds 5                    # smollm2-135m
    python benchmarks/speculation.py --rounds 5 -m gemma3-270m    # about 35 min a round here
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from infermeter import RunConfig, load_model, profile
from infermeter.measure.stats import compare_paired_samples


def _draft_folder(loaded, blocks: int, where: Path) -> Path:
    """The model's first `blocks` blocks, its final norm and head, as a checkpoint folder."""
    import copy

    draft = copy.deepcopy(loaded.model)
    draft.model.layers = draft.model.layers[:blocks]
    draft.config.num_hidden_layers = blocks
    if getattr(draft.config, "layer_types", None):  # Gemma 3: one attention kind per block
        draft.config.layer_types = draft.config.layer_types[:blocks]
    draft.save_pretrained(where)
    loaded.tokenizer.save_pretrained(where)
    return where


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("-m", "--model", default="smollm2-135m")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--new-tokens", type=int, default=48)
    ap.add_argument("--prompt-tokens", type=int, default=128)
    args = ap.parse_args()
    model = args.model
    loaded = load_model(model, device="cpu", dtype="float32")
    blocks = loaded.info.layers
    with tempfile.TemporaryDirectory() as tmp:
        folder = _draft_folder(loaded, blocks // 5, Path(tmp) / "draft")
        decodings = [
            "greedy", "prompt_lookup:3", "prompt_lookup:5", f"early_exit:{blocks // 3}",
            f"assisted:{folder}",
        ]  # fmt: skip
        decode: dict[tuple[str, str], list[float]] = {}
        spec: dict[tuple[str, str], list[dict]] = {}
        for r in range(args.rounds):
            for kind in ("natural", "repetitive"):
                for d in decodings:
                    config = RunConfig(
                        model=model, decoding=d, prompt_kind=kind, prompt_tokens=args.prompt_tokens,
                        new_tokens=args.new_tokens, samples=3, warmup=1, energy="off", seed=r,
                    )  # fmt: skip
                    run = profile(config, loaded=loaded)
                    decode.setdefault((kind, d), []).append(run.summary()["decode_ms"].p50)
                    if "speculation" in run.checks:
                        spec.setdefault((kind, d), []).append(run.checks["speculation"])
            print(f"round {r + 1} of {args.rounds} done", file=sys.stderr)
        rows = _table(decodings, decode, spec, folder, blocks // 5)
    print(f"\n{model}, float32, {args.prompt_tokens}-token prompts, {args.new_tokens} new tokens, "
          f"{args.rounds} interleaved rounds (3 samples each, medians)")  # fmt: skip
    head = f"{'prompts':<11} {'decoding':<24} {'decode ms':>9} {'speedup (95% CI)':>24} "
    print(head + f"{'verdict':<26} {'accept':>6} {'tok/fwd':>7} {'draft ms':>8} {'verify ms':>9} "
          "greedy")  # fmt: skip
    for row in rows:
        ci = (f"{row['speedup']:.3f} ({row['ci95_low']:.3f}-{row['ci95_high']:.3f})"
              if row["ci95_low"] is not None else f"{row['speedup']:.3f}")  # fmt: skip
        acc = row["acceptance_rate"]
        print(f"{row['prompts']:<11} {row['decoding']:<24} {row['decode_ms']:>9.1f} {ci:>24} "
              f"{row['verdict']:<26} {'-' if acc is None else f'{acc:.0%}':>6} "
              f"{row['tokens_per_target_forward']:>7.2f} {row['draft_ms_per_step']:>8.2f} "
              f"{row['verify_ms_per_step']:>9.2f} {row['matches_greedy']}")  # fmt: skip
    print(json.dumps(rows))


def _table(decodings, decode, spec, folder, draft_blocks: int) -> list[dict]:
    """One row per prompt kind and speculative decoding, against greedy of the same rounds."""
    import statistics

    rows = []
    for kind in ("natural", "repetitive"):
        base = decode[(kind, "greedy")]
        for d in decodings[1:]:
            verdict = compare_paired_samples(base, decode[(kind, d)])
            s = spec.get((kind, d)) or [{}]

            def mean(key: str, s: list[dict] = s) -> float:
                return statistics.fmean(x.get(key) or 0.0 for x in s)

            proposed = sum(x.get("proposed", 0) for x in s)
            rows.append(
                {
                    "prompts": kind,
                    "decoding": d.replace(str(folder), f"first-{draft_blocks}-blocks"),
                    "decode_ms": statistics.median(decode[(kind, d)]),
                    "greedy_decode_ms": statistics.median(base),
                    "speedup": verdict["speedup"],
                    "ci95_low": verdict["ci95_low"],
                    "ci95_high": verdict["ci95_high"],
                    "verdict": verdict["verdict"],
                    "acceptance_rate": (
                        sum(x.get("accepted", 0) for x in s) / proposed if proposed else None
                    ),  # fmt: skip
                    "tokens_per_target_forward": mean("tokens_per_target_forward"),
                    "draft_ms_per_step": mean("draft_ms_per_step"),
                    "verify_ms_per_step": mean("verify_ms_per_step"),
                    "matches_greedy": all(x.get("matches_greedy") for x in s),
                }
            )
    return rows


if __name__ == "__main__":
    main()
