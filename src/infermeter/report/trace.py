"""A run as a Chrome / Perfetto trace: complete ("X") events, properly nested, small.

Four tracks: run phases (load, move to device), samples (prefill, decode, every token), for
instrumented runs the model (forward > block > attention / MLP / norms > QK^T / softmax / AV),
and the user's own regions of a session (`session(...).section("name")`).
Times are microseconds on the run's timeline. To stay small (target: <= 10 MB for 1,000 tokens of
a 30-layer model in standard mode) events carry no args, names are short ("L12 attn"),
timestamps are whole microseconds, durations keep one decimal only below 10 us, and norms (a
third of all calls, each a sliver, and summed in the tables anyway) are left out unless
`detail="full"`.
"""

from __future__ import annotations

import json
from typing import Any

from infermeter.instrument.packing import unpack
from infermeter.run.results import RunResult

PID = 1
TRACKS = {1: "run phases", 2: "samples", 3: "model", 4: "user sections"}
_BLOCKS = {
    "forward",
    "embeddings",
    "rotary",
    "block",
    "final_norm",
    "lm_head",
    "vision_tower",
    "projector",
    "choose_token",
    "prepare_step",
}
#: Which module kinds each detail level exports (None: all).
DETAIL: dict[str, set[str] | None] = {
    "blocks": _BLOCKS,
    "parts": _BLOCKS | {"attention", "mlp", "moe", "o_proj", "router", "qk", "softmax", "av"},
    "full": None,
}
_SHORT = {
    "attention": "attn",
    "final_norm": "final norm",
    "lm_head": "lm head",
    "vision_tower": "vision",
    "embeddings": "embed",
    "choose_token": "choose token",
    "prepare_step": "prepare step",
}


def _x(name: str, tid: int, ts_us: float, dur_us: float) -> dict[str, Any]:
    dur = round(dur_us, 1) if dur_us < 10 else int(round(dur_us))
    return {"name": name, "ph": "X", "ts": int(round(ts_us)), "dur": dur, "pid": PID, "tid": tid}


def _label(name: str, kind: str, layer: int | None) -> str:
    short = _SHORT.get(kind, kind)
    return short if layer is None else f"L{layer} {short}"


def chrome_trace(run: RunResult, detail: str = "parts") -> dict[str, Any]:
    """The trace document (`{"traceEvents": [...], ...}`) of a run.

    Args:
        run: a stored or fresh run.
        detail: "blocks", "parts" (default: everything but norms) or "full".
    """
    if detail not in DETAIL:
        raise ValueError(f"detail must be one of {', '.join(DETAIL)}")
    kinds = DETAIL[detail]
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
        modules = run.trace["modules"]
        labels = [_label(*m) for m in modules]
        keep = [kinds is None or m[1] in kinds for m in modules]
        offset_us = run.trace["offset_ms"] * 1e3
        starts, durs, mids = records["start_us"], records["dur_us"], records["mid"]
        order = sorted(
            (i for i in range(len(records)) if keep[mids[i]]),
            key=lambda i: (starts[i], -durs[i]),
        )
        for i in order:
            events.append(_x(labels[mids[i]], 3, offset_us + float(starts[i]), float(durs[i])))
    sections = sorted(run.layers.get("sections") or [], key=lambda r: (r["start_ms"], -r["ms"]))
    for r in sections:  # a session's user regions, on the run's timeline (nested by time)
        events.append(_x(str(r["name"]), 4, float(r["start_ms"]) * 1e3, float(r["ms"]) * 1e3))
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {"run_id": run.run_id, "model": run.model_info.get("spec"), "detail": detail},
    }


def write_chrome_trace(run: RunResult, path: Any, detail: str = "parts") -> int:
    """Write the trace as compact JSON; return its size in bytes."""
    from infermeter.util.atomic import write_text_atomic

    text = json.dumps(chrome_trace(run, detail), separators=(",", ":"))
    write_text_atomic(path, text)
    return len(text)
