"""Sweeps on a real local Ray instance (2 CPUs): points land in the store from the workers,
a killed worker is retried and the sweep stays resumable, and the options fail in one line."""

import os
import re
import signal
import subprocess
import sys
import time

import pytest
from typer.testing import CliRunner

from infermeter import Store
from infermeter.cli.app import app
from tests.helpers import assert_one_line_error, cli_here

ray = pytest.importorskip("ray", reason="Ray is an optional extra: pip install 'infermeter[ray]'")
runner = CliRunner()


def _running_run(store):
    """(run id, worker pid) of a point mid-run with samples stored, or None."""
    from infermeter.store.schema import RunRow

    for row in store.list_runs(status="running", limit=10):
        if store.get(row["id"]).samples:
            with store.session("read") as s:
                return row["id"], s.get(RunRow, row["id"]).pid
    return None


def test_a_sweep_runs_as_ray_tasks_and_a_killed_worker_loses_nothing(
    postgres, tmp_path, monkeypatch
):
    """A 2 x 2 sweep on a local Ray instance (2 CPUs) into PostgreSQL, the shared-store case.
    Each point runs in a Ray worker, not the driver, and lands in the store from there with
    its knobs verified by measurement. One worker is killed with SIGKILL while its point
    runs: Ray retries the point once, the sweep ends with every point finished, the killed
    run is kept as crashed, and running the sweep again has nothing left to do and starts no
    Ray. (One sweep for both: each Ray start and worker import costs 10-20 s here.)"""
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
        "--knob",
        "batch_size=1,2",
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
    sweep_id = _sweep_id(out)
    finished = [store.get(i) for i in store.sweep_run_ids(sweep_id)]
    got = sorted((r.knobs["prompt_tokens"], r.knobs["batch_size"]) for r in finished)
    assert got == [(16, 1), (16, 2), (48, 1), (48, 2)]
    for run in finished:
        assert run.status == "finished" and run.sweep_id == sweep_id and len(run.measured) == 12
        s = run.measured[0]
        assert (s.prompt_tokens, s.batch_size) == (
            run.knobs["prompt_tokens"],
            run.knobs["batch_size"],
        )
        assert run.checks  # every knob verified by measurement in the worker
    # each point's line names the worker that ran it: never the driver's process
    workers = {int(m) for m in re.findall(r": finished \(run \w+, \S+ pid (\d+)\)", out)}
    assert len(re.findall(r": finished \(run", out)) == 4 and proc.pid not in workers, out
    # the same command again, through the CLI in this process: nothing left, so no Ray either
    starts: list[int] = []
    real_init = ray.init
    monkeypatch.setattr(ray, "init", lambda *a, **k: starts.append(1) or real_init(*a, **k))
    again = cli_here(*cmd[3:])
    assert again.returncode == 0 and "4 already done" in again.stdout, again.stdout + again.stderr
    assert starts == []


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
    # (one real start: a GPU-less node's "has 0" is judged by the same check, below)
    r = runner.invoke(app, [*base, "--cpus-per-point=1000"])
    # the sweep's banner and Ray's own start-up notice come first; the error is one line
    last = r.output.strip().splitlines()[-1]
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output
    assert last.startswith("error: --cpus-per-point 1000") and "has 2" in last, last
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
    cpu_only = [{"Alive": True, "Resources": {"CPU": 2.0}}]  # as a local instance here reports
    with pytest.raises(UserError, match=r"has 0\); drop --gpus-per-point"):
        check_feasible(cpu_only, RayPlacement(gpus_per_point=1))
    with pytest.raises(UserError, match="H100"):
        check_feasible(nodes, RayPlacement(gpus_per_point=1, accelerator_type="H100"))
