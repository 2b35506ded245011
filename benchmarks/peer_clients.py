"""infermeter's endpoint client held against a peer's (GuideLLM) on the same servers.

    python -m venv .venv-peers && .venv-peers/bin/pip install guidellm==0.8.1
    make llama-server
    python benchmarks/peer_clients.py --peer-venv .venv-peers [--requests 12] [--rounds 2] \
        [--servers null,llama.cpp,transformers] [--wire]

Servers, each on 127.0.0.1: the null server (serving/nullserver.py: 20 ms to the first token, 5
ms between tokens, its own account per request), llama.cpp's own server (llama-server,
SmolLM2-135M Q4_1, one slot, `--metrics`) and `transformers serve` (this venv's, the same
model's safetensors; no timings of its own, EOS not ignorable). Clients: `infermeter load
endpoint` and `guidellm run`, each a separate process, interleaved A B A B at concurrency 1
and 4, the same prompt and output lengths (32 and 16 tokens, EOS ignored but on `transformers
serve`). Per run: median and p99 TTFT (from the first
header write, where GuideLLM starts its clock; infermeter's from its send is beside it), the
median of each request's mean gap between tokens (TPOT), median and p99 end-to-end, output
tokens/s, and the client process's CPU seconds (all of it, start-up included: both import
torch). Server-normalised: TTFT over the server's own time to a first token and TPOT over its
own decode time per token, from the null server's known delays or llama-server's Prometheus
counters read before and after each run (its prompt and decode seconds and tokens). With
`--wire`, also by the loopback device's packet times (wire_times.py): a witness neither
client wrote, the only one `transformers serve` has, and checked against the server's own
account where there is one. Then each
client's ceiling on the null server with no delays: `load selfcheck`'s, and GuideLLM's
8 streams' requests/s. Prints ratios measured in this run; nothing is asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np

from wire_times import WireRequest, capture, missing_tools, read_packets, wire_requests

ROOT = Path(__file__).resolve().parents[1]
PROMPT, OUTPUT = 32, 16


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(url: str, proc: subprocess.Popen[bytes], timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server exited: {url}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"server not healthy: {url}")


def _child_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall s, CPU s) of a client process."""
    cpu, t = _child_cpu(), time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{cmd[0]} failed: {done.stderr[-1500:]}")
    return time.perf_counter() - t, _child_cpu() - cpu


def run_infermeter(
    url: str, conc: int, n: int, work: Path, ignore_eos: bool = True
) -> dict[str, Any]:
    out = work / "im.json"
    cmd = [sys.executable, "-m", "infermeter", "load", "endpoint", url, "-m", "smollm2-135m"]
    cmd += ["--requests", str(n), "--concurrency", str(conc), "--prompt-tokens", str(PROMPT)]
    # transformers serve refuses `ignore_eos` (HTTP 422): there, both clients stop at EOS
    eos = ["--ignore-eos"] if ignore_eos else []
    cmd += ["--new-tokens", str(OUTPUT), *eos, "--no-selfcheck", "--db"]
    cmd += [str(work / "im.db"), "--out", str(work)]
    wall, cpu = _timed(cmd, {**os.environ, "HF_HUB_OFFLINE": "1"})
    doc = json.loads((work / "load.json").read_text())
    out.write_text(json.dumps(doc))
    rows = [r for r in doc["all_samples"] if r["error"] is None]
    return {
        # from the first header write, as GuideLLM starts its clock (its trace hook); the
        # client's request building before it is `http_build_ms`, reported beside
        "ttft": [r["ttft_from_send_ms"] - r["http_build_ms"] for r in rows],
        "ttft_from_send": [r["ttft_from_send_ms"] for r in rows],
        "tpot": [r["tpot_ms"] for r in rows if r["output_tokens"] > 1],
        "e2e": [r["e2e_ms"] for r in rows],
        "tokens": [r["output_tokens"] for r in rows],
        "tok_s": doc["summary"]["output_tokens_per_s"],
        "cpu_s": cpu,
        "wall_s": wall,
        "in_flight_cores": doc["summary"]["client"]["cores"],
    }


def run_guidellm(
    peer: Path, url: str, conc: int, n: int, tok: str, work: Path, ignore_eos: bool = True
) -> dict[str, Any]:
    """GuideLLM's `run` on `url`; without `ignore_eos`, its chat format and a bare max_tokens.

    GuideLLM 0.8.1 sends `ignore_eos` with every request whose data names an output length,
    which `transformers serve` refuses (HTTP 422). Synthetic data without one, and the
    backend's own `max_tokens`, send the cap alone (request_handlers.py, its `elif` branch).
    """
    path = work / "gl.json"
    cmd = [str(peer / "bin" / "guidellm"), "run"]
    if ignore_eos:
        backend = f"kind=openai_http,target={url},request_format=/v1/completions"
        data = f"kind=synthetic_text,prompt_tokens={PROMPT},output_tokens={OUTPUT}"
    else:
        backend = f"kind=openai_http,target={url},request_format=/v1/chat/completions"
        backend += f",max_tokens={OUTPUT}"
        data = f"kind=synthetic_text,prompt_tokens={PROMPT}"
    cmd += ["--backend", backend]
    cmd += ["--profile", f"kind=concurrent,streams={conc}"]
    cmd += ["--constraint", f"kind=max_requests,count={n}"]
    cmd += ["--data", data]
    cmd += ["--tokenizer", f"kind=huggingface_auto,model={tok}"]
    cmd += ["--output", f"kind=json,path={path}", "--disable-console"]
    wall, cpu = _timed(cmd, {**os.environ, "HF_HUB_OFFLINE": "1"})
    b = json.loads(path.read_text())["benchmarks"][0]
    rows = b["requests"]["successful"]
    return {
        "ttft": [r["time_to_first_token_ms"] for r in rows],
        "tpot": [r["inter_token_latency_ms"] for r in rows if r["output_tokens"] > 1],
        "e2e": [r["request_latency"] * 1e3 for r in rows],
        "tokens": [r["output_tokens"] for r in rows],
        "tok_s": sum(r["output_tokens"] for r in rows) / b["duration"],
        "cpu_s": cpu,
        "wall_s": wall,
        "in_flight_cores": float("nan"),
    }


def run_aiperf(peer: Path, url: str, conc: int, n: int, tok: str, work: Path) -> dict[str, Any]:
    """AIPerf on `url`'s chat endpoint: the peer where GuideLLM cannot go.

    GuideLLM 0.8.1 sends `ignore_eos` with every request that names an output length, and
    `transformers serve` answers that with HTTP 422, so every GuideLLM request fails there;
    AIPerf asks for the length without it, as infermeter does without --ignore-eos.
    """
    art = work / f"aiperf-{conc}-{time.monotonic_ns()}"
    with urllib.request.urlopen(url + "/v1/models", timeout=10) as r:
        model = json.loads(r.read())["data"][0]["id"]
    cmd = [str(peer / "bin" / "aiperf"), "profile", "-m", model, "--url", url]
    cmd += ["--endpoint-type", "chat", "--streaming", "--request-count", str(n)]
    cmd += ["--concurrency", str(conc), "--tokenizer", tok, "--artifact-dir", str(art)]
    cmd += ["--synthetic-input-tokens-mean", str(PROMPT), "--output-tokens-mean", str(OUTPUT)]
    cmd += ["--ui", "none", "--use-server-token-count"]
    # not HF_HUB_OFFLINE: AIPerf 0.13's tokenizer loader then takes a local folder for a hub
    # id and refuses it (HFValidationError); nothing is downloaded for a local folder anyway
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}
    wall, cpu = _timed(cmd, env)
    recs = [json.loads(x) for x in (art / "profile_export.jsonl").read_text().splitlines() if x]
    ok = [r["metrics"] for r in recs if not r.get("error")]

    def v(m: dict[str, Any], k: str) -> float:
        return float(m[k]["value"])

    summary = json.loads((art / "profile_export_aiperf.json").read_text())
    return {
        "ttft": [v(m, "time_to_first_token") for m in ok],
        "tpot": [v(m, "inter_token_latency") for m in ok if "inter_token_latency" in m],
        "e2e": [v(m, "request_latency") for m in ok],
        "tokens": [v(m, "output_sequence_length") for m in ok],
        "tok_s": float(summary["output_token_throughput"]["avg"]),
        "cpu_s": cpu,
        "wall_s": wall,
        "in_flight_cores": float("nan"),
    }


def _llama_counters(url: str) -> dict[str, float]:
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(url + "/metrics", timeout=5) as r:
        text = r.read().decode()
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[s.name] = float(s.value)
    return out


def _server_own(
    before: dict[str, float], after: dict[str, float], requests: int
) -> tuple[float, float]:
    """(prefill ms a request, decode ms a token) from llama-server's counters over a run."""

    def d(k: str) -> float:
        return after.get(k, 0.0) - before.get(k, 0.0)

    prefill = d("llamacpp:prompt_seconds_total") * 1e3 / max(requests, 1)
    tokens = d("llamacpp:tokens_predicted_total")
    decode = d("llamacpp:tokens_predicted_seconds_total") * 1e3 / tokens if tokens else float("nan")
    return prefill, decode


def _p(v: list[float], q: float) -> float:
    return float(np.percentile(v, q)) if v else float("nan")


def _wire(path: Path | None, port: int) -> list[WireRequest]:
    return wire_requests(read_packets(path), port) if path is not None else []


def measure(
    name: str,
    url: str,
    own: Any,
    peer: Path,
    tok: str,
    a: Any,
    work: Path,
    peer_name: str = "guidellm",
) -> list[dict[str, Any]]:
    """Both clients, interleaved, at concurrency 1 and 4; a row per run.

    With `--wire`, each run is captured on the loopback device (wire_times.py) and the row
    holds the wire's medians and each client's TTFT and TPOT over them.
    """
    rows = []
    port = int(url.rsplit(":", 1)[1])
    eos = name != "transformers"  # it refuses `ignore_eos`: there, both clients stop at EOS
    for conc in (1, 4):
        for rnd in range(a.rounds):
            for client in ("infermeter", peer_name):
                before = own("before") if callable(own) else None
                pcap = work / f"{name}-{conc}-{rnd}-{client}.pcap" if a.wire else None
                with capture(port, pcap) if pcap else contextlib.nullcontext():
                    if client == "infermeter":
                        res = run_infermeter(url, conc, a.requests, work, ignore_eos=eos)
                    elif client == "aiperf":
                        res = run_aiperf(peer, url, conc, a.requests, tok, work)
                    else:
                        res = run_guidellm(peer, url, conc, a.requests, tok, work, eos)
                wire = _wire(pcap, port)
                prefill, decode = own(before, len(res["ttft"])) if callable(own) else own
                ttft, tpot = statistics.median(res["ttft"]), statistics.median(res["tpot"])
                nan = float("nan")
                w_ttft = statistics.median(w.ttft_ms for w in wire) if wire else nan
                w_tpots = [t for w in wire if (t := w.tpot_ms) is not None]
                w_tpot = statistics.median(w_tpots) if w_tpots else nan
                rows.append(
                    {
                        "server": name,
                        "conc": conc,
                        "round": rnd,
                        "client": client,
                        "n": len(res["ttft"]),
                        "tokens": statistics.median(res["tokens"]),
                        "ttft_p50": ttft,
                        "ttft_p99": _p(res["ttft"], 99),
                        "ttft_from_send_p50": statistics.median(res.get("ttft_from_send") or [nan]),
                        "tpot_p50": tpot,
                        "e2e_p50": statistics.median(res["e2e"]),
                        "e2e_p99": _p(res["e2e"], 99),
                        "tok_s": res["tok_s"],
                        "server_prefill_ms": prefill,
                        "server_decode_ms": decode,
                        "ttft_over_server": ttft / prefill,
                        "tpot_over_server": tpot / decode,
                        "wire_requests": len(wire),
                        "wire_ttft_p50": w_ttft,
                        "wire_tpot_p50": w_tpot,
                        "ttft_over_wire": ttft / w_ttft,
                        "tpot_over_wire": tpot / w_tpot,
                        "cpu_s": res["cpu_s"],
                        "cpu_s_per_request": res["cpu_s"] / max(len(res["ttft"]), 1),
                    }
                )
                print(json.dumps(rows[-1]), flush=True)
    return rows


def ceilings(peer: Path, tok: str, work: Path) -> dict[str, float]:
    """Each client's requests/s against the null server with no delays: 8 in flight."""
    from infermeter.serving.nullserver import NullSpec, null_server

    got = subprocess.run(
        [sys.executable, "-m", "infermeter", "load", "selfcheck", "-m", "smollm2-135m"]
        + ["--tokens", str(OUTPUT), "--requests", "128", "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    check = json.loads(got.stdout)
    with null_server(NullSpec(tokens=OUTPUT)) as s:
        path = work / "gl-ceiling.json"
        cmd = [str(peer / "bin" / "guidellm"), "run"]
        cmd += ["--backend", f"kind=openai_http,target={s.url},request_format=/v1/completions"]
        cmd += ["--profile", "kind=concurrent,streams=8"]
        cmd += ["--constraint", "kind=max_requests,count=256"]
        cmd += ["--data", f"kind=synthetic_text,prompt_tokens={PROMPT},output_tokens={OUTPUT}"]
        cmd += ["--tokenizer", f"kind=huggingface_auto,model={tok}"]
        cmd += ["--output", f"kind=json,path={path}", "--disable-console"]
        _timed(cmd, {**os.environ, "HF_HUB_OFFLINE": "1"})
        b = json.loads(path.read_text())["benchmarks"][0]
        gl_rps = len(b["requests"]["successful"]) / b["duration"]
    return {
        "infermeter_ceiling_rps": check["ceiling_rps"],
        "infermeter_added_ttft_ms_at_10pct": check["added"][0]["ttft_ms_p50"],
        "guidellm_ceiling_rps": gl_rps,
    }


def peer_venv(a: Any, peer: str) -> Path:
    """The venv of `peer`: AIPerf's where asked (`--aiperf-venv`), else GuideLLM's."""
    if peer == "aiperf":
        if a.aiperf_venv is None:
            raise SystemExit("--transformers-peer aiperf needs --aiperf-venv (pip install aiperf)")
        return Path(a.aiperf_venv)
    return Path(a.peer_venv)


def transformers_serve(folder: str, a: Any, work: Path) -> list[dict[str, Any]]:
    """`transformers serve` (this venv's) on SmolLM2-135M, infermeter and a peer interleaved.

    It reports no timings of its own: its rows are normalised by the wire (`--wire`) or
    compared raw. Both clients stop at EOS (it refuses `ignore_eos`), so only TTFT and TPOT,
    not E2E, compare requests of like lengths.
    """
    exe = Path(sys.executable).with_name("transformers")
    port = _port()
    cmd = [str(exe), "serve", folder, "--host", "127.0.0.1", "--port", str(port)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.3)
        nan = float("nan")
        peer = a.transformers_peer
        return measure("transformers", url, (nan, nan), peer_venv(a, peer), folder, a, work, peer)
    finally:
        proc.terminate()
        proc.wait(30)


def med(rs: list[dict[str, Any]], k: str) -> float:
    """The median of one column over rows."""
    return statistics.median(r[k] for r in rs)


def _ratio_line(im: list[dict[str, Any]], pr: list[dict[str, Any]], basis: str) -> str:
    """TTFT and TPOT over `basis` ("server" or "wire"): infermeter's, the peer's, their ratio."""
    parts = []
    for metric in ("ttft", "tpot"):
        k = f"{metric}_over_{basis}"
        a, b = med(im, k), med(pr, k)
        parts.append(f"{metric.upper()}/{basis} {a:.3f} vs {b:.3f} (ratio {a / b:.3f})")
    return "; ".join(parts)


def summary(rows: list[dict[str, Any]]) -> None:
    """Per server and concurrency: normalised ratios, raw medians and client CPU, over rounds.

    Normalised by the server's own timings where it reports them, and by the wire where the
    runs were captured; where both exist, the wire's medians over the server's own say how
    far the witness itself is from the server's account.
    """
    print("\nnormalised medians (infermeter vs the peer, over rounds):")
    for server in sorted({r["server"] for r in rows}):
        for conc in (1, 4):
            pick = [r for r in rows if r["server"] == server and r["conc"] == conc]
            if not pick:
                continue
            im = [r for r in pick if r["client"] == "infermeter"]
            pr = [r for r in pick if r["client"] != "infermeter"]
            head = f"  {server} c={conc} (peer: {pr[0]['client']})"
            if not math.isnan(med(pick, "ttft_over_server")):
                print(f"{head} by the server's own: {_ratio_line(im, pr, 'server')}")
            if not math.isnan(med(pick, "ttft_over_wire")):
                print(f"{head} by the wire: {_ratio_line(im, pr, 'wire')}")
                if not math.isnan(med(pick, "server_prefill_ms")):
                    print(
                        f"    the wire over the server's own: TTFT "
                        f"{med(pick, 'wire_ttft_p50') / med(pick, 'server_prefill_ms'):.3f}, "
                        f"TPOT {med(pick, 'wire_tpot_p50') / med(pick, 'server_decode_ms'):.3f}"
                    )
            print(
                f"    raw p50: TTFT {med(im, 'ttft_p50'):.1f} vs {med(pr, 'ttft_p50'):.1f} ms, "
                f"TPOT {med(im, 'tpot_p50'):.2f} vs {med(pr, 'tpot_p50'):.2f} ms, E2E "
                f"{med(im, 'e2e_p50'):.1f} vs {med(pr, 'e2e_p50'):.1f} ms; client CPU "
                f"s/request {med(im, 'cpu_s_per_request'):.3f} vs "
                f"{med(pr, 'cpu_s_per_request'):.3f}"
            )


def main() -> None:
    # Long because it is the benchmark's whole sequence, in the order it runs
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--peer-venv", type=Path, required=True)
    p.add_argument(
        "--llama-server",
        type=Path,
        default=Path(
            os.environ.get(
                "INFERMETER_LLAMA_SERVER",
                Path.home() / ".cache/infermeter/llama.cpp-11434/bin/llama-server",
            )
        ),
    )
    p.add_argument(
        "--servers",
        default="null,llama.cpp,transformers",
        help="which servers, comma-separated: null, llama.cpp, transformers",
    )
    p.add_argument(
        "--slots",
        type=int,
        default=1,
        help="llama-server's parallel slots (-np): 4 lets concurrency 4 run at once",
    )
    p.add_argument(
        "--transformers-peer",
        choices=("guidellm", "aiperf"),
        default="guidellm",
        help="the peer against transformers serve (AIPerf takes the server's CPU on 2 cores)",
    )
    p.add_argument("--aiperf-venv", type=Path, default=None, help="AIPerf's venv")
    p.add_argument(
        "--wire",
        action="store_true",
        help="capture each run on the loopback device (tcpdump, tshark; root) and normalise by it",
    )
    p.add_argument("--requests", type=int, default=12)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--out", type=Path, default=None, help="also write the rows as JSON here")
    a = p.parse_args()
    if a.wire and (why := missing_tools()):
        raise SystemExit(f"--wire: {why}")
    from infermeter.models.trained import ensure_converted, gguf_file, trained_model
    from infermeter.serving.nullserver import NullSpec, null_server

    model = trained_model("smollm2-135m")
    assert model is not None
    tok = str(ensure_converted(model)[0])
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        servers = set(a.servers.split(","))
        if "null" in servers:
            with null_server(NullSpec(ttft_ms=20, itl_ms=5)) as s:
                rows += measure("null", s.url, (20.0, 5.0), a.peer_venv, tok, a, work)
        if "transformers" in servers:
            rows += transformers_serve(tok, a, work)
        if "llama.cpp" not in servers:
            pass
        elif a.llama_server.exists():
            port = _port()
            cmd = [str(a.llama_server), "-m", str(gguf_file(model)), "--host", "127.0.0.1"]
            cmd += ["--port", str(port), "-c", str(2048 * a.slots), "-np", str(a.slots)]
            cmd += ["-t", "1", "--metrics"]
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            url = f"http://127.0.0.1:{port}"
            try:
                _wait(url, proc)

                def own(before: Any, n: int = 0) -> Any:
                    if before == "before":
                        return _llama_counters(url)
                    return _server_own(before, _llama_counters(url), n)

                rows += measure("llama.cpp", url, own, a.peer_venv, tok, a, work)
            finally:
                proc.terminate()
                proc.wait(20)
        else:
            print(f"llama-server not built ({a.llama_server}): make llama-server", flush=True)
        ceil = ceilings(a.peer_venv, tok, work) if "null" in servers else {}
    summary(rows)
    print("\nceilings on the null server (16 tokens a request, no delays):", json.dumps(ceil))
    if a.out is not None:
        a.out.write_text(json.dumps({"rows": rows, "ceilings": ceil}, indent=1))


if __name__ == "__main__":
    main()
