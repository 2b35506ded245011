"""Interleaved runs: several configurations of one loaded model, measured sample by sample in turn.

Why: on a shared machine the speed drifts by 10-30% over minutes. Two runs measured one after
the other differ by that drift, and no interval computed within each run can see it: four
sequential runs of one configuration gave "slower" in four of six pairs. Here every
configuration (an *arm*) measures one sample per round, and the order is reversed every other
round (A B, B A, A B, ...), so a drift falls on every arm alike and sample i of each arm ran in
the same round: `compare` pairs them (analysis/compare.py).

Each arm is a full run of its own (registered, stored, resumable like any sweep point). Its
model knobs are applied around each of its samples and undone after, its hooks are attached
only while its own sample runs, and load-time settings (dtype, torch.compile) cannot differ
between arms: they need another model or wrap its forward for a whole run.
"""

from __future__ import annotations

import contextlib
import gc
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from infermeter.errors import UserError
from infermeter.models.loader import LoadedModel
from infermeter.run.config import RunConfig
from infermeter.run.profiling import (
    Session,
    close_session,
    register_session,
    run_sample,
    samples_done,
    set_up_session,
    start_clock,
    stopped,
    tear_down,
)
from infermeter.run.progress import LiveProgress, ProgressFn
from infermeter.run.results import RunResult
from infermeter.run.signals import stop_on_signals
from infermeter.run.sink import RunSink

#: on_round(done, total): after each round of samples.
RoundProgress = Callable[[int, int], None]


@dataclass
class Arm:
    """One configuration of an interleaved run.

    `apply` returns a context manager that puts the arm's model knobs on the loaded model and
    takes them off on exit; it is entered for set-up and around each of the arm's samples.
    """

    config: RunConfig
    knobs: dict[str, Any]
    apply: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext
    before_finish: Callable[[RunResult], None] | None = None
    label: str = ""


def check_interleavable(configs: list[RunConfig]) -> None:
    """Refuse configurations that cannot interleave, before anything loads or is stored."""
    if len(configs) < 2:
        raise UserError(
            "interleaving needs at least two configurations", "give a knob two or more values"
        )
    first = configs[0]
    for c in configs:
        if c.compile:
            raise UserError(
                "torch.compile cannot interleave: it wraps the model's forward for a whole run",
                "run compile on and off as a sweep without --interleave",
            )
        if (c.dtype, c.device, c.model) != (first.dtype, first.device, first.model):
            raise UserError(
                "interleaved configurations must share one loaded model (model, dtype, device)",
                "run dtype (or device) as a sweep without --interleave",
            )
        if (c.samples, c.warmup_effective) != (first.samples, first.warmup_effective):
            raise UserError(
                "interleaved configurations need the same --samples and --warmup",
                "set them once for the whole sweep",
            )


def _note(arms: list[Arm], group: str) -> str:
    others = len(arms) - 1
    return (
        f"samples interleaved with {others} other configuration{'s' * (others > 1)} "
        f"(group {group}): one sample each per round, order reversed every round, so a drift "
        "of the machine falls on all alike and sample i of each ran in the same round"
    )


def _round_order(n_arms: int, round_index: int) -> list[int]:
    """Arm indices in the order they run in a round: forwards, then backwards (A B, B A)."""
    order = list(range(n_arms))
    return order if round_index % 2 == 0 else order[::-1]


def profile_interleaved(
    arms: list[Arm],
    loaded: LoadedModel,
    *,
    sink: RunSink | None = None,
    sweep_id: str | None = None,
    on_progress: ProgressFn | None = None,
    on_round: RoundProgress | None = None,
) -> list[RunResult]:
    """Profile every arm on `loaded`, one sample per arm per round; return the runs in order.

    Raises:
        UserError: arms that cannot share the model, or any arm's set-up error (nothing stored).
        KeyboardInterrupt: Ctrl-C, SIGTERM or SIGHUP, after every arm's run is stored
            (terminated, samples so far kept).
        GenerationFailed: an arm's generation raised; every arm is stored first (the others
            as failed, naming the arm that stopped them).
    """
    check_interleavable([a.config for a in arms])
    group = uuid.uuid4().hex[:12]  # one sitting: a resumed sweep's arms form a new group
    progresses = [LiveProgress(sink, a.config.model, on_progress) for a in arms]
    try:
        with stop_on_signals():
            return _interleaved(arms, loaded, sink, sweep_id, group, progresses, on_round)
    finally:
        for p in progresses:
            p.end()


def _interleaved(
    arms: list[Arm],
    loaded: LoadedModel,
    sink: RunSink | None,
    sweep_id: str | None,
    group: str,
    progresses: list[LiveProgress],
    on_round: RoundProgress | None,
) -> list[RunResult]:
    sessions: list[Session] = []
    for arm, progress in zip(arms, progresses, strict=True):
        with arm.apply():  # the census and costs are the arm's (top-k, active layers, ...)
            session = set_up_session(arm.config, loaded, progress, sweep_id, arm.knobs)
        session.result.config["interleaved"] = {"group": group, "arms": len(arms)}
        session.result.notes.append(_note(arms, group))
        if session.sampler is not None:
            session.result.notes.append(
                "energy: the run's power trace (sampled_j) spans every interleaved arm; each "
                "sample's energy is its own window"
            )
        sessions.append(session)
    for session in sessions:  # only once every arm's set-up has passed
        register_session(session, sink)
    gc.freeze()  # as in profile(): collections between samples scan only the run's own objects
    failures: dict[int, BaseException] = {}
    try:
        failures = _rounds(arms, sessions, sink, on_round)
    finally:
        try:
            for session in sessions:
                tear_down(session)
        finally:
            gc.unfreeze()
    return _close_all(arms, sessions, sink, failures)


def _rounds(
    arms: list[Arm], sessions: list[Session], sink: RunSink | None, on_round: RoundProgress | None
) -> dict[int, BaseException]:
    """Every round, every arm's sample; returns the failure per arm (empty when all finished)."""
    for session in sessions:
        start_clock(session)
        if session.sampler is not None:
            session.sampler.start()
    n_rounds = len(sessions[0].batches)
    k = 0
    try:
        for r in range(n_rounds):
            for k in _round_order(len(arms), r):
                _one_sample(arms[k], sessions[k], sink, r)
            if on_round is not None:
                on_round(r + 1, n_rounds)
    except (KeyboardInterrupt, Exception) as exc:
        return _stop_all(arms, sessions, k, exc)
    for session in sessions:
        samples_done(session)
    return {}


def _one_sample(arm: Arm, session: Session, sink: RunSink | None, i: int) -> None:
    """Sample `i` of one arm: its knobs on, its hooks attached, then both taken off again."""
    with arm.apply():
        # the arm's own hooks: its profiler, its draft's and its cache's watchers
        hooked = [h for h in (session.profiler, session.speculator, session.cache_probe) if h]
        for h in hooked:
            h.attach()
        try:
            run_sample(session, sink, i)
        finally:
            for h in hooked:
                h.detach()


def _stop_all(
    arms: list[Arm], sessions: list[Session], culprit: int, exc: BaseException
) -> dict[int, BaseException]:
    """One arm stopped: every arm ends with it (terminated together, or failed because of it)."""
    failures: dict[int, BaseException] = {culprit: stopped(sessions[culprit], exc)}
    for j, session in enumerate(sessions):
        if j == culprit:
            continue
        if isinstance(exc, KeyboardInterrupt):
            stopped(session, exc)
        else:
            name = arms[culprit].label or f"configuration {culprit + 1}"
            session.result.status = "failed"
            session.result.error = f"stopped: the interleaved {name} failed ({exc})"
    return failures


def _close_all(
    arms: list[Arm],
    sessions: list[Session],
    sink: RunSink | None,
    failures: dict[int, BaseException],
) -> list[RunResult]:
    """Store every arm's run; then raise the failure, if any (after all are stored)."""
    results = []
    for j, (arm, session) in enumerate(zip(arms, sessions, strict=True)):
        if j not in failures:
            results.append(close_session(session, sink, None, arm.before_finish))
    for j, failure in failures.items():
        close_session(sessions[j], sink, failure, arms[j].before_finish)  # raises
    return results


__all__ = ["Arm", "RoundProgress", "check_interleavable", "profile_interleaved"]
