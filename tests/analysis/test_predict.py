"""`predict`: memory fit, the time model through efficiency curves, learning from runs, the CLI."""

from __future__ import annotations

import math

import pytest
from typer.testing import CliRunner

from infermeter.analysis.predict import (
    Learned,
    Workload,
    learn_from_runs,
    memory_fit,
    predict,
    sequence_kv_bytes,
)
from infermeter.analysis.timemodel import DeviceModel, ForwardTime, Work, forward_time
from infermeter.cli.app import app
from infermeter.measure.ceilings import SPECS, hardware_keys
from infermeter.measure.curves import Curves
from infermeter.models.presets import PRESETS, build_config
from infermeter.models.shape import shape_of
from infermeter.models.tokenizer import builtin_tokenizer
from tests.helpers import assert_one_line_error

runner = CliRunner()


@pytest.fixture(scope="module")
def llama_shape():
    return shape_of(build_config(PRESETS["tiny-llama"], builtin_tokenizer()))


def test_memory_fit_of_a_known_shape_equals_the_hand_computation(llama_shape):
    s = llama_shape  # 4 layers, 2 KV heads of 64 dims
    params = 1_000_000
    fit = memory_fit(
        s, params, "bfloat16", batch=3, prompt=100, new=28, tp=1, capacity=1e9, runtime=5e6
    )
    assert fit.weights_bytes == params * 2
    # keys and values x layers x kv heads x head dim x bytes x tokens x batch
    assert fit.kv_cache_bytes == 2 * 4 * 2 * 64 * 2 * 128 * 3
    assert fit.free_bytes == 1e9 - fit.total_bytes
    # tensor parallelism splits weights and KV heads (2 heads over 4 GPUs: one each)
    split = memory_fit(s, params, "bfloat16", 3, 100, 28, tp=4, capacity=1e9, runtime=0)
    assert split.weights_bytes == params * 2 / 4
    assert split.kv_cache_bytes == 2 * 4 * 1 * 64 * 2 * 128 * 3


def test_sliding_windows_cap_the_kv_cache():
    s = shape_of(build_config(PRESETS["tiny-gemma3-vlm"], builtin_tokenizer()))
    windows = [lay.window for lay in s.census.layers]
    assert any(windows), "tiny-gemma3 has sliding layers"
    long, short = sequence_kv_bytes(s, 2, 1, 100_000), sequence_kv_bytes(s, 2, 1, 100)
    assert long < 1000 * short  # the sliding layers stop growing


def _synthetic_curves(shape, per_flop_s=1e-9, call_s=1e-5, op_s=2e-6):
    """Exact curves: a GEMM costs call_s + 2 rows k n x per_flop_s at every width measured."""
    widths = {tuple(x) for lay in shape.census.layers for x in lay.linear_shapes}
    widths.add((shape.hidden, shape.census.lm_head_macs // shape.hidden))
    rows = [1, 2, 4, 8, 16, 32, 64, 128, 256]
    gemm = [
        {
            "k": k,
            "n": n,
            "rows": rows,
            "seconds": [call_s + 2 * r * k * n * per_flop_s for r in rows],
        }
        for k, n in widths
    ]
    return Curves(
        dtype="float32",
        gemm=gemm,
        copy={"bytes": [1e3, 1e9], "seconds": [1e3 / 1e10, 1e9 / 1e10]},  # 10 GB/s flat
        attention={
            "heads": 4,
            "head_dim": 64,
            "prefill": {"tokens": [1, 1024], "seconds": [1e-4, 1e-4 * 1024]},
            "decode": {"keys": [1, 1024], "seconds": [1e-5, 1e-5 * 1024]},
        },
        op_seconds=op_s,
        generate_first_seconds=1e-3,
        generate_step_seconds=5e-4,
    )


def test_prediction_with_a_synthetic_curve_equals_the_hand_computed_time(llama_shape):
    s = llama_shape
    c = _synthetic_curves(s)
    dev = DeviceModel(
        "synthetic",
        "cpu",
        None,
        None,
        curves=c,
        op_seconds=c.op_seconds,
        generate_first_seconds=1e-3,
        generate_step_seconds=5e-4,
    )
    counts = {
        "prefill": {"gemm": 29, "attention": 4, "other": 300},
        "decode": {"gemm": 29, "attention": 4, "other": 250},
    }
    t = forward_time(s, dev, Work(batch=2, tokens=16), "prefill", counts)
    rows = 2 * 16
    linears = [x for lay in s.census.layers for x in lay.linear_shapes]
    gemm = sum(1e-5 + 2 * rows * k * n * 1e-9 for k, n in linears)
    head_n = s.census.lm_head_macs // s.hidden
    gemm += 1e-5 + 2 * 2 * s.hidden * head_n * 1e-9  # logits of the last position per row
    assert t.gemm_s == pytest.approx(gemm, rel=1e-9)
    # attention: 4 layers x the prefill curve at 16 tokens, scaled by batch x heads x dim
    assert t.attention_s == pytest.approx(4 * 1e-4 * 16 * 2 * (4 * 64) / (4 * 64), rel=1e-9)
    assert t.overhead_s == pytest.approx(300 * 2e-6)
    assert t.generate_s == 1e-3
    assert t.total_s == pytest.approx(t.gemm_s + t.attention_s + t.elementwise_s + 600e-6 + 1e-3)
    # a decode step: one row each, the decode curve at its keys, decode's operations
    d = forward_time(s, dev, Work(batch=1, tokens=1, context=99), "decode", counts)
    assert d.attention_s == pytest.approx(4 * 1e-5 * 100, rel=1e-9)
    assert d.overhead_s == pytest.approx(250 * 2e-6)


def test_the_dynamic_cache_is_copied_from_memory_and_faults_above_the_mmap_threshold(
    llama_shape, monkeypatch
):
    """transformers' dynamic cache re-copies each layer's keys and values every step
    (`torch.cat`). On a calibrated CPU the copy runs at the bandwidth of the largest copy
    measured (the cache is cold: a whole step since it was touched), and a tensor grown past
    glibc's mmap threshold (32 MiB, or the environment's) is mapped afresh: every page of it
    faults at the calibrated cost. A prefill from nothing and a cache written in place pay
    neither."""
    from dataclasses import replace

    from infermeter.analysis.timemodel import cache_fault_seconds, cache_seconds

    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    s = llama_shape  # 4 layers, 2 KV heads of 64 dims: 512 bytes a position in float32
    # warm copies at 100 GB/s, a copy from memory (the largest size) at 10 GB/s
    c = replace(
        _synthetic_curves(s),
        copy={"bytes": [1e3, 1e6, 1e9], "seconds": [1e-8, 1e-5, 1e-1]},
        page_fault_seconds=2e-6,
    )

    def device(curves):
        return DeviceModel("synthetic", "cpu", None, None, curves=curves, op_seconds=2e-6)

    dev = device(c)
    small = Work(batch=16, tokens=1, context=255)  # 2 MiB a tensor: below the threshold
    per_tensor = 16 * s.kv_heads * s.head_dim * 4
    moved = 4 * 2 * per_tensor * (2 * 255 + 2)  # layers x (K, V) x (read + write + new)
    assert cache_seconds(s, dev, small, s.layers) == (pytest.approx(moved / 1e10), 0.0)
    assert cache_fault_seconds(s, dev, small, s.layers) == 0.0

    big = Work(batch=16, tokens=1, context=4200)  # 33.6 MB a tensor: above 32 MiB
    pages = 4 * 2 * -(-(per_tensor * 4201) // 4096)
    assert cache_fault_seconds(s, dev, big, s.layers) == pytest.approx(pages * 2e-6)
    copy_s, passes_left = cache_seconds(s, dev, big, s.layers)
    assert passes_left == 0 and copy_s > pages * 2e-6
    # the allocator fix in the environment: nothing mapped afresh, nothing predicted
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", str(2**32))
    assert cache_fault_seconds(s, dev, big, s.layers) == 0.0
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_")
    assert cache_fault_seconds(s, dev, Work(batch=16, tokens=4200), s.layers) == 0.0
    in_place = replace(dev, cache_passes=0.0)
    assert cache_fault_seconds(s, in_place, big, s.layers) == 0.0
    gpu = replace(dev, kind="gpu")  # its cache is in the CUDA allocator's memory: no faults
    assert cache_fault_seconds(s, gpu, big, s.layers) == 0.0
    assert cache_seconds(s, in_place, big, s.layers) == (0.0, 0.0)
    # uncalibrated (a spec device): the stack's passes go back to the element-wise bytes
    assert cache_seconds(s, device(None), big, s.layers) == (0.0, 2.0)
    # and the step's time carries it all
    counts = {"decode": {"gemm": 29, "attention": 4, "other": 250}}
    t_big = forward_time(s, dev, big, "decode", counts)
    t_free = forward_time(s, device(replace(c, page_fault_seconds=0.0)), big, "decode", counts)
    assert t_big.elementwise_s - t_free.elementwise_s == pytest.approx(pages * 2e-6)
    assert t_big.page_fault_s == pytest.approx(pages * 2e-6) and t_free.page_fault_s == 0
    # predict says what the faults cost and how to be rid of them, beside the batch
    from infermeter.analysis.predict import Learned, Workload, predict

    w = Workload((16, 1), 4200, 4, "float32")
    rows = predict(s, 1_000_000, dev, w, counts, Learned())["rows"]
    (note,) = [n for n in rows[0]["notes"] if "page faults" in n]
    assert "32 MiB mmap threshold" in note and "MALLOC_MMAP_THRESHOLD_" in note
    assert not any("page faults" in n for n in rows[1]["notes"])  # batch 1: 2.1 MB a tensor


def test_a_spec_gpu_is_the_roofline_at_default_efficiencies(llama_shape):
    s = llama_shape
    dev = DeviceModel(
        "gpu",
        "gpu",
        100e12,
        1e12,
        op_seconds=0.0,
        generate_first_seconds=0.0,
        generate_step_seconds=0.0,
    )
    t = forward_time(s, dev, Work(batch=1, tokens=1, context=0, dtype_bytes=2), "decode", None)
    assert t.bound == "memory"
    assert t.memory_bound_s < t.total_s < 2 * t.memory_bound_s / dev.bandwidth_efficiency


def test_learning_recovers_the_work_and_host_factors():
    pts = []
    for g, o in [(1e-3, 1e-3), (5e-3, 1e-3), (1e-2, 2e-3), (2e-2, 1e-3), (4e-3, 4e-3)]:
        t = ForwardTime(gemm_s=g, overhead_s=o)
        pts.append((t, 2 * g + 3 * o))
    learned = learn_from_runs({"prefill": pts}, runs=5)
    assert learned.factors["prefill"]["work"] == pytest.approx(2)
    assert learned.factors["prefill"]["host"] == pytest.approx(3)
    assert learned.apply("prefill", ForwardTime(gemm_s=1, overhead_s=1)) == pytest.approx(5)
    # on a GPU with the host hidden entirely under device work: the slower of the two
    hidden = ForwardTime(gemm_s=1, overhead_s=1, overlap=1.0)
    assert learned.apply("prefill", hidden) == pytest.approx(3)
    # fewer than 4 runs: one shared scale
    few = learn_from_runs({"decode": pts[:2]}, runs=2)
    assert few.factors["decode"]["work"] == few.factors["decode"]["host"]


def test_learning_on_a_gpu_fits_through_the_overlap_it_predicts_with():
    """Host launches hidden under device work (overlap 1): the factor that makes the *combined*
    prediction match, not the parts' sum (which learnt 1.00 for a 1.25x miss on an H100)."""
    few = [
        (ForwardTime(gemm_s=8.8e-3, overhead_s=38.0e-3, overlap=1.0), 47.9e-3),
        (ForwardTime(gemm_s=136.6e-3, overhead_s=38.0e-3, overlap=1.0), 171.1e-3),
    ]
    learned = learn_from_runs({"prefill": few}, runs=2)
    for t, measured in few:
        assert learned.apply("prefill", t) == pytest.approx(measured, rel=0.02)
    # 4+ points: the two factors apart, through max(work, host) + generate
    pts = []
    for g, o in [(1e-3, 4e-3), (2e-3, 5e-3), (9e-3, 1e-3), (12e-3, 2e-3), (3e-3, 6e-3)]:
        t = ForwardTime(gemm_s=g, overhead_s=o, generate_s=1e-4, overlap=1.0)
        pts.append((t, max(1.5 * g, 2.5 * o) + 2.5e-4))
    many = learn_from_runs({"decode": pts}, runs=5)
    assert many.factors["decode"]["work"] == pytest.approx(1.5, rel=1e-3)
    assert many.factors["decode"]["host"] == pytest.approx(2.5, rel=1e-3)


def test_every_shape_preset_predicts_on_every_spec_entry():
    from infermeter.analysis.timemodel import device_model
    from infermeter.models.loader import estimate_params

    tok = builtin_tokenizer()
    specs = [ceil for _, _, ceil in SPECS]
    w = Workload((1, 8), 512, 32, "float32")
    for name, preset in PRESETS.items():
        if preset.kind != "shape":
            continue
        config = build_config(preset, tok)
        shape, params = shape_of(config), estimate_params(config)
        for ceil in specs:
            doc = predict(shape, params, device_model(ceil, "float32"), w, None, Learned())
            for row in doc["rows"]:
                assert 0 < row["ttft_ms"] < math.inf and 0 < row["tpot_ms"] < math.inf, name
                assert row["memory"]["weights_bytes"] == params * 4
            assert doc["largest_batch"] is not None


def test_predict_refuses_unknown_hardware_with_the_known_list(tmp_path):
    r = runner.invoke(app, ["predict", "--hardware", "tpu-v9", "--db", str(tmp_path / "p.db")])
    assert_one_line_error(r, "unknown hardware 'tpu-v9'", *hardware_keys())


def test_cpu_this_without_a_calibration_says_to_calibrate(tmp_path):
    r = runner.invoke(app, ["predict", "--hardware", "cpu-this", "--db", str(tmp_path / "p.db")])
    assert_one_line_error(r, "infermeter calibrate")


def test_a_model_that_cannot_fit_says_by_how_much(tmp_path):
    r = runner.invoke(
        app,
        [
            "predict",
            "-m",
            "llama-3.1-70b",
            "--hardware",
            "l4",
            "--batch",
            "1",
            "--prompt-tokens",
            "4096",
            "--new-tokens",
            "256",
            "--json",
            "--db",
            str(tmp_path / "p.db"),
        ],
    )
    assert r.exit_code == 0, r.output
    import json

    doc = json.loads(r.stdout)
    mem = doc["rows"][0]["memory"]
    assert mem["fits"] is False and doc["largest_batch"] == 0
    # 70.55 B bf16 parameters = 141 GB of weights on a 24 GB card: short by over 117 GB
    assert -mem["free_bytes"] > 117e9
    r = runner.invoke(
        app,
        [
            "predict",
            "-m",
            "llama-3.1-70b",
            "--hardware",
            "l4",
            "--batch",
            "1",
            "--db",
            str(tmp_path / "p.db"),
        ],
    )
    assert "batch 1 does not fit: short by" in r.stdout


def test_two_h100s_in_tensor_parallel_split_the_70b_and_pay_for_all_reduces(tmp_path):
    import json

    args = [
        "predict",
        "-m",
        "llama-3.1-70b",
        "--hardware",
        "h100-sxm",
        "--batch",
        "1,8",
        "--prompt-tokens",
        "4096",
        "--new-tokens",
        "256",
        "--json",
        "--db",
        str(tmp_path / "p.db"),
    ]
    one = json.loads(runner.invoke(app, args).stdout)
    two = json.loads(runner.invoke(app, [*args, "--gpus", "2", "--tp", "2"]).stdout)
    assert one["rows"][0]["memory"]["fits"] is False  # 141 GB of weights on one 80 GB GPU
    assert two["rows"][0]["memory"]["fits"] is True
    assert two["rows"][0]["memory"]["weights_bytes"] == pytest.approx(one["params"] * 2 / 2)
    assert two["rows"][0]["decode"]["comm_s"] > 0 and one["rows"][0]["decode"]["comm_s"] == 0
    # each GPU's device work halves; eager HF at batch 1 is launch-bound, so its TPOT does not
    assert two["rows"][0]["decode"]["gemm_s"] < 0.6 * one["rows"][0]["decode"]["gemm_s"]
    assert two["rows"][0]["tpot_ms"] <= one["rows"][0]["tpot_ms"] * (1 + 1e-9)
    # an engine replaying CUDA graphs is not launch-bound: tensor parallelism pays off
    one_v = json.loads(runner.invoke(app, [*args, "--stack", "vllm"]).stdout)
    two_v = json.loads(
        runner.invoke(app, [*args, "--stack", "vllm", "--gpus", "2", "--tp", "2"]).stdout
    )
    assert two_v["rows"][0]["tpot_ms"] < 0.75 * one_v["rows"][0]["tpot_ms"]
    assert two["hardware"]["efficiency"] == "datasheet peak x the hf stack's efficiencies"
    assert two["stack"]["key"] == "hf"


def test_bad_parallelism_and_top_k_are_one_line_errors(tmp_path):
    db = ["--db", str(tmp_path / "p.db")]
    r = runner.invoke(app, ["predict", "--hardware", "h100-sxm", "--gpus", "3", "--tp", "2", *db])
    assert_one_line_error(r, "--gpus 3 is not a multiple of --tp 2")
    r = runner.invoke(
        app, ["predict", "-m", "tiny-qwen3-moe", "--hardware", "l4", "--top-k", "99", *db]
    )
    assert_one_line_error(r, "--top-k 99", "experts")
    r = runner.invoke(app, ["predict", "-m", "tiny-llama", "--hardware", "l4", "--top-k", "2", *db])
    assert_one_line_error(r, "dense")
    r = runner.invoke(app, ["predict", "--hardware", "l4", "--batch", "1,x", *db])
    assert_one_line_error(r, "--batch 'x'")
    r = runner.invoke(app, ["predict", "--hardware", "m2-max", "--dtype", "bfloat16", *db])
    assert_one_line_error(r, "no bfloat16 peak", "--dtype float32")


def test_a_config_json_is_predicted_without_weights(tmp_path):
    import json

    cfg = build_config(PRESETS["qwen3-0.6b"], builtin_tokenizer())
    path = tmp_path / "config.json"
    path.write_text(cfg.to_json_string())
    r = runner.invoke(
        app,
        [
            "predict",
            "-m",
            str(path),
            "--hardware",
            "a100-80gb",
            "--json",
            "--db",
            str(tmp_path / "p.db"),
        ],
    )
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["params"] == pytest.approx(0.596e9, rel=0.01)
    bad = tmp_path / "bad.json"
    bad.write_text('{"model_type": "no-such-arch"}')
    r = runner.invoke(
        app, ["predict", "-m", str(bad), "--hardware", "l4", "--db", str(tmp_path / "p.db")]
    )
    assert_one_line_error(r, "no-such-arch")


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory):
    """A database with this CPU calibrated (curves included) and two tiny-llama runs."""
    from infermeter import RunConfig, Store
    from infermeter.run.profiling import profile

    db = str(tmp_path_factory.mktemp("cal") / "p.db")
    # at tiny-llama's own widths, as a user calibrates for the model they predict (half the
    # time of the generic widths, whose 2048 x 2048 GEMMs at 4,096 rows dominate)
    r = runner.invoke(
        app, ["calibrate", "--quick", "--device", "cpu", "-m", "tiny-llama", "--db", db]
    )
    assert r.exit_code == 0, r.output
    assert "one framework operation" in r.stdout
    # glibc here: what a KV cache mapped afresh each step costs, in the calibration's words
    assert "one page fault" in r.stdout and "above 32 MiB is mapped afresh" in r.stdout
    store = Store(db)
    ids = []
    for prompt in (16, 64):
        run = profile(
            RunConfig(
                model="tiny-llama",
                prompt_tokens=prompt,
                new_tokens=4,
                samples=2,
                warmup=1,
                energy="off",
                device="cpu",
            )
        )
        store.save(run)
        ids.append(run.run_id)
    return db, ids


@pytest.mark.slow
def test_calibrated_cpu_predicts_from_curves_learns_from_runs_and_draws(tmp_path, calibrated):
    """The whole loop on this machine: calibrate, two stored runs, predict, figures."""
    import json

    from infermeter import Store

    db, _ = calibrated
    store = Store(db)
    out = tmp_path / "fig"
    r = runner.invoke(
        app,
        [
            "predict",
            "-m",
            "tiny-llama",
            "--hardware",
            "cpu-this",
            "--batch",
            "1,2",
            "--prompt-tokens",
            "32",
            "--new-tokens",
            "4",
            "--out",
            str(out),
            "--db",
            db,
        ],
    )
    assert r.exit_code == 0, r.output
    assert "efficiency: measured curves" in r.stdout
    doc = json.loads((out / "predict.json").read_text())
    assert doc["hardware"]["measured"] is True and doc["hardware"]["kind"] == "cpu"
    assert doc["learned"]["runs"] == 2 and doc["learned"]["from"] == "runs of this model"
    # the document is its type, key by key (the stored id beside it)
    from infermeter.experiments.whatif import (
        HardwareDoc,
        PredictionDoc,
        PredictionLearnedDoc,
        StackDoc,
        WorkloadDoc,
    )
    from tests.helpers import doc_keys

    assert set(doc) == doc_keys(PredictionDoc) | {"id"}
    for key, part in (
        ("hardware", HardwareDoc),
        ("stack", StackDoc),
        ("workload", WorkloadDoc),
        ("learned", PredictionLearnedDoc),
    ):
        assert set(doc[key]) == doc_keys(part), key
    for stem in ("predict_latency", "predict_memory"):
        assert (out / f"{stem}.png").stat().st_size > 10_000
        assert (out / f"{stem}.csv").read_text().count("\n") >= 2
    # the memory figure's band is the rows' memory interval, at every context length
    import csv

    band = doc["rows"][0]["memory_interval"]
    assert "no published memory figure on a cpu" in band["widened"]
    for p in csv.DictReader((out / "predict_memory.csv").open()):
        total = float(p["total_bytes"]) / 1e9
        assert float(p["total_gb_low"]) == pytest.approx(total * band["low_factor"])
        assert float(p["total_gb_high"]) == pytest.approx(total * band["high_factor"])
    # a CPU has no 8-bit tensor rate measured: W8A8 is refused, weight-only int8 predicted
    r = runner.invoke(app, ["predict", "--hardware", "cpu-this", "--dtype", "fp8-w8a8", "--db", db])
    assert_one_line_error(r, "no fp8 peak")
    r = runner.invoke(
        app,
        [
            "predict",
            "-m",
            "tiny-llama",
            "--hardware",
            "cpu-this",
            "--dtype",
            "int8",
            "--batch",
            "1",
            "--json",
            "--db",
            db,
        ],
    )
    assert r.exit_code == 0, r.output
    int8 = json.loads(r.stdout)["rows"][0]["memory"]
    assert int8["weights_bytes"] == pytest.approx(doc["rows"][0]["memory"]["weights_bytes"] / 4)
    assert store.prediction(doc["id"])["model"] == "tiny-llama"


def test_the_curves_serve_analyze_compare_and_fit(calibrated):
    """Once calibrated, analyze, compare and fit all use the curve time model."""
    import json

    from infermeter import RunConfig, Store
    from infermeter.run.sweep import SweepSpec, run_sweep

    db, (short, long) = calibrated
    r = runner.invoke(app, ["analyze", short, "--db", db, "--json"])
    assert r.exit_code == 0, r.output
    tm = json.loads(r.stdout)["time_model"]
    assert tm["learned"]["runs"] == 1  # the other run, never the analysed one itself
    assert [row["metric"] for row in tm["rows"]] == ["ttft_ms", "tpot_ms"]
    for row in tm["rows"]:
        assert row["predicted_ms"] > 0 and row["parts_ms"]["gemm"] > 0
        assert row["error_pct"] == pytest.approx(
            100 * (row["predicted_ms"] - row["measured_ms"]) / row["measured_ms"]
        )
    r = runner.invoke(app, ["analyze", short, "--db", db], terminal_width=200)
    assert r.exit_code == 0 and "time model (curves + factors learnt from 1" in r.stdout

    r = runner.invoke(app, ["compare", short, long, "--db", db, "--json"])
    assert r.exit_code == 0, r.output
    cmp = json.loads(r.stdout)
    assert cmp["prediction"] == "time model with measured curves"
    # a 64-token prompt costs more than a 16-token one: the predicted prefill speedup is < 1
    assert 0 < cmp["phases"][0]["predicted_speedup"] < 1

    base = RunConfig(model="tiny-llama", samples=1, warmup=1, new_tokens=3, energy="off")
    spec = SweepSpec(base, {"prompt_tokens": ["8", "24", "48", "96"]})
    sid = run_sweep(spec, Store(db)).sweep_id
    r = runner.invoke(app, ["fit", sid, "--db", db, "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["curves_note"] is None
    curves = doc["curves"]["prefill"]
    assert curves["model"]["kind"] == "curves" and curves["held_out"] == 1
    assert curves["model"]["coef"]["work"] > 0
    r = runner.invoke(app, ["fit", sid, "--db", db], terminal_width=200)
    assert r.exit_code == 0 and "prefill: curves, ms =" in r.stdout


def test_a_measured_dip_in_a_curve_is_read_as_noise():
    """A 16-row GEMM measured slower than the 64-row one (a busy machine) made `compare`
    predict a 64-token prompt 6.7x faster than a 16-token one: times never fall with size."""
    from infermeter.measure.curves import Curves

    c = Curves(
        "float32",
        gemm=[{"k": 64, "n": 64, "rows": [1, 16, 64, 256], "seconds": [1e-4, 5e-4, 3e-4, 9e-4]}],
        copy={"bytes": [1e3, 1e6, 1e9], "seconds": [1e-6, 2e-3, 1e-3]},
    )
    rows = [1, 8, 16, 32, 64, 128, 256, 1024]
    times = [c.gemm_seconds(r, 64, 64) for r in rows]
    assert all(b >= a * (1 - 1e-12) for a, b in zip(times, times[1:], strict=False)), times
    assert c.gemm_seconds(64, 64, 64) == pytest.approx(5e-4)  # held at the 16-row time
    assert c.gemm_seconds(256, 64, 64) == pytest.approx(9e-4)  # a real rise is kept
    assert c.copy_seconds(1e9) == pytest.approx(c.copy_seconds(1e6))


def test_load_predict_learns_from_a_stored_load_and_simulates_rates(tmp_path, calibrated):
    """`load --predict` (issue 34, item 4): a real load stored, then the same loop predicted
    from its steps, then a rate sweep with SLOs, the capacity search and the figures."""
    import json

    db, _ = calibrated
    shape = [
        "-m",
        "tiny-llama",
        "--requests",
        "8",
        "--prompt-tokens",
        "32",
        "--new-tokens",
        "16",
        "--energy",
        "off",
        "--db",
        db,
        "--json",
    ]
    r = runner.invoke(app, ["load", "--concurrency", "4", *shape])
    assert r.exit_code == 0, r.output
    measured = json.loads(r.stdout)["summary"]
    r = runner.invoke(app, ["load", "--predict", "--concurrency", "4", *shape])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    sm = doc["step_model"]
    assert sm["steps"] >= 20 and "this model's" in sm["learnt_from"]
    assert sm["fit_error_pct_p50"] is not None and doc["approximate"] == []
    (p,) = doc["points"]
    assert doc["workload"]["requests"] == 8 and p["throughput_rps"] > 0
    from infermeter.analysis.stepcost import StepFactorsDoc
    from infermeter.experiments.load_whatif import (
        LoadPredictionDoc,
        PredictedPointDoc,
        SchedulerDoc,
    )
    from infermeter.run.load_docs import LoadSpecDoc
    from tests.helpers import assert_rows_are, doc_keys

    assert set(doc) == doc_keys(LoadPredictionDoc) | {"id"}
    assert_rows_are(doc["points"], PredictedPointDoc)
    assert set(doc["scheduler"]) == doc_keys(SchedulerDoc)
    assert set(doc["step_model"]) == doc_keys(StepFactorsDoc)
    assert set(doc["workload"]) == doc_keys(LoadSpecDoc) - {"imported_from"}
    assert {"steps", "interval", "tpot_ms_p50_interval"} <= set(p)
    # the loop it learnt from, predicted: a units or wiring slip would be 1000x, not 2x
    for m in ("tpot_ms_p50", "e2e_ms_p50"):
        ratio = p[m] / measured[m.rsplit("_", 1)[0]]["p50"]
        assert 0.5 < ratio < 2, (m, ratio)

    out = tmp_path / "lp"
    r = runner.invoke(
        app,
        [
            "load",
            "--predict",
            "-m",
            "tiny-llama",
            "--rate",
            "0.2,2,4000",
            "--requests",
            "48",
            "--slo",
            "e2e_ms=400",
            "--out",
            str(out),
            "--db",
            db,
        ],
        terminal_width=200,
    )
    assert r.exit_code == 0, r.output
    assert "predicted load: tiny-llama" in r.stdout and "stored as prediction" in r.stdout
    doc = json.loads((out / "load_prediction.json").read_text())
    rates = [p["rate"] for p in doc["points"]]
    assert rates == [0.2, 2, 4000]
    ttft = [p["ttft_ms_p99"] for p in doc["points"]]
    # 4000 req/s is all 48 at once and queues; 0.2 req/s (5 s apart) finds the server idle
    # however slow a loaded machine made the learnt steps. The middle rate's place is not
    # given: a CI run learnt steps slow enough that 20 req/s queued too (562 ms against 908 at
    # 400), and a request that finds the server idle pays the learnt after-idle cost (another
    # predicted 16.2 ms at 2 req/s and 15.6 at 20). How much the burst queues depends on the
    # prefill's learnt cost per token: 26x the idle TTFT here (24 requests), 2.0x in a full
    # suite run whose learnt prefill was nearly flat in its tokens
    assert ttft[2] > 1.5 * ttft[0]
    assert ttft[2] >= 0.9 * ttft[1]
    assert (out / "latency_vs_throughput.png").stat().st_size > 10_000
    r = runner.invoke(
        app,
        [
            "load",
            "--predict",
            "-m",
            "tiny-llama",
            "--rate",
            "5",
            "--find-max-rate",
            "--slo",
            "e2e_ms=400",
            "--requests",
            "32",
            "--db",
            db,
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    cap = json.loads(r.stdout)["capacity"]
    assert cap["answer"].startswith("capacity:") and cap["steps"]


def test_load_predict_refuses_what_it_cannot_simulate(tmp_path):
    db = str(tmp_path / "p.db")
    base = ["load", "--predict", "-m", "tiny-llama", "--db", db]
    r = runner.invoke(app, [*base, "--endpoint", "http://127.0.0.1:9"])
    assert_one_line_error(r, "not an endpoint")
    r = runner.invoke(app, [*base, "--server", "static"])
    assert_one_line_error(r, "continuous batching only")
    r = runner.invoke(app, [*base, "--hardware", "cpu-this"])
    assert_one_line_error(r, "infermeter calibrate")
    r = runner.invoke(app, [*base, "--hardware", "no-such-gpu"])
    assert_one_line_error(r, "unknown hardware")
    r = runner.invoke(app, [*base, "--energy", "rapl"])
    assert_one_line_error(r, "--predict runs nothing")
    # a power source at an endpoint was ignored silently before: the server runs elsewhere
    r = runner.invoke(
        app, ["load", "--endpoint", "http://127.0.0.1:9", "--energy", "rapl", "--db", db]
    )
    assert_one_line_error(r, "the endpoint's server runs elsewhere")


def test_load_predict_on_a_gpu_row_sizes_the_cache_and_says_it_is_approximate(tmp_path):
    import json

    r = runner.invoke(
        app,
        [
            "load",
            "--predict",
            "-m",
            "tiny-llama",
            "--hardware",
            "h100-sxm",
            "--stack",
            "vllm",
            "--rate",
            "10,100",
            "--requests",
            "16",
            "--json",
            "--db",
            str(tmp_path / "p.db"),
        ],
    )
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["stack"] == "vllm" and doc["scheduler"]["blocks"] > 1000
    assert any("no stored `load` run" in a for a in doc["approximate"])
    assert any("spec row" in a for a in doc["approximate"])
    assert any("vllm's own" in a for a in doc["approximate"])  # not its scheduler: said
    assert all(p["tpot_ms_p50"] > 0 for p in doc["points"])


def test_calibration_measures_a_page_fault_and_keeps_it(calibrated):
    """`calibrate` times a page fault (fresh pages less touched ones), stored with the curves."""
    from infermeter import Store
    from infermeter.experiments.whatif import local_device_name
    from infermeter.measure.curves import curves_of

    db, _ = calibrated
    measured = Store(db).measured_ceilings(local_device_name(), stable_only=False)
    (curves,) = curves_of(measured.details).values()
    assert 1e-8 < curves.page_fault_seconds < 1e-3
    assert Curves.from_dict(curves.to_dict()).page_fault_seconds == curves.page_fault_seconds
    assert not curves.growth  # no longer measured: it depended on the allocator's history


def test_the_prediction_documents_hold_every_key_their_types_declare():
    """ForwardTime and MemoryFit documents: their keys are their TypedDicts' (a field added to
    either dataclass without its document type fails here)."""
    from typing import get_type_hints

    from infermeter.analysis.predict import MemoryFit, MemoryFitDoc
    from infermeter.analysis.timemodel import ForwardTimeDoc

    assert set(ForwardTime(total_s=1.0).to_dict()) == set(get_type_hints(ForwardTimeDoc))
    mem = MemoryFit(1.0, 2.0, 3.0, 4.0, 10.0).to_dict()
    assert set(mem) == MemoryFitDoc.__required_keys__
    assert MemoryFitDoc.__optional_keys__ == {"total_bytes_interval"}
    assert mem["total_bytes"] == 10.0 and mem["fits"] is True


def test_the_memory_figure_keeps_a_far_capacity_off_its_scale(monkeypatch, tmp_path):
    """A 135M model on an 80 GB GPU: the capacity line 50x above the stack flattened it to
    nothing; the capacity is named in the legend instead. Near the capacity, the line is drawn."""
    import infermeter.report.predict_figures as pf
    from infermeter.experiments.whatif import predict as what_if_predict
    from infermeter.store import Store

    legends: list[list[str]] = []

    def keep(fig, out, stem, rows):
        legends.append([t.get_text() for t in fig.axes[0].get_legend().get_texts()])
        return []

    monkeypatch.setattr(pf, "save_figure", keep)
    store = Store(tmp_path / "r.db")
    small = what_if_predict("smollm2-135m", "a100-80gb", prompt_tokens=2048, store=store)
    full = what_if_predict("smollm2-135m", "t4", batches=(64,), prompt_tokens=8192, store=store)
    pf.memory_figure(dict(small), tmp_path)
    pf.memory_figure(dict(full), tmp_path)
    assert "capacity 80 GB (off the scale)" in legends[0]
    assert any(t.startswith("capacity ") and "off" not in t for t in legends[1]), legends[1]
