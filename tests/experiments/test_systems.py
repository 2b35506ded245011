"""`infermeter systems-analysis`: the reference's two JSON files from one command."""

import json

import pytest
from typer.testing import CliRunner

from infermeter.cli.app import app
from infermeter.store import Store
from tests.helpers import assert_one_line_error

runner = CliRunner()


def test_systems_analysis_quick_writes_both_files(tmp_path):
    out = tmp_path / "sa"
    r = runner.invoke(
        app,
        [
            "systems-analysis",
            "--model",
            "tiny-qwen3-moe",
            "--baseline",
            "top_k=8",
            "--variant",
            "top_k=1",
            "--quick",
            "--out",
            str(out),
            "--db",
            str(tmp_path / "r.db"),
        ],
        terminal_width=120,
    )
    assert r.exit_code == 0, r.output
    doc = json.loads((out / "systems_analysis.json").read_text())
    assert set(doc) >= {"baseline", "variant", "scaling", "roofline", "bottlenecks", "comparison"}
    assert doc["baseline"]["knobs"]["top_k"] == 8 and doc["variant"]["knobs"]["top_k"] == 1
    assert list(doc["scaling"]) == ["64", "128", "256", "512"]
    for n, point in doc["scaling"].items():
        assert point["ttft_ms"] > 0
        assert point["ttft_per_token_ms"] == pytest.approx(point["ttft_ms"] / int(n))
    c = doc["comparison"]
    assert c["actual_speedup"] > 0 and c["predicted_speedup"] > 1
    assert c["prediction_error_pct"] == pytest.approx(
        100 * (c["predicted_speedup"] - c["actual_speedup"]) / c["actual_speedup"]
    )
    report = json.loads((out / "profile_report.json").read_text())
    assert len(report["scaling"]) == 4 and report["variant"]["meta"]["run_id"]
    assert "speedup" in r.stdout
    # every run went through the sweep's point runner: its knob was verified by measurement
    store = Store(tmp_path / "r.db")
    variant, baseline = (store.get(doc[k]["run_id"]).checks for k in ("variant", "baseline"))
    assert variant["top_k"] == {"experts_per_token": 1}
    assert baseline["top_k"] == {"experts_per_token": 8}
    assert variant["cache"]["class"] == baseline["cache"]["class"] == "DynamicCache"


def test_systems_analysis_refuses_a_load_time_knob(tmp_path):
    r = runner.invoke(
        app,
        ["systems-analysis", "--variant", "dtype=bfloat16", "--out", str(tmp_path / "x")],
    )
    assert_one_line_error(r, "cannot reload for dtype")


def test_systems_analysis_needs_a_variant(tmp_path):
    r = runner.invoke(app, ["systems-analysis", "--out", str(tmp_path / "x")])
    assert_one_line_error(r, "--variant or --routing is required")
    r = runner.invoke(app, ["systems-analysis", "--variant", "top_k", "--out", str(tmp_path)])
    assert_one_line_error(r, "is not NAME=VALUE")


@pytest.mark.slow
def test_systems_analysis_of_routing_shortcuts_predicts_and_measures(tmp_path):
    """The issue-17 command: learned vs shortcut routing with the reference's fields, the
    performance model fed with measured path costs, and its prediction beside the measurement."""
    out = tmp_path / "sa"
    cfg = tmp_path / "var.json"
    cfg.write_text('{"frequency_threshold": 0.5, "entropy_threshold": 2.0, "cache_size": 64}')
    r = runner.invoke(
        app,
        [
            "systems-analysis",
            "--model",
            "tiny-qwen3-moe",
            "--routing",
            str(cfg),
            "--quick",
            "--out",
            str(out),
            "--db",
            str(tmp_path / "r.db"),
        ],
        terminal_width=200,
    )
    assert r.exit_code == 0, r.output
    doc = json.loads((out / "systems_analysis.json").read_text())
    assert doc["baseline"]["knobs"]["routing"] == "learned"
    assert doc["var"]["knobs"]["routing"] == str(cfg)
    assert {"avg_time_ms", "throughput_tps", "memory"} <= set(doc["baseline"])
    stats = doc["var"]["var_stats"]
    assert sum(stats["percent"].values()) == pytest.approx(100)
    assert sum(stats["tokens"].values()) > 0
    routing = doc["routing"]
    for phase in ("prefill", "decode"):
        costs = routing["phases"][phase]["costs_us_per_token"]
        assert all(
            costs[k] > 0
            for k in ("fast_path_lookup", "cache_lookup", "learned_routing", "expert_compute")
        )
    c = doc["comparison"]
    assert c["actual_speedup"] > 0 and c["predicted_speedup"] > 0
    assert c["prediction_error_pct"] == pytest.approx(
        100 * (c["predicted_speedup"] - c["actual_speedup"]) / c["actual_speedup"]
    )
    ids = {f["reference_id"] for f in doc["bottlenecks"]}
    assert ("high_learned_routing" in ids) == (stats["percent"]["learned"] > 20)
    assert {"64", "512"} <= set(doc["scaling"]) and "avg_time_ms" in doc["scaling"]["64"]
    assert "routing:" in r.stdout and "breakeven" in r.stdout


def test_systems_analysis_refuses_a_bad_routing_config(tmp_path):
    r = runner.invoke(
        app,
        ["systems-analysis", "--routing", "shortcuts:cache_size=-2", "--out", str(tmp_path / "x")],
    )
    assert_one_line_error(r, "cache_size")
