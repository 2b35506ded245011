"""Long fault trials on real processes: SIGKILL at random moments, and concurrent writers.

- 20 trials: a real `infermeter profile` killed with SIGKILL at a random moment, then
  `PRAGMA integrity_check`, the run found `crashed`, every sample committed before the kill
  still there and whole;
- 4 writer processes running profiles for 60 s while the dashboard is read over HTTP: no
  writer fails, no request fails, every sample stored.
- every case of the second and third hardening rounds (issues 35 and 58), each a test on real
  processes, real SQLite and PostgreSQL, a real tmpfs, Ray, torchrun and hostile servers on
  127.0.0.1: run with pytest and tabulated, with a pass count;
- the peak resident memory of `infermeter load endpoint` (its process and children) against a
  server streaming a reply that never ends and a /metrics body that never ends (issue 58: an
  endless body grew a load to 18.4 GB): it must stay under 1 GiB and end with its reasons.
Prints each report and a JSON line. (`make test` runs short variants: tests/store/test_faults.py.)

    python benchmarks/faults.py --trials 20 --seconds 60
    python benchmarks/faults.py --cases-only          # the case tables alone
    python benchmarks/faults.py --hostile-only        # the peak memory against endless bodies
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

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


#: (item of issue 58, what must hold, the tests that check it against real hostile servers)
CASES_58: list[tuple[str, str, list[str]]] = [
    (
        "58.1",
        "every outside read bounded: a whole-request deadline, 16 MiB per reply, 8 MiB and "
        "one timeout per scrape",
        [
            "tests/serving/test_selfcheck.py::test_timeout_bounds_the_whole_request_not_each_read",
            "tests/serving/test_selfcheck.py::test_an_endless_response_is_cut_off",
            "tests/serving/test_server_metrics.py::test_a_scrape_of_a_hostile_metrics_server_ends_bounded_with_its_reason",
        ],
    ),
    (
        "58.2",
        "a bad chunk (not JSON, or the wrong shape) fails its request, not the run",
        [
            "tests/serving/test_selfcheck.py::test_a_bad_chunk_fails_its_request_and_the_rest_are_kept"
        ],
    ),
    (
        "58.3",
        "trace records and data files checked before the first request, one line each",
        [
            "tests/workloads/test_traffic.py::test_a_trace_record_out_of_range_is_refused_before_any_request",
            "tests/workloads/test_traffic.py::test_a_burstgpt_row_without_a_token_count_is_named",
            "tests/workloads/test_traffic.py::test_bad_workload_files_are_one_line",
            "tests/workloads/test_sources.py::test_a_broken_data_file_is_one_line_naming_it",
        ],
    ),
    (
        "58.4",
        "no secret of an endpoint, metrics or database URL printed, stored or written",
        [
            "tests/serving/test_server_metrics.py::test_no_secret_of_an_endpoint_or_metrics_url_is_printed_or_stored",
            "tests/util/test_urls.py",
            "tests/store/test_hardening.py::test_a_password_is_never_shown",
        ],
    ),
    (
        "58.5",
        "a load is stored from its first request: kill -9 (SQLite, PostgreSQL), Ctrl-C in "
        "the last scrape",
        [
            "tests/serving/test_load.py::test_a_killed_load_keeps_the_requests_it_served",
            "tests/serving/test_server_metrics.py::test_ctrl_c_during_the_last_scrape_keeps_every_finished_request",
        ],
    ),
    (
        "58.6",
        "/api/compare of a run without samples, over-long output names, a run cut by a full disk",
        [
            "tests/dashboard/test_api.py::test_analysis_trace_and_compare_for_the_run_and_compare_pages",
            "tests/cli/test_gate_outputs.py::test_a_name_longer_than_the_file_system_allows_is_one_line",
            "tests/store/test_disk_full.py::test_a_run_cut_short_by_a_full_disk_is_marked_failed_once_there_is_room",
        ],
    ),
]


def run_cases(cases: list[tuple[str, str, list[str]]]) -> list[dict[str, object]]:
    """Run every case's tests with pytest (one session) and return a row per case."""
    import subprocess
    import xml.etree.ElementTree as ET

    root = Path(__file__).resolve().parents[1]
    ids = [t for _, _, tests in cases for t in tests]
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
        testcases = ET.parse(report).getroot().iter("testcase")
        results = []
        for c in testcases:
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
    for item, what, tests in cases:
        mine = [r for r in results if any(_covers(t, r[0], r[1]) for t in tests)]
        counts = {s: sum(1 for r in mine if r[2] == s) for s in ("passed", "failed", "skipped")}
        rows.append({"item": item, "what": what, **counts})
    return rows


@dataclass
class HostileRun:
    """`load endpoint` against a reply and a /metrics body that never end."""

    peak_rss_mib: float
    exit_code: int | None
    seconds: float
    last_line: str
    samples: int


def _endless_metrics() -> tuple[Any, str]:
    """A /metrics server on 127.0.0.1 whose body never ends (a valid exposition, repeated)."""
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            block = b"# HELP x x\n" + b"x_total 1\n" * 6000
            try:
                while True:
                    self.wfile.write(block)
            except OSError:
                return  # the client hung up: what a bounded scrape does

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/metrics"


def hostile_peak_rss(
    tmp: Path, endless: bool = True, requests: int = 4, timeout_s: float = 600.0
) -> HostileRun:
    """Peak RSS of `load endpoint` (process and children, every 20 ms) against endless bodies.

    With `endless=False`, against well-behaved ones: the same command's own baseline.

    The null server streams 64 KiB of text per chunk and as many chunks as asked (65,536, the
    most `--new-tokens` takes: 4 GiB a reply if nothing cut it); the metrics server's body
    never ends and is scraped every 100 ms for the whole run.
    """
    import subprocess
    import time

    import psutil

    from infermeter.serving.nullserver import NullSpec, null_server

    metrics, metrics_url = _endless_metrics()
    spec = NullSpec(piece=" the" * 16384) if endless else NullSpec()
    tokens = "65536" if endless else "16"
    db = tmp / f"hostile-{endless}.db"
    try:
        with null_server(spec) as s:
            cmd = [
                sys.executable, "-m", "infermeter", "load", "endpoint", s.url,
                "-m", "tiny-llama", "--requests", str(requests), "--concurrency", "2",
                "--prompt-tokens", "16", "--new-tokens", tokens, "--no-selfcheck",
                "--db", str(db),
            ]  # fmt: skip
            if endless:
                cmd += ["--metrics-url", metrics_url, "--metrics-interval-ms", "100"]
            started = time.perf_counter()
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            me = psutil.Process(proc.pid)
            peak = 0
            while proc.poll() is None and time.perf_counter() - started < timeout_s:
                try:
                    rss = me.memory_info().rss + sum(
                        c.memory_info().rss for c in me.children(recursive=True)
                    )
                except psutil.Error:
                    rss = 0
                peak = max(peak, rss)
                time.sleep(0.02)
            if proc.poll() is None:
                proc.kill()
            out, err = proc.communicate()
            seconds = time.perf_counter() - started
    finally:
        metrics.shutdown()
        metrics.server_close()
    lines = [x for x in (err.strip() or out.strip()).splitlines() if x.strip()]
    from infermeter.store import Store

    runs = Store(db).list_runs() if db.exists() else []
    kept = len(Store(db).get(runs[0]["id"]).samples) if runs else 0
    return HostileRun(peak / 2**20, proc.returncode, seconds, lines[-1] if lines else "", kept)


def _covers(test_id: str, path: str, name: str) -> bool:
    """Whether the pytest id `test_id` (a file or file::test) names the result (path, name)."""
    file, _, test = test_id.partition("::")
    return path.endswith(file.removeprefix("tests/")) and (not test or name.split("[")[0] == test)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--writers", type=int, default=4)
    ap.add_argument("--cases-only", action="store_true", help="only the case tables")
    ap.add_argument("--hostile-only", action="store_true", help="only the endless bodies")
    args = ap.parse_args(argv)
    if args.hostile_only:
        with tempfile.TemporaryDirectory() as tmp:
            hostile = _print_hostile(Path(tmp))
        print(json.dumps({"hostile": asdict(hostile)}))
        return
    rows = run_cases(CASES + CASES_58)
    print(f"\n{'item':>5}  {'passed':>6} {'failed':>6} {'skipped':>7}  what")
    for r in rows:
        print(f"{r['item']:>5}  {r['passed']:>6} {r['failed']:>6} {r['skipped']:>7}  {r['what']}")
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
        hostile = _print_hostile(Path(tmp))
    doc = {"kill": asdict(kills), "writers": asdict(load), "hostile": asdict(hostile)}
    print(json.dumps({**doc, "cases": rows}))


def _print_hostile(tmp: Path) -> HostileRun:
    plain = hostile_peak_rss(tmp, endless=False)
    run = hostile_peak_rss(tmp)
    verdict = "under" if run.peak_rss_mib < 1024 else "OVER"
    print(
        f"endless reply and /metrics body: peak RSS {run.peak_rss_mib:,.0f} MiB ({verdict} "
        f"1 GiB; the same command against a well-behaved server: {plain.peak_rss_mib:,.0f} "
        f"MiB), exit {run.exit_code} after {run.seconds:.1f} s; it said: {run.last_line}",
        flush=True,
    )
    return run


if __name__ == "__main__":
    main()
