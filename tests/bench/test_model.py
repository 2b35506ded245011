"""`bench model`: forward and training-step cost on real tiny models; the loss is real and falls;
the model leaves as it came."""

import json
import math

import pytest
import torch
from typer.testing import CliRunner

from infermeter.bench.model import ModelBenchSpec, run_benchmark, run_point
from infermeter.cli.app import app
from infermeter.models import load_model
from tests.helpers import assert_one_line_error

runner = CliRunner()


def test_train_loss_is_finite_and_falls_over_5_steps_and_weights_are_restored():
    loaded = load_model("tiny-llama", device="cpu")
    before = {k: v.clone() for k, v in loaded.model.state_dict().items()}
    spec = ModelBenchSpec(seq_lens=(64,), train=True, steps=5, samples=2, warmup=0)
    point = run_point(loaded, spec, 64)
    assert math.isfinite(point.loss) and point.loss > 0
    # random weights over a 4096-token vocabulary: the loss starts near ln(4096)
    assert abs(point.loss - math.log(loaded.info.vocab)) < 1.5
    assert len(point.step_losses) == 6  # before each of 5 steps, and after the last
    assert point.step_losses[-1] < point.step_losses[0] - 0.5
    assert len(point.forward_ms) == 2 and len(point.train_ms) == 2
    assert point.train_peak_mib > point.forward_peak_mib > 0
    after = loaded.model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert not loaded.model.training and all(p.grad is None for p in loaded.model.parameters())


def test_document_over_models_and_lengths():
    spec = ModelBenchSpec(models=("tiny-llama", "tiny-mixtral"), seq_lens=(16, 32), samples=2)
    doc = run_benchmark(spec)
    assert doc["meta"]["kind"] == "bench-model"
    points = [(r["model"], r["seq_len"]) for r in doc["summary"]]
    assert points == [(m, n) for m in ("tiny-llama", "tiny-mixtral") for n in (16, 32)]
    assert all(r["train_ms"] is None and r["loss"] is None for r in doc["summary"])
    assert len(doc["all_samples"]) == 8


def test_cli_with_train_writes_a_report(tmp_path):
    r = runner.invoke(
        app,
        [
            "bench",
            "model",
            "-m",
            "tiny-llama",
            "--seq-lens",
            "32,64",
            "--train",
            "--steps",
            "2",
            "--samples",
            "2",
            "--out",
            str(tmp_path),
        ],
        terminal_width=160,
    )
    assert r.exit_code == 0, r.output
    assert "train/fwd" in r.output and "tiny-llama" in r.output
    doc = json.loads((tmp_path / "bench_model.json").read_text())
    # both timed at every length, two samples each (which is faster is the clock's word, and a
    # busy 2-core host once made even the fastest forward slower than the fastest training
    # step: not asserted here, as no wall-clock comparison is)
    assert all(row["train_over_forward"] > 0 for row in doc["summary"])
    assert all(row["train_ms"]["n"] == row["forward_ms"]["n"] == 2 for row in doc["summary"])
    for name in ("model_latency.png", "model_memory.png", "report.md", "report.html"):
        assert (tmp_path / name).stat().st_size > 0
    assert "| tiny-llama | 64 |" in (tmp_path / "report.md").read_text()


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--steps", "3"], "--steps needs --train"),
        (["-m", "no-such-model"], "no-such-model"),
        (["--seq-lens", "100000"], "--seq-lens"),
        (["--lr", "2"], "--lr"),
    ],
)
def test_bad_options_are_one_line(args, needle):
    r = runner.invoke(app, ["bench", "model", *args])
    assert_one_line_error(r, needle)


def test_a_noisy_point_is_flagged_in_the_table_as_a_runs_metric_is():
    """Issue 59: `bench` intervals of 1.6-40 ms carried no flag while a run's noisy metric
    did; the same rule (over 10% spread or an outlier, from 2 samples) marks a bench cell."""
    from rich.console import Console

    from infermeter.bench.model import ModelPoint, point_row
    from infermeter.cli.bench_cmd import model_table

    def table(forward_ms):
        point = ModelPoint("tiny-llama", 64, 1000, forward_ms=forward_ms)
        doc = {
            "meta": {"spec": {"batch": 1}, "device": {"name": "cpu"}},
            "summary": [point_row(point)],
        }
        console = Console(width=200, record=True)
        console.print(model_table(doc))
        return console.export_text()

    noisy = table([10.0, 10.2, 40.0])
    assert "⚠ 10.2" in noisy and "⚠ noisy: the timed calls vary by more than 10%" in noisy
    steady = table([10.0, 10.1, 10.2])
    assert "⚠" not in steady
