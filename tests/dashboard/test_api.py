"""Dashboard API and its guards, through FastAPI's test client on a real SQLite store."""

import pytest
from fastapi.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from infermeter import RunConfig, Store, profile
from infermeter.dashboard import create_app
from infermeter.dashboard.security import Guard
from infermeter.run.sweep import SweepSpec, run_sweep


@pytest.fixture(scope="module")
def stored(tiny_llama, tmp_path_factory):
    store = Store(tmp_path_factory.mktemp("dash") / "r.db")
    run = profile(
        RunConfig(new_tokens=4, samples=2, mode="standard", energy="off"),
        loaded=tiny_llama,
        sink=store,
    )
    sweep = run_sweep(
        SweepSpec(
            RunConfig(new_tokens=2, samples=1, warmup=0, energy="off"), {"new_tokens": ["2", "3"]}
        ),
        store,
        loaded=tiny_llama,
    )
    return store, run, sweep


def client(store, **guard):
    return TestClient(create_app(store, Guard(**guard), poll_s=0.05), base_url="http://localhost")


def test_lists_and_details(stored):
    store, run, sweep = stored
    c = client(store)
    runs = c.get("/api/runs").json()["runs"]
    assert run.run_id in {r["id"] for r in runs}
    doc = c.get(f"/api/runs/{run.run_id}").json()
    assert doc["meta"]["run_id"] == run.run_id
    assert doc["summary"][0]["ttft_ms"]["mean"] == pytest.approx(run.summary()["ttft_ms"].mean)
    assert {r["kind"] for r in doc["layers"]["layers"]} >= {"block", "attention"}
    assert c.get(f"/api/runs/{run.run_id[:6]}").status_code == 200  # a unique prefix works
    sweeps = c.get("/api/sweeps").json()["sweeps"]
    assert sweeps[0]["id"] == sweep.sweep_id and sweeps[0]["runs"] == 2
    assert len(c.get(f"/api/sweeps/{sweep.sweep_id}").json()["summary"]) == 2
    page = c.get("/")
    assert page.status_code == 200 and "/static/app.js" in page.text
    assert "https://" not in page.text  # no CDN: works offline
    assert c.get("/static/app.js").headers["content-type"].startswith("text/javascript")


def test_charts_come_from_this_server_in_the_reports_colours(stored):
    """plotly.js is the plotly package's own bundle, served (compressed) from here, never a CDN.

    The palette the page draws with is the one the report's matplotlib figures use.
    """
    import json
    import re

    from infermeter.util import palette

    store, _, _ = stored
    c = client(store)
    page = c.get("/").text
    scripts = re.findall(r'<script src="([^"]+)"', page)
    assert scripts == [
        "/static/plotly.min.js",
        "/static/palette.js",
        "/static/charts.js",
        "/static/app.js",
    ]
    bundle = c.get("/static/plotly.min.js", headers={"Accept-Encoding": "gzip"})
    assert bundle.status_code == 200 and "plotly.js v" in bundle.text[:200]
    assert bundle.headers["content-encoding"] == "gzip"
    assert len(bundle.text) > 3_000_000  # the whole library, not a stub
    js = c.get("/static/palette.js").text
    assert json.loads(js.split("=", 1)[1].rstrip().rstrip(";")) == palette.as_json()
    assert palette.PHASES["prefill"] in js
    for name in ("charts.js", "app.js"):
        src = c.get(f"/static/{name}").text
        assert "http://" not in src and "https://" not in src


def test_analysis_trace_and_compare_for_the_run_and_compare_pages(stored):
    store, run, sweep = stored
    c = client(store)
    analysis = c.get(f"/api/runs/{run.run_id}/analysis").json()
    assert analysis["run_id"] == run.run_id
    assert {"prefill", "decode"} <= set(analysis["roofline"]) and "findings" in analysis
    trace = c.get(f"/api/runs/{run.run_id}/trace")
    assert trace.status_code == 200
    assert f'filename="trace-{run.run_id}.json"' in trace.headers["content-disposition"]
    assert any(e.get("name") == "prefill (TTFT)" for e in trace.json()["traceEvents"])
    # a run against itself: no detectable difference anywhere, and every run's samples
    doc = c.get(f"/api/compare?runs={run.run_id},{run.run_id}").json()
    (comparison,) = doc["comparisons"]
    assert comparison["total_verdict"] == "no detectable difference"
    assert [len(r["samples"]) for r in doc["runs"]] == [2, 2]
    points = [r["run_id"] for r in c.get(f"/api/sweeps/{sweep.sweep_id}").json()["summary"]]
    doc = c.get("/api/compare?runs=" + ",".join(points)).json()
    assert doc["comparisons"][0]["changed"] == {"new_tokens": [2, 3]}
    assert c.get(f"/api/compare?runs={run.run_id}").status_code == 400
    assert c.get("/api/compare?runs=abc,NOT-HEX").status_code == 404
    # a run with no measured sample: the reason in one line, not a 500 and a traceback
    import copy

    empty = copy.deepcopy(run)
    empty.run_id, empty.samples = None, []
    empty_id = store.save(empty)
    r = c.get(f"/api/compare?runs={run.run_id},{empty_id}")
    assert r.status_code == 400 and "has no samples" in r.json()["detail"]


@pytest.mark.parametrize(
    "path",
    [
        "/api/runs/ffffffffffff",
        "/api/runs/NOT-HEX",
        "/api/runs/..%2f..%2fetc",
        "/api/sweeps/abc123",
        "/api/sweeps/x'%20OR%201=1",
    ],
)
def test_unknown_or_invalid_ids_are_404(stored, path):
    assert client(stored[0]).get(path).status_code == 404


@pytest.mark.parametrize(
    "path",
    [
        "/static/../app.py",
        "/static/%2e%2e/app.py",
        "/static/%2e%2e%2fapp.py",
        "/static/..%2f..%2fpyproject.toml",
        "/static/app.js/../../app.py",
        "/static_evil/app.js",
        "/staticapp.js",
        "/static/",
        "/static/.%2e/security.py",
        "/static/%252e%252e/app.py",
        "/static/__init__.py",
    ],
)
def test_static_files_only_from_the_package_folder(stored, path):
    r = client(stored[0]).get(path)
    assert r.status_code == 404, (path, r.status_code)


def test_token_required_when_exposed(stored):
    store = stored[0]
    c = client(store, host="0.0.0.0", token="s3cret")
    for method, path in (
        ("get", "/"),
        ("get", "/api/runs"),
        ("get", "/static/app.js"),
        ("post", "/api/runs"),
        ("delete", "/api/runs/abc"),
    ):
        assert getattr(c, method)(path).status_code == 401, (method, path)
    assert c.get("/api/runs", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert c.get("/api/runs", headers={"Authorization": "Bearer s3cret"}).status_code == 200
    r = c.get("/?token=s3cret")
    assert r.status_code == 200 and "infermeter_token" in r.headers["set-cookie"]
    assert c.get("/api/runs").status_code == 200  # the cookie the page got


def test_host_header_must_name_this_server(stored):
    c = client(stored[0])
    assert c.get("/api/runs", headers={"Host": "evil.example"}).status_code == 400
    assert c.get("/api/runs", headers={"Host": "127.0.0.1:8765"}).status_code == 200
    exposed = client(stored[0], host="10.1.2.3", token="t")
    assert exposed.get("/api/runs?token=t", headers={"Host": "10.1.2.3:8765"}).status_code == 200
    assert exposed.get("/api/runs?token=t", headers={"Host": "rebind.evil"}).status_code == 400


def _profile_and_watch(ws, store, tiny_llama):
    """Profile into `store` while the live socket is open; the run and the events it pushed."""
    run = profile(
        RunConfig(new_tokens=3, samples=1, warmup=0, energy="off", mode="standard"),
        loaded=tiny_llama,
        sink=store,
    )
    seen = {}
    while not {"sample", "layers"} <= set(seen):
        ev = ws.receive_json()
        seen[ev["type"]] = ev
    return run, seen


def test_websocket_checks_origin_and_token_and_pushes_samples(stored, tiny_llama):
    store = stored[0]
    c = client(store)
    host = {"Host": "localhost:8765"}  # the test client's WebSocket says "testserver"
    refused = [
        (c, {**host, "Origin": "http://evil.example"}),
        (c, host),  # no Origin: not a page of ours
        (c, {"Host": "evil.example", "Origin": "http://evil.example"}),  # DNS rebinding
        (client(store, host="0.0.0.0", token="t"), {**host, "Origin": "http://localhost"}),
    ]
    for cl, headers in refused:
        with (
            pytest.raises(WebSocketDisconnect),
            cl.websocket_connect("/ws/live", headers=headers) as ws,
        ):
            ws.receive_json()
    with c.websocket_connect("/ws/live", headers={**host, "Origin": "http://localhost:8765"}) as ws:
        assert ws.receive_json()["type"] == "hello"
        run, seen = _profile_and_watch(ws, store, tiny_llama)
        assert seen["sample"]["sample"]["run_id"] == run.run_id
        assert seen["layers"]["rows"] and seen["layers"]["run_id"] == run.run_id


@pytest.mark.parametrize(
    "origin",
    [
        "http://127.0.0.1:9999",  # another port of this machine is another site
        "http://localhost:3000",
        "https://localhost",
        "https://localhost:8765",  # another scheme
        "http://[::1]:8080",
        "http://localhost:8765.evil.example",
        "http://user:pw@localhost:8765",
        "http://localhost:8765/path",
        "http://evil.example:8765",
        "null",
    ],
)
def test_a_websocket_from_any_other_origin_is_refused(stored, origin):
    c = TestClient(
        create_app(stored[0], Guard(port=8765), poll_s=0.05), base_url="http://localhost:8765"
    )
    with (
        pytest.raises(WebSocketDisconnect),
        c.websocket_connect("/ws/live", headers={"Host": "localhost:8765", "Origin": origin}) as ws,
    ):
        ws.receive_json()


@pytest.mark.parametrize(
    "origin", ["http://localhost:8765", "http://127.0.0.1:8765", "http://[::1]:8765"]
)
def test_the_servers_own_page_opens_the_websocket(stored, origin):
    c = TestClient(
        create_app(stored[0], Guard(port=8765), poll_s=0.05), base_url="http://localhost:8765"
    )
    with c.websocket_connect(
        "/ws/live", headers={"Host": "localhost:8765", "Origin": origin}
    ) as ws:
        assert ws.receive_json()["type"] == "hello"


@pytest.mark.parametrize(
    ("host", "status"),
    [
        ("localhost:8765", 200),
        ("[::1]:8765", 200),
        ("127.0.0.1:8765", 200),
        ("localhost:1@evil.example", 400),  # user-info: the host is evil.example
        ("localhost:8766", 400),
        ("localhost", 400),  # port 80 is not ours
        ("localhost:8765.evil.example", 400),
        ("evil.example:8765", 400),
    ],
)
def test_the_host_header_is_parsed_with_its_port(stored, host, status):
    c = TestClient(
        create_app(stored[0], Guard(port=8765), poll_s=0.05), base_url="http://localhost:8765"
    )
    assert c.get("/api/runs", headers={"Host": host}).status_code == status


def test_the_live_feed_and_the_lists_work_on_postgresql(postgres, tiny_llama):
    """The same live page over a real PostgreSQL server: a sample written by a profile arrives
    on the WebSocket, and the run list reads it."""
    store = Store(postgres.new_database())
    c = client(store)
    headers = {"Host": "localhost:8765", "Origin": "http://localhost:8765"}
    with c.websocket_connect("/ws/live", headers=headers) as ws:
        assert ws.receive_json()["type"] == "hello"
        run, seen = _profile_and_watch(ws, store, tiny_llama)
        assert seen["sample"]["sample"]["run_id"] == run.run_id
    runs = c.get("/api/runs").json()["runs"]
    assert [r["id"] for r in runs] == [run.run_id]


def test_history_api_draws_a_models_runs_with_their_change_points(tmp_path):
    from tests.helpers import history_store

    store, ids = history_store(tmp_path, [10.0] * 8 + [12.5] * 6)
    c = client(store)
    doc = c.get("/api/history", params={"model": "tiny-llama"}).json()
    (group,) = doc["configurations"]
    assert len(group["points"]) == 14 and group["change_points"][0]["run_id"] == ids[8]
    assert (
        c.get("/api/history", params={"model": "tiny-llama", "metric": "nope"}).status_code == 400
    )
    assert c.get("/api/history", params={"model": "other"}).json()["configurations"] == []


def test_a_page_opened_mid_run_is_sent_the_samples_measured_before_it(tiny_llama, tmp_path):
    """Issue 59: the live page opened at sample 6 of 12 said "waiting for samples..." (the
    feed starts after what was stored) and a reload lost what it had shown. A page that comes
    while a run is running gets that run's samples so far, oldest first; finished runs' are
    left to the run page."""
    from dataclasses import replace

    store = Store(tmp_path / "r.db")
    done = profile(RunConfig(new_tokens=3, samples=1, warmup=0, energy="off"), loaded=tiny_llama)
    store.save(done)  # finished: not replayed
    measured = profile(
        RunConfig(new_tokens=3, samples=3, warmup=0, energy="off"), loaded=tiny_llama
    )
    run_id = store.begin_run(replace(measured, run_id=None))  # this process runs it: running
    for smp in measured.samples[:2]:
        store.add_sample(run_id, smp)
    c = client(store)
    headers = {"Host": "localhost:8765", "Origin": "http://localhost:8765"}
    with c.websocket_connect("/ws/live", headers=headers) as ws:
        assert ws.receive_json()["type"] == "hello"
        store.add_sample(run_id, measured.samples[2])  # measured while the page is open
        seen = []
        while len(seen) < 3:  # (without the replay the first would be this third one)
            event = ws.receive_json()
            if event["type"] == "sample":
                seen.append(event["sample"])
                assert seen[0]["index"] == measured.samples[0].index, seen
    assert [x["run_id"] for x in seen] == [run_id] * 3
    assert [x["index"] for x in seen] == [s.index for s in measured.samples]


def test_stored_predictions_are_listed_and_served_with_their_intervals(stored):
    """Issue 55: the dashboard had no page for predictions, so their intervals were nowhere
    there. `/api/predictions` lists them; each document carries its rows' 90% intervals."""
    from infermeter import predict

    store, _, _ = stored
    doc = predict("tiny-llama", "h100-sxm", batches=(1, 8), store=store, stack="vllm")
    pid = store.save_prediction(dict(doc))  # as `infermeter predict` stores it
    c = client(store)
    listed = c.get("/api/predictions").json()["predictions"]
    mine = next(p for p in listed if p["id"] == pid)
    assert (mine["model"], mine["hardware"], mine["kind"], mine["stack"]) == (
        "tiny-llama", "h100-sxm", "forward", "vllm")  # fmt: skip
    served = c.get(f"/api/predictions/{pid}").json()
    assert [r["batch"] for r in served["rows"]] == [1, 8]
    for r in served["rows"]:
        low, high = r["tpot_ms_interval"]
        assert low < r["tpot_ms"] < high
    assert c.get("/api/predictions/0123456789ab").status_code == 404
    assert c.get("/api/predictions/not-hex").status_code == 404
