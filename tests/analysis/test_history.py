"""Performance over time: change points the data support, and a run against its history
(issue 37, item 4). Stored runs with known change points, through the real store and CLI."""

import json

import numpy as np
from typer.testing import CliRunner

from infermeter import Store
from infermeter.analysis.history import against_history, history
from infermeter.cli.app import app
from infermeter.run.environment import git_state
from tests.helpers import history_run as _run
from tests.helpers import history_store as _store

runner = CliRunner()


def test_a_step_in_tpot_is_one_change_point_at_the_right_run(tmp_path):
    series = [10.0] * 12 + [12.5] * 8  # a 25% slowdown from run 12 on
    store, ids = _store(tmp_path, series)
    doc = history(store.history("tiny-llama"), "tpot_ms")
    (group,) = doc["configurations"]
    assert len(group["points"]) == 20
    (change,) = group["change_points"]
    assert change["run_id"] == ids[12] and change["index"] == 12
    assert 22 < change["change_pct"] < 28 and change["p_value"] < 1e-6
    assert change["commit"] == f"{12:040x}"
    p = group["points"][0]
    assert p["ci95_low"] <= p["median"] <= p["ci95_high"] and p["samples"] == 5


def test_noise_and_one_slow_run_are_not_changes(tmp_path):
    series = [10.0] * 9 + [13.0] + [10.0] * 10  # one odd run in the middle
    store, _ = _store(tmp_path, series)
    (group,) = history(store.history("tiny-llama"), "tpot_ms")["configurations"]
    assert group["change_points"] == []


def test_configurations_are_kept_apart(tmp_path):
    """Other knob values are another series: their level is no change of the first."""
    rng = np.random.default_rng(1)
    store = Store(tmp_path / "runs.db")
    for i in range(8):
        store.save(_run(2 * i, 10.0, rng))
        store.save(_run(2 * i + 1, 20.0, rng, new_tokens=17))
    groups = history(store.history("tiny-llama"), "tpot_ms")["configurations"]
    assert len(groups) == 2 and all(g["change_points"] == [] for g in groups)
    assert sorted(round(g["points"][0]["median"]) for g in groups) == [10, 20]
    # another seed (other prompts) is another series; more samples per run is the same one
    store.save(_run(40, 10.0, rng, seed=3))
    store.save(_run(41, 10.0, rng, samples=9, energy="off"))
    groups = history(store.history("tiny-llama"), "tpot_ms")["configurations"]
    assert sorted(len(g["points"]) for g in groups) == [1, 8, 9]


def test_a_new_run_against_its_history(tmp_path):
    store, ids = _store(tmp_path, [10.0] * 10 + [13.0, 10.05])
    rows = store.history("tiny-llama")
    by_id = {r["id"]: r for r in rows}
    slow = against_history(rows, by_id[ids[10]], "tpot_ms")
    assert slow["verdict"] == "slower than history" and 25 < slow["change_pct"] < 35
    usual = against_history(rows, by_id[ids[11]], "tpot_ms")
    assert usual["verdict"] == "within history"
    first = against_history(rows, by_id[ids[1]], "tpot_ms")
    assert first["verdict"] == "too few runs"


def test_history_and_compare_against_history_from_the_cli(tmp_path):
    store, ids = _store(tmp_path, [10.0] * 8 + [12.5] * 6)
    db, out = str(store.where), tmp_path / "out"
    r = runner.invoke(app, ["history", "tiny-llama", "--db", db, "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "<- change" in r.output and "change at" in r.output and "+25" in r.output
    assert (out / "history.png").stat().st_size > 10_000 and (out / "history.csv").is_file()
    doc = json.loads((out / "history.json").read_text())
    assert doc["configurations"][0]["change_points"][0]["run_id"] == ids[8]
    r = runner.invoke(app, ["compare", ids[8], "--against-history", "--db", db, "--fail-if-slower"])
    assert r.exit_code == 1 and "is slower than its history: tpot_ms" in r.output
    assert "not slower" not in r.output  # one sentence per verdict, never its negation beside it
    r = runner.invoke(app, ["compare", ids[7], "--against-history", "--db", db, "--json"])
    assert r.exit_code == 0
    verdicts = {m["metric"]: m["verdict"] for m in json.loads(r.stdout)["metrics"]}
    assert verdicts["tpot_ms"] == "within history"
    r = runner.invoke(app, ["compare", ids[0], "--db", db])
    assert r.exit_code == 2 and "or one with --against-history" in r.output
    r = runner.invoke(app, ["history", "no-such-model", "--db", db])
    assert r.exit_code == 2 and "no finished runs" in r.output


def test_runs_record_the_git_state_they_were_started_from(tmp_path):
    import subprocess

    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(repo)]
    subprocess.run([*git, "init", "-q"], check=True)
    (repo / "f.txt").write_text("a")
    subprocess.run([*git, "add", "f.txt"], check=True)
    subprocess.run([*git, "commit", "-qm", "first"], check=True)
    state = git_state(str(repo))
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    assert state["commit"] == head.strip() and state["dirty"] is False
    (repo / "f.txt").write_text("b")
    assert git_state(str(repo))["dirty"] is True
    assert git_state(str(tmp_path)) is None  # not a repository
