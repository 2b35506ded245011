"""SIGTERM (schedulers, `docker stop`) and SIGHUP end a run like Ctrl-C: stored at once as
`terminated`, with every sample measured so far; tested on a real `infermeter profile`."""

import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from infermeter import Store


def _count(db, sql):
    try:
        with sqlite3.connect(db, timeout=1) as c:
            return c.execute(sql).fetchone()[0]
    except sqlite3.Error:
        return 0


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_stores_the_run_as_terminated_with_its_samples(sig, tmp_path):
    db = tmp_path / "r.db"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "infermeter",
            "profile",
            "--new-tokens",
            "32",
            "--samples",
            "200",
            "--energy",
            "off",
            "--db",
            str(db),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "INFERMETER_DEBUG": ""},
    )
    try:
        deadline = time.monotonic() + 120
        while _count(db, "SELECT count(*) FROM samples") < 2:
            assert proc.poll() is None, proc.stderr.read()
            assert time.monotonic() < deadline, "no sample stored in 120 s"
            time.sleep(0.2)
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + sig
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
    name = signal.Signals(sig).name
    assert lines[-1] == f"terminated by {name}; what was measured so far is stored"
    assert "Traceback" not in stderr
    (run,) = Store(db).list_runs()
    assert run["status"] == "terminated" and run["samples"] >= 1
    stored = Store(db).get(run["id"])
    assert stored.error == f"terminated by {name}"
