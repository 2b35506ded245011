"""`session`: a run whose workload is the user's own code, with timed user regions.

`profile` runs a configuration's generations itself. A researcher often needs more: their own
pre- and post-processing, their own `generate` calls, a pipeline around the model. A session is
the same run (the model loaded and timed, the hooks of the chosen mode attached, the energy
sampler running, the run registered and stored in one transaction at the end) with the body of
a `with` block as its workload:

    with session(RunConfig(model="tiny-llama", mode="standard"), sink=store) as s:
        with s.section("tokenize"):
            inputs = s.tokenizer(["Hello"], return_tensors="pt")
        with s.section("generate"):
            s.model.generate(**inputs, max_new_tokens=8)
        s.run_samples()        # and, if wanted, the configuration's own measured samples
    run = s.result             # stored; run.layers["sections"] holds one row per region call

Regions are timed with the run's clock (CUDA events on a GPU), so they line up with the samples
and the per-layer records on one timeline, in the trace too. The hooks see every forward the
block runs, the user's own included.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING

from infermeter.models.loader import LoadedModel
from infermeter.run.config import RunConfig
from infermeter.run.profiling import (
    Session,
    attach_instruments,
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
from infermeter.run.results import RunResult, SampleResult
from infermeter.run.signals import stop_on_signals
from infermeter.run.sink import RunSink

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedTokenizerBase

    from infermeter.measure.timer import Section


class UserSession:
    """The handle a `session` block works with: the model, user regions, the run's samples."""

    def __init__(self, inner: Session, sink: RunSink | None) -> None:
        self._inner = inner
        self._sink = sink
        self._next_sample = 0

    @property
    def loaded(self) -> LoadedModel:
        """The loaded model, tokenizer (or processor) and what was read from the checkpoint."""
        return self._inner.loaded

    @property
    def model(self) -> torch.nn.Module:
        """The transformers model, with the mode's hooks attached."""
        return self._inner.loaded.model

    @property
    def tokenizer(self) -> PreTrainedTokenizerBase:
        """The model's tokenizer (a processor for vision-language models)."""
        return self._inner.loaded.tokenizer

    @property
    def config(self) -> RunConfig:
        """The run's configuration."""
        return self._inner.config

    @property
    def result(self) -> RunResult:
        """The run: complete (and stored, with a sink) once the block has ended."""
        return self._inner.result

    @property
    def run_id(self) -> str | None:
        """The run's id in the sink (None without one)."""
        return self._inner.result.run_id

    def section(self, name: str) -> AbstractContextManager[Section]:
        """Time the body as the user region `name` on the run's clock (nestable, repeatable)."""
        timer = self._inner.sections
        assert timer is not None  # set when the block starts
        return timer.section(name)

    def run_samples(self, count: int | None = None) -> list[SampleResult]:
        """Measure the configuration's next `count` samples (all that remain by default).

        Warm-up samples come first, as in `profile`; each is a timed generation with TTFT,
        per-token times, memory and energy edges, stored as it ends. Returns the samples run.
        """
        total = len(self._inner.batches)
        end = total if count is None else min(total, self._next_sample + max(0, count))
        done = []
        while self._next_sample < end:
            run_sample(self._inner, self._sink, self._next_sample)
            done.append(self._inner.result.samples[-1])
            self._next_sample += 1
        return done


@contextmanager
def session(
    config: RunConfig,
    *,
    sink: RunSink | None = None,
    loaded: LoadedModel | None = None,
    on_progress: ProgressFn | None = None,
) -> Iterator[UserSession]:
    """A run whose workload is the body of the `with` block (see the module's docstring).

    Args:
        config: model, mode (hooks), energy, and the samples `run_samples` measures if the
            block calls it (a block that does not runs only its own code).
        sink: keeps the run (usually a `Store`): registered before the block, stored after it.
        loaded: an already loaded model (its load time is then not part of this run).
        on_progress: called as the load and the samples advance.

    Raises:
        UserError: bad configuration or model (before the block runs; nothing stored).
        Whatever the block raises, after the run is stored as failed (Ctrl-C: terminated).
    """
    progress = LiveProgress(sink, config.model, on_progress)
    try:
        with stop_on_signals():
            inner = set_up_session(config, loaded, progress, None, None)
            register_session(inner, sink)
            yield from _run_block(inner, sink, UserSession(inner, sink))
    finally:
        progress.end()


def _run_block(inner: Session, sink: RunSink | None, handle: UserSession) -> Iterator[UserSession]:
    """Attach, run the block, tear down and store; then re-raise what the block raised."""
    start_clock(inner)
    failure: BaseException | None = None
    try:
        attach_instruments(inner)
        yield handle
        samples_done(inner)
        inner.result.notes.append(_workload_note(inner, handle))
    except (KeyboardInterrupt, Exception) as exc:
        failure = stopped(inner, exc)
    finally:
        tear_down(inner)
    close_session(inner, sink, None)
    if failure is not None:
        raise failure


def _workload_note(inner: Session, handle: UserSession) -> str:
    """What the run's workload was, so a reader does not take its samples for all of it."""
    total = len(inner.batches)
    return (
        f"a session: the workload was the user's own code, with {handle._next_sample} of the "
        f"configuration's {total} samples (warm-up included) run inside it; the layer tables "
        "count every forward the hooks saw, the user's own calls included"
    )
