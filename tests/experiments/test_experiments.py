"""Sweeps and experiments from the CLI, as users run them, and the files they write."""

import csv
import json

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

from infermeter.cli.app import app
from infermeter.experiments import EXPERIMENTS
from tests.helpers import assert_one_line_error, cli_here

runner = CliRunner()


@pytest.mark.slow
def test_experiment_all_quick_writes_every_json_csv_and_png(tmp_path):
    out, db = tmp_path / "exp", tmp_path / "r.db"
    r = cli_here(
        "experiment",
        "all",
        "--quick",
        "--model",
        "tiny-qwen3-moe",
        "--out",
        str(out),
        "--db",
        str(db),
        "--energy",
        "off",
        "--samples",
        "2",
    )
    assert r.returncode == 0, r.stderr
    for name in EXPERIMENTS:
        folder = out / name
        if EXPERIMENTS[name].serving:  # a rate sweep of `load`: its own files
            doc = json.loads((folder / "load_sweep.json").read_text())
            assert [p["rate"] for p in doc["summary"]] == [2.0, 8.0, 32.0]
            assert all(len(run["all_samples"]) == 2 for run in doc["runs"])  # --samples 2
            assert (folder / "latency_vs_throughput.png").stat().st_size > 0
            continue
        doc = json.loads((folder / "sweep.json").read_text())
        assert doc["meta"]["name"] == name and doc["summary"]
        # a second knob draws one figure per value of it (speculation: one per prompt kind)
        figures = sorted(folder.glob(f"{name}*.png"))
        assert len(figures) == (2 if name == "speculation" else 1), figures
        for path in figures:
            png = Image.open(path)
            assert png.size[0] >= 1800
            assert png.info.get("dpi", (300, 300))[0] == pytest.approx(300, 1)
        rows = [r for f in sorted(folder.glob(f"{name}*.csv")) for r in csv.DictReader(f.open())]
        assert len(rows) == len(doc["summary"])
        means = sorted(round(r["ttft_ms"]["mean"], 4) for r in doc["summary"])
        assert sorted(round(float(r["ttft_ms"]), 4) for r in rows) == means
    ctx = json.loads((out / "context-scaling" / "sweep.json").read_text())
    # the fit is over prefill ms per prompt token, as stored: recomputed here independently
    xs = np.array([r["config"]["prompt_tokens"] for r in ctx["summary"]], dtype=float)
    ys = np.array([r["ttft_ms"]["mean"] for r in ctx["summary"]]) / xs
    assert ctx["scaling"]["loglog_slope"] == pytest.approx(np.polyfit(np.log(xs), np.log(ys), 1)[0])
    assert ctx["scaling"]["metric"] == "ttft_ms per prompt token"
    assert all(r["prefill_components_ms"]["attention"] > 0 for r in ctx["summary"])
    layers = json.loads((out / "layers" / "sweep.json").read_text())
    assert [r["checks"]["active_layers"]["blocks_run"] for r in layers["summary"]] == [
        [0],
        [0, 1],
        [0, 1, 2, 3],
    ]
    # speculation: each prompt-lookup length judged against greedy on the same prompts
    verdict = list(csv.DictReader((out / "speculation" / "verdict.csv").open()))
    assert sorted((v["prompt_kind"], v["decoding"]) for v in verdict) == [
        ("natural", "prompt_lookup:3"),
        ("repetitive", "prompt_lookup:3"),
    ]
    assert all(v["matches_greedy"] == "True" for v in verdict)
    assert "repetitive prompts, prompt_lookup:3: " in r.stdout
    compile_doc = json.loads((out / "compile" / "sweep.json").read_text())
    on = next(r for r in compile_doc["summary"] if r["config"]["compile"] is True)
    assert on["checks"]["compile"]["cold_over_warm"] > 1  # cold first call > warm calls
    assert "moe-topk" in r.stdout and "wrote" in r.stdout
    # a dense model skips moe-topk, saying why
    r2 = runner.invoke(
        app,
        [
            "experiment",
            "moe-topk",
            "--model",
            "tiny-llama",
            "--quick",
            "--out",
            str(out),
            "--db",
            str(db),
        ],
    )
    assert_one_line_error(r2, "does not apply to tiny-llama", "no experts")


def test_sweep_cli_json_resume_and_plot(tmp_path):
    db = tmp_path / "r.db"
    args = [
        "sweep",
        "--model",
        "tiny-qwen3-moe",
        "--knob",
        "top_k=1,2",
        "--knob",
        "prompt_tokens=16,32",
        "--samples",
        "1",
        "--warmup",
        "0",
        "--new-tokens",
        "2",
        "--energy",
        "off",
        "--db",
        str(db),
    ]
    r = runner.invoke(app, [*args, "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert len(doc["summary"]) == 4 and len(doc["all_samples"]) == 4
    sid = doc["meta"]["sweep_id"]
    r = runner.invoke(app, args, terminal_width=120)
    assert r.exit_code == 0 and "4 points, 4 already done" in r.stdout
    r = runner.invoke(app, ["plot", sid[:6], "--out", str(tmp_path / "p"), "--db", str(db)])
    assert r.exit_code == 0, r.output
    pngs = list((tmp_path / "p").glob("*.png"))
    assert len(pngs) == 2  # one figure per value of the other knob
    r = runner.invoke(app, ["sweeps", "list", "--db", str(db), "--json"])
    assert json.loads(r.stdout)["sweeps"][0]["runs"] == 4


@pytest.mark.parametrize(
    "args,needles",
    [
        (["--knob", "top_k=1,99", "--model", "tiny-qwen3-moe"], ["top_k=99 is above the 16"]),
        (["--knob", "top_k=1,2", "--model", "tiny-llama"], ["top_k applies to mixture"]),
        (["--knob", "active_layers=0"], ["active_layers=0 is outside 1..4"]),
        (["--knob", "active_layers=9"], ["outside 1..4"]),
        (["--knob", "nope=1"], ["unknown knob 'nope'"]),
        (["--knob", "top_k"], ["not NAME=V1,V2"]),
        ([], ["a sweep needs at least one --knob"]),
        (["--knob", "new_tokens=1", "--config", "/nonexistent.yaml"], ["does not exist"]),
    ],
)
def test_sweep_user_errors(tmp_path, args, needles):
    r = runner.invoke(app, ["sweep", "--db", str(tmp_path / "r.db"), *args])
    assert_one_line_error(r, *needles)


def test_plot_errors(tmp_path):
    r = runner.invoke(app, ["plot", str(tmp_path / "none.json")])
    assert_one_line_error(r, "does not exist")
    r = runner.invoke(app, ["plot", "abc123", "--db", str(tmp_path / "r.db")])
    assert_one_line_error(r, "no database at")  # plot only reads: it creates nothing
    from infermeter import Store

    Store(tmp_path / "r.db")
    r = runner.invoke(app, ["plot", "abc123", "--db", str(tmp_path / "r.db")])
    assert_one_line_error(r, "no sweep 'abc123'")
