"""Every stored run is analysable: load runs and runs with no samples, in the CLI and dashboard.

Before: `analyze` of a load run made minutes earlier said "made by an older infermeter; profile
it again", and the dashboard answered "analysis failed: 500" for it and for runs with no samples.
"""

import json
import re

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from infermeter import Store
from infermeter.cli.app import app
from infermeter.run.results import RunResult
from infermeter.util.timestamps import now_iso

runner = CliRunner()


@pytest.fixture
def runs(tmp_path):
    """A real load run (4 requests at once: they queue) and a failed run with no samples."""
    db = str(tmp_path / "r.db")
    args = [
        "load",
        "-m",
        "tiny-llama",
        "--requests",
        "4",
        "--rate",
        "inf",
        "--server",
        "static",
        "--static-batch",
        "1",
        "--prompt-tokens",
        "16",
        "--new-tokens",
        "3",
        "--db",
        db,
    ]
    r = runner.invoke(app, args, terminal_width=200)
    assert r.exit_code == 0, r.output
    load_id = re.search(r"stored as run (\w+)", r.output).group(1)
    empty = RunResult(
        run_id=None,
        config={"model": "tiny-llama", "mode": "minimal"},
        knobs={},
        model_info={"spec": "tiny-llama"},
        device={"name": "cpu"},
        versions={},
        created=now_iso(),
        samples=[],
        status="failed",
    )
    return db, load_id, Store(db).save(empty)


def test_analyze_of_a_load_run_and_of_an_empty_run_says_why_in_one_line(runs, tmp_path):
    db, load_id, empty_id = runs
    r = runner.invoke(app, ["analyze", load_id, "--db", db], terminal_width=200)
    assert r.exit_code == 0, r.output
    assert "roofline: a load run" in r.output and "older infermeter" not in r.output
    doc = json.loads(runner.invoke(app, ["analyze", load_id, "--db", db, "--json"]).stdout)
    assert doc["roofline"]["unavailable"].startswith("a load run")
    assert doc["time_model"]["rows"] == [] and doc["time_model"]["note"]
    # 4 requests at once on one static slot: the last three wait for the ones before them
    (finding,) = doc["findings"]
    assert finding["id"] == "queueing" and finding["evidence"]["queue_share"] >= 0.5
    r = runner.invoke(app, ["analyze", empty_id, "--db", db, "--out", str(tmp_path / "an")])
    assert r.exit_code == 0, r.output
    assert "has no samples (failed)" in r.output
    written = sorted(p.name for p in (tmp_path / "an").iterdir())
    assert written == [f"analysis-{empty_id}.json"]  # no roofline figure without points


def test_the_dashboard_analyses_them_without_a_500(runs):
    from infermeter.dashboard import create_app
    from infermeter.dashboard.security import Guard

    db, load_id, empty_id = runs
    app_ = create_app(Store(db), Guard(), poll_s=0.05)
    with TestClient(app_, base_url="http://localhost") as c:
        for run_id, needle in ((load_id, "a load run"), (empty_id, "has no samples")):
            resp = c.get(f"/api/runs/{run_id}/analysis")
            assert resp.status_code == 200, resp.text
            assert needle in resp.json()["roofline"]["unavailable"]
