"""Sweeps on a real local Ray instance (2 CPUs): points land in the store from the workers,
a killed worker is retried and the sweep stays resumable, and the options fail in one line."""

import os
import signal
import subprocess
import sys
import time

import pytest
from typer.testing import CliRunner

from infermeter import RunConfig, Store
from infermeter.cli.app import app
from infermeter.run.sweep import SweepSpec
from tests.helpers import assert_one_line_error, cli_here

ray = pytest.importorskip("ray", reason="Ray is an optional extra: pip install 'infermeter[ray]'")
runner = CliRunner()


def test_a_four_point_sweep_runs_as_ray_tasks_into_the_store(tmp_path, monkeypatch):
    from infermeter.experiments.ray_sweep import RayPlacement, run_sweep_on_ray

    store = Store(tmp_path / "r.db")
    spec = SweepSpec(
        RunConfig(model="tiny-llama", new_tokens=3, samples=2, warmup=0, energy="off"),
        {"prompt_tokens": ["8", "16"], "batch_size": ["1", "2"]},
    )
    seen = []
    result = run_sweep_on_ray(spec, store, RayPlacement(local_cpus=2), on_point=seen.append)
    assert not ray.is_initialized()  # the instance it started is shut down
    assert len(result.runs) == 4 and result.skipped == 0
    got = sorted((r.knobs["prompt_tokens"], r.knobs["batch_size"]) for r in result.runs)
    assert got == [(8, 1), (8, 2), (16, 1), (16, 2)]
    for run in result.runs:
        back = store.get(run.run_id)
        assert back.status == "finished" and back.sweep_id == spec.sweep_id
        s = back.measured[0]
        assert (s.prompt_tokens, s.batch_size) == (
            back.knobs["prompt_tokens"],
            back.knobs["batch_size"],
        )
        assert back.checks  # every knob verified by measurement in the worker
    workers = {p["pid"] for p in seen}
    assert os.getpid() not in workers  # the points ran in Ray's worker processes
    starts: list[int] = []
    real_init = ray.init
    monkeypatch.setattr(ray, "init", lambda *a, **k: starts.append(1) or real_init(*a, **k))
    again = run_sweep_on_ray(spec, store, RayPlacement(local_cpus=2))
    assert again.skipped == 4 and [r.run_id for r in again.runs] == [r.run_id for r in result.runs]
    assert starts == []  # nothing left to run: no Ray instance is started for it


def _running_run(store):
    """(run id, worker pid) of a point mid-run with samples stored, or None."""
    from infermeter.store.schema import RunRow

    for row in store.list_runs(status="running", limit=10):
        if store.get(row["id"]).samples:
            with store.session("read") as s:
                return row["id"], s.get(RunRow, row["id"]).pid
    return None


def test_killing_a_worker_mid_point_loses_nothing_and_the_sweep_resumes(postgres, tmp_path):
    """The shared-store case: workers write to PostgreSQL; one is killed with SIGKILL while
    its point runs. Ray retries the point once, the sweep ends with every point finished, the
    killed run is kept as crashed, and running the sweep again has nothing left to do."""
    url = postgres.new_database()
    cmd = [
        sys.executable,
        "-m",
        "infermeter",
        "sweep",
        "-m",
        "tiny-llama",
        "--knob",
        "prompt_tokens=16,48",
        "--new-tokens",
        "24",
        "--samples",
        "12",
        "--warmup",
        "0",
        "--energy",
        "off",
        "--ray",
        "--ray-cpus",
        "2",
        "--db",
        url,
    ]
    env = {**os.environ, "INFERMETER_HOME": str(tmp_path / "home")}
    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    killed = None
    watch = Store(url)  # one connection polled every 50 ms (opening one per poll took longer)
    deadline = time.monotonic() + 120
    while killed is None and time.monotonic() < deadline and proc.poll() is None:
        found = _running_run(watch)
        if found is not None:
            killed, pid = found
            os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)
    out, _ = proc.communicate(timeout=300)
    assert killed is not None, out
    assert proc.returncode == 0, out
    store = Store(url)  # opening it marks the dead worker's run crashed (same host)
    assert store.get(killed).status == "crashed"
    assert store.get(killed).samples  # what it measured before dying is kept
    finished = [store.get(i) for i in store.sweep_run_ids(_sweep_id(out))]
    assert sorted(r.knobs["prompt_tokens"] for r in finished) == [16, 48]
    assert all(len(r.measured) == 12 for r in finished)
    # the same command again, through the CLI in this process: nothing left, so no Ray either
    again = cli_here(*cmd[3:])
    assert again.returncode == 0 and "2 already done" in again.stdout, again.stdout + again.stderr


def _sweep_id(out):
    line = next(x for x in out.splitlines() if x.startswith("sweep ") and " on " in x)
    return line.split()[1]


def test_ray_options_fail_in_one_line(tmp_path, monkeypatch):
    db = str(tmp_path / "r.db")
    base = ["sweep", "-m", "tiny-llama", "--knob", "new_tokens=2,3", "--db", db]
    r = runner.invoke(app, [*base, "--gpus-per-point", "1"])
    assert_one_line_error(r, "add --ray")
    r = runner.invoke(app, [*base, "--ray", "local", "--cpus-per-point", "0"])
    assert_one_line_error(r, "--cpus-per-point 0 / --gpus-per-point 0: a point needs some")
    r = runner.invoke(app, [*base, "--ray", "local", "--cpus-per-point", "-1"])
    assert_one_line_error(r, "--cpus-per-point -1 is out of range; use 0..4096")
    r = runner.invoke(app, [*base, "--ray", "local", "--ray-cpus", "0"])
    assert_one_line_error(r, "--ray-cpus 0 is out of range; use 1..4096")
    r = runner.invoke(app, [*base, "--ray", "local", "--node-label", "zone"])
    assert_one_line_error(r, "KEY=VALUE")
    r = runner.invoke(app, [*base, "--ray", "local", "--interleave"])
    assert_one_line_error(r, "drop --ray or --interleave")
    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    r = runner.invoke(app, [*base, "--ray", "local"])
    assert_one_line_error(r, "pip install 'infermeter[ray]'")


def test_a_bare_ray_flag_means_a_local_instance():
    from infermeter.cli.sweep_cmd import bare_ray_option

    assert bare_ray_option(["im", "sweep", "--ray"]) == ["im", "sweep", "--ray", "local"]
    assert bare_ray_option(["im", "sweep", "--ray", "--db", "x"])[3] == "local"
    assert bare_ray_option(["im", "sweep", "--ray", "auto"]) == ["im", "sweep", "--ray", "auto"]
    assert bare_ray_option(["im", "profile", "--ray"]) == ["im", "profile", "--ray"]


def test_a_point_no_node_can_run_is_refused_not_left_waiting(tmp_path):
    """`sweep --ray --cpus-per-point 1000` hung in silence: Ray queues an infeasible task
    forever (issue 35, item 9). Checked against the real local instance's nodes."""
    db = str(tmp_path / "r.db")
    base = [
        "sweep",
        "-m",
        "tiny-llama",
        "--knob",
        "new_tokens=2",
        "--db",
        db,
        "--ray",
        "local",
        "--ray-cpus",
        "2",
    ]
    for option, needles in (
        ("--cpus-per-point=1000", ("--cpus-per-point 1000", "has 2")),
        ("--gpus-per-point=1", ("--gpus-per-point 1", "has 0")),
    ):
        r = runner.invoke(app, [*base, option])
        # the sweep's banner and Ray's own start-up notice come first; the error is one line
        last = r.output.strip().splitlines()[-1]
        assert r.exit_code == 2 and "Traceback" not in r.output, r.output
        assert last.startswith("error: ") and all(n in last for n in needles), last
    assert not ray.is_initialized()  # the instance it started is shut down
    assert Store(db).list_runs() == []


def test_feasibility_is_judged_per_node():
    from infermeter import UserError
    from infermeter.experiments.ray_sweep import RayPlacement, check_feasible

    nodes = [
        {"Alive": True, "Resources": {"CPU": 8.0, "GPU": 1.0, "accelerator_type:A10G": 1.0}},
        {"Alive": True, "Resources": {"CPU": 16.0}},
        {"Alive": False, "Resources": {"CPU": 64.0, "GPU": 8.0}},
    ]
    check_feasible(nodes, RayPlacement(cpus_per_point=16))
    check_feasible(nodes, RayPlacement(gpus_per_point=1, accelerator_type="A10G"))
    with pytest.raises(UserError, match="the largest has 16"):  # 8 + 16 is not one node
        check_feasible(nodes, RayPlacement(cpus_per_point=24))
    with pytest.raises(UserError, match="the largest has 1"):  # the dead node does not count
        check_feasible(nodes, RayPlacement(gpus_per_point=2))
    with pytest.raises(UserError, match="H100"):
        check_feasible(nodes, RayPlacement(gpus_per_point=1, accelerator_type="H100"))
