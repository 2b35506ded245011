"""The host is part of the measurement (issue 59, item 1): what other processes took while a run
measured is recorded, and a run beside a CPU hog says so above its table."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from infermeter.cli.app import app
from infermeter.measure.host import HostLoad, HostWatch

runner = CliRunner()


def _load(**kw: float | int | None) -> HostLoad:
    base: dict = dict(
        window_s=1.0,
        cpu_count=2,
        torch_threads=2,
        other_busy_cores=0.0,
        own_busy_cores=2.0,
        steal_share=0.0,
        load_avg_1m=None,
        cpu_mhz=None,
    )
    return HostLoad(**{**base, **kw})


def test_busy_means_others_took_cores_the_run_needed():
    assert not _load().busy and _load().verdict() is None
    hogged = _load(other_busy_cores=1.0, own_busy_cores=1.0, load_avg_1m=3.0)
    assert hogged.busy
    said = hogged.verdict()
    assert said is not None and "1.0 of 2 cores" in said and "load average 3.0" in said
    assert "--threads" in said
    # a shell's tick is not a busy host, even on a saturated machine
    assert not _load(other_busy_cores=0.3, own_busy_cores=1.9).busy
    # work on cores the run leaves free: 10 busy cores beside a 32-thread run on 64
    assert not _load(cpu_count=64, torch_threads=32, other_busy_cores=10, own_busy_cores=32).busy
    # a hypervisor taking 8% of the CPU time makes it busy by itself
    stolen = _load(steal_share=0.08)
    assert stolen.busy and "hypervisor took 8%" in (stolen.verdict() or "")
    back = HostLoad.from_dict(hogged.to_dict())
    assert back == hogged and hogged.to_dict()["busy"] is True


def _hogs(n: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def test_the_watch_sees_another_process_spin():
    hogs = _hogs(1)
    try:
        watch = HostWatch()
        import time

        time.sleep(0.5)  # this process idles: what the machine did was the hog's
        seen = watch.stop(torch_threads=1)
    finally:
        for h in hogs:
            h.kill()
    assert seen.other_busy_cores > 0.5 and seen.own_busy_cores < 0.2
    assert seen.window_s >= 0.5 and seen.cpu_count >= 1


def test_a_profile_beside_a_cpu_hog_says_so_above_its_table(tmp_path):
    """A hog on every core: the header's warning, with the figures, and the stored document;
    `--threads 1` is the run's (recorded) and torch's own count is put back after it."""
    import psutil
    import torch

    before = torch.get_num_threads()
    hogs = _hogs(psutil.cpu_count() or 2)
    try:
        r = runner.invoke(
            app,
            ["profile", "-m", "tiny-llama", "--new-tokens", "8", "--samples", "3"]
            + ["--threads", "1", "--json", "--db", str(tmp_path / "r.db")],
        )
    finally:
        for h in hogs:
            h.kill()
    assert r.exit_code == 0, r.output
    device = json.loads(r.stdout)["meta"]["device"]
    assert device["torch_threads"] == 1 and torch.get_num_threads() == before
    host = device["host"]
    assert host["busy"] is True and host["other_busy_cores"] >= 0.5, host
    run_id = json.loads(r.stdout)["meta"]["run_id"]
    shown = runner.invoke(app, ["runs", "show", run_id, "--db", str(tmp_path / "r.db")])
    lines = shown.output.splitlines()
    warning = next(i for i, x in enumerate(lines) if x.startswith("⚠ busy host"))
    assert warning < next(i for i, x in enumerate(lines) if x.startswith("summary")), shown.output
    assert "cores busy" in lines[warning]
    # compare names the side measured on a busy host: its difference may be the host's
    db = str(tmp_path / "r.db")
    other = runner.invoke(app, ["profile", "-m", "tiny-llama", "--new-tokens", "8", "--json"]
                          + ["--samples", "3", "--db", db])  # fmt: skip
    other_id = json.loads(other.stdout)["meta"]["run_id"]
    compared = runner.invoke(app, ["compare", run_id, other_id, "--db", db])
    assert compared.exit_code == 0, compared.output
    assert "⚠ the baseline: busy host: other processes kept" in compared.output


@pytest.mark.parametrize("given", ["0", "-1", "5000"])
def test_threads_out_of_range_is_one_line(given, tmp_path):
    from tests.helpers import assert_one_line_error

    r = runner.invoke(app, ["profile", "--threads", given, "--db", str(tmp_path / "r.db")])
    assert_one_line_error(r, f"--threads {given} is out of range; use 1..4096")
