"""The time model's GPU work held against an H100's own kernels (recorded on a loan).

tests/bench/data/h100/generate_steps/steps.jsonl holds eager `generate` decode steps that
benchmarks/gpu_generate_steps.py measured on an H100 under transformers 4.46.3 and 5.17: the
step, the GPU's busy time per step (torch.profiler) and the kernels launched. These tests
read that file with today's code; no GPU is needed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infermeter.analysis.timemodel import (
    Work,
    attention_path,
    device_model,
    forward_time,
)
from infermeter.measure.ceilings import spec_by_key
from infermeter.models.config_only import config_of
from infermeter.models.opcount import count_ops_of_config
from infermeter.models.shape import shape_of

ROOT = Path(__file__).resolve().parents[2]
PUBLISHED = ROOT / "benchmarks" / "published"
RECORDED = ROOT / "tests" / "bench" / "data" / "h100" / "generate_steps" / "steps.jsonl"
OP_COUNTS = json.loads((PUBLISHED / "op_counts.json").read_text())


def _rows() -> list[dict]:
    return [json.loads(line) for line in RECORDED.read_text().splitlines() if line.strip()]


def _config(row: dict):
    config, _ = config_of(str(PUBLISHED / "models" / f"{row['model']}.json"))
    return config


def _counts(row: dict, config) -> dict:
    """The row's release's counts where op_counts.json has them, else counted here."""
    hub = row["model"].replace("--", "/", 1)
    if row["attn"] == "sdpa" and hub in OP_COUNTS.get(row["transformers"], {}):
        return {**OP_COUNTS[row["transformers"]][hub], "transformers": row["transformers"]}
    config._attn_implementation = row["attn"]
    counted = count_ops_of_config(config, row["dtype"])
    assert counted is not None
    return {**counted, "transformers": row["transformers"]}


def _gpu_work_ms(row: dict, counts: dict | None = None) -> float:
    config = _config(row)
    counts = counts if counts is not None else _counts(row, config)
    dev = device_model(spec_by_key("h100-sxm"), "bfloat16", "hf")
    w = Work(
        batch=row["batch"],
        tokens=1,
        context=row["prompt_tokens"] + row["new_tokens"] // 2,
        dtype_bytes=2,
    )
    ft = forward_time(shape_of(config), dev, w, "decode", counts)
    return (ft.gemm_s + ft.attention_s + ft.elementwise_s) * 1e3


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    return _rows()


def test_the_recording_is_whole_and_says_what_ran(rows):
    assert len(rows) == 21
    assert {r["gpu"] for r in rows} == {"NVIDIA H100 80GB HBM3"}
    assert {r["transformers"] for r in rows} == {"4.46.3", "5.17.0"}
    for r in rows:
        assert 0 < r["gpu_busy_ms_per_step"] < r["decode_step_ms"], r
        assert r["kernels_per_step"] > 1000, r


def test_predicted_gpu_work_is_within_15_percent_of_every_measured_step(rows):
    """The GPU part of the step alone (the host, a noisy VM there, aside): GEMMs, attention,
    element-wise bytes and each small operation's device time, against the GPU's busy time.
    The per-operation device time was read off these rows at batch 1, so the batches above
    1 are the test (the KV cache's reads and copies growing with the batch)."""
    errors = {
        (r["transformers"], r["model"], r["attn"], r["batch"], r["process"]): (
            _gpu_work_ms(r) / r["gpu_busy_ms_per_step"] - 1
        )
        for r in rows
    }
    assert max(abs(e) for e in errors.values()) < 0.15, errors


def test_keys_copied_to_every_query_head_grow_the_step_as_the_h100_measured(rows):
    """transformers 4.46.3 copies a grouped-query model's keys and values out to every query
    head before SDPA (`repeat_kv`); 5.17 hands SDPA the grouped cache. The H100 measured
    Llama-3.1-8B's GPU time growing 3.0 ms from batch 1 to 32 under 4.46.3 and 1.4 ms under
    5.17; the model, which learns the copy from the heads the counted kernel was handed,
    predicts the same order (without the copy both releases would grow alike)."""

    def growth(release: str) -> tuple[float, float]:
        pick = [
            r
            for r in rows
            if r["model"] == "meta-llama--Llama-3.1-8B"
            and r["transformers"] == release
            and r["process"] in (1, 2)
        ]
        by_batch = {r["batch"]: r for r in pick}
        measured = by_batch[32]["gpu_busy_ms_per_step"] - by_batch[1]["gpu_busy_ms_per_step"]
        model = _gpu_work_ms(by_batch[32]) - _gpu_work_ms(by_batch[1])
        return measured, model

    old_measured, old_model = growth("4.46.3")
    new_measured, new_model = growth("5.17.0")
    assert old_measured > 2 * new_measured
    assert old_model > 2 * new_model
    assert old_model == pytest.approx(old_measured, rel=0.35)
    counts_446 = {**OP_COUNTS["4.46.3"]["meta-llama/Llama-3.1-8B"], "transformers": "4.46.3"}
    assert attention_path(counts_446, "decode").keys_copied
    assert not attention_path(counts_446, "decode", "hf-fa2").keys_copied


def test_eager_attention_after_sdpa_became_the_default_runs_at_sdpas_rate(rows):
    """Llama-2-13B at batch 16, 512 + 64 tokens: eager and SDPA decode steps took the same
    GPU time under 4.46.3 (21.27 and 21.15 ms), so eager attention's slow read (fitted to
    optimum's 2023 A100 sweep, transformers 4.32) is charged only to releases before 4.36."""
    by = {
        (r["attn"], r["batch"]): r
        for r in rows
        if r["model"] == "meta-llama--Llama-2-13b-hf" and r["transformers"] == "4.46.3"
    }
    eager, sdpa = by[("eager", 16)], by[("sdpa", 16)]
    assert eager["gpu_busy_ms_per_step"] == pytest.approx(sdpa["gpu_busy_ms_per_step"], rel=0.02)
    config = _config(eager)
    counts = _counts(eager, config)
    assert attention_path(counts, "decode").eager
    assert not attention_path(counts, "decode").eager_slow
    as_in_2023 = {**counts, "transformers": "4.32.0"}
    assert attention_path(as_in_2023, "decode").eager_slow
    today = _gpu_work_ms(eager, counts)
    assert today == pytest.approx(_gpu_work_ms(sdpa), rel=0.1)
    assert _gpu_work_ms(eager, as_in_2023) > today + 5  # 12% of bandwidth: ms more a step


def test_predict_says_where_keys_are_copied_and_where_eager_attention_is_slow():
    """The notes beside each batch name what the counted forward did: keys copied out to
    every query head under 4.46.3, eager attention read slowly only for a release before
    SDPA became the default, and a launch-bound step in operations (not kernels: about 60%
    of the operations launch one, 1,545 kernels for 2,560 operations on the H100)."""
    from infermeter.analysis.predict import Learned, Workload, predict
    from infermeter.models.loader import estimate_params

    def notes(model: str, release: str, hub: str, batch: int) -> list[str]:
        config, _ = config_of(str(PUBLISHED / "models" / f"{model}.json"))
        counts = {**OP_COUNTS[release][hub], "transformers": release}
        dev = device_model(spec_by_key("h100-sxm"), "bfloat16", "hf")
        w = Workload((batch,), 64, 100, "bfloat16")
        doc = predict(shape_of(config), estimate_params(config), dev, w, counts, Learned())
        return doc["rows"][0]["notes"]

    llama = notes("meta-llama--Llama-3.1-8B", "4.46.3", "meta-llama/Llama-3.1-8B", 32)
    assert any("copied out to all 32 query heads from 8" in n for n in llama), llama
    assert any("launch-bound: 2,560 operations x 11 us" in n for n in llama), llama
    assert not any("attention runs as matmuls" in n for n in llama)
    bloom = notes("bigscience--bloom", "4.21.3", "bigscience/bloom", 1)
    assert any("eager, transformers 4.21.3" in n and "12% of bandwidth" in n for n in bloom)
