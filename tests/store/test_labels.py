"""Names that tell runs apart: every knob value and each setting off its default, in lists."""

import json

from typer.testing import CliRunner

from infermeter import RunConfig, Store
from infermeter.cli.app import app
from infermeter.run.config import run_label
from infermeter.run.sweep import SweepSpec, run_sweep

runner = CliRunner()


def test_the_label_names_knobs_and_settings_off_their_defaults():
    cfg = RunConfig(prompt_tokens=64, batch_size=4, dtype="int8", compile="reduce-overhead")
    assert run_label(cfg.to_dict(), {"top_k": 8}) == {
        "top_k": 8,
        "prompt_tokens": 64,
        "batch_size": 4,
        "dtype": "int8",
        "compile": "reduce-overhead",
    }
    assert run_label(RunConfig().to_dict(), {}) == {}  # defaults are not noise
    # a knob's own value wins over the config's
    assert run_label({"prompt_tokens": 64}, {"prompt_tokens": "64"}, ["prompt_tokens"]) == {
        "prompt_tokens": "64"
    }
    # a swept value at its default still names the point (batch_size=1 beside batch_size=2)
    assert run_label({"batch_size": 1}, {"batch_size": 1}, ["batch_size"]) == {"batch_size": 1}


def test_sweep_points_that_differ_in_config_knobs_read_differently(tiny_llama, tmp_path):
    """Points differing in prompt_tokens (or batch) both read "(minimal)" before."""
    db = str(tmp_path / "r.db")
    store = Store(db)
    base = RunConfig(new_tokens=2, samples=1, warmup=0, energy="off")
    run_sweep(
        SweepSpec(base, {"prompt_tokens": ["8", "16"], "batch_size": ["1", "2"]}),
        store,
        loaded=tiny_llama,
    )
    rows = json.loads(runner.invoke(app, ["runs", "list", "--db", db, "--json"]).stdout)["runs"]
    labels = {json.dumps(r["label"], sort_keys=True) for r in rows}
    assert len(rows) == 4 and len(labels) == 4, labels
    assert all({"prompt_tokens", "batch_size", "new_tokens"} <= set(r["label"]) for r in rows)
    r = runner.invoke(app, ["runs", "list", "--db", db], env={"COLUMNS": "200"})
    for p in ("8", "16"):
        assert f"prompt_tokens={p}" in r.stdout, r.stdout
