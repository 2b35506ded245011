"""benchmarks/gpu_check.py: without CUDA one line and exit 0; its table from recorded output."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import gpu_check  # noqa: E402


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="this machine has CUDA")
def test_without_cuda_it_says_why_in_one_line_and_exits_0(tmp_path):
    script = str(ROOT / "benchmarks" / "gpu_check.py")
    done = subprocess.run(
        [sys.executable, script, "--out", str(tmp_path / "g")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpu_check: nothing ran:"), done.stdout
    assert not (tmp_path / "g").exists()  # nothing written


def test_the_table_from_recorded_outputs():
    calib = {
        "measured": {"flop_per_s": {"bfloat16": 7.0e14}, "bandwidth_bytes_per_s": 2.8e12},
        "spec": {"flop_per_s": {"bfloat16": 9.89e14}, "bandwidth_bytes_per_s": 3.35e12},
    }
    rows = gpu_check.calibrate_rows(calib)
    assert rows[0]["check"] == "matmul bfloat16" and rows[0]["note"] == "71% of datasheet"
    assert rows[1]["value"] == pytest.approx(2800) and rows[1]["note"] == "84% of datasheet"
    run = {
        # as `profile --json` writes it: one summary per configuration, p50 as the median
        "summary": [{"ttft_ms": {"p50": 30.0}, "tpot_ms": {"p50": 9.0}}],
        "all_samples": [
            {
                "warmup": False,
                "memory": {
                    "peak_reserved_mib": 5000.0,
                    "device_free_mib": 74000.0,
                    "device_total_mib": 80000.0,
                },
            }
        ],
    }
    prof = gpu_check.profile_rows("llama-3.2-1b b1", run, {"roofline": {"decode_min_ms": 1.5}})
    assert prof[1]["note"] == "6.00x the bandwidth-bound minimum"
    assert prof[2]["reference"] == 6000.0 and "1000 MiB outside the allocator" in prof[2]["note"]
    sw = gpu_check.stopwatch_rows({"ratio_p50": 1.013})
    assert sw[0]["ok"] is True and sw[0]["value"] == pytest.approx(1.3)
    assert gpu_check.stopwatch_rows({"ratio_p50": 1.05})[0]["ok"] is False
    text = gpu_check.table([*rows, *prof, *sw])
    assert text.splitlines()[0].split() == [
        "check",
        "value",
        "unit",
        "reference",
        "goal",
        "ok",
        "note",
    ]
    assert "NO" not in text and "yes" in text and len(text.splitlines()) == 1 + 6


def test_overhead_and_nvml_rows_from_recorded_outputs():
    """The JSON lines of overhead.py --quick (recorded on tiny-llama here) and nvml_integration."""

    def mode(tpot, lo, hi, ttft=1.01):
        return {"ttft": ttft, "tpot": tpot, "tpot_ci": [lo, hi], "cpu": 1.5}

    doc = {
        "model": "tiny-llama",
        "device": "cpu",
        "main": {
            "none": mode(1.0, 1.0, 1.0),
            "minimal": mode(0.9826, 0.9722, 0.9930),
            "standard": mode(1.0576, 1.0408, 1.0745),
            "deep": mode(1.0710, 1.0650, 1.0790),
            "torch.profiler": mode(1.1811, 1.1609, 1.2013),
        },
    }
    rows = {r["check"]: r for r in gpu_check.overhead_rows(doc)}
    assert list(rows) == [
        "overhead minimal",
        "overhead standard",
        "overhead deep",
        "overhead torch.profiler",
    ]
    assert rows["overhead minimal"]["ok"] is True  # the interval's top, -0.7%, within 1%
    assert rows["overhead standard"]["ok"] is False  # 5.8% over 3%
    assert rows["overhead deep"]["ok"] is True and rows["overhead deep"]["goal"] == "<= 8%"
    assert rows["overhead torch.profiler"]["ok"] is None
    assert rows["overhead standard"]["value"] == pytest.approx(5.76)
    assert rows["overhead standard"]["note"].startswith("95% CI +4.08 to +7.45%")
    nv = gpu_check.nvml_rows(
        {
            "median_abs_diff_pct": 1.2,
            "max_abs_diff_pct": 2.5,
            "windows": 20,
            "interval_ms": 20.0,
            "j_per_token": 0.41,
            "model": "llama-3.2-1b",
        }
    )
    assert nv[0]["ok"] is True and "largest 2.50% over 20 windows" in nv[0]["note"]
    assert nv[1]["value"] == 0.41 and nv[1]["unit"] == "J/token"
    assert gpu_check.nvml_rows({"median_abs_diff_pct": 3.5, "windows": 5})[0]["ok"] is False


def test_the_compile_rows_measure_graphs_over_a_static_cache_and_survive_a_failure(monkeypatch):
    """On the H100 the CUDA-graphs profile failed and took the eager and compile rows with it."""
    calls = []

    def fake_run_json(cmd, timeout_s=None):
        calls.append(cmd)
        if "--compile" in cmd:  # torch.compile's default mode fails here
            raise RuntimeError("profile exited 1: boom")
        tpot = 9.0 if "--compile-mode" in cmd else 18.0
        return {"summary": [{"tpot_ms": {"p50": tpot}, "ttft_ms": {"p50": 30.0}}]}

    monkeypatch.setattr(gpu_check, "run_json", fake_run_json)
    rows = gpu_check.compile_rows("llama-3.2-1b", "db", "3")
    tpot = [r for r in rows if r["check"].endswith("TPOT")]
    assert [r["value"] for r in tpot] == [18.0, 18.0, None, 9.0]
    assert tpot[2]["ok"] is False and "boom" in tpot[2]["note"]
    assert tpot[3]["note"] == "2.00x the first row's speed"
    assert [r["check"] for r in rows if r["check"].endswith("TTFT")] == [
        "llama-3.2-1b b1 eager TTFT",
        "llama-3.2-1b b1 eager static cache TTFT",
        "llama-3.2-1b b1 graphs static cache TTFT",
    ]
    graphs = calls[-1]
    assert graphs[graphs.index("--compile-mode") + 1] == "reduce-overhead"
    assert graphs[graphs.index("--cache") + 1] == "static"


def test_steps_name_only_known_variants(tmp_path):
    script = str(ROOT / "benchmarks" / "gpu_check.py")
    done = subprocess.run(
        [sys.executable, script, "--steps", "context,warp"], capture_output=True, text=True
    )
    assert done.returncode == 2 and "unknown step 'warp'" in done.stderr
    assert set(gpu_check.EXTRA_STEPS) == {"compile", "context", "quant"}
