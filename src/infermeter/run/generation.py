"""Time one `model.generate` call: start, first token (TTFT), every later token.

The timing rides on `generate` itself, the path users run, through a stopping criterion that
transformers calls once per generated token, right after that token is chosen. Each call takes
one clock mark (a CUDA event on GPU: no host sync) and returns a preallocated all-False tensor,
so it never stops generation and costs about a microsecond. `min_new_tokens == max_new_tokens`
suppresses EOS, so every sample generates exactly the tokens asked for. The process's minor
page faults are read at the start, at the first token and at the return (one `getrusage` each,
about a microsecond): a CPU's decode can spend most of its time in them (measure/faults.py).

Speculative decoding (workloads/decoding.py) accepts several tokens per target forward, and the
criterion is called once per forward: it keeps the sequence's length with each mark, and the
tokens of one forward share its mark (their inter-token latency is 0: bursty by nature).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from infermeter.measure.clock import Clock
from infermeter.measure.faults import minor_faults


class StepRecorder:
    """A transformers stopping criterion that only marks the time of each new token."""

    def __init__(
        self,
        clock: Clock,
        batch_size: int,
        device: Any,
        capacity: int,
        on_token: Callable[[Any], None] | None = None,
    ) -> None:
        import torch

        self.clock = clock
        self.on_token = on_token  # told each token's mark (the profiler's token windows)
        self.start: Any = None  # the generate call's start mark, set just before the call
        self.marks: list[Any] = [None] * capacity
        self.lengths: list[int] = [0] * capacity  # the sequence's length at each mark
        self.count = 0
        self._false = torch.zeros(batch_size, dtype=torch.bool, device=device)
        #: the process's minor page faults at the call's start and at its first token
        self.faults_at_start: int | None = None
        self.faults_at_first: int | None = None

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        """Record the mark; never ask to stop."""
        mark = self.clock.mark()
        if self.count == 0:
            self.faults_at_first = minor_faults()
        if self.count < len(self.marks):
            self.marks[self.count] = mark
            self.lengths[self.count] = input_ids.shape[-1]
        self.count += 1
        if self.on_token is not None:
            self.on_token(mark)
        return self._false


@dataclass
class TimedGeneration:
    """Raw marks of one generate call, resolved into milliseconds by `durations`."""

    start: Any
    marks: list[Any]
    output_ids: Any
    input_length: int
    #: minor page faults (prefill: start to first token; decode: first token to the return),
    #: None where the OS keeps no count
    faults: tuple[int, int] | None = None

    def durations(self, clock: Clock) -> tuple[float, list[float]]:
        """(TTFT ms, inter-token latencies ms) from the marks."""
        ttft = clock.elapsed_ms(self.start, self.marks[0])
        steps = [clock.elapsed_ms(a, b) for a, b in zip(self.marks, self.marks[1:], strict=False)]
        return ttft, steps


def generation_config(
    tokenizer: Any,
    new_tokens: int,
    *,
    decoding: str = "greedy",
    temperature: float = 1.0,
    top_p: float = 1.0,
    top_k: int | None = None,
    cache: str = "dynamic",
    generate_compiles: str | None = None,
) -> Any:
    """A fresh GenerationConfig, so a checkpoint's own defaults never change what is measured.

    transformers' generate compiles the decode step on its own (torch.compile with CUDA
    graphs) whenever the cache is static and the device is a GPU: "eager with a static cache"
    measured 3.2 ms per token on an H100 where eager decode took 12.9, without a word. So
    compilation is off here unless `generate_compiles` names the torch.compile mode that
    generate is to use (`knobs.compile.generate_compiles` decides when).
    """
    from transformers import GenerationConfig

    from infermeter.workloads.decoding import (
        CACHE_IMPLEMENTATION,
        QUANTIZED_CACHE_CONFIG,
        parse_decoding,
    )

    how = parse_decoding(decoding)
    sampling = how.kind == "sampling"
    kw: dict[str, Any] = dict(
        max_new_tokens=new_tokens,
        min_new_tokens=new_tokens,
        do_sample=sampling,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.bos_token_id,
        use_cache=True,
    )
    if sampling:
        kw.update(temperature=temperature, top_p=top_p, top_k=top_k or 0)
    if CACHE_IMPLEMENTATION[cache] is not None:
        kw.update(cache_implementation=CACHE_IMPLEMENTATION[cache])
    if cache == "quantized":
        kw.update(cache_config=dict(QUANTIZED_CACHE_CONFIG))
    if generate_compiles is None:
        kw.update(disable_compile=True)
    else:
        from transformers import CompileConfig

        kw.update(compile_config=CompileConfig(mode=generate_compiles))
    if how.kind == "prompt_lookup":
        kw.update(prompt_lookup_num_tokens=how.tokens)
    elif how.kind == "early_exit":
        kw.update(assistant_early_exit=how.tokens)
    return GenerationConfig(**kw)


def timed_generate(
    model: Any,
    inputs: dict[str, Any],
    gen_config: Any,
    clock: Clock,
    new_tokens: int,
    watch: Callable[[StepRecorder], AbstractContextManager[Any]] | None = None,
    on_token: Callable[[Any], None] | None = None,
    extra: dict[str, Any] | None = None,
) -> TimedGeneration:
    """Run `model.generate(**inputs)` once, marking its start and every generated token.

    `watch(recorder)` is entered before the start mark and left after the call returns (so
    its own cost stays outside the timed window): run/live_steps.py streams the marks from it.
    `on_token(mark)` is told each token's mark right after it is taken. `extra`: more
    arguments of `generate` (a speculative run's draft model and tokenizers).
    """
    import torch
    from transformers import StoppingCriteriaList

    batch = inputs["input_ids"].shape[0]
    recorder = StepRecorder(clock, batch, inputs["input_ids"].device, new_tokens, on_token)
    criteria = StoppingCriteriaList([recorder])
    watcher = watch(recorder) if watch is not None else contextlib.nullcontext()
    with watcher, torch.inference_mode():
        recorder.faults_at_start = minor_faults()
        recorder.start = clock.mark()
        out = model.generate(
            **inputs, generation_config=gen_config, stopping_criteria=criteria, **(extra or {})
        )
        after = minor_faults()
    length = inputs["input_ids"].shape[1]
    start, first = recorder.faults_at_start, recorder.faults_at_first
    return TimedGeneration(
        start=recorder.start,
        marks=token_marks(recorder, length, new_tokens),
        output_ids=out,
        input_length=length,
        faults=(first - start, after - first)
        if start is not None and first is not None and after is not None
        else None,
    )


def token_marks(recorder: StepRecorder, input_length: int, new_tokens: int) -> list[Any]:
    """One mark per generated token: a forward that accepted n tokens gives its mark n times."""
    calls = min(recorder.count, len(recorder.marks))
    marks: list[Any] = []
    before = input_length
    for mark, length in zip(recorder.marks[:calls], recorder.lengths[:calls], strict=True):
        marks += [mark] * max(1, length - before)
        before = length
    return marks[:new_tokens]
