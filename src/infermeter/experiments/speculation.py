"""Where speculative decoding pays: each speculative point against greedy on the same prompts.

Per prompt kind, each speculative decoding's decode time (the median over its samples, with the
95% interval of that median) against greedy decoding's: faster or slower only where the two
intervals do not overlap, else no detectable difference. Beside it, what explains the result:
the share of proposals accepted and the tokens each target forward yielded.
"""

from __future__ import annotations

from typing import Any


def _stat(row: dict[str, Any], key: str) -> tuple[float | None, float | None, float | None]:
    s = row.get(key) or {}
    return s.get("p50"), s.get("median_ci95_low"), s.get("median_ci95_high")


def _verdict(base: tuple[Any, ...], point: tuple[Any, ...]) -> str:
    (_, b_lo, b_hi), (_, p_lo, p_hi) = base, point
    if None in (b_lo, b_hi, p_lo, p_hi):
        return "too few samples to judge"
    if p_hi < b_lo:
        return "pays: faster"
    if p_lo > b_hi:
        return "costs: slower"
    return "no detectable difference"


def speculation_verdict(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per speculative point: its decode time against greedy's on the same prompts."""
    rows = doc.get("summary") or []
    greedy = {
        r["config"].get("prompt_kind"): r for r in rows if r["config"].get("decoding") == "greedy"
    }
    out = []
    for r in rows:
        kind, how = r["config"].get("prompt_kind"), r["config"].get("decoding")
        base = greedy.get(kind)
        if how == "greedy" or base is None:
            continue
        b, p = _stat(base, "decode_ms"), _stat(r, "decode_ms")
        spec = (r.get("checks") or {}).get("speculation") or {}
        out.append(
            {
                "prompt_kind": kind,
                "decoding": how,
                "greedy_decode_ms": b[0],
                "decode_ms": p[0],
                "speedup": b[0] / p[0] if b[0] and p[0] else None,
                "acceptance_rate": spec.get("acceptance_rate"),
                "tokens_per_target_forward": spec.get("tokens_per_target_forward"),
                "matches_greedy": spec.get("matches_greedy"),
                "verdict": _verdict(b, p),
            }
        )
    return out
