"""How far is `infermeter predict` from published measurements, per serving stack?

Reads `benchmarks/published/measurements.json` (each entry: a quote, its source and address,
the model, GPU, stack, batch, lengths, dtype and the measured figure) and the models' configs
in `benchmarks/published/models/`, predicts each entry with the stack's profile
(analysis/stacks.py), and prints per entry and per stack group the error on a time basis
(a rate is turned into the time it implies: tokens/s -> seconds per token), separately for the
sources the stack constants were fitted on and for the held-out ones. It also lists every
prediction below its own roofline floor (there may be none) and every measurement below it
(a misread figure: the data are checked too).

    python benchmarks/predict_published.py            # the table and the summary
    python benchmarks/predict_published.py --fit      # grid-search the constants on the
                                                      # "fit" sources and print the best
    python benchmarks/predict_published.py --write-intervals   # the held-out errors and the
        # scope that `predict`'s 90% intervals come from (analysis/data/prediction_errors.json),
        # and their coverage, one held-out source left out at a time

Goals (issue 32), on the held-out sources: hf median <= 10%, max <= 25%; serving engines
median <= 20%, max <= 60%.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import math
import os
import re
import statistics
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from infermeter.analysis.precision import precision_of
from infermeter.analysis.predict import Learned, Workload, predict
from infermeter.analysis.stacks import STACKS, Stack
from infermeter.analysis.timemodel import device_model
from infermeter.measure.ceilings import spec_by_key

HERE = Path(__file__).resolve().parent / "published"
ENGINES = ("vllm", "sglang", "tensorrt-llm", "lmdeploy", "tgi", "llama.cpp")


def group_of(stack: str) -> str:
    """The stack groups the goals are stated for (hf-fa2 is HF generate too)."""
    return "serving engines" if stack in ENGINES else {"hf-fa2": "hf"}.get(stack, stack)


#: operation counts under the transformers release each HF figure ran (published/count_ops.py)
OP_COUNTS: dict[str, dict[str, Any]] = json.loads((HERE / "op_counts.json").read_text())


def op_counts_for(e: dict[str, Any], model: Model) -> dict[str, Any] | None:
    """The entry's operation counts: its transformers release's where counted, else today's."""
    release = e.get("transformers_version") or ""
    counted = OP_COUNTS.get(release, {}).get(e["model"])
    return {**counted, "transformers": release} if counted is not None else model.op_counts


class Model:
    """A published model's shape, parameter count and operation counts (computed once)."""

    _cache: dict[str, Model] = {}

    def __init__(self, hub_id: str) -> None:
        from infermeter.models.config_only import config_of
        from infermeter.models.info import count_params
        from infermeter.models.shape import meta_model, shape_of

        path = HERE / "models" / (hub_id.replace("/", "--") + ".json")
        self.config, _ = config_of(str(path))
        model = meta_model(self.config)  # one structure for the shape and the count
        self.shape = shape_of(model)
        self.params = count_params(model)

    @functools.cached_property
    def op_counts(self) -> dict[str, Any] | None:
        """The model's operation counts, counted on first use.

        Only an entry whose release op_counts.json lacks needs them: counting materialises and
        runs the model (about 0.4 s a model, 8 s of the held-out check when done for all).
        """
        from infermeter.models.opcount import count_ops_of_config

        return count_ops_of_config(self.config, "bfloat16")

    @classmethod
    def of(cls, hub_id: str) -> Model:
        """The model, built on first use."""
        if hub_id not in cls._cache:
            cls._cache[hub_id] = cls(hub_id)
        return cls._cache[hub_id]


def measured_seconds(e: dict[str, Any]) -> float:
    """The entry's figure as the time it implies (`predicted` gives the same basis).

    Rates become the time they imply: tokens/s per sequence -> seconds per token, a batch's
    output tokens/s -> the seconds of the whole batch, a speedup -> the time ratio.
    """
    v, m = float(e["value"]), e["metric"]
    b, new, prompt, tp = e["batch"], e["new_tokens"], e["prompt_tokens"], e.get("tp") or 1
    per = {
        "tpot_ms": lambda: v / 1e3,
        "ttft_ms": lambda: v / 1e3,
        "e2e_latency_s": lambda: v,
        "e2e_ms_per_output_token": lambda: new * v / 1e3,
        "wall_ms_per_output_token_all_seqs": lambda: b * new * v / 1e3,
        "decode_tok_s_per_seq": lambda: 1 / v,
        "e2e_tok_s_per_seq": lambda: new / v,
        "output_throughput_tok_s": lambda: b * new / v,
        "output_throughput_tok_s_per_gpu": lambda: b * new / (v * tp),
        "prefill_tok_s": lambda: b * prompt / v,
        "speedup_vs_fp16": lambda: 1 / v,
    }
    return per[m]()


def release_of(e: dict[str, Any]) -> str | None:
    """The engine release an entry's free-text `stack_version` names, or None.

    Its first dotted number: "1.0.3"; "0.2.0" of "commit acbed3e (2023-10-06, ~v0.2.0; ...)".
    HF entries carry theirs in `transformers_version` (operation counts), not here.
    """
    if group_of(e["stack"]) != "serving engines":
        return None
    found = re.search(r"(?<![\w.])v?(\d+\.\d+(?:\.\d+)?)", str(e.get("stack_version") or ""))
    return found.group(1) if found else None


def _times(e: dict[str, Any], stack: Stack, dtype: str) -> dict[str, float]:
    """Predicted TTFT, TPOT and whole-request seconds of the entry's workload, and floors.

    A benchmark at a fixed concurrency (`"concurrency": true`: requests arrive one by one and
    join a running batch) is not a batch prefilled at once: a request's TTFT is its own
    prefill plus the decode step of the batch it joins, and its TPOT a decode step at the
    batch of all concurrent requests.
    """
    model = Model.of(e["model"])
    ceilings = spec_by_key(e["hardware"])
    if ceilings is None:
        raise SystemExit(f"{e['id']}: unknown hardware {e['hardware']!r}")
    dev = device_model(ceilings, precision_of(dtype).compute, stack, release_of(e))
    tp = int(e.get("tp") or 1)
    new = max(int(e["new_tokens"]), 1)
    batches = (1, int(e["batch"])) if e.get("concurrency") else (int(e["batch"]),)
    w = Workload(batches, max(int(e["prompt_tokens"]), 1), new, dtype, tp, tp)
    rows = predict(model.shape, model.params, dev, w, op_counts_for(e, model), Learned())["rows"]
    first, row = rows[0], rows[-1]
    pre, dec = first["prefill"], row["decode"]
    tpot = row["tpot_ms"] / 1e3
    ttft = first["ttft_ms"] / 1e3 + (tpot if e.get("concurrency") else 0.0)
    floor_pre = max(pre["compute_bound_s"] or 0, pre["memory_bound_s"] or 0)
    floor_dec = max(dec["compute_bound_s"] or 0, dec["memory_bound_s"] or 0)
    return {
        "ttft": ttft,
        "tpot": tpot,
        "total": ttft + (new - 1) * tpot,
        "floor_ttft": floor_pre,
        "floor_tpot": floor_dec,
        "floor_total": floor_pre + (new - 1) * floor_dec,
    }


def predicted(e: dict[str, Any], stack: Stack) -> tuple[float, float]:
    """(predicted seconds on the entry's basis, its roofline floor in seconds)."""
    t = _times(e, stack, e["dtype"])
    m = e["metric"]
    if m == "speedup_vs_fp16":  # a time ratio: no floor of its own
        return t["total"] / _times(e, stack, "float16")["total"], 0.0
    basis = {
        "tpot_ms": "tpot",
        "decode_tok_s_per_seq": "tpot",
        "ttft_ms": "ttft",
        "prefill_tok_s": "ttft",
    }.get(m, "total")
    return t[basis], t[f"floor_{basis}"]


def evaluate(entries: list[dict[str, Any]], stacks: dict[str, Stack]) -> list[dict[str, Any]]:
    """Every entry with its measured and predicted seconds and the error (%)."""
    out = []
    for e in entries:
        meas = measured_seconds(e)
        pred, floor = predicted(e, stacks[e["stack"]])
        out.append(
            {
                **e,
                "measured_s": meas,
                "predicted_s": pred,
                "floor_s": floor,
                "error_pct": 100 * (pred - meas) / meas,
            }
        )
    return out


def summary(rows: list[dict[str, Any]]) -> list[tuple[str, str, int, float, float]]:
    """(group, split, entries, median |error| %, max |error| %) per stack group and split."""
    out = []
    keys = sorted({(group_of(r["stack"]), r["split"]) for r in rows})
    for g, split in keys:
        errs = [
            abs(r["error_pct"]) for r in rows if group_of(r["stack"]) == g and r["split"] == split
        ]
        out.append((g, split, len(errs), statistics.median(errs), max(errs)))
    return out


def _loss(rows: list[dict[str, Any]]) -> float:
    """Mean absolute log error: a ratio's error counts the same above and below."""
    return statistics.fmean(abs(math.log(r["predicted_s"] / r["measured_s"])) for r in rows)


#: the constants --fit searches, per stack
GRIDS: dict[str, dict[str, list[float]]] = {
    # hf and hf-fa2 together: the same generate loop, so the same host constants
    "hf": {
        "op_seconds": [x * 1e-6 for x in (9, 10, 10.5, 11, 11.5, 12)],
        "overlap": [0.75, 1.0],
        "eager_attention_efficiency": [0.08, 0.1, 0.12, 0.15, 0.2],
    },
    "hf-fa2": {
        "op_seconds": [x * 1e-6 for x in (8, 9, 10, 11, 12, 13, 14)],
        "overlap": [0.0, 0.25, 0.5, 0.75, 1.0],
        "cache_passes": [20.0, 25.0, 30.0, 35.0, 40.0],
        "bandwidth_efficiency": [0.6, 0.65, 0.7, 0.75, 0.8],
    },
    "engine": {
        "step_seconds": [x * 1e-3 for x in (0.0, 0.25, 0.5, 1, 1.5, 2, 3, 4)],
        "first_seconds": [x * 1e-3 for x in (0.5, 1, 2, 3, 5, 8)],
        "bandwidth_efficiency": [0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9],
    },
}


def _best(
    train: list[dict[str, Any]], grid: dict[str, list[float]]
) -> tuple[float, dict[str, float]]:
    """The grid point of least loss when every entry's stack takes its values."""
    best: tuple[float, dict[str, float]] | None = None
    for values in itertools.product(*grid.values()):
        params = dict(zip(grid, values, strict=True))
        stacks = {k: replace(STACKS[k], **params) for k in {e["stack"] for e in train}}
        loss = _loss(evaluate(train, stacks))
        if best is None or loss < best[0]:
            best = (loss, params)
    assert best is not None
    return best


def fit_eager(entries: list[dict[str, Any]]) -> None:
    """Per engine with an eager era, the host seconds per kernel its eager fit figures show.

    Only the fit entries of a release before the engine's CUDA graphs are read (bisection on
    `EagerRelease.op_seconds`, the profile's other constants as they are); held-out entries
    never are.
    """
    from infermeter.analysis import stacks as stack_module

    for key, record in stack_module.EAGER_RELEASES.items():
        train = [
            e
            for e in entries
            if e["stack"] == key
            and e["split"] == "fit"
            and stack_module.eager_release(key, release_of(e)) is not None
        ]
        found = []
        for e in train:
            meas, lo, hi = measured_seconds(e), 0.0, 1e-3
            try:
                for _ in range(40):
                    mid = (lo + hi) / 2
                    stack_module.EAGER_RELEASES[key] = replace(record, op_seconds=mid)
                    if predicted(e, STACKS[key])[0] < meas:
                        lo = mid  # too fast: more host time
                    else:
                        hi = mid
            finally:
                stack_module.EAGER_RELEASES[key] = record
            print(f"  {e['id']:48} {release_of(e)}: {lo * 1e6:.1f} us per kernel")
            found.append(lo)
        if found:
            print(f"{key} before {record.graphs_since}: {statistics.median(found) * 1e6:.1f} us")


def fit(entries: list[dict[str, Any]]) -> None:
    """Print, per stack with fit entries, the grid point of least loss on them.

    Also one set of engine constants fitted on every engine's fit entries at once: the
    constants of the engines no source was fitted on.
    """
    from infermeter.analysis.stacks import eager_release

    # an engine's eager-era figures fit its eager host time only (`fit_eager`)
    entries = [e for e in entries if eager_release(e["stack"], release_of(e)) is None]
    groups = {
        k: [e for e in entries if e["stack"] == k and e["split"] == "fit"]
        for k in sorted({e["stack"] for e in entries})
    }
    # the generate loop's host constants are shared by hf and hf-fa2: fitted on both at once
    groups["hf"] = [e for e in entries if e["stack"] in ("hf", "hf-fa2") and e["split"] == "fit"]
    groups["engines (pooled)"] = [
        e for e in entries if e["stack"] in ENGINES and e["split"] == "fit"
    ]
    for key, train in groups.items():
        if not train:
            continue
        grid = GRIDS.get(key, GRIDS["engine"])
        _, params = _best(train, grid)
        stacks = {k: replace(STACKS[k], **params) for k in {e["stack"] for e in train}}
        errs = [abs(r["error_pct"]) for r in evaluate(train, stacks)]
        med = statistics.median(errs)
        print(
            f"{key}: {len(train)} fit entries, best {params}, median {med:.1f}% "
            f"max {max(errs):.1f}%"
        )


CALIBRATION = (
    Path(__file__).resolve().parents[1] / "src/infermeter/analysis/data/prediction_errors.json"
)


def _model_type(hub_id: str) -> str:
    path = HERE / "models" / (hub_id.replace("/", "--") + ".json")
    config = json.loads(path.read_text())
    return str(config.get("model_type") or (config.get("text_config") or {}).get("model_type"))


def _log_errors(rows: list[dict[str, Any]]) -> list[float]:
    return [math.log(r["measured_s"] / r["predicted_s"]) for r in rows]


def coverage(rows: list[dict[str, Any]]) -> list[tuple[str, int, int, int, int]]:
    """Per stack group: held-out rows, sources, rows judged and rows inside their interval.

    Honest: each source's rows are judged by intervals built from the other held-out
    sources' errors only (leave one source out), never from their own.
    """
    from infermeter.analysis.intervals import leave_one_source_out, stack_group

    held = [r for r in rows if r["split"] == "held-out"]
    out = []
    for g in sorted({stack_group(r["stack"]) for r in held}):
        mine = [r for r in held if stack_group(r["stack"]) == g]
        errs = [
            {"source": r["source"], "log_error": e}
            for r, e in zip(mine, _log_errors(mine), strict=True)
        ]
        inside, judged = leave_one_source_out(errs)
        out.append((g, len(mine), len({r["source"] for r in mine}), judged, inside))
    return out


def write_intervals(rows: list[dict[str, Any]]) -> None:
    """The held-out log errors per stack group and the scope of every published row."""
    from infermeter.analysis.intervals import stack_group

    held = [r for r in rows if r["split"] == "held-out"]
    groups = {}
    for g in sorted({stack_group(r["stack"]) for r in held}):
        mine = [r for r in held if stack_group(r["stack"]) == g]
        groups[g] = [
            {"id": r["id"], "source": r["source"], "log_error": round(e, 6)}
            for r, e in zip(mine, _log_errors(mine), strict=True)
        ]
    rows = [r for r in rows if r["split"] in ("fit", "held-out")]
    scope = {
        "stacks": sorted({r["stack"] for r in rows}),
        "hardware": sorted({r["hardware"] for r in rows}),
        "dtypes": sorted({r["dtype"] for r in rows}),
        "model_types": sorted({_model_type(r["model"]) for r in rows}),
        "max_batch": max(int(r["batch"]) for r in rows),
        "max_prompt_tokens": max(int(r["prompt_tokens"]) for r in rows),
        "max_new_tokens": max(int(r["new_tokens"]) for r in rows),
    }
    import datetime

    doc = {
        "written": datetime.date.today().isoformat(),
        "by": "benchmarks/predict_published.py --write-intervals",
        "what": "log(measured / predicted) of each held-out published figure, per stack group "
        "(sources the constants were never fitted on); scope: every published row",
        "groups": groups,
        "scope": scope,
    }
    if CALIBRATION.exists():  # the memory errors are benchmarks/predict_memory.py's to write
        kept = json.loads(CALIBRATION.read_text()).get("memory")
        if kept is not None:
            doc["memory"] = kept
    CALIBRATION.parent.mkdir(parents=True, exist_ok=True)
    CALIBRATION.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {CALIBRATION}")


def fit_memory(entries: list[dict[str, Any]], key: str) -> dict[str, float]:
    """Per memory class, the bandwidth efficiency that meets `key`'s decode fit figures.

    Each fit entry of the stack measured as decode tokens/s (a bandwidth-bound step) gets the
    efficiency that makes its prediction equal its figure (bisection, the stack's other
    constants as they are); a class's value is the median of its entries'. Held-out entries
    are never read here.
    """
    from infermeter.measure.ceilings import MEMORY_TYPE_KEY, memory_class

    found: dict[str, list[float]] = {}
    for e in entries:
        if e["stack"] != key or e["split"] != "fit" or e["metric"] != "decode_tok_s_per_seq":
            continue
        ceilings = spec_by_key(e["hardware"])
        cls = memory_class(ceilings.details.get(MEMORY_TYPE_KEY)) if ceilings else None
        if cls is None:
            continue
        meas = measured_seconds(e)
        lo, hi = 0.05, 1.0
        for _ in range(40):
            mid = (lo + hi) / 2
            stack = replace(STACKS[key], bandwidth_by_memory=((cls, mid),))
            if predicted(e, stack)[0] > meas:
                lo = mid  # too slow: more efficiency
            else:
                hi = mid
        print(f"  {e['id']:48} {cls:5} {e['hardware']:12} efficiency {lo:.3f}")
        found.setdefault(cls, []).append(lo)
    out = {cls: statistics.median(v) for cls, v in found.items()}
    for cls, v in sorted(out.items()):
        print(f"{key} on {cls}: {v:.3f} (median of {len(found[cls])} fit figures)")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fit", action="store_true", help="grid-search constants on fit sources")
    ap.add_argument("--json", type=Path, help="write every row here")
    ap.add_argument(
        "--fit-memory",
        metavar="STACK",
        help="the stack's bandwidth efficiency per memory class from its fit figures",
    )
    ap.add_argument(
        "--write-intervals",
        action="store_true",
        help="write the held-out errors and scope predict's intervals come from",
    )
    args = ap.parse_args()
    entries = json.loads((HERE / "measurements.json").read_text())
    if args.fit:
        fit(entries)
        fit_eager(entries)
        return 0
    if args.fit_memory:
        fit_memory(entries, args.fit_memory)
        return 0
    rows = evaluate(entries, STACKS)
    print(
        f"{'id':34} {'stack':13} {'split':8} {'gpu':10} {'b':>4} {'in':>6} {'out':>5} "
        f"{'metric':24} {'measured':>10} {'predicted':>10} {'error':>7}"
    )
    for r in rows:
        print(
            f"{r['id'][:34]:34} {r['stack']:13} {r['split']:8} {r['hardware']:10} "
            f"{r['batch']:>4} {r['prompt_tokens']:>6} {r['new_tokens']:>5} {r['metric']:24} "
            f"{r['measured_s']:>10.4g} {r['predicted_s']:>10.4g} {r['error_pct']:>+6.1f}%"
        )
    sources = {r["source"] for r in rows}
    print(
        f"\n{len(rows)} measurements from {len(sources)} sources (seconds on each figure's "
        "time basis)\n"
    )
    print(f"{'stack group':16} {'split':9} {'n':>3} {'median |err|':>13} {'max |err|':>10}")
    for g, split, n, med, mx in summary(rows):
        print(f"{g:16} {split:9} {n:>3} {med:>12.1f}% {mx:>9.1f}%")
    below = [r for r in rows if r["predicted_s"] < r["floor_s"] * (1 - 1e-9)]
    print(f"\npredictions below their roofline floor: {len(below)}")
    for r in below:
        print(f"  {r['id']}: {r['predicted_s']:.4g} s < floor {r['floor_s']:.4g} s")
    under = [r for r in rows if r["measured_s"] < r["floor_s"] * (1 - 1e-9)]
    print(f"measurements below the roofline floor (misread data?): {len(under)}")
    for r in under:
        print(f"  {r['id']}: measured {r['measured_s']:.4g} s < floor {r['floor_s']:.4g} s")
    print("\n90% intervals, one held-out source left out at a time (coverage on its rows):")
    print(f"{'stack group':16} {'n':>3} {'sources':>7} {'judged':>6} {'inside':>6} {'coverage':>9}")
    for g, n, k, judged, inside in coverage(rows):
        print(f"{g:16} {n:>3} {k:>7} {judged:>6} {inside:>6} {inside / max(judged, 1):>8.0%}")
    if args.write_intervals:
        write_intervals(rows)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
