"""Non-overlapping components of a phase's time, per sample, from a run's part table.

The part table has nested rows (a block contains its attention and MLP), so the components are
made disjoint: attention, MLP (dense or MoE, router included), norms, "block rest" (a block's
time in none of those: residual adds, hooks' own gaps), embeddings, final norm, LM head, vision
tower and projector, rotary (the position tables), "forward rest" (forward time in no top-level
module: masks, glue, hooks) and
"outside forward" (the phase's wall time outside the model's forward: generate's logits
processing, sampling, cache bookkeeping). They sum to the phase's measured time per sample.
"""

from __future__ import annotations

from typing import Any, cast

from infermeter.instrument.tables import GENERATE_PARTS, PARENT, PartRowDoc, nest_parts

#: Display order of components.
COMPONENTS = (
    "vision_tower",
    "projector",
    "embeddings",
    "rotary",
    "attention",
    "mlp",
    "norm",
    "block rest",
    "final_norm",
    "lm_head",
    "forward rest",
    "outside forward",
)


def phase_components(run: Any, phase: str = "prefill") -> dict[str, float] | None:
    """Milliseconds per measured sample of each component of `phase`; None without a part table."""
    parts = run.layers.get("parts", [])
    rows = [r for r in parts if r.get("phase") == phase]
    samples = run.measured
    if not rows or not samples:
        return None
    n = len(samples)
    ms = {r["part"]: float(r["total_ms"] or 0.0) / n for r in rows}
    if phase == "prefill":  # a VLM encodes images inside the TTFT window, before the forward
        for r in parts:
            if r.get("phase") == "vision" and r["part"] in ("vision_tower", "projector"):
                ms[r["part"]] = float(r["total_ms"] or 0.0) / n
    if phase == "prefill":
        wall = sum(s.ttft_ms for s in samples) / n
    elif (run.config.get("sample_every") or 1) > 1:
        return None  # only one decode step in N was timed: parts do not add up to decode
    else:
        wall = sum(s.decode_ms for s in samples) / n
    mlp = ms.get("mlp", 0.0) + ms.get("moe", 0.0)
    inside_block = ms.get("attention", 0.0) + mlp + ms.get("norm", 0.0)
    out = {
        "vision_tower": ms.get("vision_tower", 0.0),
        "projector": ms.get("projector", 0.0),
        "embeddings": ms.get("embeddings", 0.0),
        "rotary": ms.get("rotary", 0.0),
        "attention": ms.get("attention", 0.0),
        "mlp": mlp,
        "norm": ms.get("norm", 0.0),
        "block rest": max(0.0, ms.get("block", 0.0) - inside_block),
        "final_norm": ms.get("final_norm", 0.0),
        "lm_head": ms.get("lm_head", 0.0),
        "forward rest": max(0.0, ms.get("other", 0.0)),
        "outside forward": max(
            0.0,
            wall - ms.get("forward", 0.0) - ms.get("vision_tower", 0.0) - ms.get("projector", 0.0),
        ),
    }
    return {k: v for k, v in out.items() if v > 0 or k in ("attention", "mlp")}


def with_generate_calls(run: Any, parts: list[PartRowDoc]) -> list[PartRowDoc]:
    """The part rows under one more level: the generate call's time in each phase.

    The generate call's time (TTFT; the decode time) = the model's forward + generate's own
    work outside it (logits processing, sampling, stopping checks, cache bookkeeping). Only
    where every step of the phase was timed (not with --sample-every above 1), the forwards
    are the samples' own (one prefill each: not a session whose code ran generate too) and the
    phase's wall time covers its forward time; otherwise the rows are returned as they are.
    """
    rows = [r.copy() for r in parts]
    if any("parent" not in r for r in rows):  # stored before parts were nested
        rows = nest_parts([cast(PartRowDoc, {**r, "parent": PARENT.get(r["part"])}) for r in rows])
    samples = run.measured
    if not samples or (run.config.get("sample_every") or 1) > 1:
        return rows
    prefills = [r["calls"] for r in rows if r["phase"] == "prefill" and r["part"] == "forward"]
    if prefills and prefills[0] != len(samples):  # a session's own generate calls are in the
        return rows  # tables too: the samples' wall time is not the whole of their forwards
    walls = {
        "prefill": sum(s.ttft_ms for s in samples),
        "decode": sum(s.decode_ms for s in samples),
    }
    has_vision = any(r["phase"] == "vision" for r in rows)
    for phase, wall in walls.items():
        forward = next((r for r in rows if r["phase"] == phase and r["part"] == "forward"), None)
        if forward is None or (phase == "prefill" and has_vision):
            continue  # a VLM's image encoding shares the TTFT window: not split here
        inside = forward["total_ms"]
        if not inside or wall < inside:
            continue
        forward["parent"], forward["pct_parent"] = "generate call", 100.0 * inside / wall
        rows.append(
            {
                "phase": phase,
                "part": "generate call",
                "parent": None,
                "calls": len(samples),
                "total_ms": wall,
                "mean_ms": wall / len(samples),
                "pct_forward": None,
                "pct_parent": None,
            }
        )
        outside = wall - inside
        rows.append(
            {
                "phase": phase,
                "part": "outside forward",
                "parent": "generate call",
                "calls": None,
                "total_ms": outside,
                "mean_ms": None,
                "pct_forward": None,
                "pct_parent": 100.0 * outside / wall,
            }
        )
        _split_outside(rows, phase, outside)
    return rows


def _split_outside(rows: list[PartRowDoc], phase: str, outside: float) -> None:
    """Generate's timed parts (token choice, step preparation) as shares of "outside forward".

    What is left of it is generate's set-up before the first forward (prefill) and its own
    call overhead; in decode the step windows add up exactly, and no rest row is shown.
    """
    timed = [r for r in rows if r["phase"] == phase and r["part"] in GENERATE_PARTS]
    if not timed:
        return
    for r in timed:
        r["pct_forward"] = None  # outside the forward: no share of it
        r["pct_parent"] = 100.0 * r["total_ms"] / outside if outside else None
    rest = outside - sum(r["total_ms"] for r in timed)
    if abs(rest) <= 1e-6 * max(outside, 1e-9):
        return
    rows.append(
        {
            "phase": phase,
            "part": "rest of generate",
            "parent": "outside forward",
            "calls": None,
            "total_ms": rest,
            "mean_ms": None,
            "pct_forward": None,
            "pct_parent": 100.0 * rest / outside if outside else None,
        }
    )


def part_tree(parts: list[PartRowDoc]) -> list[tuple[int, PartRowDoc]]:
    """(depth, row) in tree order: each part followed by the parts timed inside it."""
    out: list[tuple[int, PartRowDoc]] = []
    for phase in dict.fromkeys(r["phase"] for r in parts):
        rows = [r for r in parts if r["phase"] == phase]
        roots = [
            r for r in rows if not r.get("parent") or r["parent"] not in {x["part"] for x in rows}
        ]

        def walk(row: PartRowDoc, depth: int, rows: list[PartRowDoc] = rows) -> None:
            out.append((depth, row))
            for child in rows:
                if child.get("parent") == row["part"] and child is not row:
                    walk(child, depth + 1)

        for root in roots:
            walk(root, 0)
    return out
