"""A run as a Chrome / Perfetto trace: complete ("X") events, properly nested, small.

Four tracks: run phases (load, move to device), samples (prefill, decode, every token), for
instrumented runs the model (forward > block > attention / MLP / norms > QK^T / softmax / AV),
and the user's own regions of a session (`session(...).section("name")`).
Times are microseconds on the run's timeline. To stay small (target: <= 10 MB for 1,000 tokens of
a 30-layer model in standard mode) events carry no args, names are short ("L12 attn"),
and norms (a third of all calls, each a sliver, and summed in the tables anyway) are left out
unless `detail="full"`. Starts and ends are whole microseconds, each rounded where it falls
(not the duration on its own: that put consecutive token slices 1 us over each other). The
model's records keep their starts rounded to the microsecond when stored, so an end can still
land up to 1 us past the next call's start: `_tidy` trims such an end to that start and keeps
each child inside its parent, so Perfetto nests every slice. An event under a microsecond
keeps its duration to 0.1 us. Only tracks that hold events are named (an empty "user
sections" track on every trace said nothing).
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
    ts = int(round(ts_us))
    dur: float = int(round(ts_us + dur_us)) - ts
    if dur == 0 and dur_us > 0:
        dur = round(dur_us, 1)  # under a microsecond: keep it visible
    return {"name": name, "ph": "X", "ts": ts, "dur": dur, "pid": PID, "tid": tid}


def _tidy(events: list[dict[str, Any]]) -> None:
    """Trim the rounding overlaps of one track's complete events in place (see the docstring).

    An event that starts within 1 us of the open one's end and ends after it is a neighbour:
    the open one ends where it starts. Otherwise an event ending past the open one is its
    child, cut to its parent's end.
    """
    stack: list[dict[str, Any]] = []
    for e in sorted(events, key=lambda e: (e["ts"], -e["dur"])):
        end = e["ts"] + e["dur"]
        while stack:
            top = stack[-1]
            top_end = top["ts"] + top["dur"]
            if e["ts"] >= top_end:
                stack.pop()
            elif e["ts"] >= top_end - 1 and end > top_end:
                top["dur"] = e["ts"] - top["ts"]
                stack.pop()
            else:
                break
        if stack and end > stack[-1]["ts"] + stack[-1]["dur"]:
            e["dur"] = stack[-1]["ts"] + stack[-1]["dur"] - e["ts"]
        stack.append(e)


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
    used = {e["tid"] for e in events if e["ph"] == "X"}
    for tid in used:
        _tidy([e for e in events if e.get("tid") == tid and e["ph"] == "X"])
    events[1:1] = [
        {"name": "thread_name", "ph": "M", "pid": PID, "tid": tid, "args": {"name": name}}
        for tid, name in TRACKS.items()
        if tid in used
    ]
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
