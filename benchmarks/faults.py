"""Long fault trials on real processes: SIGKILL at random moments, and concurrent writers.

- 20 trials: a real `infermeter profile` killed with SIGKILL at a random moment, then
  `PRAGMA integrity_check`, the run found `crashed`, every sample committed before the kill
  still there and whole;
- 4 writer processes running profiles for 60 s while the dashboard is read over HTTP: no
  writer fails, no request fails, every sample stored.
- every case of the second hardening round (issue 35), each a test on real processes, real
  SQLite and PostgreSQL, a real tmpfs, Ray and torchrun: run with pytest and tabulated, with
  a pass count.
Prints each report and a JSON line. (`make test` runs short variants: tests/store/test_faults.py.)

    python benchmarks/faults.py --trials 20 --seconds 60
    python benchmarks/faults.py --cases-only          # the issue-35 table alone
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.faults_kit import kill_trials, writers_and_reader

#: (item of issue 35, what must hold, the tests that check it on real parts)
CASES: list[tuple[str, str, list[str]]] = [
    (
        "1",
        "concurrent first opens of a new PostgreSQL database all succeed",
        [
            "tests/store/test_hardening.py::test_processes_opening_a_new_postgresql_database_at_once_all_succeed",
            "tests/store/test_hardening.py::test_a_schema_step_another_process_did_first_is_retried_not_refused",
        ],
    ),
    (
        "2",
        "a PostgreSQL password is never printed, logged, stored or sent",
        [
            "tests/store/test_hardening.py::test_a_password_is_never_shown",
            "tests/store/test_hardening.py::test_the_profile_card_and_runs_show_hide_the_password",
        ],
    ),
    (
        "3",
        "a run in progress is kept from delete and cleanup unless --force",
        [
            "tests/store/test_hardening.py::test_a_run_in_progress_is_kept_from_delete_and_cleanup_unless_forced"
        ],
    ),
    (
        "4",
        "a refused database is never written; read-only and empty ones are read only",
        [
            "tests/store/test_hardening.py::test_a_foreign_sqlite_file_is_refused_untouched",
            "tests/store/test_hardening.py::test_a_newer_schema_is_refused_before_any_table_is_created",
            "tests/store/test_hardening.py::test_reading_an_empty_database_creates_nothing",
            "tests/store/test_hardening.py::test_a_database_opened_read_only_can_be_listed",
        ],
    ),
    (
        "5",
        "two deep-mode profiles in two threads each keep their attention operations",
        [
            "tests/instrument/test_profiler.py::test_two_deep_profiles_in_two_threads_each_time_their_own_attention"
        ],
    ),
    (
        "6",
        "no --tp process outlives an interrupted or killed profile",
        [
            "tests/experiments/test_tensor_parallel.py::test_no_process_outlives_an_interrupted_or_killed_profile"
        ],
    ),
    (
        "7",
        "a killed profile leaves no in-progress line on the live page",
        ["tests/store/test_hardening.py::test_a_killed_profile_leaves_no_in_progress_line"],
    ),
    (
        "8",
        "an interrupted load stores the requests that finished (Ctrl-C, SIGTERM)",
        ["tests/serving/test_load.py::test_an_interrupted_load_stores_the_requests_that_finished"],
    ),
    (
        "9",
        "a Ray point no node can run is refused, not left waiting",
        [
            "tests/experiments/test_ray_sweep.py::test_a_point_no_node_can_run_is_refused_not_left_waiting",
            "tests/experiments/test_ray_sweep.py::test_feasibility_is_judged_per_node",
        ],
    ),
    (
        "10",
        "unbounded or malformed inputs are one line, at once",
        ["tests/run/test_hostile_inputs.py"],
    ),
    (
        "11",
        "a full disk: files whole or absent, one line, the store readable",
        ["tests/store/test_disk_full.py"],
    ),
    (
        "12",
        "serve on every interface, Ctrl-C with pages open, bytes given back, load lengths",
        [
            "tests/dashboard/test_serve_process.py",
            "tests/store/test_hardening.py::test_cleanup_never_claims_more_than_the_database_held",
            "tests/serving/test_load.py::test_bad_options_are_one_line",
        ],
    ),
]


def run_cases() -> list[dict[str, object]]:
    """Run every case's tests with pytest (one session) and return a row per case."""
    import subprocess
    import xml.etree.ElementTree as ET

    root = Path(__file__).resolve().parents[1]
    ids = [t for _, _, tests in CASES for t in tests]
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "junit.xml"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                f"--junitxml={report}",
                *ids,
            ],
            cwd=root,
            check=False,
        )
        cases = ET.parse(report).getroot().iter("testcase")
        results = []
        for c in cases:
            path = c.get("file") or (c.get("classname") or "").replace(".", "/") + ".py"
            status = (
                "failed"
                if c.find("failure") is not None or c.find("error") is not None
                else "skipped"
                if c.find("skipped") is not None
                else "passed"
            )
            results.append((path, c.get("name") or "", status))
    rows = []
    for item, what, tests in CASES:
        mine = [r for r in results if any(_covers(t, r[0], r[1]) for t in tests)]
        counts = {s: sum(1 for r in mine if r[2] == s) for s in ("passed", "failed", "skipped")}
        rows.append({"item": item, "what": what, **counts})
    return rows


def _covers(test_id: str, path: str, name: str) -> bool:
    """Whether the pytest id `test_id` (a file or file::test) names the result (path, name)."""
    file, _, test = test_id.partition("::")
    return path.endswith(file.removeprefix("tests/")) and (not test or name.split("[")[0] == test)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--writers", type=int, default=4)
    ap.add_argument("--cases-only", action="store_true", help="only the issue-35 table")
    args = ap.parse_args(argv)
    rows = run_cases()
    print(f"\n{'item':>4}  {'passed':>6} {'failed':>6} {'skipped':>7}  what")
    for r in rows:
        print(f"{r['item']:>4}  {r['passed']:>6} {r['failed']:>6} {r['skipped']:>7}  {r['what']}")
    ok = sum(1 for r in rows if r["passed"] and not r["failed"] and not r["skipped"])
    print(f"{ok} of {len(rows)} cases pass on real parts (every test of the case passed)")
    if args.cases_only:
        print(json.dumps({"cases": rows}))
        return
    with tempfile.TemporaryDirectory() as tmp:
        kills = kill_trials(  # from start-up to deep into the samples
            Path(tmp), args.trials, seed=7, min_delay_s=0.3, max_delay_s=14.0, samples=40
        )
        print(
            f"SIGKILL: {kills.trials} trials, {kills.killed} killed mid-run, "
            f"{kills.samples_committed} samples committed before a kill, "
            f"{kills.samples_lost} lost; problems: {kills.problems or 'none'}",
            flush=True,
        )
        load = writers_and_reader(Path(tmp), args.writers, args.seconds, samples=3)
        print(
            f"writers: {load.writers} for {args.seconds:g} s, {load.runs} runs, "
            f"{load.samples_stored} of {load.samples_expected} samples stored; dashboard "
            f"{load.requests} requests, {load.failed_requests} failed; "
            f"problems: {load.problems or 'none'}"
        )
    print(json.dumps({"kill": asdict(kills), "writers": asdict(load), "cases": rows}))


if __name__ == "__main__":
    main()
