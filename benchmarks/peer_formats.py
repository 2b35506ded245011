"""Peers' result formats, checked with the peers' own code.

    python -m venv .venv-peers && .venv-peers/bin/pip install aiperf==0.13.0
    python benchmarks/peer_formats.py --peer-venv .venv-peers --tokenizer HF_TOKENIZER_DIR

On one null server (127.0.0.1, 20 ms to the first token, 8 ms between tokens):
1. `infermeter load endpoint` runs 16 requests at concurrency 2; the run is exported with
   `infermeter export --format aiperf|guidellm|vllm`. Each exported AIPerf line is validated
   by AIPerf's own pydantic model (`MetricRecordInfo.model_validate_json`) in the peer's venv.
2. `aiperf profile` runs 16 requests at concurrency 2 on the same server; its
   `profile_export.jsonl` is imported with `infermeter load import`, and the stored run's median
   TTFT and TPOT are held against the medians in AIPerf's own summary of that run.
Prints what it measured; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

VALIDATE = """
import sys
from aiperf.common.models.record_models import MetricRecordInfo
n = 0
for line in open(sys.argv[1]):
    if line.strip():
        MetricRecordInfo.model_validate_json(line)
        n += 1
print(n)
"""


def _cli(*args: str) -> str:
    r = subprocess.run(
        [sys.executable, "-m", "infermeter", *args], capture_output=True, text=True, check=False
    )
    if r.returncode != 0:
        raise SystemExit(f"infermeter {' '.join(args)} failed: {r.stderr[-2000:]}")
    return r.stdout


def _new_run(db: Path, seen: set[str]) -> str:
    from infermeter import Store

    (new,) = [r["id"] for r in Store(str(db)).list_runs() if r["id"] not in seen]
    seen.add(new)
    return str(new)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--peer-venv", type=Path, required=True)
    ap.add_argument("--tokenizer", required=True, help="an HF tokenizer folder for AIPerf")
    ap.add_argument("--requests", type=int, default=16)
    a = ap.parse_args()
    from infermeter.serving.nullserver import NullSpec, null_server

    with tempfile.TemporaryDirectory() as tmp, null_server(NullSpec(ttft_ms=20, itl_ms=8)) as s:
        work = Path(tmp)
        db = work / "r.db"
        n = str(a.requests)
        _cli(
            "load",
            "endpoint",
            s.url,
            "-m",
            "tiny-llama",
            "--requests",
            n,
            "--concurrency",
            "2",
            "--prompt-tokens",
            "16",
            "--new-tokens",
            "16",
            "--no-selfcheck",
            "--db",
            str(db),
            "--out",
            str(work / "o"),
        )
        seen: set[str] = set()
        run_id = _new_run(db, seen)
        for fmt in ("aiperf", "guidellm", "vllm"):
            _cli("export", run_id, "--format", fmt, "--db", str(db), "--out", str(work))
        exported = next(work.glob(f"run-{run_id}.aiperf.jsonl"))
        py = str(a.peer_venv / "bin" / "python")
        r = subprocess.run([py, "-c", VALIDATE, str(exported)], capture_output=True, text=True)
        verdict = f"{r.stdout.strip()} lines valid" if r.returncode == 0 else r.stderr[-1500:]
        print(f"infermeter's AIPerf export, by AIPerf's own MetricRecordInfo: {verdict}")

        art = work / "aiperf"
        cmd = [
            str(a.peer_venv / "bin" / "aiperf"),
            "profile",
            "-m",
            "tiny-llama",
            "--url",
            s.url,
            "--endpoint-type",
            "chat",
            "--streaming",
            "--request-count",
            n,
            "--concurrency",
            "2",
            "--tokenizer",
            a.tokenizer,
            "--artifact-dir",
            str(art),
            "--synthetic-input-tokens-mean",
            "16",
            "--output-tokens-mean",
            "16",
            "--ui",
            "none",
            "--use-server-token-count",
        ]
        subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=600)
        summary = json.loads((art / "profile_export_aiperf.json").read_text())
        _cli("load", "import", str(art / "profile_export.jsonl"), "--db", str(db))
        from infermeter import Store

        back = Store(str(db)).get(_new_run(db, seen))
        mine = back.checks["load"]["summary"]
        for ours, theirs in (
            ("ttft_ms", "time_to_first_token"),
            ("tpot_ms", "inter_token_latency"),
        ):
            x, y = mine[ours]["p50"], summary[theirs]["p50"]
            print(
                f"AIPerf's run imported: median {ours} {x:.4f} vs AIPerf's own {y:.4f} "
                f"(x{x / y:.6f})"
            )


if __name__ == "__main__":
    main()
