"""Whole-model forward and training-step cost over sequence lengths: `infermeter bench model`.

The question it answers: what does one forward over N tokens cost, and what does a training
step (forward + backward with a real loss) cost beside it? Inputs are exact-length windows of
the built-in corpus (real text through the model's tokenizer), the loss is the causal-LM
cross-entropy transformers computes from `labels`, and `steps` optimizer steps (AdamW) on one
batch show that the loss is finite and falls, i.e. that gradients flow through the whole model.

Order per model and length, so the figures stay comparable: forward samples (eval mode, no KV
cache, no autograd), then forward + backward samples (train mode, gradients zeroed each time,
weights unchanged), then the optimizer steps, which change the weights and so come last; the
model's weights are restored afterwards. Peak memory is measured on one extra call of each
(see `bench.attention.peak_memory_mib`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from infermeter.errors import UserError
from infermeter.measure.device import DeviceDoc

if TYPE_CHECKING:
    from infermeter.bench.eta import BenchProgress


@dataclass(frozen=True)
class ModelBenchSpec:
    """One `bench model` call: models, lengths, batch and what to measure."""

    models: tuple[str, ...] = ("tiny-llama",)
    seq_lens: tuple[int, ...] = (128, 256, 512)
    batch: int = 1
    train: bool = False
    steps: int = 0
    lr: float = 1e-3
    dtype: str = "auto"
    device: str = "cpu"
    warmup: int = 1
    samples: int = 5
    seed: int = 0

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON."""
        return asdict(self)


@dataclass
class ModelPoint:
    """One model at one length."""

    model: str
    seq_len: int
    params: int
    forward_ms: list[float] = field(default_factory=list)
    forward_peak_mib: float | None = None
    train_ms: list[float] = field(default_factory=list)
    train_peak_mib: float | None = None
    loss: float | None = None
    step_losses: list[float] = field(default_factory=list)
    memory_method: str = ""
    note: str = ""


def validate(spec: ModelBenchSpec) -> None:
    """Every option checked before a model loads."""
    checks = [
        (bool(spec.models), "give at least one --model"),
        (
            bool(spec.seq_lens) and all(1 <= s <= 65536 for s in spec.seq_lens),
            "--seq-lens must be within 1..65536",
        ),
        (1 <= spec.batch <= 1024, "--batch must be within 1..1024"),
        (0 <= spec.steps <= 1000, "--steps must be within 0..1000"),
        (0 <= spec.warmup <= 100, "--warmup must be within 0..100"),
        (1 <= spec.samples <= 10000, "--samples must be within 1..10000"),
        (0.0 < spec.lr <= 1.0, "--lr must be within (0, 1]"),
        (0 <= spec.seed < 2**31, "--seed must be within 0..2147483647"),
    ]
    for ok, message in checks:
        if not ok:
            raise UserError(message, "see `infermeter bench model --help`")
    if spec.steps and not spec.train:
        raise UserError("--steps needs --train", "add --train, or drop --steps")


def _inputs(loaded: Any, spec: ModelBenchSpec, seq_len: int) -> Any:
    """`batch` rows of exactly `seq_len` corpus tokens (no chat template), on the device."""
    from infermeter.workloads.prompts import WorkloadSpec, build_batches

    limit = loaded.info.max_positions
    if limit is not None and seq_len > limit:
        raise UserError(
            f"--seq-lens {seq_len} is longer than {loaded.info.spec}'s context ({limit} tokens)",
            f"use lengths up to {limit}",
        )
    work = WorkloadSpec(batch_size=spec.batch, prompt_tokens=seq_len, chat=False, seed=spec.seed)
    (batch,) = build_batches(loaded.tokenizer, work, 1)
    device = next(loaded.model.parameters()).device
    return batch.input_ids[:, -seq_len:].to(device)


def _timed(call: Callable[[], Any], spec: ModelBenchSpec, device: Any) -> list[float]:
    from infermeter.bench.timing import time_calls

    return time_calls(call, spec.warmup, spec.samples, device)


def run_point(loaded: Any, spec: ModelBenchSpec, seq_len: int) -> ModelPoint:
    """Forward, then (with `train`) forward + backward, then optimizer steps, at one length."""
    import torch

    from infermeter.bench.timing import peak_memory_mib

    model = loaded.model
    ids = _inputs(loaded, spec, seq_len)
    device = ids.device
    point = ModelPoint(loaded.info.spec, seq_len, loaded.info.params)

    def forward() -> Any:
        with torch.inference_mode():
            return model(input_ids=ids, use_cache=False).logits

    model.eval()
    point.forward_ms = _timed(forward, spec, device)
    point.forward_peak_mib, point.memory_method = peak_memory_mib(forward, device)
    if spec.train:
        _train(model, ids, spec, point)
    return point


def _train(model: Any, ids: Any, spec: ModelBenchSpec, point: ModelPoint) -> None:
    """Forward + backward samples with the real loss, then `steps` AdamW steps; weights restored.

    Long-lived state is undone: the weights are copied before the optimizer touches them and
    put back after, gradients dropped, eval mode restored, so the model leaves as it came.
    """
    import torch

    from infermeter.bench.timing import peak_memory_mib

    losses: list[float] = []

    def forward_backward() -> Any:
        model.zero_grad(set_to_none=True)
        loss = model(input_ids=ids, labels=ids, use_cache=False).loss
        loss.backward()
        losses.append(float(loss.detach()))
        return loss

    saved = {k: v.detach().clone() for k, v in model.state_dict().items()}
    model.train()
    try:
        point.train_ms = _timed(forward_backward, spec, ids.device)
        point.train_peak_mib, _ = peak_memory_mib(forward_backward, ids.device)
        point.loss = losses[0]
        if spec.steps:
            optimizer = torch.optim.AdamW(model.parameters(), lr=spec.lr)
            for _ in range(spec.steps):
                loss = forward_backward()
                optimizer.step()
            point.step_losses = losses[-spec.steps :]
            point.step_losses.append(_loss_now(model, ids))
            del optimizer, loss
    finally:
        model.zero_grad(set_to_none=True)
        model.eval()
        with torch.no_grad():
            model.load_state_dict(saved)
    if not math.isfinite(point.loss):
        point.note = "loss is not finite: check the dtype (float16 on CPU?) and the inputs"


def _loss_now(model: Any, ids: Any) -> float:
    """The loss after the last optimizer step (no gradient)."""
    import torch

    with torch.no_grad():
        return float(model(input_ids=ids, labels=ids, use_cache=False).loss)


def point_row(p: ModelPoint) -> dict[str, Any]:
    """A point's summary row: medians with intervals, peaks, loss, train/inference ratio."""
    from infermeter.measure.stats import summarize

    fwd = summarize(p.forward_ms)
    train = summarize(p.train_ms)
    ratio = train.p50 / fwd.p50 if train.n and fwd.n and fwd.p50 > 0 else None
    falling = None
    if len(p.step_losses) >= 2:
        falling = p.step_losses[-1] < p.step_losses[0]
    return {
        "model": p.model,
        "seq_len": p.seq_len,
        "params": p.params,
        "forward_ms": fwd.to_dict(),
        "forward_peak_mib": p.forward_peak_mib,
        "train_ms": train.to_dict() if train.n else None,
        "train_peak_mib": p.train_peak_mib,
        "train_over_forward": ratio,
        "loss": p.loss,
        "step_losses": p.step_losses,
        "loss_falling": falling,
        "memory_method": p.memory_method,
        "note": p.note,
    }


def run_benchmark(
    spec: ModelBenchSpec,
    on_point: Callable[[ModelPoint], None] | None = None,
    on_progress: Callable[[BenchProgress], None] | None = None,
) -> dict[str, Any]:
    """Every model at every length: the document `bench model` prints, saves and reports.

    `on_progress` hears each finished point with the estimate of the time left (`bench/eta.py`).
    """
    import torch

    from infermeter.bench.eta import Eta
    from infermeter.measure.device import describe_device
    from infermeter.models.loader import load_model

    validate(spec)
    eta = Eta([(name, n) for name in spec.models for n in spec.seq_lens])
    summary, samples, models = [], [], []
    device_info: DeviceDoc = {}
    for name in spec.models:
        loaded = load_model(name, dtype=spec.dtype, device=spec.device, seed=spec.seed)
        device_info = describe_device(next(loaded.model.parameters()).device)
        models.append({"spec": name, "params": loaded.info.params, "dtype": loaded.info.dtype})
        eta.skip()  # the load is no point's time
        for seq_len in spec.seq_lens:
            point = run_point(loaded, spec, seq_len)
            if on_point is not None:
                on_point(point)
            if on_progress is not None:
                on_progress(eta.point_done(name, seq_len))
            summary.append(point_row(point))
            for what, values in (("forward", point.forward_ms), ("train", point.train_ms)):
                samples += [
                    {"model": name, "seq_len": seq_len, "what": what, "sample_id": i, "ms": ms}
                    for i, ms in enumerate(values)
                ]
        del loaded
    meta = {
        "kind": "bench-model",
        "spec": spec.to_dict(),
        "models": models,
        "device": device_info,
        "versions": {"torch": torch.__version__},
    }
    return {"meta": meta, "summary": summary, "all_samples": samples}
