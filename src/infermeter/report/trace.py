"""A run as a Chrome / Perfetto trace: complete ("X") events, properly nested, small.

Three tracks: run phases (load, move to device), samples (prefill, decode, every token) and, for
instrumented runs, the model (forward > block > attention / MLP / norms > QK^T / softmax / AV).
Times are microseconds on the run's timeline. To stay small (target: <= 10 MB for 1,000 tokens of
a 30-layer model in standard mode) events carry no args, names are short ("L12 attention"),
timestamps are whole microseconds and durations keep one decimal.
"""

from __future__ import annotations

import json
from typing import Any

from infermeter.instrument.packing import unpack
from infermeter.run.results import RunResult

PID = 1
TRACKS = {1: "run phases", 2: "samples", 3: "model"}


def _x(name: str, tid: int, ts_us: float, dur_us: float) -> dict[str, Any]:
    return {
        "name": name,
        "ph": "X",
        "ts": int(round(ts_us)),
        "dur": round(dur_us, 1),
        "pid": PID,
        "tid": tid,
    }


def _label(name: str, kind: str, layer: int | None) -> str:
    if layer is None:
        return kind if kind != "forward" else "forward"
    return f"L{layer} {kind}"


def chrome_trace(run: RunResult) -> dict[str, Any]:
    """The trace document (`{"traceEvents": [...], ...}`) of a run."""
    events: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "pid": PID, "args": {"name": f"run {run.run_id}"}}
    ]
    for tid, name in TRACKS.items():
        events.append(
            {"name": "thread_name", "ph": "M", "pid": PID, "tid": tid, "args": {"name": name}}
        )
    t = 0.0
    for key, label in (("load_ms", "load"), ("to_device_ms", "move to device")):
        if key in run.phases:
            events.append(_x(label, 1, t * 1e3, run.phases[key] * 1e3))
            t += run.phases[key]
    for s in run.samples:
        start = s.start_ms * 1e3
        label = f"sample {s.index}" + (" (warm-up)" if s.warmup else "")
        events.append(_x(label, 2, start, s.total_ms * 1e3))
        events.append(_x("prefill (TTFT)", 2, start, s.ttft_ms * 1e3))
        if s.step_ms:
            events.append(_x("decode", 2, start + s.ttft_ms * 1e3, s.decode_ms * 1e3))
        at = start + s.ttft_ms * 1e3
        for k, ms in enumerate(s.step_ms, start=2):
            events.append(_x(f"token {k}", 2, at, ms * 1e3))
            at += ms * 1e3
    if run.trace:
        records = unpack(run.trace["dtype"], run.trace["records"])
        labels = [_label(*m) for m in run.trace["modules"]]
        offset_us = run.trace["offset_ms"] * 1e3
        order = sorted(
            range(len(records)), key=lambda i: (records["start_us"][i], -records["dur_us"][i])
        )
        for i in order:
            r = records[i]
            events.append(
                _x(labels[r["mid"]], 3, offset_us + float(r["start_us"]), float(r["dur_us"]))
            )
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {"run_id": run.run_id, "model": run.model_info.get("spec")},
    }


def write_chrome_trace(run: RunResult, path: Any) -> int:
    """Write the trace as compact JSON; return its size in bytes."""
    text = json.dumps(chrome_trace(run), separators=(",", ":"))
    with open(path, "w") as fh:
        fh.write(text)
    return len(text)
