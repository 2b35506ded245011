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
from tests.helpers import assert_load_doc, assert_one_line_error

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
    assert_load_doc(doc)


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


# --- hostile metrics servers and credentials (issue 58, items 1 and 4) -----------------------


class _Hostile:
    """A metrics server on 127.0.0.1 that misbehaves as `kind` says, on a thread."""

    def __init__(self, kind: str) -> None:
        import http.server
        import threading

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                try:
                    if kind == "endless":  # a valid exposition that never ends
                        line = b"# HELP x x\n" + b"x_total 1\n" * 6000
                        while True:
                            self.wfile.write(line)
                    else:  # "trickle": one byte every 50 ms, for ever
                        while True:
                            self.wfile.write(b"#")
                            self.wfile.flush()
                            time.sleep(0.05)
                except OSError:
                    return  # the client hung up: what a bounded scrape does

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/metrics"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize("kind", ["endless", "trickle"])
def test_a_scrape_of_a_hostile_metrics_server_ends_bounded_with_its_reason(kind):
    """An endless /metrics body grew a load to 18.4 GB; one trickling a byte a second kept it
    from ending: a timeout per read never fires. Each scrape is bounded in bytes and in time."""
    from infermeter.serving.server_metrics import MAX_BODY_BYTES, Scraper

    hostile = _Hostile(kind)
    try:
        scraper = Scraper(hostile.url, interval_s=60, timeout_s=1.0)
        scraper.scrape()
    finally:
        hostile.close()
    assert scraper.readings == [] and len(scraper.failures) == 1
    reason = scraper.failures[0]
    if kind == "endless":
        assert f"passed {MAX_BODY_BYTES >> 20} MiB" in reason
    else:
        assert "took over 1 s" in reason


def test_no_secret_of_an_endpoint_or_metrics_url_is_printed_or_stored(exporter, tmp_path):
    """`load endpoint http://user:secret@host` printed the password, stored it in the run's
    spec and device and wrote it into load.json; --metrics-url with user-info printed it and
    every scrape failed (urllib took `user:pass@host` for the host name). Now the clients send
    it as basic auth and every output, the store and load.json show it masked."""
    import json

    from infermeter.serving.nullserver import NullSpec, null_server

    db, out = tmp_path / "r.db", tmp_path / "out"
    port = exporter.split(":")[2].split("/")[0]
    metrics = f"http://scraper:m3trpw@127.0.0.1:{port}/metrics?token=t0kval"
    with null_server(NullSpec(ttft_ms=5, itl_ms=2)) as s:
        url = s.url.replace("http://", "http://alice:s3cr3tpw@")
        r = runner.invoke(
            app,
            [
                "load",
                "endpoint",
                url,
                "--requests",
                "3",
                "--rate",
                "inf",
                "--new-tokens",
                "4",
                "--no-selfcheck",
                "--metrics-url",
                metrics,
                "--metrics-interval-ms",
                "100",
                "--out",
                str(out),
                "--db",
                str(db),
            ],
            env={"COLUMNS": "300"},
        )
    assert r.exit_code == 0, r.output
    secrets = ("s3cr3tpw", "m3trpw", "t0kval")
    shown = r.output + (r.stderr or "")
    doc = (out / "load.json").read_text()
    stored = db.read_bytes()
    for secret in secrets:
        assert secret not in shown, secret
        assert secret not in doc, secret
        assert secret.encode() not in stored, secret
    meta = json.loads(doc)["meta"]
    assert "alice:***@127.0.0.1" in meta["model_info"]["spec"]
    m = json.loads(doc)["server_metrics"]
    assert m["scrapes"] > 0 and m["failures"] == 0  # basic auth, not a host named scraper:...
    assert m["url"].endswith("/metrics?token=***") and "scraper:***@" in m["url"]


def test_ctrl_c_during_the_last_scrape_keeps_every_finished_request(
    exporter, tiny_llama, tmp_path, monkeypatch
):
    """A Ctrl-C while the last scrape ran escaped the load, and the requests that had finished
    were never stored although the CLI said they were (issue 58, item 5): now the interrupt
    comes back with the document, which is stored as a profile's would be."""
    from infermeter import Store
    from infermeter.serving.load import store_load
    from infermeter.serving.server_metrics import Scraper

    def interrupted_stop(self):
        self._stop.set()
        raise KeyboardInterrupt

    monkeypatch.setattr(Scraper, "stop", interrupted_stop)
    store = Store(tmp_path / "r.db")
    spec = LoadSpec(
        rate=math.inf,
        requests=3,
        new_tokens=Lengths("fixed", 3),
        server="static",
        metrics_url=exporter,
        energy="off",
    )
    doc = run_load(spec, loaded=tiny_llama, sink=store, keep=True)
    caught = doc["meta"]["interrupted"]
    assert isinstance(caught, KeyboardInterrupt)
    assert [r["output_tokens"] for r in doc["all_samples"]] == [3, 3, 3]
    run_id = store_load(doc, store, doc["meta"].pop("interrupted"))
    (listed,) = store.list_runs()
    assert listed["id"] == run_id and listed["status"] == "terminated"
    assert len(store.get(run_id).samples) == 3  # the kept run, finished in place: not twice
