"""NVTX ranges named as infermeter's tables, so an Nsight Systems timeline lines up with them.

`nsys profile --trace=cuda,nvtx infermeter profile ... --nvtx` shows, on the CPU thread's NVTX
row: one range per generate call (`sample 0`, `warmup 0`), inside it one per forward named by
its phase (`prefill`, `decode`: the `phase` column), and inside those one per block and part
named by the module path in the `name` column (`model.layers.3.self_attn`). The kernels each
range launched appear under it on the GPU rows, so a slow block in infermeter's per-layer table
is found in the timeline by its name.

The ranges use the model's forward wrappers (`models/forward_wrap.py`, 0.25 us a call on CPU),
not hooks, plus one NVTX push and pop per module call (their cost on a GPU host is not measured
here yet), and they are independent of the profiling mode: `--nvtx` with `--mode minimal` marks
the timeline without infermeter timing anything inside the forward.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from infermeter.errors import UserError
from infermeter.models.architecture import discover
from infermeter.models.forward_args import forward_phase
from infermeter.models.forward_wrap import ForwardWrap


class NvtxBackend(Protocol):
    """torch.cuda.nvtx's push and pop (a recorder in tests)."""

    def range_push(self, msg: str) -> Any:
        """Open a range."""
        ...

    def range_pop(self) -> Any:
        """Close the innermost range."""
        ...


def cuda_nvtx() -> NvtxBackend:
    """torch.cuda.nvtx, checked to work: a CPU build of torch has none."""
    import torch

    if not torch.cuda.is_available():
        raise UserError(
            "--nvtx needs a CUDA device (NVTX ranges mark an Nsight Systems timeline)",
            "run on a GPU machine, or drop --nvtx",
        )
    nvtx = torch.cuda.nvtx
    try:
        nvtx.range_push("infermeter")
        nvtx.range_pop()
    except RuntimeError as exc:
        raise UserError(f"NVTX is not available ({exc})", "install a CUDA build of torch") from None
    backend: NvtxBackend = nvtx
    return backend


def _parts(arch: Any) -> list[Any]:
    """Every module a range is opened for, outermost first: top-level ones, blocks, parts."""
    out = [
        m
        for m in (
            arch.embeddings,
            arch.rotary,
            arch.final_norm,
            arch.lm_head,
            arch.vision_tower,
            arch.projector,
        )
        if m is not None
    ]
    for b in arch.blocks:
        out.append(b.block)
        out.extend(m for m in (b.attention, b.mlp, b.mixer) if m is not None)
        out.extend(norm for _name, norm in b.norms)
    return out


class NvtxRanges:
    """NVTX ranges around samples, forwards (by phase), blocks and parts of `model`.

    Args:
        model: the transformers model.
        backend: where ranges go; torch.cuda.nvtx (checked) by default.
        modules: also a range per block and part; off under torch.compile, whose graph would
            break at every range (samples and phases are marked outside the compiled forward).
    """

    def __init__(
        self, model: Any, backend: NvtxBackend | None = None, modules: bool = True
    ) -> None:
        self.model = model
        self.backend = backend if backend is not None else cuda_nvtx()
        self.arch = discover(model)
        self.modules = modules
        self._wraps: list[ForwardWrap] = []

    def _named(self, name: str) -> Any:
        push, pop = self.backend.range_push, self.backend.range_pop

        def around(inner: Any, args: Any, kwargs: Any) -> Any:
            push(name)
            try:
                return inner(*args, **kwargs)
            finally:
                pop()

        return around

    def _phase(self, inner: Any, args: Any, kwargs: Any) -> Any:
        self.backend.range_push(forward_phase(kwargs))
        try:
            return inner(*args, **kwargs)
        finally:
            self.backend.range_pop()

    def attach(self) -> None:
        """Wrap the forward and every named module (again after `detach`)."""
        if self._wraps:
            return
        self._wraps.append(ForwardWrap(self.model, self._phase))
        for module in _parts(self.arch) if self.modules else []:
            self._wraps.append(ForwardWrap(module, self._named(self.arch.name_of(module))))

    def detach(self) -> None:
        """Put every forward back."""
        for w in reversed(self._wraps):
            w.remove()
        self._wraps.clear()

    @contextmanager
    def sample(self, index: int, warmup: bool) -> Iterator[None]:
        """A range around one generate call, named as the samples table names it."""
        self.backend.range_push(f"{'warmup' if warmup else 'sample'} {index}")
        try:
            yield
        finally:
            self.backend.range_pop()
