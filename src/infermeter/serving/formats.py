"""Peers' result files in and out, as stored load runs.

vLLM's `bench serve` result JSON and GuideLLM's benchmarks JSON become load runs; a stored load
run becomes a vLLM result.

Why: a team that measured with vLLM's client or GuideLLM last month wants `compare` and
`history` across tools, and a team that reads vLLM's files wants ours in that form. The fields
are the ones each tool writes, read from its own code: vLLM's `vllm/benchmarks/serve.py`
(`benchmark()`'s `result`: `ttfts`, `itls`, `latencies` in seconds, `start_times` on the
client's `perf_counter`, `queue_times`, `input_lens`, `output_lens`, `errors`, with the
summary's `mean_/median_/p99_{ttft,tpot,itl,e2el}_ms`), GuideLLM 0.8's `benchmarks[]` with
`requests.successful[]` / `errored[]` (`time_to_first_token_ms`, `inter_token_latency_ms`,
`request_latency` in seconds, `request_start_time`, `prompt_tokens`, `output_tokens`).

What cannot cross: a peer keeps no per-token times (vLLM keeps them; GuideLLM keeps a
request's mean gap, so its tokens are spread evenly and said so), no server timings, no
self-check; an imported run says which tool measured it in its device name and notes.
"""

from __future__ import annotations

import math
from typing import Any

from infermeter.errors import UserError
from infermeter.run.document import LoadResult

FORMATS = ("vllm", "guidellm")


def _row(
    i: int,
    arrival_ms: float,
    ttft_ms: float,
    itl_ms: list[float],
    e2e_ms: float,
    prompt: int,
    output: int,
    error: str | None,
    queue_ms: float = 0.0,
) -> dict[str, Any]:
    ok = error is None and math.isfinite(ttft_ms)
    return {
        "sample_id": i,
        "arrival_ms": arrival_ms,
        "queue_ms": queue_ms,
        "ttft_ms": ttft_ms if ok else math.nan,
        "tpot_ms": sum(itl_ms) / len(itl_ms) if ok and itl_ms else math.nan,
        "e2e_ms": e2e_ms if ok else math.nan,
        "ttst_ms": itl_ms[0] if ok and itl_ms else math.nan,
        "itl_ms": itl_ms if ok else [],
        "prompt_tokens": prompt,
        "new_tokens_asked": output,
        "output_tokens": output if ok else 0,
        "server_output_tokens": None,
        "error": error,
        "session": None,
        "turn": 0,
    }


def _document(
    rows: list[dict[str, Any]], tool: str, model: str, spec: dict[str, Any]
) -> LoadResult:
    from infermeter.run.slo import slo_report
    from infermeter.serving.load import summarize_load

    if not rows:
        raise UserError(f"the {tool} file holds no requests", "export a run that sent some")
    served = [r for r in rows if r["error"] is None]
    origin = min(r["arrival_ms"] for r in rows)
    for r in rows:
        r["arrival_ms"] -= origin
    wall_s = max((r["arrival_ms"] + r["e2e_ms"] for r in served), default=0.0) / 1e3
    summary = summarize_load(rows, wall_s)
    summary["slo"] = slo_report(rows, (), wall_s)
    name = f"imported from {tool}"
    asked: dict[str, Any] = {
        "model": model,
        "rate": float(spec.get("rate", math.inf)),
        "requests": len(rows),
        "concurrency": spec.get("concurrency"),
        "server": "endpoint",
        "slos": {},
        "imported_from": tool,
    }
    meta = {
        "kind": "load",
        "model": model,
        "model_info": {"spec": f"{model} ({name})", "name": model, "tokenizer": model},
        "device": {"name": name, "kind": "endpoint"},
        "versions": {tool: str(spec.get("version", "?"))},
        "spec": asked,
        "imported_from": tool,
    }
    return LoadResult({"meta": meta, "summary": summary, "timeline": [], "all_samples": rows})


def _number(v: Any, what: str) -> float:
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise UserError(f"{what} is not a number ({v!r})", "is it the tool's own file?") from None
    return x


def from_vllm(data: Any) -> list[LoadResult]:
    """A vLLM `bench serve --save-result` file as one load document."""
    need = ("ttfts", "itls", "latencies", "input_lens", "output_lens")
    if not isinstance(data, dict) or any(not isinstance(data.get(k), list) for k in need):
        raise UserError(
            "not a vLLM bench serve result (it needs ttfts, itls, latencies, input_lens, "
            "output_lens)",
            "save it with `vllm bench serve --save-result`",
        )
    n = len(data["ttfts"])
    starts = data.get("start_times") or [math.nan] * n
    queues = data.get("queue_times") or [0.0] * n
    errors = data.get("errors") or [""] * n
    rows = []
    for i in range(n):
        start = _number(starts[i], "start_times") if starts[i] is not None else math.nan
        err = errors[i] or None
        rows.append(
            _row(
                i,
                start * 1e3 if math.isfinite(start) else float(i),
                _number(data["ttfts"][i] or math.nan, "ttfts") * 1e3,
                [_number(x, "itls") * 1e3 for x in data["itls"][i] or []],
                _number(data["latencies"][i] or math.nan, "latencies") * 1e3,
                int(data["input_lens"][i]),
                int(data["output_lens"][i]),
                str(err) if err else None,
                _number(queues[i] or 0.0, "queue_times") * 1e3,
            )
        )
    model = str(data.get("model_id") or data.get("tokenizer_id") or "?")
    spec = {
        "rate": data.get("request_rate", math.inf),
        "concurrency": data.get("max_concurrency"),
        "version": data.get("vllm_version") or data.get("version") or "?",
    }
    return [_document(rows, "vllm", model, spec)]


def from_guidellm(data: Any) -> list[LoadResult]:
    """A GuideLLM benchmarks JSON as one load document per benchmark (strategy)."""
    benches = data.get("benchmarks") if isinstance(data, dict) else None
    if not isinstance(benches, list) or not benches:
        raise UserError(
            "not a GuideLLM benchmarks file (no `benchmarks` list)",
            "write it with `guidellm run --output kind=json,path=FILE`",
        )
    version = ((data.get("metadata") or {}).get("guidellm_version")) or "?"
    out = []
    for b in benches:
        reqs = b.get("requests") or {}
        rows: list[dict[str, Any]] = []
        for kind in ("successful", "errored", "incomplete"):
            for r in reqs.get(kind) or []:
                n_out = int(r.get("output_tokens") or 0)
                ttft = _number(
                    r.get("time_to_first_token_ms") or math.nan, "time_to_first_token_ms"
                )
                gap = r.get("inter_token_latency_ms")
                itl = [_number(gap, "inter_token_latency_ms")] * (n_out - 1) if gap else []
                err = None if kind == "successful" else str(r.get("error") or kind)
                rows.append(
                    _row(
                        len(rows),
                        _number(r.get("request_start_time"), "request_start_time") * 1e3,
                        ttft,
                        itl,
                        _number(r.get("request_latency") or math.nan, "request_latency") * 1e3,
                        int(r.get("prompt_tokens") or 0),
                        n_out,
                        err,
                    )
                )
        strategy = (b.get("config") or {}).get("strategy") or {}
        model = str(((b.get("config") or {}).get("backend") or {}).get("model") or "?")
        spec = {
            "rate": strategy.get("rate", math.inf),
            "concurrency": strategy.get("streams") or strategy.get("max_concurrency"),
            "version": version,
        }
        doc = _document(rows, "guidellm", model, spec)
        doc["meta"]["notes"] = [
            "GuideLLM keeps a request's mean gap between tokens, not each gap: its tokens are "
            "spread evenly here"
        ]
        out.append(doc)
    return out


def read_results(data: Any, fmt: str) -> list[LoadResult]:
    """A peer's result file (parsed JSON) as load documents."""
    if fmt == "vllm":
        return from_vllm(data)
    if fmt == "guidellm":
        return from_guidellm(data)
    raise UserError(f"--format {fmt!r} is not a format", f"use one of {', '.join(FORMATS)}")


def guess_format(data: Any) -> str:
    """Which peer wrote this file, from its keys."""
    if isinstance(data, dict) and "benchmarks" in data:
        return "guidellm"
    if isinstance(data, dict) and "ttfts" in data:
        return "vllm"
    raise UserError(
        "cannot tell which tool wrote this file",
        f"name it with --format ({', '.join(FORMATS)})",
    )


def to_vllm(doc: dict[str, Any]) -> dict[str, Any]:
    """A load document as vLLM's `bench serve` result JSON (times in seconds, as it writes)."""
    import numpy as np

    rows = doc["all_samples"]
    ok = [r for r in rows if r["error"] is None]
    s, spec = doc["summary"], doc["meta"]["spec"]

    def stats(name: str, values: list[float]) -> dict[str, float]:
        v = [x for x in values if math.isfinite(x)] or [0.0]
        return {
            f"mean_{name}_ms": float(np.mean(v)),
            f"median_{name}_ms": float(np.median(v)),
            f"std_{name}_ms": float(np.std(v)),
            f"p99_{name}_ms": float(np.percentile(v, 99)),
        }

    tpots = [r["tpot_ms"] for r in ok if r["output_tokens"] > 1]
    out: dict[str, Any] = {
        "backend": "infermeter",
        "model_id": doc["meta"]["model"],
        "request_rate": spec["rate"] if math.isfinite(spec["rate"]) else "inf",
        "max_concurrency": spec.get("concurrency"),
        "duration": s["wall_s"],
        "completed": len(ok),
        "failed": len(rows) - len(ok),
        "total_input_tokens": sum(r["prompt_tokens"] for r in ok),
        "total_output_tokens": sum(r["output_tokens"] for r in ok),
        "request_throughput": len(ok) / s["wall_s"] if s["wall_s"] > 0 else 0.0,
        "output_throughput": s["output_tokens_per_s"],
        "input_lens": [r["prompt_tokens"] for r in rows],
        "output_lens": [r["output_tokens"] for r in rows],
        "ttfts": [r["ttft_ms"] / 1e3 if r["error"] is None else 0.0 for r in rows],
        "itls": [[x / 1e3 for x in r["itl_ms"]] for r in rows],
        "latencies": [r["e2e_ms"] / 1e3 if r["error"] is None else 0.0 for r in rows],
        "start_times": [r["arrival_ms"] / 1e3 for r in rows],
        "queue_times": [r["queue_ms"] / 1e3 if math.isfinite(r["queue_ms"]) else 0.0 for r in rows],
        "errors": [r["error"] or "" for r in rows],
    }
    out |= stats("ttft", [r["ttft_ms"] for r in ok])
    out |= stats("tpot", tpots)
    out |= stats("itl", [x for r in ok for x in r["itl_ms"]])
    out |= stats("e2el", [r["e2e_ms"] for r in ok])
    return out


def stored_as_document(run: Any) -> dict[str, Any]:
    """A stored load run back as a load document (one row per stored request)."""
    load = (run.checks or {}).get("load")
    if not load:
        raise UserError(
            f"run {run.run_id} is not a load run", "export a run made by `infermeter load`"
        )
    queue = load.get("queue_ms") or []
    measured = [x for x in run.samples if not x.warmup]
    rows = []
    for k, smp in enumerate(measured):
        itl = list(smp.step_ms)
        rows.append(
            _row(
                smp.index,
                smp.start_ms,
                smp.ttft_ms,
                itl,
                smp.ttft_ms + sum(itl),
                smp.prompt_tokens,
                smp.new_tokens,
                None,
                queue[k] if k < len(queue) else 0.0,
            )
        )
    for f in load.get("failed") or []:
        rows.append(_row(f["sample_id"], 0.0, math.nan, [], math.nan, 0, 0, f["error"]))
    spec = (run.config or {}).get("load") or {}
    return {
        "meta": {"model": run.model_info.get("name") or spec.get("model"), "spec": spec},
        "summary": load["summary"],
        "all_samples": rows,
    }
