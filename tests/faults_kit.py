"""Fault trials on real processes, shared by the fault tests and `benchmarks/faults.py`.

- `kill_trials`: SIGKILL a real `infermeter profile` at a random moment, then check the SQLite
  file (`PRAGMA integrity_check`), that the killed run is found `crashed` on the next open, and
  that every sample committed before the kill is there whole (all its decode steps).
- `writers_and_reader`: several writer processes make a profile's store writes in a loop
  (`tests/store_writer.py`: the store's write path without a model, so each writes dozens of
  runs, not one) into one database while the dashboard (a real `infermeter serve`) is read
  over HTTP; no writer may fail, no sample may go missing, no request may fail.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

NEW_TOKENS = 8


def _profile_cmd(db: Path | str, samples: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "infermeter",
        "profile",
        "--model",
        "tiny-llama",
        "--prompt-tokens",
        "16",
        "--new-tokens",
        str(NEW_TOKENS),
        "--samples",
        str(samples),
        "--warmup",
        "0",
        "--energy",
        "off",
        "--db",
        str(db),
    ]


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "INFERMETER_HOME": str(home), "INFERMETER_DEBUG": ""}


@dataclass
class KillReport:
    """What the kill trials found."""

    trials: int = 0
    killed: int = 0  # killed before they finished on their own
    samples_committed: int = 0
    samples_lost: int = 0
    problems: list[str] = field(default_factory=list)


def _committed(db: Path) -> dict[str, list[int]]:
    """Per run id: the index of every committed sample, read with plain sqlite3."""
    if not db.exists():
        return {}
    with sqlite3.connect(db, timeout=10) as c:
        try:
            rows = c.execute('SELECT run_id, "index" FROM samples').fetchall()
        except sqlite3.OperationalError:  # not created yet
            return {}
    out: dict[str, list[int]] = {}
    for run_id, idx in rows:
        out.setdefault(run_id, []).append(idx)
    return out


def kill_trials(
    workdir: Path,
    trials: int,
    seed: int = 0,
    max_delay_s: float = 8.0,
    samples: int = 6,
    min_delay_s: float = 0.3,
) -> KillReport:
    """SIGKILL `trials` real profiles at random moments into one database; check after each."""
    from infermeter import Store

    rng = random.Random(seed)
    db, report = workdir / "kill.db", KillReport()
    for _ in range(trials):
        before = _committed(db)
        proc = subprocess.Popen(
            _profile_cmd(db, samples),
            env=_env(workdir),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + rng.uniform(min_delay_s, max_delay_s)
        seen: dict[str, list[int]] = {}
        while time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
            with contextlib.suppress(sqlite3.Error):
                seen = _committed(db)  # what is committed just before the kill
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            report.killed += 1
        proc.wait(timeout=60)
        report.trials += 1
        with sqlite3.connect(db, timeout=10) as c:
            check = c.execute("PRAGMA integrity_check").fetchone()[0]
        if check != "ok":
            report.problems.append(f"trial {report.trials}: integrity_check {check}")
        store = Store(db)  # opening marks a dead process's run crashed
        after = _committed(db)
        for run_id, rows in seen.items():
            if run_id in before and len(before[run_id]) == len(rows):
                continue
            kept = set(after.get(run_id, []))
            lost = [i for i in rows if i not in kept]
            report.samples_committed += len(rows)
            report.samples_lost += len(lost)
            if lost:
                report.problems.append(f"trial {report.trials}: run {run_id} lost {lost}")
        for r in store.list_runs(limit=1):
            run = store.get(r["id"])
            if run.status not in ("crashed", "finished"):
                report.problems.append(f"trial {report.trials}: run status {run.status}")
            bad = [s.index for s in run.samples if len(s.step_ms) != NEW_TOKENS - 1]
            if bad:
                report.problems.append(f"trial {report.trials}: partial samples {bad}")
    return report


@dataclass
class WritersReport:
    """What the concurrent writers and the dashboard reader found."""

    writers: int = 0
    runs: int = 0
    samples_expected: int = 0
    samples_stored: int = 0
    requests: int = 0
    failed_requests: int = 0
    problems: list[str] = field(default_factory=list)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def writers_and_reader(
    workdir: Path,
    writers: int = 4,
    duration_s: float = 10.0,
    samples: int = 3,
    db: str | Path | None = None,
) -> WritersReport:
    """`writers` processes write runs in a loop for `duration_s` while the dashboard is read.

    `db`: the shared database (a SQLite file in `workdir` by default; a PostgreSQL URL works).
    """
    from infermeter import Store

    db = db or workdir / "shared.db"
    report = WritersReport(writers=writers)
    Store(db)
    port = _free_port()
    serve = subprocess.Popen(
        [sys.executable, "-m", "infermeter", "serve", "--port", str(port), "--db", str(db)],
        env=_env(workdir),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.1)
        procs: list[subprocess.Popen[str] | None] = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tests.store_writer",
                    str(db),
                    str(samples),
                    f"{duration_s}",
                ],
                cwd=Path(__file__).resolve().parent.parent,
                env=_env(workdir),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(writers)
        ]
        base = f"http://127.0.0.1:{port}"
        while any(p is not None for p in procs):
            for k, p in enumerate(procs):
                if p is None or p.poll() is None:
                    continue
                out, err = p.communicate()
                if p.returncode != 0:
                    report.problems.append(f"writer {k} exited {p.returncode}: {err[-300:]}")
                else:
                    report.samples_expected += int(out.split()[1])  # runs, samples
                procs[k] = None
            try:
                with urllib.request.urlopen(base + "/api/runs", timeout=10) as resp:
                    runs_doc = json.loads(resp.read())
                ids = [r["id"] for r in runs_doc["runs"]][:3]
                for run_id in ids:
                    with urllib.request.urlopen(f"{base}/api/runs/{run_id}", timeout=10) as r2:
                        r2.read()
                    report.requests += 1
                report.requests += 1
            except Exception as exc:  # every failure is counted and named
                report.failed_requests += 1
                report.problems.append(f"dashboard: {type(exc).__name__}: {exc}")
            time.sleep(0.2)
    finally:
        serve.terminate()
        serve.wait(timeout=30)
    store = Store(db)
    rows = store.list_runs(limit=10_000)
    report.runs = len(rows)
    for r in rows:
        run = store.get(r["id"])
        if run.status != "finished":
            report.problems.append(f"run {run.run_id}: {run.status} {run.error}")
        report.samples_stored += len(run.samples)
    return report
