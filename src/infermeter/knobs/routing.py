"""routing: MoE routing shortcuts (fast path, routing cache, learned router) as a knob.

The systems-analysis reference (000) bypasses routers where routing is predictable:
- a **fast path**: a per-layer table from token id to the experts (and weights) the learned
  router almost always picks for it, built by a calibration pass over the built-in corpus
  (or a prompts file): a token enters the table when it was seen at least `min_count` times,
  its most common expert set has a share of at least `frequency_threshold`, and the entropy
  (bits) of its expert-set distribution is at most `entropy_threshold`; the `table_size` most
  frequent such tokens per layer are kept;
- a **routing cache**: each layer keeps the last `cache_size` learned decisions by key (the
  token id, or the token and the one before it), each valid for `cache_ttl` router calls;
- the **learned** router for every other token, computed for those rows only.

How: each router's `forward` is wrapped (as the profiler does, `models/forward_wrap.py`); the
model's code is not edited and everything is undone on exit. A pre-hook on the model records
the input ids of each forward, which the routers see only as hidden states. The routers of
Mixtral, Qwen2-MoE and Qwen3-MoE in transformers 5 return (logits, weights, experts); rows
that took a shortcut get zero logits (nothing reads them during generation). When every token
takes the learned path, the router's own output is returned untouched, so the model is exact.
Counts per layer and path are kept for the run's evidence.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections import Counter, OrderedDict
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from infermeter.errors import UserError
from infermeter.knobs.base import Knob, KnobNotApplied
from infermeter.knobs.evidence import (
    KnobCheckDoc,
    RoutingObservedDoc,
    RoutingSplitDoc,
    with_quality,
)
from infermeter.models.architecture import discover
from infermeter.models.loader import LoadedModel

CACHE_KEYS = ("token", "token+prev")
PATHS = ("fast", "cached", "learned")


@dataclass(frozen=True)
class RoutingShortcuts:
    """The shortcut settings (the reference's VAR config)."""

    frequency_threshold: float = 0.9
    entropy_threshold: float = 0.5
    min_count: int = 2
    table_size: int = 4096
    cache_size: int = 256
    cache_ttl: int = 32
    cache_key: str = "token"
    calibration_tokens: int = 512

    def validate(self) -> RoutingShortcuts:
        """Every field in range, or one line naming it and the fix."""
        checks = [
            (0.0 <= self.frequency_threshold <= 1.0, "frequency_threshold must be within 0..1"),
            (0.0 <= self.entropy_threshold <= 64.0, "entropy_threshold must be within 0..64 bits"),
            (1 <= self.min_count <= 10**6, "min_count must be within 1..1000000"),
            (0 <= self.table_size <= 10**7, "table_size must be within 0..10000000"),
            (0 <= self.cache_size <= 10**7, "cache_size must be within 0..10000000"),
            (1 <= self.cache_ttl <= 10**9, "cache_ttl must be within 1..1000000000"),
            (self.cache_key in CACHE_KEYS, f"cache_key must be one of {', '.join(CACHE_KEYS)}"),
            (16 <= self.calibration_tokens <= 65536, "calibration_tokens must be 16..65536"),
        ]
        for ok, message in checks:
            if not ok:
                raise UserError(f"routing config: {message}", "fix the routing config")
        return self

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RoutingShortcuts:
        """From a config file's dict; unknown keys are refused."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise UserError(
                f"routing config: unknown keys {unknown}", f"use only {', '.join(sorted(known))}"
            )
        try:
            return cls(**d).validate()
        except TypeError as exc:
            raise UserError(f"routing config: {exc}", "give numbers and a cache_key") from None


def parse(text: str) -> str:
    """The knob's value as typed, once it is known to be a valid setting.

    Kept as text (stored with the run, shown in tables); `shortcut_config` turns it into
    the settings when the knob is applied.
    """
    shortcut_config(text)
    return text.strip()


def shortcut_config(text: str) -> RoutingShortcuts | None:
    """None for `learned`; settings for `shortcuts` (defaults), `shortcuts:key=v,...`, FILE.json."""
    t = text.strip()
    if t == "learned":
        return None
    if t == "shortcuts" or t.startswith("shortcuts:"):
        pairs = [p for p in t.removeprefix("shortcuts").lstrip(":").split(",") if p.strip()]
        values: dict[str, Any] = {}
        for p in pairs:
            key, _, raw = p.partition("=")
            values[key.strip()] = _number(raw.strip())
        return RoutingShortcuts.from_dict(values)
    path = Path(t).expanduser()
    if path.suffix == ".json":
        try:
            return RoutingShortcuts.from_dict(json.loads(path.read_text()))
        except OSError as exc:
            raise UserError(
                f"cannot read routing config {t!r} ({exc.strerror or exc})",
                "give an existing JSON file",
            ) from None
        except json.JSONDecodeError as exc:
            raise UserError(
                f"routing config {t!r} is not valid JSON ({exc.msg})", "fix the file"
            ) from None
    raise UserError(
        f"routing={t!r} is not a routing value",
        "use learned, shortcuts, shortcuts:frequency_threshold=0.8,cache_size=64 or FILE.json",
    )


def _number(raw: str) -> Any:
    for cast in (int, float):
        try:
            return cast(raw)
        except ValueError:
            continue
    return raw


@dataclass
class _Entry:
    experts: Any  # long tensor (k,)
    weights: Any  # tensor (k,)


@dataclass
class LayerRouting:
    """One router's shortcut state: its fast-path table, its cache, and what each path got."""

    table: dict[int, _Entry] = field(default_factory=dict)
    cache: OrderedDict[Any, tuple[int, _Entry]] = field(default_factory=OrderedDict)
    counts: Counter[str] = field(default_factory=Counter)
    learned_calls: int = 0
    calls: int = 0
    #: the table as sorted key, experts and weights tensors, rebuilt when the table changes
    _packed: tuple[int, Any, Any, Any] | None = None

    def lookup(self, ids: Any) -> tuple[Any, Any, Any]:
        """(hit mask, experts, weights) of every token in one vectorised lookup."""
        import torch

        if self._packed is None or self._packed[0] != len(self.table):
            keys = sorted(self.table)
            experts = torch.stack([self.table[t].experts for t in keys])
            weights = torch.stack([self.table[t].weights for t in keys])
            self._packed = (
                len(self.table),
                torch.tensor(keys, device=ids.device),
                experts.to(ids.device),
                weights.to(ids.device),
            )
        _, keys_t, experts_t, weights_t = self._packed
        pos = torch.searchsorted(keys_t, ids).clamp_(max=keys_t.numel() - 1)
        hit = keys_t[pos] == ids
        return hit, experts_t[pos], weights_t[pos]


def _entropy_bits(counts: Counter[Any]) -> float:
    total = sum(counts.values())
    return -sum(c / total * math.log2(c / total) for c in counts.values() if c)


def _router_outputs(model: Any, ids: Any) -> list[list[tuple[Any, Any]]]:
    """Per router (block order): per forward call, (experts, weights) of every token."""
    import torch

    routers = [b.router for b in discover(model).blocks if b.router is not None]
    seen: list[list[tuple[Any, Any]]] = [[] for _ in routers]
    handles = [
        r.register_forward_hook(lambda _m, _a, out, i=i: seen[i].append((out[2], out[1])))
        for i, r in enumerate(routers)
    ]
    try:
        with torch.inference_mode():
            model(input_ids=ids, use_cache=False)
    finally:
        for h in handles:
            h.remove()
    return seen


def calibrate(loaded: LoadedModel, cfg: RoutingShortcuts) -> list[dict[int, _Entry]]:
    """The fast-path table of each router, from one pass over the built-in corpus."""
    from infermeter.workloads.prompts import WorkloadSpec, build_batches

    rows = max(1, cfg.calibration_tokens // 128)
    spec = WorkloadSpec(batch_size=rows, prompt_tokens=128, chat=False, seed=4321)
    (batch,) = build_batches(loaded.tokenizer, spec, 1)
    ids = batch.input_ids.to(next(loaded.model.parameters()).device)
    flat_ids = ids.reshape(-1).tolist()
    tables = []
    for calls in _router_outputs(loaded.model, ids):
        experts, weights = calls[0]
        choices: dict[int, Counter[tuple[int, ...]]] = {}
        picked: dict[tuple[int, tuple[int, ...]], Any] = {}
        for pos, token in enumerate(flat_ids):
            chosen = tuple(experts[pos].tolist())
            key = tuple(sorted(chosen))
            choices.setdefault(token, Counter())[key] += 1
            if (token, key) not in picked:
                picked[(token, key)] = (experts[pos].clone(), weights[pos].clone())
        table: list[tuple[int, int, _Entry]] = []
        for token, counter in choices.items():
            n = sum(counter.values())
            key, top = counter.most_common(1)[0]
            if n < cfg.min_count or top / n < cfg.frequency_threshold:
                continue
            if _entropy_bits(counter) > cfg.entropy_threshold:
                continue
            e, w = picked[(token, key)]
            table.append((n, token, _Entry(e, w)))
        table.sort(key=lambda t: -t[0])
        tables.append({token: entry for _, token, entry in table[: cfg.table_size]})
    return tables


class ShortcutRouting:
    """Routers wrapped to take the fast path, the cache or the learned router per token."""

    def __init__(self, loaded: LoadedModel, cfg: RoutingShortcuts) -> None:
        self.cfg = cfg
        self.model = loaded.model
        self.routers = [b.router for b in discover(loaded.model).blocks if b.router is not None]
        self.layers = [LayerRouting(table=t) for t in calibrate(loaded, cfg)]
        self.ids: list[int] = []  # flattened input ids of the current forward
        self.prev: list[int] = []  # the token before each (for the token+prev cache key)
        self._ids_tensor: Any = None
        self._handles: list[Any] = []

    def __enter__(self) -> ShortcutRouting:
        from infermeter.models.forward_wrap import ForwardWrap

        self._handles.append(
            self.model.register_forward_pre_hook(self._capture_ids, with_kwargs=True)
        )
        for i, router in enumerate(self.routers):
            self._handles.append(ForwardWrap(router, self._around(i)))
        return self

    def __exit__(self, *exc: Any) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()

    def _capture_ids(self, module: Any, args: Any, kwargs: dict[str, Any]) -> None:
        ids = kwargs.get("input_ids", args[0] if args else None)
        if ids is None or not hasattr(ids, "reshape"):
            self.ids, self.prev = [], []
            return
        rows = ids.tolist()
        last = getattr(self, "_last", {})
        self.ids = [t for row in rows for t in row]
        self.prev = []
        for r, row in enumerate(rows):
            before = last.get(r, -1)
            for t in row:
                self.prev.append(before)
                before = t
        self._last = {r: row[-1] for r, row in enumerate(rows) if row}
        self._ids_tensor = None

    def _key(self, pos: int) -> Any:
        token = self.ids[pos]
        return token if self.cfg.cache_key == "token" else (self.prev[pos], token)

    def _around(self, layer: int) -> Any:
        state = self.layers[layer]

        def around(inner: Any, args: Any, kwargs: Any) -> Any:
            hidden = args[0] if args else kwargs["hidden_states"]
            return self._route(state, inner, hidden)

        return around

    def _route(self, state: LayerRouting, inner: Any, hidden: Any) -> Any:
        """Split the rows into fast, cached and learned; the router runs on learned rows only."""
        import torch

        state.calls += 1
        flat = hidden.reshape(-1, hidden.shape[-1])
        n = flat.shape[0]
        if len(self.ids) != n:  # not the token rows we know (a vision tower's): all learned
            state.counts["learned"] += n
            state.learned_calls += 1
            return inner(hidden)
        if state.table:
            hit, table_experts, table_weights = state.lookup(self._ids_on(flat.device))
            fast = hit.tolist()
        else:
            fast = [False] * n
        cached: dict[int, _Entry] = {}
        if self.cfg.cache_size:
            for pos in range(n):
                if not fast[pos] and (entry := self._cached(state, pos)) is not None:
                    cached[pos] = entry
        learned = [pos for pos in range(n) if not fast[pos] and pos not in cached]
        state.counts["fast"] += n - len(cached) - len(learned)
        state.counts["cached"] += len(cached)
        state.counts["learned"] += len(learned)
        if len(learned) == n:
            state.learned_calls += 1
            out = inner(hidden)
            self._remember(state, learned, out[2], out[1])
            return out
        if state.table:
            experts, weights = table_experts.clone(), table_weights.clone()
        else:
            k = next(iter(cached.values())).experts.numel()
            experts = torch.zeros((n, k), dtype=torch.long, device=flat.device)
            weights = flat.new_zeros((n, k))
        if cached:
            rows = torch.tensor(list(cached), device=flat.device)
            experts[rows] = torch.stack([e.experts for e in cached.values()])
            weights[rows] = torch.stack([e.weights for e in cached.values()]).to(weights.dtype)
        router = getattr(inner, "__self__", None)  # None when another wrapper came first
        logits = flat.new_zeros((n, getattr(router, "num_experts", 0) or 1))
        if learned:
            state.learned_calls += 1
            idx = torch.tensor(learned, device=flat.device)
            sub_logits, sub_w, sub_e = inner(flat.index_select(0, idx))
            logits = sub_logits.new_zeros((n, sub_logits.shape[-1]))
            logits[idx], weights[idx], experts[idx] = sub_logits, sub_w.to(weights.dtype), sub_e
            self._remember(state, learned, sub_e, sub_w, rows=learned)
        return logits, weights.to(flat.dtype), experts

    def _ids_on(self, device: Any) -> Any:
        """This forward's token ids as a tensor on `device` (made once per forward)."""
        import torch

        if self._ids_tensor is None or self._ids_tensor.device != device:
            self._ids_tensor = torch.tensor(self.ids, device=device)
        return self._ids_tensor

    def _cached(self, state: LayerRouting, pos: int) -> _Entry | None:
        if not self.cfg.cache_size:
            return None
        key = self._key(pos)
        hit = state.cache.get(key)
        if hit is None:
            return None
        born, entry = hit
        if state.calls - born > self.cfg.cache_ttl:  # expired: forget it
            del state.cache[key]
            return None
        state.cache.move_to_end(key)
        return entry

    def _remember(
        self,
        state: LayerRouting,
        positions: list[int],
        experts: Any,
        weights: Any,
        rows: list[int] | None = None,
    ) -> None:
        """Learned decisions into the cache (newest last; the oldest evicted past its size)."""
        if not self.cfg.cache_size:
            return
        for j, pos in enumerate(positions):
            row = j if rows is not None else pos
            state.cache[self._key(pos)] = (
                state.calls,
                _Entry(experts[row].clone(), weights[row].clone()),
            )
            state.cache.move_to_end(self._key(pos))
            while len(state.cache) > self.cfg.cache_size:
                state.cache.popitem(last=False)

    def distribution(self) -> RoutingSplitDoc:
        """Tokens per path over every layer (counts and percent), per layer, cache use."""
        total: Counter[str] = Counter()
        for s in self.layers:
            total.update(s.counts)
        n = sum(total.values()) or 1
        return {
            "tokens": {p: total[p] for p in PATHS},
            "percent": {p: 100.0 * total[p] / n for p in PATHS},
            "per_layer": [{p: s.counts[p] for p in PATHS} for s in self.layers],
            "learned_router_calls": sum(s.learned_calls for s in self.layers),
            "table_entries": [len(s.table) for s in self.layers],
            "cache_utilization": (
                sum(len(s.cache) for s in self.layers) / (self.cfg.cache_size * len(self.layers))
                if self.cfg.cache_size and self.layers
                else 0.0
            ),
        }

    def reset_counts(self) -> None:
        """Zero the per-path counts (the cache and table stay)."""
        for s in self.layers:
            s.counts.clear()
            s.learned_calls = 0


def _check(value: str, loaded: LoadedModel) -> None:
    info = loaded.info
    if not info.is_moe:
        raise UserError(
            f"routing applies to mixture-of-experts models; {info.spec} is dense",
            "use a MoE model (e.g. tiny-qwen3-moe, tiny-mixtral) or drop this knob",
        )
    routers = [b.router for b in discover(loaded.model).blocks if b.router is not None]
    if not routers or not all(hasattr(r, "top_k") and hasattr(r, "weight") for r in routers):
        raise UserError(
            f"the routers of {info.spec} are not top-k routers this knob can wrap",
            "routing shortcuts support Mixtral, Qwen2-MoE and Qwen3-MoE routers",
        )


@contextlib.contextmanager
def _apply(loaded: LoadedModel, value: str) -> Iterator[dict[str, Any]]:
    cfg = shortcut_config(value)
    if cfg is None:
        yield {"routing": "learned"}
        return
    with ShortcutRouting(loaded, cfg) as routing:
        yield {"routing": "shortcuts", "config": cfg.to_dict(), "state": routing}


def _verify(loaded: LoadedModel, value: str, result: Any, applied: Any = None) -> KnobCheckDoc:
    """One forward of the calibration prompt with shortcuts, and one with the learned router.

    Evidence: the split of tokens over the paths, the top-k overlap with the learned router on
    the tokens of the fast-path table, and the quality proxy against learned routing.
    """
    if not applied:
        raise KnobNotApplied("routing verification needs the applied state")
    if applied["routing"] == "learned":  # the reference itself
        return {"routing": "learned", "top1_agreement": 1.0, "kl_nats": 0.0}
    from infermeter.knobs.calibration import calibration_ids, logits, quality

    routing: ShortcutRouting = applied["state"]
    ids = calibration_ids(loaded)
    routing.reset_counts()
    shortcut_logits = logits(loaded.model, ids)
    split = routing.distribution()
    routing.__exit__()  # the learned router alone, for the reference
    try:
        learned_choice = _router_outputs(loaded.model, ids)
        learned_logits = logits(loaded.model, ids)
    finally:
        routing.__enter__()
    agreement = _agreement(routing, ids, learned_choice)
    routing.reset_counts()
    if sum(split["tokens"].values()) == 0:
        raise KnobNotApplied("routing=shortcuts but no router call went through the wrappers")
    evidence: KnobCheckDoc = {
        "routing": "shortcuts",
        "config": applied["config"],
        "split": split,
        "topk_overlap_on_shortcut_tokens": agreement,
    }
    return with_quality(evidence, quality(learned_logits, shortcut_logits))


def _agreement(routing: ShortcutRouting, ids: Any, learned: list[list[tuple[Any, Any]]]) -> Any:
    """Mean share of the learned router's experts that the fast-path table also picks.

    Over the calibration tokens found in the table; None when no token is in any table.
    """
    flat = ids.reshape(-1).tolist()
    overlaps = []
    for state, calls in zip(routing.layers, learned, strict=True):
        experts = calls[0][0]
        for pos, token in enumerate(flat):
            entry = state.table.get(token)
            if entry is not None:
                want = set(experts[pos].tolist())
                overlaps.append(len(want & set(entry.experts.tolist())) / len(want))
    return sum(overlaps) / len(overlaps) if overlaps else None


def _observed(applied: dict[str, Any]) -> RoutingObservedDoc:
    """Tokens per path over every generate call of the run (warm-up included)."""
    state = applied.get("state")
    return state.distribution() if state is not None else {"routing": "learned"}


ROUTING = Knob(
    "routing",
    "MoE routing: learned, or shortcuts (fast path + cache): shortcuts[:key=v,...] or FILE.json",
    "model",
    parse,
    check=_check,
    apply=_apply,
    verify=_verify,
    observed=_observed,
)
