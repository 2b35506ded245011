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
    done = subprocess.run([sys.executable, script, "--out", str(tmp_path / "g")],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpu_check: nothing ran:"), done.stdout
    assert not (tmp_path / "g").exists()  # nothing written


def test_the_table_from_recorded_outputs():
    calib = {"measured": {"flop_per_s": {"bfloat16": 7.0e14}, "bandwidth_bytes_per_s": 2.8e12},
             "spec": {"flop_per_s": {"bfloat16": 9.89e14}, "bandwidth_bytes_per_s": 3.35e12}}
    rows = gpu_check.calibrate_rows(calib)
    assert rows[0]["check"] == "matmul bfloat16" and rows[0]["note"] == "71% of datasheet"
    assert rows[1]["value"] == pytest.approx(2800) and rows[1]["note"] == "84% of datasheet"
    run = {"summary": {"ttft_ms": {"median": 30.0}, "tpot_ms": {"median": 9.0}},
           "all_samples": [{"warmup": False, "memory": {"peak_reserved_mb": 5000.0,
                            "device_free_mb": 74000.0, "device_total_mb": 80000.0}}]}
    prof = gpu_check.profile_rows("llama-3.2-1b b1", run, {"roofline": {"decode_min_ms": 1.5}})
    assert prof[1]["note"] == "6.00x the bandwidth-bound minimum"
    assert prof[2]["reference"] == 6000.0 and "1000 MiB outside the allocator" in prof[2]["note"]
    sw = gpu_check.stopwatch_rows({"ratio_p50": 1.013})
    assert sw[0]["ok"] is True and sw[0]["value"] == pytest.approx(1.3)
    assert gpu_check.stopwatch_rows({"ratio_p50": 1.05})[0]["ok"] is False
    text = gpu_check.table([*rows, *prof, *sw])
    assert text.splitlines()[0].split() == ["check", "value", "unit", "reference", "goal", "ok",
                                            "note"]  # fmt: skip
    assert "NO" not in text and "yes" in text and len(text.splitlines()) == 1 + 6
