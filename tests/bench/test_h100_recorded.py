"""A real H100's figures (2026-11-27, tests/bench/data/h100), held by every later change.

`benchmarks/gpu_check.py` ran on an NVIDIA H100 80GB HBM3 (torch 2.11 + CUDA 13.0,
transformers 5.24) and left its table and its SQLite store: the calibration and four eager
bfloat16 profiles (llama-3.2-1b and qwen3-4b, batch 1 and 16, 512 + 128 tokens). These tests
read that store with today's code, as a user's `analyze` and `predict --learn` would.
"""

import json
import shutil
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from infermeter.cli.app import app

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "bench" / "data" / "h100"
sys.path.insert(0, str(ROOT / "benchmarks"))
import gpu_check  # noqa: E402

#: run id -> (model, batch), as recorded
RUNS = {
    "c9618b9ba372": ("llama-3.2-1b", 1),
    "a62619ca15be": ("llama-3.2-1b", 16),
    "7eaa8ea28731": ("qwen3-4b", 1),
    "c7dc9198988d": ("qwen3-4b", 16),
}


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("h100") / "gpu_check.db"
    shutil.copy(DATA / "gpu_check.db", path)  # the recorded file is never written
    return str(path)


def _rows() -> dict[str, dict]:
    doc = json.loads((DATA / "gpu_check.json").read_text())
    return {r["check"]: r for r in doc["rows"]}


def test_the_recorded_table_met_its_goals_and_reads_as_one_table():
    rows = _rows()
    assert rows["energy sources"]["value"] == "nvml"
    assert rows["CUDA events vs stopwatch"]["ok"] and rows["NVML integrated vs counter"]["ok"]
    assert 0.6 < rows["matmul bfloat16"]["value"] / rows["matmul bfloat16"]["reference"] < 0.9
    assert 0.8 < rows["copy bandwidth"]["value"] / rows["copy bandwidth"]["reference"] <= 1.0
    text = gpu_check.table(list(rows.values()))
    assert "NO" not in text and len(text.splitlines()) == 1 + len(rows)


@pytest.mark.parametrize("run_id", sorted(RUNS))
def test_analyze_of_each_recorded_run_keeps_its_bandwidth_floor(db, run_id):
    """The bytes a decode step must read, over the H100's measured copy bandwidth, as the table
    recorded them; never above the measured TPOT (a floor over a measurement is a unit slip)."""
    model, batch = RUNS[run_id]
    r = CliRunner().invoke(app, ["analyze", run_id, "--db", db, "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    roof = doc["roofline"]
    assert doc["device"].startswith("NVIDIA H100")
    recorded = _rows()[f"{model} b{batch} TPOT"]
    assert roof["decode_min_ms"] == pytest.approx(recorded["reference"], rel=0.01)
    assert roof["decode_min_ms"] < recorded["value"]
    assert roof["above_ceiling"] == []


@pytest.mark.parametrize("model", ["llama-3.2-1b", "qwen3-4b"])
def test_predict_learnt_from_the_recorded_runs_meets_them(db, model):
    """`predict --learn` on the H100's own runs: the prediction the runs teach lands within 30%
    of each run's median (the host's sample-to-sample spread was 30%); the fit once learnt
    1.00 for a 1.25x miss."""
    from infermeter.store import Store

    store = Store(db)
    measured = {batch: store.get(rid).summary() for rid, (m, batch) in RUNS.items() if m == model}
    args = ["predict", "-m", model, "--hardware", "h100-sxm", "--dtype", "bfloat16"]
    args += ["--batch", "1,16", "--prompt-tokens", "512", "--new-tokens", "128"]
    r = CliRunner().invoke(app, [*args, "--learn", "--db", db, "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["learned"]["runs"] == 2
    for row in doc["rows"]:
        s = measured[row["batch"]]
        for ours, theirs in (("ttft_ms", s["ttft_ms"]), ("tpot_ms", s["tpot_ms"])):
            assert row[ours] == pytest.approx(theirs.median, rel=0.3), (row["batch"], ours)


def test_the_power_figure_of_the_recorded_run_stays_within_the_card(db, tmp_path):
    """NVML's counter polled at each sample's edges had not ticked between two close readings:
    power between every two readings drew 0 W beside 2,511 W on this 700 W H100. Over spans
    the counter resolves, every point lies between idle and the card's power limit, and the
    spans hold all the energy the trace does."""
    import csv

    from infermeter.measure.energy.attribution import power_spans
    from infermeter.report.run_figures import power_figure
    from infermeter.store import Store

    run = Store(db).get("c9618b9ba372")
    assert run.energy["update_period_ms"] == 100.0
    power_figure(run, tmp_path)
    rows = list(csv.DictReader((tmp_path / "power.csv").open()))
    watts = [float(r["power_w"]) for r in rows]
    assert len(watts) > 100 and min(watts) > 50 and max(watts) < 700
    t, j = run.power["t_ms"], [sum(r) for r in run.power["joules"]]
    mids, w = power_spans(t, j, 100.0)
    edge, energy_j = t[0], 0.0
    for mid, watts_i in zip(mids, w, strict=True):  # spans run edge to edge, none skipped
        end = 2 * mid - edge
        energy_j += watts_i * (end - edge) / 1e3
        edge = end
    assert edge == pytest.approx(t[-1]) and energy_j == pytest.approx(j[-1] - j[0], rel=1e-9)
    # the old way, between every two readings: the spike this replaced
    naive = [(j[i] - j[i - 1]) / ((t[i] - t[i - 1]) / 1e3) for i in range(1, len(t))]
    assert max(naive) > 2000 and min(naive) == 0
