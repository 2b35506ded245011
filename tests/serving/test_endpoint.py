"""`load --endpoint` against a real OpenAI-compatible server nobody here wrote: `transformers
serve` (shipped with transformers), started on 127.0.0.1 with a tiny checkpoint this test saves
(issue 33, items 1-2)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from infermeter import Store
from infermeter.cli.app import app
from infermeter.run.load_docs import FailedRequestDoc
from tests.helpers import assert_load_doc, assert_one_line_error, assert_rows_are

pytest.importorskip("openai", reason="--endpoint needs the openai client: infermeter[endpoint]")
runner = CliRunner()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """`transformers serve CHECKPOINT` on a free port; (base URL, checkpoint folder)."""
    from infermeter import load_model

    folder = tmp_path_factory.mktemp("ckpt") / "tiny-llama"
    lm = load_model("tiny-llama", device="cpu", seed=0)
    lm.model.save_pretrained(folder)
    # a chat template, so that /v1/chat/completions has one to apply (the preset has none)
    lm.tokenizer.chat_template = (
        "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}assistant:"
    )
    lm.tokenizer.save_pretrained(folder)
    lm.tokenizer.chat_template = None
    proc, port = _serve(folder)
    yield f"http://127.0.0.1:{port}", str(folder)
    _stop(proc)


def _serve(folder) -> tuple[subprocess.Popen, int]:
    """`transformers serve FOLDER` on a free port of 127.0.0.1, once it accepts connections."""
    exe = Path(sys.executable).with_name("transformers")
    if not exe.exists():
        pytest.skip("the transformers command is not installed beside this Python")
    port = _free_port()
    proc = subprocess.Popen(
        [str(exe), "serve", str(folder), "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"transformers serve exited: {proc.stdout.read()[-2000:]}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            time.sleep(0.3)
    return proc, port


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()


def test_a_load_against_transformers_serve_is_measured_and_stored(server, tmp_path):
    url, folder = server
    db = str(tmp_path / "r.db")
    r = runner.invoke(
        app,
        [
            "load",
            "--endpoint",
            url,
            "-m",
            "tiny-llama",
            "--requests",
            "6",
            "--rate",
            "20",
            "--new-tokens",
            "8",
            "--prompt-tokens",
            "24",
            "--slo",
            "e2e_ms=60000",
            "--out",
            str(tmp_path / "o"),
            "--db",
            db,
        ],
        env={"COLUMNS": "200"},
    )
    assert r.exit_code == 0, r.output
    assert f"endpoint {url}/v1 serving {folder}" in r.output
    doc = json.loads((tmp_path / "o" / "load.json").read_text())
    rows = doc["all_samples"]
    assert len(rows) == 6 and not any(x["error"] for x in rows)
    for x in rows:  # streamed token by token: a first token, then gaps, then the end
        assert 0 < x["ttft_ms"] <= x["e2e_ms"]
        assert x["output_tokens"] >= 1 and x["server_output_tokens"] == x["output_tokens"]
        assert len(x["itl_ms"]) == x["output_tokens"] - 1
    assert doc["summary"]["slo"]["all_met_pct"] == 100.0
    (run,) = Store(db).list_runs()
    stored = Store(db).get(run["id"])
    assert run["status"] == "finished" and len(stored.samples) == 6
    assert stored.device["name"] == f"endpoint {url}/v1"


def test_a_closed_loop_and_a_model_the_server_lacks(server, tmp_path):
    url, _ = server
    db = str(tmp_path / "r.db")
    r = runner.invoke(
        app,
        [
            "load",
            "--endpoint",
            url,
            "-m",
            "tiny-llama",
            "--requests",
            "4",
            "--concurrency",
            "2",
            "--new-tokens",
            "4",
            "--json",
            "--db",
            db,
        ],
    )
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["meta"]["spec"]["concurrency"] == 2 and len(doc["all_samples"]) == 4
    # every request failed (a model it cannot load): one line with the server's reason
    r = runner.invoke(
        app,
        [
            "load",
            "--endpoint",
            url,
            "--endpoint-model",
            "no/such-model",
            "-m",
            "tiny-llama",
            "--requests",
            "2",
            "--db",
            db,
        ],
    )
    assert_one_line_error(r, "all 2 requests", "failed (first: HTTP")


def test_a_server_that_is_down_or_a_bad_url_is_one_line(tmp_path):
    db = str(tmp_path / "r.db")
    port = _free_port()  # nothing listens there
    r = runner.invoke(
        app,
        [
            "load",
            "--endpoint",
            f"http://127.0.0.1:{port}",
            "-m",
            "tiny-llama",
            "--requests",
            "2",
            "--db",
            db,
        ],
    )
    assert_one_line_error(r, "cannot list the models", "connection failed")
    r = runner.invoke(
        app,
        [
            "load",
            "--endpoint",
            f"http://127.0.0.1:{port}",
            "--endpoint-model",
            "m",
            "-m",
            "tiny-llama",
            "--requests",
            "2",
            "--timeout",
            "5",
            "--db",
            db,
        ],
    )
    assert_one_line_error(r, "all 2 requests", "connection failed")
    r = runner.invoke(app, ["load", "--endpoint", "ftp://x", "--db", db])
    assert_one_line_error(r, "is not an http(s) URL")


def test_reference_sets_the_endpoint_beside_the_same_requests_in_process(server, tmp_path):
    """`--reference`: what the serving stack adds, per percentile (issue 33, item 3)."""
    import math

    url, _ = server
    r = runner.invoke(
        app,
        [
            "load",
            "--endpoint",
            url,
            "-m",
            "tiny-llama",
            "--requests",
            "6",
            "--rate",
            "10",
            "--new-tokens",
            "6",
            "--reference",
            "--json",
            "--db",
            str(tmp_path / "r.db"),
        ],
    )
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert_load_doc(doc)  # the reference's summary and the stack's cost among the rest
    rows = doc["reference"]["stack_cost"]
    assert [(x["metric"], x["percentile"]) for x in rows][:3] == [
        ("ttft_ms", "p50"),
        ("ttft_ms", "p90"),
        ("ttft_ms", "p99"),
    ]
    for x in rows:
        assert math.isfinite(x["endpoint_ms"]) and math.isfinite(x["in_process_ms"])
        assert x["stack_ms"] == pytest.approx(x["endpoint_ms"] - x["in_process_ms"])
    r = runner.invoke(app, ["load", "--reference", "--db", str(tmp_path / "r.db")])
    assert_one_line_error(r, "--reference compares an endpoint")


def test_multi_turn_sessions_and_a_trace_against_the_server(server, tmp_path):
    """Issue 33, item 4 against a real server: each turn of a session is sent once the answer
    before it has streamed in, with its history; a trace's rows at their own times."""
    url, _ = server
    chat = tmp_path / "chat.jsonl"
    turns = [
        {"role": "user", "content": "Name a colour."},
        {"role": "assistant", "content": "Blue."},
        {"role": "user", "content": "Another?"},
        {"role": "assistant", "content": "Green, then red."},
    ]
    chat.write_text("".join(json.dumps({"messages": turns}) + "\n" for _ in range(2)))
    r = runner.invoke(
        app,
        [
            "load",
            "--endpoint",
            url,
            "-m",
            "tiny-llama",
            "--workload",
            f"chat:{chat}",
            "--rate",
            "50",
            "--json",
            "--db",
            str(tmp_path / "r.db"),
        ],
    )
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    rows = doc["all_samples"]
    assert len(rows) == 4 and not any(x["error"] for x in rows)
    for x in rows:
        if x["turn"] == 1:
            (first,) = [p for p in rows if p["session"] == x["session"] and p["turn"] == 0]
            assert x["arrival_ms"] >= first["arrival_ms"] + first["e2e_ms"] - 1e-6
            assert x["prompt_tokens"] > first["prompt_tokens"]  # its history came with it
    assert doc["meta"]["workload"]["multi_turn_sessions"] == 2
    # the same sessions as messages to /v1/chat/completions (the server's template)
    r = runner.invoke(
        app,
        [
            "load",
            "--endpoint",
            url,
            "-m",
            "tiny-llama",
            "--workload",
            f"chat:{chat}",
            "--rate",
            "50",
            "--endpoint-api",
            "chat",
            "--json",
            "--db",
            str(tmp_path / "r.db"),
        ],
    )
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["meta"]["endpoint"]["api"] == "chat"
    rows = doc["all_samples"]
    assert len(rows) == 4 and not any(x["error"] for x in rows), rows
    assert all(x["output_tokens"] >= 1 for x in rows)
    r = runner.invoke(
        app,
        [
            "load",
            "--endpoint",
            url,
            "-m",
            "tiny-llama",
            "--workload",
            "azure-sample",
            "--requests",
            "3",
            "--trace-speed",
            "10",
            "--json",
            "--db",
            str(tmp_path / "r.db"),
        ],
    )
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    stamps = [x["arrival_ms"] for x in sorted(doc["all_samples"], key=lambda x: x["sample_id"])]
    import pandas as pd

    from infermeter.workloads.traffic import resolve

    frame = pd.to_datetime(pd.read_csv(resolve("azure-sample")[1])["TIMESTAMP"])[:3]
    expected = ((frame - frame.iloc[0]).dt.total_seconds() * 1e3 / 10).tolist()
    assert stamps == pytest.approx(expected)


def test_capacity_search_against_the_server(server, tmp_path):
    """Issue 33, item 5 at an endpoint: every step is a load of the server, stored."""
    url, _ = server
    r = runner.invoke(
        app,
        [
            "load",
            "--endpoint",
            url,
            "-m",
            "tiny-llama",
            "--find-max-rate",
            "--slo",
            "e2e_ms=60000",
            "--slo-target",
            "0.6",
            "--requests",
            "8",
            "--rate",
            "64",
            "--bisect",
            "0",
            "--new-tokens",
            "2",
            "--prompt-tokens",
            "16",
            "--json",
            "--db",
            str(tmp_path / "r.db"),
        ],
    )
    assert r.exit_code == 0, r.output
    result = json.loads(r.stdout)
    # the server answers one request at a time: where it saturates depends on this machine's
    # load, so the test checks the search's shape, not the number
    assert result["steps"] and result["steps"][0]["rate"] == 64
    assert all(s["requests"] >= 8 and s["verdict"] in ("pass", "fail") for s in result["steps"])
    assert len(result["run_ids"]) >= len(result["steps"])
    if result["max_rate"] is not None and result["first_failing_rate"] is not None:
        assert result["max_rate"] < result["first_failing_rate"]


def test_an_endpoint_load_scrapes_metrics_and_says_when_there_are_none(server, tmp_path):
    """transformers serve publishes no Prometheus metrics: every scrape fails (HTTP 404), said
    in one line, and the load itself is measured as ever."""
    url, _ = server
    r = runner.invoke(
        app,
        [
            "load",
            "--endpoint",
            url,
            "-m",
            "tiny-llama",
            "--requests",
            "2",
            "--new-tokens",
            "2",
            "--metrics-url",
            f"{url}/metrics",
            "--metrics-interval-ms",
            "100",
            "--db",
            str(tmp_path / "r.db"),
        ],
        env={"COLUMNS": "300"},
    )
    assert r.exit_code == 0, r.output
    assert "every scrape failed (first: HTTPStatusError: Client error '404 Not Found'" in r.output


def test_a_failed_request_is_stored_beside_the_served_ones():
    """A request with no latencies (the server returned no token) broke the store's NOT NULL
    TTFT and lost the run; it is kept with its reason instead."""
    from infermeter.serving.load import as_run

    ok = {
        "sample_id": 0,
        "arrival_ms": 0.0,
        "queue_ms": 0.1,
        "ttft_ms": 5.0,
        "tpot_ms": 1.0,
        "e2e_ms": 7.0,
        "itl_ms": [1.0, 1.0],
        "prompt_tokens": 4,
        "new_tokens_asked": 3,
        "output_tokens": 3,
        "error": None,
    }
    bad = {
        **ok,
        "sample_id": 1,
        "ttft_ms": float("nan"),
        "tpot_ms": float("nan"),
        "e2e_ms": float("nan"),
        "itl_ms": [],
        "output_tokens": 0,
        "error": "the server returned no token",
    }
    spec = {"model": "m", "rate": 1.0, "server": "continuous", "slos": {}, "requests": 2}
    doc = {
        "meta": {"spec": spec, "device": {}, "versions": {}, "model_info": {"spec": "m"}},
        "summary": {},
        "timeline": [],
        "all_samples": [ok, bad],
    }
    run = as_run(doc)
    assert [s.index for s in run.samples] == [0]
    assert_rows_are(run.checks["load"]["failed"], FailedRequestDoc)
    assert run.checks["load"]["failed"] == [
        {"sample_id": 1, "error": "the server returned no token"}
    ]


def test_smollm2_served_by_transformers_agrees_with_it_in_process(smollm2, tmp_path):
    """The real trained model behind a real server: the server's greedy text for a prompt is
    the text `generate` gives in this process (same weights, float32), and a load of it counts
    every streamed token."""
    import torch

    folder = tmp_path / "smollm2-135m"
    smollm2.model.save_pretrained(folder)  # writes `architectures`, which serve needs
    smollm2.tokenizer.save_pretrained(folder)
    proc, port = _serve(folder)
    try:
        import openai

        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none")
        prompt = "The capital of France is"
        served = (
            client.completions.create(
                model=str(folder), prompt=prompt, max_tokens=8, temperature=0.0
            )
            .choices[0]
            .text
        )
        ids = smollm2.tokenizer(prompt, return_tensors="pt")
        with torch.inference_mode():
            out = smollm2.model.generate(**ids, max_new_tokens=8, do_sample=False)
        here = smollm2.tokenizer.decode(
            out[0, ids["input_ids"].shape[1] :], skip_special_tokens=True
        )
        assert served.strip() == here.strip() and "Paris" in here
        r = runner.invoke(
            app,
            [
                "load",
                "--endpoint",
                f"http://127.0.0.1:{port}",
                "-m",
                "smollm2-135m",
                "--requests",
                "3",
                "--rate",
                "20",
                "--new-tokens",
                "6",
                "--prompt-tokens",
                "32",
                "--json",
                "--db",
                str(tmp_path / "r.db"),
            ],
        )
        assert r.exit_code == 0, r.output
        rows = json.loads(r.stdout)["all_samples"]
        assert [x["error"] for x in rows] == [None] * 3
        for x in rows:  # our count of the streamed text's tokens is the server's own, but
            # the server also counts the EOS it stopped at, which streams no text
            stopped = x["output_tokens"] < x["new_tokens_asked"]
            assert x["server_output_tokens"] in (None, x["output_tokens"] + stopped)
            assert 0 < x["ttft_ms"] <= x["e2e_ms"]
        # transformers serve knows no `ignore_eos`: every request fails, in one line that
        # carries the server's own words (not only the openai client's "Error code: 422")
        r = runner.invoke(
            app,
            [
                "load",
                "--endpoint",
                f"http://127.0.0.1:{port}",
                "-m",
                "smollm2-135m",
                "--requests",
                "2",
                "--ignore-eos",
                "--db",
                str(tmp_path / "r.db"),
            ],
        )
        assert_one_line_error(r, "all 2 requests", "HTTP 422", "ignore_eos")
    finally:
        _stop(proc)
