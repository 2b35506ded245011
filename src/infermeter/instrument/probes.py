"""Statistics gathered on the device in the hot path and copied to the host once per run.

Each probe owns a preallocated float64 tensor on the model's device and adds into it with a few
fused reductions per call; nothing calls `.item()` or otherwise synchronises until `collect()`.
Element counts (known from shapes on the host) are kept in Python, never read from the device.

Sums, not means, are accumulated, so per-layer statistics over many calls are exact:
mean |x| = sum|x| / n, std from sum x and sum x^2, sparsity = count(|x| <= eps) / n.
`torch.histc(x, bins=1, min=-eps, max=eps)` counts |x| <= eps in one kernel.
"""

from __future__ import annotations

import math
from typing import Any

PHASES = ("prefill", "decode")


def _tensor_of(out: Any) -> Any:
    """The hidden-state tensor of a module output (tensor, or first item of a tuple)."""
    if isinstance(out, tuple | list):
        out = out[0] if out else None
    return out if hasattr(out, "dim") else None


class ActivationProbe:
    """Per (phase, layer): sum|x|, sum x, sum x^2, count(|x| <= eps), max|x|, and n."""

    FIELDS = 5

    def __init__(self, layers: int, device: Any, eps: float) -> None:
        import torch

        self._torch = torch
        self.eps = eps
        self.buf = torch.zeros((2, layers, self.FIELDS), dtype=torch.float64, device=device)
        self.n = [[0] * layers for _ in PHASES]
        self.calls = [[0] * layers for _ in PHASES]

    def record(self, phase: int, layer: int, out: Any) -> None:
        """Add one block output's statistics: five reductions, one stack, two in-place updates."""
        x = _tensor_of(out)
        if x is None:
            return
        t = self._torch
        flat = x.detach().reshape(-1).float()
        row = self.buf[phase, layer]
        stats = t.stack(
            (
                t.linalg.vector_norm(flat, 1),
                flat.sum(),
                t.dot(flat, flat),
                t.histc(flat, bins=1, min=-self.eps, max=self.eps)[0],
                t.linalg.vector_norm(flat, math.inf),
            )
        )
        row[:4].add_(stats[:4])
        t.maximum(row[4:], stats[4:], out=row[4:])
        self.n[phase][layer] += flat.numel()
        self.calls[phase][layer] += 1

    def collect(self) -> list[dict[str, Any]]:
        """Rows (phase, layer, mean_abs, std, max_abs, sparsity, calls) after one host copy."""
        host = self.buf.cpu().tolist()
        rows = []
        for p, phase in enumerate(PHASES):
            for layer, vals in enumerate(host[p]):
                n = self.n[p][layer]
                if not n:
                    continue
                s_abs, s, s2, small, mx = vals
                mean = s / n
                var = max(s2 / n - mean * mean, 0.0) * (n / (n - 1) if n > 1 else 1.0)
                rows.append(
                    {
                        "phase": phase,
                        "layer": layer,
                        "mean_abs": s_abs / n,
                        "std": math.sqrt(var),
                        "max_abs": mx,
                        "sparsity": small / n,
                        "calls": self.calls[p][layer],
                    }
                )
        return rows


class KillProbe:
    """Per (phase, layer): post-activation values with |y| <= eps, and how many there were."""

    def __init__(self, layers: int, device: Any, eps: float) -> None:
        import torch

        self._torch = torch
        self.eps = eps
        self.buf = torch.zeros((2, layers), dtype=torch.float64, device=device)
        self.n = [[0] * layers for _ in PHASES]

    def record(self, phase: int, layer: int, out: Any) -> None:
        """Count killed activations of one activation-module call."""
        y = _tensor_of(out)
        if y is None or y.numel() == 0:
            return
        killed = self._torch.histc(y.detach().float(), bins=1, min=-self.eps, max=self.eps)
        self.buf[phase, layer].add_(killed[0])
        self.n[phase][layer] += y.numel()

    def collect(self) -> list[dict[str, Any]]:
        """Rows (phase, layer, kill_ratio, values)."""
        host = self.buf.cpu().tolist()
        return [
            {"phase": ph, "layer": layer, "kill_ratio": host[p][layer] / n, "values": n}
            for p, ph in enumerate(PHASES)
            for layer, n in enumerate(self.n[p])
            if n
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

    def collect(self) -> list[dict[str, Any]]:
        """Rows (phase, layer, expert, tokens, share)."""
        host = self.buf.cpu().tolist()
        rows = []
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


class AttentionProbe:
    """Per (phase, layer): sum of row entropies, rows, weights below threshold, masked, total."""

    def __init__(self, layers: int, device: Any, threshold: float) -> None:
        import torch

        self._torch = torch
        self.threshold = threshold
        self.buf = torch.zeros((2, layers, 3), dtype=torch.float64, device=device)
        self.rows = [[0] * layers for _ in PHASES]
        self.weights = [[0] * layers for _ in PHASES]

    def record(self, phase: int, layer: int, w: Any) -> None:
        """Entropy and sparsity of one softmax output of shape (batch, heads, queries, keys).

        Masked positions have weight exactly 0 and are left out of sparsity, so a causal mask
        does not count as "sparse attention". xlogy(0, 0) = 0, so they add no entropy either.
        """
        t = self._torch
        wf = w.detach().float()
        stats = t.stack(
            (
                -t.special.xlogy(wf, wf).sum(),
                t.histc(wf, bins=1, min=0.0, max=self.threshold)[0],
                (wf == 0).sum().to(t.float64),
            )
        )
        self.buf[phase, layer].add_(stats)
        self.rows[phase][layer] += wf.numel() // wf.shape[-1]
        self.weights[phase][layer] += wf.numel()

    def collect(self) -> list[dict[str, Any]]:
        """Rows (phase, layer, entropy, sparsity)."""
        host = self.buf.cpu().tolist()
        out = []
        for p, ph in enumerate(PHASES):
            for layer, (ent, below, masked) in enumerate(host[p]):
                rows, n = self.rows[p][layer], self.weights[p][layer]
                if not rows:
                    continue
                live = n - masked
                out.append(
                    {
                        "phase": ph,
                        "layer": layer,
                        "entropy": ent / rows,
                        "sparsity": (below - masked) / live if live else math.nan,
                    }
                )
        return out
