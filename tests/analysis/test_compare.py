"""`infermeter compare`: per-phase and per-layer speedup, prediction, and the CI gate."""

import json

import pytest
from typer.testing import CliRunner

from infermeter import RunConfig, Store, profile
from infermeter.cli.app import app
from infermeter.knobs import KNOBS

runner = CliRunner()


def test_compare_top_k_runs_and_fail_if_slower(tiny_moe, tmp_path):
    db = str(tmp_path / "r.db")
    store = Store(db)
    cfg = RunConfig(
        model="tiny-qwen3-moe",
        prompt_tokens=256,
        new_tokens=6,
        samples=3,
        mode="standard",
        energy="off",
    )
    ids = {}
    for k in (8, 1):
        with KNOBS["top_k"].apply(tiny_moe, k):
            ids[k] = profile(cfg, loaded=tiny_moe, sink=store, knobs={"top_k": k}).run_id
    r = runner.invoke(app, ["compare", ids[8], ids[1], "--db", db, "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["changed"] == {"top_k": [8, 1]}
    prefill = next(p for p in doc["phases"] if p["phase"] == "prefill")
    assert prefill["speedup"] > 1 and prefill["predicted_speedup"] > 1
    assert prefill["prediction_error_pct"] == pytest.approx(
        100 * (prefill["predicted_speedup"] - prefill["speedup"]) / prefill["speedup"]
    )
    assert any(r["kind"] == "moe" for r in doc["where"])
    # the CI gate: 8 experts per token is slower than 1
    r = runner.invoke(
        app, ["compare", ids[1], ids[8], "--db", db, "--fail-if-slower"], terminal_width=100
    )
    assert r.exit_code == 1 and "variant is slower" in r.output
    r = runner.invoke(
        app, ["compare", ids[8], ids[1], "--db", db, "--fail-if-slower"], terminal_width=100
    )
    assert r.exit_code == 0 and "speedup" in r.output
