"""A load run without the model: arrivals, transformers' continuous-batching scheduler, step costs.

Why simulate rather than scale a measured curve: a server's latency under load is set by who
shares each step with whom (a long prompt arriving stalls every decoding request for its
prefill), by the queue when arrivals outpace steps, and by the KV cache when it fills; none of
that is a property of one request. Vidur simulates the scheduler from per-operation costs for
the same reason. The scheduler here is transformers' FIFO scheduler as it is in
`transformers.generation.continuous_batching.scheduler` (5.x), step by step:

- requests that are decoding go first, then those part-way through their prompt, then the
  waiting ones in arrival order;
- a step carries at most `max_batch_tokens` query tokens and `max_requests_per_step` requests;
  a prompt longer than the budget left is split over steps (chunked prefill);
- the KV cache holds `blocks` blocks of `page_tokens` tokens; a request takes blocks as its
  tokens need them, and while fewer than `safety_margin` of the blocks are free no new prompt
  starts unless the step would otherwise be empty;
- a request whose prompt completes in a step gets its first token at the step's end, a
  decoding request one more token per step; it ends after its `new_tokens` (no EOS).

Offloading a request to make room (transformers' CPU offload when the cache is full) is not
simulated: a run that would need it is reported as such, not guessed.

Each step's seconds come from a caller's cost function (analysis/stepcost.py). The requests
come back as `serving.load.Request` objects with their times filled in, so a simulated run is
summarised by the same code as a measured one (`summarize_load`, `slo_report`, `knee`).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from infermeter.analysis.stepcost import StepLoad
from infermeter.serving.load import Request

#: transformers' defaults (ContinuousBatchingConfig and the paged cache, 5.x)
DEFAULT_MAX_BATCH_TOKENS = 8192
DEFAULT_MAX_REQUESTS_PER_STEP = 1024
DEFAULT_PAGE_TOKENS = 256
DEFAULT_SAFETY_MARGIN = 0.15
#: steps simulated at most: a run that needs more is cut there and says so
MAX_STEPS = 2_000_000


@dataclass(frozen=True)
class SchedulerLimits:
    """What the scheduler works within; `blocks` None: a cache that never fills."""

    max_batch_tokens: int = DEFAULT_MAX_BATCH_TOKENS
    max_requests_per_step: int = DEFAULT_MAX_REQUESTS_PER_STEP
    blocks: int | None = None
    page_tokens: int = DEFAULT_PAGE_TOKENS
    safety_margin: float = DEFAULT_SAFETY_MARGIN


@dataclass(eq=False)  # compared by identity: the queues hold each request once
class _State:
    """One request inside the simulated server."""

    req: Request
    prompt_left: int
    cached: int = 0
    generated: int = 0
    blocks: int = 0


@dataclass
class SimResult:
    """The simulated requests (times set), the steps, and what could not be simulated."""

    requests: list[Request]
    steps: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


class _Cache:
    def __init__(self, limits: SchedulerLimits) -> None:
        self.total = limits.blocks
        self.page = max(limits.page_tokens, 1)
        self.used = 0

    def free_share(self) -> float:
        return 1.0 if self.total is None else (self.total - self.used) / max(self.total, 1)

    def take(self, st: _State, tokens: int) -> bool:
        """Blocks for `tokens` more of `st`'s tokens; False (nothing taken) when they do not fit."""
        need = math.ceil((st.cached + tokens) / self.page) - st.blocks
        if need <= 0:
            return True
        if self.total is not None and self.used + need > self.total:
            return False
        self.used += need
        st.blocks += need
        return True

    def free(self, st: _State) -> None:
        self.used -= st.blocks
        st.blocks = 0

    def used_pct(self) -> float | None:
        return None if self.total is None else 100.0 * self.used / max(self.total, 1)


def _schedule(
    decoding: list[_State],
    prefilling: list[_State],
    waiting: deque[_State],
    limits: SchedulerLimits,
    cache: _Cache,
) -> list[tuple[_State, int]]:
    """The next step's requests and their query tokens, as the FIFO scheduler picks them."""
    budget, room = limits.max_batch_tokens, limits.max_requests_per_step
    in_margin = cache.free_share() >= limits.safety_margin
    out: list[tuple[_State, int]] = []
    for st in [*decoding, *prefilling, *waiting]:
        is_decode = st.prompt_left == 0
        if not in_margin and out and not is_decode:
            break
        q = 1 if is_decode else min(st.prompt_left, budget)
        if not cache.take(st, q):
            continue
        out.append((st, q))
        budget -= q
        room -= 1
        if budget <= 0 or room <= 0:
            break
    return out


def simulate(
    requests: list[Request],
    offsets_s: list[float],
    step_seconds: Callable[[StepLoad], float],
    limits: SchedulerLimits | None = None,
    concurrency: int | None = None,
    admission_s: float = 0.0,
) -> SimResult:
    """Serve `requests` (arriving at `offsets_s`, or closed-loop at `concurrency`).

    A request with `follows` set (a session's later turn) arrives when that request ends, as
    `load` sends it. Times are seconds from the first arrival, written into the requests. A
    request that finds the server idle starts its first step `admission_s` after it arrives.

    Long because: it is the server's loop, one step per iteration, and reads best in one piece.
    """
    limits = limits or SchedulerLimits()
    cache = _Cache(limits)
    result = SimResult(requests)
    order = sorted(
        (i for i, r in enumerate(requests) if r.follows is None),
        key=lambda i: 0.0 if concurrency else offsets_s[i],
    )
    next_turn = {r.follows: i for i, r in enumerate(requests) if r.follows is not None}
    upcoming: deque[int] = deque(order)
    ready: deque[tuple[float, Request]] = deque()  # later turns, with their arrival times
    waiting: deque[_State] = deque()
    decoding: list[_State] = []
    prefilling: list[_State] = []
    in_flight, done, t = 0, 0, 0.0
    idle = True  # the server starts waiting
    if upcoming and concurrency is None:
        t = offsets_s[requests[upcoming[0]].index]

    def arrive(now: float) -> None:
        nonlocal in_flight
        while ready and ready[0][0] <= now and (concurrency is None or in_flight < concurrency):
            at, r = ready.popleft()
            r.arrival_s = at
            waiting.append(_State(r, len(r.prompt_ids)))
            in_flight += 1
        while upcoming and (concurrency is None or in_flight < concurrency):
            r = requests[upcoming[0]]
            at = now if concurrency is not None else offsets_s[r.index]
            if at > now:
                break
            upcoming.popleft()
            r.arrival_s = at
            waiting.append(_State(r, len(r.prompt_ids)))
            in_flight += 1

    while done < len(requests):
        arrive(t)
        if not (waiting or decoding or prefilling):
            nxt = [ready[0][0]] if ready else []
            if upcoming and concurrency is None:
                nxt.append(offsets_s[requests[upcoming[0]].index])
            if not nxt:
                result.notes.append("requests left that never arrive (a turn after a failed one)")
                break
            t = max(t, min(nxt))
            idle = True
            continue
        if idle and admission_s:
            arrive(t + admission_s)  # who else came while the server woke
            t += admission_s
        batch = _schedule(decoding, prefilling, waiting, limits, cache)
        if not batch:
            result.notes.append(
                "the KV cache filled with every running request still short of room: "
                "transformers would offload requests to the CPU, which is not simulated; "
                "the run stops there"
            )
            break
        load = StepLoad(
            tokens=sum(q for _, q in batch),
            context_tokens=sum(st.cached + q for st, q in batch),
            requests=len(batch),
            prefill_tokens=sum(q for st, q in batch if st.prompt_left > 0),
            after_idle=idle,
        )
        idle = False
        dt = step_seconds(load)
        end = t + dt
        result.steps.append(
            {
                "t_ms": t * 1e3,
                "step_ms": dt * 1e3,
                "batch_requests": len(batch),
                "prefill_tokens": load.prefill_tokens,
                "decode_tokens": load.tokens - load.prefill_tokens,
                "context_tokens": load.context_tokens,
                "running": len(decoding) + len(prefilling),
                "waiting": len(waiting),
                "kv_used_pct": cache.used_pct(),
            }
        )
        for st, q in batch:
            r = st.req
            if st in waiting:
                waiting.remove(st)
                r.start_s = t
            elif math.isnan(r.start_s):
                r.start_s = t
            was_decoding = st.prompt_left == 0
            st.cached += q
            if not was_decoding:
                st.prompt_left -= q
                if st.prompt_left > 0:
                    if st not in prefilling:
                        prefilling.append(st)
                    continue
                if st in prefilling:
                    prefilling.remove(st)
                decoding.append(st)
            st.generated += 1
            r.token_s.append(end)
            if st.generated >= r.new_tokens:
                r.end_s = end
                decoding.remove(st)
                cache.free(st)
                in_flight -= 1
                done += 1
                nxt_i = next_turn.get(r.index)
                if nxt_i is not None:
                    ready.append((end, requests[nxt_i]))
        if len(result.steps) >= MAX_STEPS:
            result.notes.append(f"cut after {MAX_STEPS} steps")
            break
        t = end
    return result
