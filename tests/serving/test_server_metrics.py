"""`load --metrics-url` (issue 34, item 2): a real Prometheus exposition server (the official
`prometheus_client`'s, in its own process, publishing an engine's metric names and its own
process metrics) scraped while a load runs; the series stored under their own names."""

from __future__ import annotations

import math
import socket
import subprocess
import sys
import textwrap
import time

import pytest
from typer.testing import CliRunner

from infermeter.cli.app import app
from infermeter.serving.load import Lengths, LoadSpec, run_load
from infermeter.serving.server_metrics import parse
from tests.helpers import assert_one_line_error

pytest.importorskip("prometheus_client", reason="--metrics-url needs infermeter[endpoint]")
runner = CliRunner()

EXPORTER = textwrap.dedent("""
    import sys, time
    from prometheus_client import Gauge, Histogram, start_http_server
    running = Gauge("vllm:num_requests_running", "running", ["model_name"])
    kv = Gauge("vllm:kv_cache_usage_perc", "kv", ["model_name"])
    latency = Histogram("vllm:e2e_request_latency_seconds", "e2e", ["model_name"])
    start_http_server(int(sys.argv[1]), addr="127.0.0.1")
    n = 0
    while True:
        n += 1
        running.labels("m").set(n % 4)
        kv.labels("m").set(0.25 * (n % 4))
        latency.labels("m").observe(0.1 * n)
        time.sleep(0.05)
""")


@pytest.fixture(scope="module")
def exporter():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-c", EXPORTER, str(port)])
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.1)
    yield f"http://127.0.0.1:{port}/metrics"
    proc.terminate()
    proc.wait(10)


def test_the_parser_keeps_samples_and_drops_buckets():
    text = (
        '# TYPE x_seconds histogram\nx_seconds_bucket{le="1.0"} 2\nx_seconds_sum 1.5\n'
        'x_seconds_count 2\n# TYPE up gauge\nup{job="a"} 1\n'
    )
    assert parse(text) == [
        ("x_seconds_sum", {}, 1.5),
        ("x_seconds_count", {}, 2.0),
        ("up", {"job": "a"}, 1.0),
    ]


def test_a_load_scrapes_the_engines_metrics_as_it_runs(exporter, tiny_llama):
    doc = run_load(
        LoadSpec(
            rate=math.inf,
            requests=4,
            new_tokens=Lengths("fixed", 8),
            server="static",
            metrics_url=exporter,
            metrics_interval_ms=100,
            energy="off",
        ),
        loaded=tiny_llama,
    )
    m = doc["server_metrics"]
    assert m["scrapes"] >= 2 and m["failures"] == 0
    running = m["series"]['vllm:num_requests_running{model_name="m"}']
    assert set(running["values"]) <= {0.0, 1.0, 2.0, 3.0} and running["labels"] == {
        "model_name": "m"
    }
    assert running["t_ms"] == sorted(running["t_ms"])
    assert "process_cpu_seconds_total" in m["series"]  # the exporter's own, real, process
    assert not [k for k in m["series"] if "_bucket" in k]
    assert 'vllm:e2e_request_latency_seconds_count{model_name="m"}' in m["series"]
    state = {r["name"]: r for r in doc["summary"]["server_metrics"]["state"]}
    assert state["vllm:num_requests_running"]["max"] <= 3
    assert 0 <= state["vllm:kv_cache_usage_perc"]["max"] <= 0.75


def test_cli_prints_the_state_and_a_dead_url_fails_no_run(exporter, tmp_path):
    db = str(tmp_path / "r.db")
    r = runner.invoke(
        app,
        [
            "load",
            "--rate",
            "inf",
            "--requests",
            "2",
            "--new-tokens",
            "2",
            "--server",
            "static",
            "--metrics-url",
            exporter,
            "--metrics-interval-ms",
            "100",
            "--db",
            db,
        ],
        env={"COLUMNS": "300"},
    )
    assert r.exit_code == 0, r.output
    assert "server metrics (" in r.output and "vllm:num_requests_running max" in r.output
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    r = runner.invoke(
        app,
        [
            "load",
            "--rate",
            "inf",
            "--requests",
            "2",
            "--new-tokens",
            "2",
            "--server",
            "static",
            "--metrics-url",
            f"http://127.0.0.1:{dead}/metrics",
            "--db",
            db,
        ],
        env={"COLUMNS": "300"},
    )
    assert r.exit_code == 0, r.output
    assert "every scrape failed" in r.output
    r = runner.invoke(app, ["load", "--metrics-url", "ftp://x", "--db", db])
    assert_one_line_error(r, "--metrics-url 'ftp://x' is not an http(s) URL")
