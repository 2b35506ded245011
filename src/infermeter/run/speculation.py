"""A speculative run: its draft, what each sample's speculation did, and the greedy check.

Per sample, from hooks on the target (and the draft) model's forward: how many forwards the
target ran (the prefill and one verification per step), how many positions each was fed (all
but one of a step's are proposed tokens), and how long the draft's forwards and the target's
verifications took. With the tokens produced (run/generation.py's recorder) that gives the
acceptance rate, the tokens each target forward yields, and where a step's time goes.

Speculation with greedy verification must not change the output: after the samples, the first
measured sample's prompt is generated once more with plain greedy decoding (untimed) and the
two outputs compared token by token; a difference is stored, noted and reported as a finding.
"""

from __future__ import annotations

import statistics
from typing import Any, TypedDict

from infermeter.errors import UserError
from infermeter.measure.clock import Clock
from infermeter.models.loader import LoadedModel, load_model
from infermeter.workloads.decoding import Decoding, parse_decoding


class SpeculationSampleDoc(TypedDict):
    """One measured sample's speculation: forwards, tokens proposed and accepted, their ms."""

    target_forwards: int
    draft_forwards: int
    tokens: int
    proposed: int
    accepted: int
    prefill_ms: float | None
    verify_ms: float
    draft_ms: float


class _SpeculationDoc(TypedDict):
    kind: str
    #: tokens proposed per step (prompt lookup, early exit) or the draft model's name
    value: int | str | None
    target_forwards: int
    draft_forwards: int
    tokens: int
    proposed: int
    accepted: int
    acceptance_rate: float | None
    tokens_per_target_forward: float
    mean_accepted_per_step: float
    draft_ms_per_step: float
    verify_ms_per_step: float
    prefill_ms_median: float
    per_sample: list[SpeculationSampleDoc]


class SpeculationDoc(_SpeculationDoc, total=False):
    """A speculative run's `checks["speculation"]`: `Speculator.summary` and `greedy_check`.

    `matches_greedy`: the first measured sample generated again greedily gives the same output
    (None: no sample to check); `first_difference_at_token`: where they differ (None: they
    match).
    """

    matches_greedy: bool | None
    first_difference_at_token: int | None


class GreedyCheckDoc(TypedDict, total=False):
    """`greedy_check`: does greedy decoding give the speculative run's first output?"""

    matches_greedy: bool | None
    first_difference_at_token: int | None


def _fed(args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    """Positions a forward is fed (its input ids' or embeddings' length)."""
    ids = kwargs.get("input_ids")
    if ids is None and args:
        ids = args[0]
    if ids is None:
        ids = kwargs.get("inputs_embeds")
    return int(ids.shape[1]) if ids is not None and hasattr(ids, "shape") else 0


class Speculator:
    """The draft of a speculative run and the hooks that see what speculation did."""

    def __init__(self, decoding: Decoding, loaded: LoadedModel, clock: Clock) -> None:
        self.decoding, self.loaded, self.clock = decoding, loaded, clock
        self.draft: LoadedModel | None = None
        self.extra: dict[str, Any] = {}
        self._hooks: list[Any] = []
        self._calls: list[tuple[str, Any, Any, int]] = []  # (who, start, end, positions fed)
        self._open: dict[str, tuple[Any, int]] = {}
        self.samples: list[SpeculationSampleDoc] = []
        self.first_output: tuple[Any, Any] | None = None  # (inputs, new token ids)
        layers = int(getattr(loaded.model.config.get_text_config(), "num_hidden_layers", 0))
        if decoding.kind == "early_exit" and not 0 < (decoding.tokens or 0) < layers:
            raise UserError(
                f"decoding early_exit:{decoding.tokens} needs fewer blocks than the model's "
                f"{layers}",
                f"use early_exit:1 to early_exit:{max(layers - 1, 1)}",
            )

    def load_draft(self) -> float:
        """Load an assisted run's draft beside the target; returns the load's ms (0 if none)."""
        if self.decoding.kind != "assisted":
            return 0.0
        import time

        target = self.loaded.model
        param = next(target.parameters())
        t0 = time.perf_counter()
        self.draft = load_model(
            str(self.decoding.draft), dtype=str(param.dtype).removeprefix("torch."),
            device=str(param.device),
        )  # fmt: skip
        self.extra = {"assistant_model": self.draft.model}
        if self.draft.tokenizer.get_vocab() != self.loaded.tokenizer.get_vocab():
            # transformers re-encodes the draft's text for the target (and back)
            self.extra.update(
                tokenizer=self.loaded.tokenizer, assistant_tokenizer=self.draft.tokenizer
            )
        return (time.perf_counter() - t0) * 1e3

    def attach(self) -> None:
        """Hooks on the target's (and the draft's) forward, marking each call's start and end."""
        models = [("target", self.loaded.model)]
        if self.draft is not None:
            models.append(("draft", self.draft.model))
        for who, model in models:
            self._hooks.append(model.register_forward_pre_hook(self._pre(who), with_kwargs=True))
            self._hooks.append(model.register_forward_hook(self._post(who), with_kwargs=True))

    def detach(self) -> None:
        """Remove the hooks."""
        for h in self._hooks:
            h.remove()
        self._hooks = []

    def _who(self, who: str) -> str:
        if who == "target" and self.decoding.kind == "early_exit":
            base = getattr(self.loaded.model, self.loaded.model.base_model_prefix)
            if base.config.num_hidden_layers == self.decoding.tokens:
                return "draft"  # transformers runs the first K blocks as the draft
        return who

    def _pre(self, who: str) -> Any:
        def hook(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            self._open[who] = (self.clock.mark(), _fed(args, kwargs))

        return hook

    def _post(self, who: str) -> Any:
        def hook(module: Any, args: Any, kwargs: Any, output: Any) -> None:
            start, fed = self._open.pop(who, (None, 0))
            if start is not None:
                self._calls.append((self._who(who), start, self.clock.mark(), fed))

        return hook

    def begin(self) -> None:
        """A sample starts: forget the calls of the one before."""
        self._calls = []

    def end(self, produced: int, input_length: int, warm: bool, output: Any, inputs: Any) -> None:
        """A sample ended with `produced` tokens: keep what its speculation did."""
        target = [c for c in self._calls if c[0] == "target"]
        draft = [c for c in self._calls if c[0] == "draft"]
        ms = self.clock.elapsed_ms
        proposed = sum(max(0, fed - 1) for *_, fed in target[1:])
        if target:
            proposed += max(0, target[0][3] - input_length)  # proposals fed with the prompt
        accepted = max(0, produced - len(target))
        row: SpeculationSampleDoc = {
            "target_forwards": len(target),
            "draft_forwards": len(draft),
            "tokens": produced,
            "proposed": proposed,
            "accepted": accepted,
            "prefill_ms": ms(target[0][1], target[0][2]) if target else None,
            "verify_ms": sum(ms(s, e) for _, s, e, _ in target[1:]),
            "draft_ms": sum(ms(s, e) for _, s, e, _ in draft),
        }
        if not warm:
            self.samples.append(row)
            if self.first_output is None:
                self.first_output = (inputs, output)

    def summary(self) -> SpeculationDoc:
        """The run's speculation: totals over measured samples and the per-step figures."""
        rows = self.samples
        forwards = sum(r["target_forwards"] for r in rows)
        tokens = sum(r["tokens"] for r in rows)
        proposed = sum(r["proposed"] for r in rows)
        accepted = sum(r["accepted"] for r in rows)
        steps = max(1, forwards - len(rows))  # forwards after each prefill
        return {
            "kind": self.decoding.kind,
            "value": self.decoding.tokens if self.decoding.draft is None else self.decoding.draft,
            "target_forwards": forwards,
            "draft_forwards": sum(r["draft_forwards"] for r in rows),
            "tokens": tokens,
            "proposed": proposed,
            "accepted": accepted,
            "acceptance_rate": accepted / proposed if proposed else None,
            "tokens_per_target_forward": tokens / max(1, forwards),
            "mean_accepted_per_step": accepted / steps,
            "draft_ms_per_step": sum(r["draft_ms"] for r in rows) / steps,
            "verify_ms_per_step": sum(r["verify_ms"] for r in rows) / steps,
            "prefill_ms_median": statistics.median(
                [r["prefill_ms"] for r in rows if r["prefill_ms"] is not None] or [0.0]
            ),
            "per_sample": rows,
        }


def speculator_for(decoding: str, loaded: LoadedModel, clock: Clock) -> Speculator | None:
    """A `Speculator` when `decoding` is speculative, else None."""
    parsed = parse_decoding(decoding)
    return Speculator(parsed, loaded, clock) if parsed.speculative else None


def greedy_check(spec: Speculator, new_tokens: int) -> GreedyCheckDoc:
    """The first measured sample's prompt generated again greedily: does the output match?"""
    import torch

    from infermeter.run.generation import generation_config

    if spec.first_output is None:
        return {"matches_greedy": None}
    inputs, output = spec.first_output
    gen = generation_config(spec.loaded.tokenizer, new_tokens, decoding="greedy")
    with torch.inference_mode():
        plain = spec.loaded.model.generate(**inputs, generation_config=gen)
    length = inputs["input_ids"].shape[1]
    a, b = output[0, length:].tolist(), plain[0, length:].tolist()
    first = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), None)
    if first is None and len(a) != len(b):
        first = min(len(a), len(b))
    return {"matches_greedy": first is None, "first_difference_at_token": first}
