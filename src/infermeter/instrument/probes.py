"""Statistics gathered on the device in the hot path and copied to the host once per run.

Small (decode-sized) tensors are not touched in the hot path at all: the probe keeps a
reference until the model's forward ends, then `flush()` stacks all of them of one shape and
reduces them row-wise in a handful of kernels for every layer at once. In context (cold caches
between model ops) every kernel costs 20-50 us on this CPU, so per-call reductions would cost
~50 us a block; deferred ones cost ~1.5 us a block. Larger (prefill) tensors are reduced per call
into one row of a preallocated device buffer (`torch.stack(..., out=row)`). Rows are combined
per (phase, layer) on the host at `collect()`; nothing calls `.item()` or otherwise synchronises
before that, and element counts (known from shapes) are kept in Python. Deferred tensors are
held only until the end of the forward that made them.

Sums, not means, are kept, so statistics over many calls are exact:
mean |x| = sum|x| / n, std from sum x and sum x^2, max |x| from min and max.
"""

from __future__ import annotations

import math
from typing import Any, TypedDict

PHASES = ("prefill", "decode")


class ActivationRowDoc(TypedDict):
    """A block's output statistics over a phase's probed calls (`activations`)."""

    phase: str
    layer: int
    mean_abs: float
    std: float
    max_abs: float
    #: share of values at or below the probe's epsilon
    sparsity: float
    calls: int


class KillRowDoc(TypedDict):
    """The MLP activation's values at or below kill_eps in a phase (`mlp_kill`)."""

    phase: str
    layer: int
    kill_ratio: float
    values: int


class RoutingRowDoc(TypedDict):
    """Tokens a layer's router sent to one expert in a phase (`moe_routing`)."""

    phase: str
    layer: int
    expert: int
    tokens: int
    share: float


class _AttentionRowDoc(TypedDict):
    phase: str
    layer: int
    #: mean entropy of a softmax row (nats)
    entropy: float
    #: share of live (unmasked) weights below the threshold; None (NaN) where none was live
    sparsity: float | None


class AttentionRowDoc(_AttentionRowDoc, total=False):
    """A layer's attention weights in a phase (`attention`).

    Deep mode adds each timed operation's mean ms per call (`qk_ms`, `softmax_ms`, `av_ms`,
    `o_proj_ms`) where it timed them.
    """

    qk_ms: float | None
    softmax_ms: float | None
    av_ms: float | None
    o_proj_ms: float | None


class AttentionHeadRowDoc(_AttentionRowDoc):
    """One head's attention weights in a phase (`attention_heads`)."""

    head: int


def _tensor_of(out: Any) -> Any:
    """The hidden-state tensor of a module output (tensor, or first item of a tuple)."""
    if isinstance(out, tuple | list):
        out = out[0] if out else None
    return out if hasattr(out, "dim") else None


class _Rows:
    """A growable device buffer of per-call rows plus host-side (phase, layer, n) for each."""

    def __init__(self, width: int, device: Any, capacity: int) -> None:
        import torch

        self._torch = torch
        self.buf = torch.zeros((max(capacity, 16), width), dtype=torch.float32, device=device)
        self.meta: list[tuple[int, int, int]] = []

    def append(self, meta: list[tuple[int, int, int]]) -> Any:
        """Room for one row per `meta` entry, recorded in one go: the buffer's rows to fill."""
        first = len(self.meta)
        while first + len(meta) > self.buf.shape[0]:  # rare: grow by doubling (one copy)
            self.buf = self._torch.cat((self.buf, self._torch.zeros_like(self.buf)))
        self.meta.extend(meta)
        return self.buf[first : first + len(meta)]

    def host(self) -> list[list[float]]:
        rows: list[list[float]] = self.buf[: len(self.meta)].double().cpu().tolist()
        return rows


class _Deferred:
    """Tensors kept (not copied) until the forward ends, then stacked per shape.

    Only a call of at most `max_rows` rows (tokens) is kept: a decode step's. A prefill's
    tensors are reduced at once, while the forward has just written them (still in cache):
    a 128-token smollm2 prefill in deep mode met the element cap, so its 30 layers' attention
    weights and MLP activations were stacked into 18 and 24 MB copies and reduced from memory,
    77 ms of a 194-ms prefill.
    """

    def __init__(self, limit: int, max_rows: int | None = None) -> None:
        self.limit = limit
        self.max_rows = max_rows
        self.items: list[tuple[int, int, Any]] = []  # (phase, layer, tensor)

    def offer(self, phase: int, layer: int, t: Any, rows: int = 1) -> bool:
        """Keep `t` if it is small enough; return False when the caller must reduce it now."""
        if t.numel() > self.limit or (self.max_rows is not None and rows > self.max_rows):
            return False
        self.items.append((phase, layer, t))
        return True

    def groups(self, torch: Any) -> list[tuple[list[tuple[int, int, int]], Any]]:
        """[(meta per row, stacked tensor)] per (shape, dtype); clears the pending items."""
        by_shape: dict[tuple[Any, ...], list[tuple[int, int, Any]]] = {}
        for phase, layer, t in self.items:
            by_shape.setdefault((tuple(t.shape), t.dtype), []).append((phase, layer, t))
        self.items = []
        return [
            ([(p, lay, t.numel()) for p, lay, t in grp], torch.stack([t for _, _, t in grp]))
            for grp in by_shape.values()
        ]


def _write_rows(rows: _Rows, meta: list[tuple[int, int, int]], columns: tuple[Any, ...]) -> None:
    """Append one row per meta entry, filled column-wise from 1-D tensors (one kernel)."""
    out = rows.append(meta)
    rows._torch.stack([c.float() for c in columns], dim=1, out=out)


class _RowProbe:
    """Base of the probes that reduce tensors into per-call rows of `WIDTH` columns.

    Small tensors are deferred to `flush()` (all layers of one shape reduced at once); larger
    ones are reduced when recorded. Subclasses say which columns a stack of tensors gives.
    """

    WIDTH = 1

    def __init__(
        self,
        device: Any,
        capacity: int = 4096,
        stage_width: int = 0,
        stage_rows: int | None = None,
    ) -> None:
        import torch

        self._torch = torch
        self.rows = _Rows(self.WIDTH, device, capacity)
        self.deferred = _Deferred(stage_width, stage_rows)

    def _offer(self, phase: int, layer: int, t: Any) -> None:
        """`t` of shape (..., values per row): its rows are its tokens."""
        flat = t.reshape(-1)
        rows = flat.numel() // max(t.shape[-1], 1) if t.dim() else 1
        if not self.deferred.offer(phase, layer, flat, rows):
            self._write([(phase, layer, flat.numel())], flat.unsqueeze(0))

    def flush(self) -> None:
        """Reduce every deferred tensor, one shape at a time (called at the end of a forward)."""
        for meta, stacked in self.deferred.groups(self._torch):
            self._write(meta, stacked)

    def _write(self, meta: list[tuple[int, int, int]], stacked: Any) -> None:
        _write_rows(self.rows, meta, self._columns(stacked))

    def _columns(self, s: Any) -> tuple[Any, ...]:
        """Per-row reductions of a (rows, values) tensor, WIDTH of them."""
        raise NotImplementedError


class ActivationProbe(_RowProbe):
    """Per call: sum|x|, sum x, sum x^2, min, max, count of |x| > eps; combined per layer.

    `eps == 0` (the default) counts exact zeros with one kernel (the L0 norm); a positive eps
    costs two more kernels.
    """

    WIDTH = 6

    def __init__(
        self,
        layers: int,
        device: Any,
        eps: float,
        capacity: int = 4096,
        stage_width: int = 0,
        stage_rows: int | None = None,
    ) -> None:
        super().__init__(device, capacity, stage_width, stage_rows)
        self.eps = eps
        self.layers = layers

    def record(self, phase: int, layer: int, out: Any) -> None:
        """Defer (decode-sized) or reduce now (larger) one block output; no host sync."""
        x = _tensor_of(out)
        if x is not None:
            self._offer(phase, layer, x.detach())

    def _columns(self, s: Any) -> tuple[Any, ...]:
        t = self._torch
        if s.dtype != t.float32:
            s = s.float()
        # amin and amax, not aminmax: on CPU the fused kernel took 112 us for a 128-token
        # prefill row of smollm2 where the two take 13 (benchmarks/standard_parts.py)
        lo, hi = s.amin(1), s.amax(1)
        if self.eps:
            big = t.count_nonzero(s.abs() > self.eps, dim=1)
        else:
            big = t.linalg.vector_norm(s, 0, dim=1)
        # |x| summed and the 2-norm squared: half the time of vector_norm(ord=1) and of
        # (x * x).sum() on a prefill row, the same sums to float32 rounding
        squares = t.linalg.vector_norm(s, 2, dim=1).square()
        return (s.abs().sum(1), s.sum(1), squares, lo, hi, big)

    def collect(self) -> list[ActivationRowDoc]:
        """Rows (phase, layer, mean_abs, std, max_abs, sparsity, calls) after one host copy."""
        acc: dict[tuple[int, int], list[Any]] = {}  # float sums, then int counts
        for (phase, layer, n), (s_abs, s, s2, lo, hi, big) in zip(
            self.rows.meta, self.rows.host(), strict=True
        ):
            a = acc.setdefault((phase, layer), [0.0, 0.0, 0.0, 0.0, 0.0, 0, 0])
            a[0] += s_abs
            a[1] += s
            a[2] += s2
            a[3] = max(a[3], hi, -lo)
            a[4] += n - big
            a[5] += n
            a[6] += 1
        rows: list[ActivationRowDoc] = []
        for (phase, layer), (s_abs, s, s2, mx, small, n, calls) in sorted(acc.items()):
            mean = s / n
            var = max(s2 / n - mean * mean, 0.0) * (n / (n - 1) if n > 1 else 1.0)
            rows.append(
                {
                    "phase": PHASES[phase],
                    "layer": layer,
                    "mean_abs": s_abs / n,
                    "std": math.sqrt(var),
                    "max_abs": mx,
                    "sparsity": small / n,
                    "calls": calls,
                }
            )
        return rows


class KillProbe(_RowProbe):
    """Per (phase, layer): post-activation values with |y| <= eps among all seen."""

    def __init__(
        self,
        layers: int,
        device: Any,
        eps: float,
        capacity: int = 4096,
        stage_width: int = 0,
        stage_rows: int | None = None,
    ) -> None:
        super().__init__(device, capacity, stage_width, stage_rows)
        self.eps = eps

    def record(self, phase: int, layer: int, out: Any) -> None:
        """Defer or count the killed activations of one activation-module call."""
        y = _tensor_of(out)
        if y is not None and y.numel():
            self._offer(phase, layer, y.detach())

    def _columns(self, s: Any) -> tuple[Any, ...]:
        return (self._torch.count_nonzero(s.abs() <= self.eps, dim=1),)

    def collect(self) -> list[KillRowDoc]:
        """Rows (phase, layer, kill_ratio, values)."""
        acc: dict[tuple[int, int], list[Any]] = {}  # float sums, then int counts
        for (phase, layer, n), (killed,) in zip(self.rows.meta, self.rows.host(), strict=True):
            a = acc.setdefault((phase, layer), [0.0, 0])
            a[0] += killed
            a[1] += n
        return [
            {"phase": PHASES[p], "layer": layer, "kill_ratio": k / n, "values": n}
            for (p, layer), (k, n) in sorted(acc.items())
        ]


class RoutingProbe:
    """Per (phase, layer, expert): tokens routed there, from the router's top-k indices."""

    def __init__(self, layers: int, experts: int, device: Any) -> None:
        import torch

        self._torch = torch
        self.experts = experts
        self.buf = torch.zeros((2, layers, experts), dtype=torch.float64, device=device)
        self._ones = torch.ones(4096, dtype=torch.float64, device=device)
        self.assignments = [[0] * layers for _ in PHASES]

    def record(self, phase: int, layer: int, out: Any) -> None:
        """Add the expert indices a router chose (no bincount: it would sync on CUDA)."""
        idx = out[-1] if isinstance(out, tuple | list) else None
        if idx is None or not hasattr(idx, "dtype") or idx.dtype.is_floating_point:
            return
        flat = idx.detach().reshape(-1)
        if flat.numel() > self._ones.numel():
            self._ones = self._torch.ones(
                flat.numel() * 2, dtype=self._ones.dtype, device=self._ones.device
            )
        self.buf[phase, layer].index_add_(0, flat, self._ones[: flat.numel()])
        self.assignments[phase][layer] += flat.numel()

    def collect(self) -> list[RoutingRowDoc]:
        """Rows (phase, layer, expert, tokens, share)."""
        host = self.buf.cpu().tolist()
        rows: list[RoutingRowDoc] = []
        for p, ph in enumerate(PHASES):
            for layer, counts in enumerate(host[p]):
                total = self.assignments[p][layer]
                if not total:
                    continue
                for e, c in enumerate(counts):
                    rows.append(
                        {
                            "phase": ph,
                            "layer": layer,
                            "expert": e,
                            "tokens": int(c),
                            "share": c / total,
                        }
                    )
        return rows


class AttentionProbe(_RowProbe):
    """Per call and head: sum of row entropies, weights below threshold, masked (exactly 0) weights.

    Each call writes one row per head (the heads of one call are consecutive rows), so the same
    sums give the layer's figures and each head's: heads of one layer differ (some attend to one
    token, some spread), which a layer's mean hides.
    """

    WIDTH = 3

    def __init__(
        self,
        layers: int,
        device: Any,
        threshold: float,
        capacity: int = 4096,
        stage_width: int = 0,
        stage_rows: int | None = None,
    ) -> None:
        super().__init__(device, capacity, stage_width, stage_rows)
        self.threshold = threshold
        #: per row written, beside `rows.meta`: (softmax rows it sums over, its head)
        self._row_heads: list[tuple[int, int]] = []

    def record(self, phase: int, layer: int, w: Any) -> None:
        """Entropy and sparsity of one softmax output of shape (batch, heads, queries, keys).

        Masked positions have weight exactly 0 and are left out of sparsity, so a causal mask
        does not count as "sparse attention". xlogy(0, 0) = 0, so they add no entropy either.
        """
        wf = w.detach()
        # (heads, softmax rows, keys): a view when the batch is 1
        per_head = wf.transpose(0, 1).reshape(wf.shape[1], -1, wf.shape[-1])
        rows = wf.shape[0] * wf.shape[2]  # the call's queries: one per token
        if not self.deferred.offer(phase, layer, per_head, rows):
            self._write([(phase, layer, per_head.numel())], per_head.unsqueeze(0))

    def _write(self, meta: list[tuple[int, int, int]], stacked: Any) -> None:
        """`stacked` is (calls, heads, softmax rows, keys): one row per call and head."""
        calls, heads, rows = stacked.shape[:3]
        self._row_heads += [(rows, head) for _ in range(calls) for head in range(heads)]
        per_row = [(p, lay, n // heads) for p, lay, n in meta for _ in range(heads)]
        _write_rows(self.rows, per_row, self._columns(stacked.reshape(calls * heads, -1)))

    def _columns(self, s: Any) -> tuple[Any, ...]:
        t = self._torch
        s = s.float()
        # -p log p with log of p clamped to the smallest normal float: 0 for a masked weight
        # (0 x log(tiny)), the same sum as xlogy(p, p) to float32 rounding, and faster on CPU,
        # where xlogy is not vectorised (benchmarks/deep_probes.py)
        logs = s.clamp_min(t.finfo(t.float32).tiny).log_()
        return (
            -(s * logs).sum(1),
            t.count_nonzero(s < self.threshold, dim=1),
            s.shape[1] - t.linalg.vector_norm(s, 0, dim=1),
        )

    def _sums(self) -> dict[tuple[int, int, int], list[float]]:
        """Per (phase, layer, head): [entropy sum, below, masked, softmax rows, weights]."""
        acc: dict[tuple[int, int, int], list[float]] = {}
        for (phase, layer, n), (ent, below, masked), (rows, head) in zip(
            self.rows.meta, self.rows.host(), self._row_heads, strict=True
        ):
            a = acc.setdefault((phase, layer, head), [0.0, 0.0, 0.0, 0, 0])
            a[0] += ent
            a[1] += below
            a[2] += masked
            a[3] += rows
            a[4] += n
        return acc

    @staticmethod
    def _row(
        phase: int, layer: int, ent: float, below: float, masked: float, rows: float, n: float
    ) -> AttentionRowDoc:
        live = n - masked
        return {
            "phase": PHASES[phase],
            "layer": layer,
            "entropy": ent / rows,
            "sparsity": (below - masked) / live if live else math.nan,
        }

    def collect(self) -> list[AttentionRowDoc]:
        """Rows (phase, layer, entropy, sparsity): every head of the layer together."""
        by_layer: dict[tuple[int, int], list[float]] = {}
        for (p, layer, _), sums in self._sums().items():
            a = by_layer.setdefault((p, layer), [0.0, 0.0, 0.0, 0, 0])
            for k, v in enumerate(sums):
                a[k] += v
        return [self._row(p, layer, *sums) for (p, layer), sums in sorted(by_layer.items())]

    def collect_heads(self) -> list[AttentionHeadRowDoc]:
        """Rows (phase, layer, head, entropy, sparsity): each head apart."""
        out: list[AttentionHeadRowDoc] = []
        for (p, layer, head), sums in sorted(self._sums().items()):
            row = self._row(p, layer, *sums)
            out.append(
                {
                    "phase": row["phase"],
                    "layer": layer,
                    "head": head,
                    "entropy": row["entropy"],
                    "sparsity": row["sparsity"],
                }
            )
        return out
