"""Peers' result files in and out, as stored load runs.

vLLM's `bench serve` result JSON, GuideLLM's benchmarks JSON and AIPerf's per-request
`profile_export.jsonl` become load runs; a stored load run becomes any of the three.

Why: a team that measured with vLLM's client or GuideLLM last month wants `compare` and
`history` across tools, and a team that reads vLLM's files wants ours in that form. The fields
are the ones each tool writes, read from its own code: vLLM's `vllm/benchmarks/serve.py`
(`benchmark()`'s `result`: `ttfts`, `itls`, `latencies` in seconds, `start_times` on the
client's `perf_counter`, `queue_times`, `input_lens`, `output_lens`, `errors`, with the
summary's `mean_/median_/p99_{ttft,tpot,itl,e2el}_ms`), GuideLLM 0.8's `benchmarks[]` with
`requests.successful[]` / `errored[]` (`time_to_first_token_ms`, `inter_token_latency_ms`,
`request_latency` in seconds, `request_start_time`, `prompt_tokens`, `output_tokens`), and
AIPerf 0.13's `MetricRecordInfo` lines (`aiperf/common/models/record_models.py`: `metadata` with
`credit_issued_ns`, `request_start_ns`, `request_end_ns`, `benchmark_phase`; `metrics` as
`{name: {value, unit}}` with `time_to_first_token`, `inter_chunk_latency`, `request_latency`,
`input_sequence_length`, `output_sequence_length`; `error` as `ErrorDetails`). AIPerf's
`profile_export_aiperf.json` is only percentiles: it cannot become requests, and says so.

What goes out is checked against the peers' own code by `benchmarks/peer_formats.py` (AIPerf's
pydantic model validates each exported line; GuideLLM's computed request fields are the names it
writes, but GuideLLM reloads its own files through internal fields infermeter does not have, so
an exported GuideLLM file is for readers of the format, not for `guidellm` itself).

What cannot cross: a peer keeps no per-token times (vLLM keeps them; GuideLLM keeps a
request's mean gap, so its tokens are spread evenly and said so), no server timings, no
self-check; an imported run says which tool measured it in its device name and notes.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from infermeter.errors import UserError
from infermeter.run.document import LoadResult
from infermeter.serving.rows import LoadDoc, LoadMetaDoc, RequestRowDoc

if TYPE_CHECKING:
    from infermeter.run.load_docs import LoadSpecDoc

FORMATS = ("vllm", "guidellm", "aiperf")


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
) -> RequestRowDoc:
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


def _document(rows: list[RequestRowDoc], tool: str, model: str, spec: dict[str, Any]) -> LoadResult:
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
    asked: LoadSpecDoc = {
        "model": model,
        "rate": float(spec.get("rate", math.inf)),
        "requests": len(rows),
        "concurrency": spec.get("concurrency"),
        "server": "endpoint",
        "slos": {},
        "imported_from": tool,
    }
    meta: LoadMetaDoc = {
        "kind": "load",
        "model": model,
        "model_info": {"spec": f"{model} ({name})", "name": model, "tokenizer": model},
        "device": {"name": name, "kind": "endpoint"},
        "versions": {"peer": f"{tool} {spec.get('version', '?')}"},
        "spec": asked,
        "imported_from": tool,
    }
    doc: LoadDoc = {"meta": meta, "summary": summary, "timeline": [], "all_samples": rows}
    return LoadResult(doc)


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
        rows: list[RequestRowDoc] = []
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


_TO_MS = {"ms": 1.0, "ns": 1e-6, "us": 1e-3, "sec": 1e3, "s": 1e3}


def _aiperf_value(metrics: dict[str, Any], name: str, ms: bool = False) -> Any:
    m = metrics.get(name)
    if not isinstance(m, dict) or "value" not in m:
        return None
    v = m["value"]
    if not ms:
        return v
    scale = _TO_MS.get(str(m.get("unit", "ms")))
    if scale is None:
        raise UserError(f"AIPerf's {name} is in {m.get('unit')!r}", "export times in ms or ns")
    if isinstance(v, list):
        return [_number(x, name) * scale for x in v]
    return _number(v, name) * scale


def from_aiperf(records: list[Any]) -> list[LoadResult]:
    """AIPerf's `profile_export.jsonl` (one `MetricRecordInfo` a line) as one load document.

    Warm-up records are left out, as AIPerf leaves them out of its own statistics. The
    scheduled send is the credit's issue time, so queueing before the send is kept.
    """
    if records and isinstance(records[0], dict) and "request_latency" in records[0]:
        raise UserError(
            "this is AIPerf's summary (profile_export_aiperf.json): percentiles, no requests",
            "import profile_export.jsonl from the same artifact folder",
        )
    rows: list[RequestRowDoc] = []
    model = "?"
    for rec in records:
        if not isinstance(rec, dict) or not isinstance(rec.get("metadata"), dict):
            raise UserError(
                "not an AIPerf record export (each line needs `metadata` and `metrics`)",
                "import profile_export.jsonl from aiperf's artifact folder",
            )
        meta, metrics = rec["metadata"], rec.get("metrics") or {}
        if meta.get("benchmark_phase", "profiling") != "profiling":
            continue
        start_ns = _number(meta.get("request_start_ns"), "request_start_ns")
        issued = meta.get("credit_issued_ns")
        scheduled_ns = _number(issued, "credit_issued_ns") if issued is not None else start_ns
        error = rec.get("error")
        err = str(error.get("message") or error.get("type") or "failed") if error else None
        if err is None and meta.get("was_cancelled"):
            err = "cancelled"
        ttft = _aiperf_value(metrics, "time_to_first_token", ms=True)
        e2e = _aiperf_value(metrics, "request_latency", ms=True)
        gaps = _aiperf_value(metrics, "inter_chunk_latency", ms=True) or []
        out = _aiperf_value(metrics, "output_sequence_length")
        rows.append(
            _row(
                len(rows),
                scheduled_ns / 1e6,
                math.nan if ttft is None else ttft,
                list(gaps),
                math.nan if e2e is None else e2e,
                int(_aiperf_value(metrics, "input_sequence_length") or 0),
                int(out if out is not None else len(gaps) + 1),
                err,
                (start_ns - scheduled_ns) / 1e6,
            )
        )
        model = str(meta.get("model_name") or model)
    return [_document(rows, "aiperf", model, {"version": "0.13 record format"})]


def read_results(data: Any, fmt: str) -> list[LoadResult]:
    """A peer's result file (parsed JSON, or a list of JSON lines) as load documents."""
    if fmt == "vllm":
        return from_vllm(data)
    if fmt == "guidellm":
        return from_guidellm(data)
    if fmt == "aiperf":
        return from_aiperf(data if isinstance(data, list) else [data])
    raise UserError(f"--format {fmt!r} is not a format", f"use one of {', '.join(FORMATS)}")


def guess_format(data: Any) -> str:
    """Which peer wrote this file, from its keys."""
    if isinstance(data, dict) and "benchmarks" in data:
        return "guidellm"
    if isinstance(data, dict) and "ttfts" in data:
        return "vllm"
    first = data[0] if isinstance(data, list) and data else data
    if isinstance(first, dict) and ("metadata" in first and "metrics" in first):
        return "aiperf"
    if isinstance(first, dict) and "aiperf_version" in first:
        return "aiperf"
    raise UserError(
        "cannot tell which tool wrote this file",
        f"name it with --format ({', '.join(FORMATS)})",
    )


def read_peer_file(path: Path, fmt: str | None) -> list[LoadResult]:
    """A peer's result file as load documents: JSON, or JSON lines (AIPerf's records)."""
    import json

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(
            f"cannot read {path}: {exc.__class__.__name__}", "give the tool's own result file"
        ) from None
    data: Any
    try:
        data = json.loads(text)
    except ValueError as exc:
        lines = [ln for ln in text.splitlines() if ln.strip()]
        try:
            data = [json.loads(ln) for ln in lines]
        except ValueError:
            raise UserError(
                f"{path} is neither JSON nor JSON lines ({exc})", "give the tool's own result file"
            ) from None
        if not data:
            raise UserError(f"{path} is empty", "give the tool's own result file") from None
    return read_results(data, fmt or guess_format(data))


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


def _seconds(ms: float) -> float:
    return ms / 1e3 if math.isfinite(ms) else 0.0


def to_aiperf(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """A load document as AIPerf's `profile_export.jsonl` records (one dict a line).

    Times are on the run's own clock from its start (AIPerf's are wall-clock ns): what reads
    them compares durations, never dates. The scheduled send goes in `credit_issued_ns`, so
    the time a request waited before its send survives.
    """
    out = []
    for r in doc["all_samples"]:
        scheduled_ns = int(r["arrival_ms"] * 1e6)
        queue = r["queue_ms"] if math.isfinite(r["queue_ms"]) else 0.0
        start_ns = scheduled_ns + int(queue * 1e6)
        ok = r["error"] is None
        e2e = r["e2e_ms"] if ok and math.isfinite(r["e2e_ms"]) else 0.0
        meta = {
            "session_num": int(r["sample_id"]),
            "x_request_id": str(r["sample_id"]),
            "turn_index": int(r.get("turn") or 0),
            "credit_issued_ns": scheduled_ns,
            "request_start_ns": start_ns,
            "request_end_ns": start_ns + int(e2e * 1e6),
            "worker_id": "infermeter",
            "record_processor_id": "infermeter",
            "benchmark_phase": "profiling",
            "was_cancelled": False,
        }
        metrics: dict[str, Any] = {
            "input_sequence_length": {"value": r["prompt_tokens"], "unit": "tokens"},
        }
        if ok:
            gaps = list(r["itl_ms"])
            metrics |= {
                "request_latency": {"value": e2e, "unit": "ms"},
                "time_to_first_token": {"value": r["ttft_ms"], "unit": "ms"},
                "output_sequence_length": {"value": r["output_tokens"], "unit": "tokens"},
                "output_token_count": {"value": r["output_tokens"], "unit": "tokens"},
            }
            if gaps:
                metrics |= {
                    "time_to_second_token": {"value": gaps[0], "unit": "ms"},
                    "inter_chunk_latency": {"value": gaps, "unit": "ms"},
                    "inter_token_latency": {"value": sum(gaps) / len(gaps), "unit": "ms"},
                }
        rec: dict[str, Any] = {"metadata": meta, "metrics": metrics}
        if not ok:
            rec["error"] = {"code": None, "type": "RequestFailed", "message": str(r["error"])}
        out.append(rec)
    return out


def to_guidellm(doc: dict[str, Any]) -> dict[str, Any]:
    """A load document as a GuideLLM 0.8 benchmarks JSON with one benchmark.

    The request entries carry the fields GuideLLM writes for each request (its computed
    `GenerativeRequestStats` fields, times in seconds, latencies between tokens in ms).
    """
    spec = doc["meta"]["spec"]
    rate = spec.get("rate", math.inf)
    conc = spec.get("concurrency")
    if conc:
        strategy: dict[str, Any] = {"type_": "concurrent", "streams": conc, "max_concurrency": conc}
    elif isinstance(rate, (int, float)) and math.isfinite(rate):
        strategy = {"type_": "poisson", "rate": rate}
    else:
        strategy = {"type_": "throughput"}
    ok: list[dict[str, Any]] = []
    bad: list[dict[str, Any]] = []
    for r in doc["all_samples"]:
        queue = r["queue_ms"] if math.isfinite(r["queue_ms"]) else 0.0
        start = _seconds(r["arrival_ms"] + queue)
        e2e = _seconds(r["e2e_ms"]) if r["error"] is None else 0.0
        n_out = int(r["output_tokens"])
        gaps = list(r["itl_ms"])
        entry: dict[str, Any] = {
            "type_": "generative_request_stats",
            "request_id": str(r["sample_id"]),
            "request_start_time": start,
            "request_end_time": start + e2e,
            "request_latency": e2e,
            "request_dispatch_delay": queue / 1e3,
            "prompt_tokens": int(r["prompt_tokens"]),
            "output_tokens": n_out,
            "total_tokens": int(r["prompt_tokens"]) + n_out,
        }
        if r["error"] is None:
            entry |= {
                "time_to_first_token_ms": r["ttft_ms"],
                "time_to_first_output_token_ms": r["ttft_ms"],
                "inter_token_latency_ms": sum(gaps) / len(gaps) if gaps else None,
                "time_per_output_token_ms": r["e2e_ms"] / n_out if n_out else None,
                "output_tokens_per_second": n_out / e2e if e2e > 0 else None,
            }
            ok.append(entry)
        else:
            bad.append(entry | {"error": str(r["error"])})
    starts = [e["request_start_time"] for e in ok + bad]
    ends = [e["request_end_time"] for e in ok + bad]
    return {
        "metadata": {"written_by": "infermeter", "format": "guidellm 0.8 benchmarks"},
        "benchmarks": [
            {
                "type_": "generative_benchmark",
                "config": {
                    "strategy": strategy,
                    "backend": {"model": doc["meta"]["model"], "target": "endpoint"},
                },
                "requests": {"successful": ok, "errored": bad, "incomplete": []},
                "start_time": min(starts, default=0.0),
                "end_time": max(ends, default=0.0),
                "duration": max(ends, default=0.0) - min(starts, default=0.0),
            }
        ],
    }


def import_peer_file(path: Path, fmt: str | None, store: Any) -> list[tuple[str, LoadResult]]:
    """A peer's result file stored as load runs: (run id, its document) for each."""
    from infermeter.serving.load import as_run
    from infermeter.serving.rows import as_load_doc

    out = []
    for doc in read_peer_file(path, fmt):
        run = as_run(as_load_doc(doc))
        run.notes.extend(doc["meta"].get("notes") or [])
        run.notes.append(f"imported from {doc['meta']['imported_from']} ({path.name})")
        out.append((str(store.save(run)), doc))
    return out
