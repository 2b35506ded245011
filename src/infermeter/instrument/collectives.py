"""Every collective of a tensor-parallel model, by phase, decoder layer and operation.

transformers' tensor-parallel styles call `torch.distributed.all_reduce` (row-wise layers: the
attention output and the MLP down projection) and `all_gather_into_tensor` (gathered outputs)
through the module attribute, so wrapping those attributes sees each call with its tensor. On
CPU (gloo) a collective returns when it is done, so the wall time around the call is its cost;
on GPU (NCCL) the call only enqueues the kernel and the recorder synchronises the device around
it, which makes the time real and the run slower: communication figures on a GPU are of a
serialised run, and say so. A forward pre-hook on the model names the phase (a forward over
more than one new position per row is a prefill) and counts forwards; pre-hooks on the decoder
blocks say which block a collective belongs to.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, TypedDict

from infermeter.models.forward_args import forward_phase

#: torch.distributed functions wrapped, by the name the tables show
WRAPPED = {"all_reduce": "all_reduce", "all_gather_into_tensor": "all_gather"}


class CollectiveRowDoc(TypedDict):
    """One phase, layer and collective operation of a tensor-parallel run (`collectives`)."""

    phase: str
    #: the decoder block (-1: outside every block)
    layer: int
    op: str
    count: int
    bytes: int
    ms: float
    count_per_forward: float
    bytes_per_call: float
    #: per position (batch x tokens) of the forwards: hidden size x dtype size for an all-reduce
    bytes_per_position: float | None


class CommunicationRowDoc(TypedDict):
    """One phase of a tensor-parallel run (`communication`): collectives against the forward."""

    phase: str
    forwards: int
    positions: int
    collectives: int
    bytes: int
    comm_ms: float
    forward_ms: float
    compute_ms: float
    comm_share: float | None


@dataclass
class CollectiveRecorder:
    """Wraps the collectives and hooks the model while active (`with recorder: ...`)."""

    model: Any
    #: (phase, layer index or -1 outside blocks, op) -> [count, bytes, seconds, positions]
    #: (positions: rows x new positions of the forward each call was made in, summed)
    calls: dict[tuple[str, int, str], list[float]] = field(
        default_factory=lambda: defaultdict(lambda: [0, 0, 0.0, 0])
    )
    #: phase -> [forwards, seconds in forwards, new positions x rows]
    forwards: dict[str, list[float]] = field(
        default_factory=lambda: defaultdict(lambda: [0, 0.0, 0])
    )
    _phase: str = "prefill"
    _layer: int = -1
    _t_forward: float = 0.0
    _positions: int = 0
    _undo: list[Any] = field(default_factory=list)

    def __enter__(self) -> CollectiveRecorder:
        import torch
        import torch.distributed as dist

        sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
        for attr, shown in WRAPPED.items():
            original = getattr(dist, attr)

            def wrapper(*args: Any, _orig: Any = original, _op: str = shown, **kw: Any) -> Any:
                t: Any = args[0] if args else kw.get("tensor")
                nbytes = int(t.numel() * t.element_size()) if hasattr(t, "numel") else 0
                sync()
                t0 = time.perf_counter()
                out = _orig(*args, **kw)
                sync()
                row = self.calls[(self._phase, self._layer, _op)]
                row[0] += 1
                row[1] += nbytes
                row[2] += time.perf_counter() - t0
                row[3] += self._positions
                return out

            setattr(dist, attr, wrapper)
            self._undo.append(lambda a=attr, o=original: setattr(dist, a, o))
        self._hook_model()
        return self

    def _hook_model(self) -> None:
        def pre(_m: Any, args: Any, kwargs: Any) -> None:
            ids = kwargs.get("input_ids", args[0] if args else None)
            if ids is None:
                ids = kwargs.get("inputs_embeds")
            rows, new = (int(ids.shape[0]), int(ids.shape[1])) if ids is not None else (1, 1)
            self._phase = forward_phase(kwargs)
            self._layer = -1
            f = self.forwards[self._phase]
            f[0] += 1
            f[2] += rows * new
            self._positions = rows * new
            self._t_forward = time.perf_counter()

        def post(_m: Any, _args: Any, _out: Any) -> None:
            self.forwards[self._phase][1] += time.perf_counter() - self._t_forward

        hooks = [
            self.model.register_forward_pre_hook(pre, with_kwargs=True),
            self.model.register_forward_hook(post),
        ]
        for index, block in enumerate(decoder_blocks(self.model)):
            hooks.append(block.register_forward_pre_hook(lambda *_a, i=index: self._set(i)))
        self._undo.extend(h.remove for h in hooks)

    def _set(self, index: int) -> None:
        self._layer = index

    def __exit__(self, *exc: Any) -> None:
        while self._undo:
            self._undo.pop()()

    def reset(self) -> None:
        """Forget what was recorded (after warm-up)."""
        self.calls.clear()
        self.forwards.clear()

    def rows(self) -> list[CollectiveRowDoc]:
        """One row per phase, layer and operation: count, bytes, ms, and per forward."""
        out: list[CollectiveRowDoc] = []
        for (phase, layer, op), (count, nbytes, secs, positions) in sorted(self.calls.items()):
            forwards = self.forwards[phase][0] or 1
            out.append(
                {
                    "phase": phase,
                    "layer": layer,
                    "op": op,
                    "count": int(count),
                    "bytes": int(nbytes),
                    "ms": secs * 1e3,
                    "count_per_forward": count / forwards,
                    "bytes_per_call": nbytes / count if count else 0,
                    # batch x tokens of the forwards: bytes / this = hidden x dtype size
                    "bytes_per_position": nbytes / positions if positions else None,
                }
            )
        return out

    def phases(self) -> list[CommunicationRowDoc]:
        """Per phase: forwards, collectives, bytes, communication and forward ms, the share."""
        out: list[CommunicationRowDoc] = []
        for phase, (forwards, fwd_s, positions) in sorted(self.forwards.items()):
            calls = [v for (p, _, _), v in self.calls.items() if p == phase]
            comm_s = sum(v[2] for v in calls)
            out.append(
                {
                    "phase": phase,
                    "forwards": int(forwards),
                    "positions": int(positions),
                    "collectives": int(sum(v[0] for v in calls)),
                    "bytes": int(sum(v[1] for v in calls)),
                    "comm_ms": comm_s * 1e3,
                    "forward_ms": fwd_s * 1e3,
                    "compute_ms": (fwd_s - comm_s) * 1e3,
                    "comm_share": comm_s / fwd_s if fwd_s else None,
                }
            )
        return out


def decoder_blocks(model: Any) -> list[Any]:
    """The decoder blocks of a transformers model: its longest ModuleList."""
    import torch

    lists: list[Any] = [m for m in model.modules() if isinstance(m, torch.nn.ModuleList)]
    if not lists:
        return []
    longest = max(range(len(lists)), key=lambda i: len(lists[i]))
    return list(lists[longest])
