"""What `run/` needs of a store, as protocols.

The store package implements them and run/ never imports it: a lower layer names what it needs,
the higher one provides it.

`RunSink` is all a single profile needs; `LiveSink` adds the optional live writes (a sink
without them keeps everything at the end); `SweepStore` adds what a resumable sweep reads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, TypedDict, runtime_checkable

from infermeter.run.results import RunResult, SampleResult

if TYPE_CHECKING:  # the spec's module parses knobs; a sink needs only its shape
    from infermeter.instrument.tables import LayerRowDoc
    from infermeter.run.sweep_spec import SweepSpecDoc


class SweepDoc(TypedDict):
    """A stored sweep's row: what `StoredSweeps.sweep` gives (the store implements it)."""

    id: str
    name: str
    #: each swept knob's values as given (text), in the order they were run
    knobs: dict[str, list[str]]
    created: str
    #: what defines the sweep: its name, base configuration and knobs
    spec: SweepSpecDoc


class RunSink(Protocol):
    """Where a run is kept while and after it runs (implemented by `infermeter.store.Store`)."""

    def begin_run(self, result: RunResult) -> str:
        """Register a running run; return its id."""
        ...

    def finish_run(self, result: RunResult) -> None:
        """Write status, phases and all samples in one transaction."""
        ...

    def probe_write(self) -> None:
        """Raise UserError now if a write would be refused (a locked database).

        Called before a model loads, so the refusal comes in seconds, not a minute after.
        """
        ...


@runtime_checkable
class LiveSink(RunSink, Protocol):
    """A sink that also keeps each sample as it is measured, for live views and crash safety."""

    def add_sample(self, run_id: str, smp: SampleResult) -> None:
        """Keep one sample now."""
        ...

    def add_samples(self, run_id: str, samples: list[SampleResult]) -> None:
        """Keep several samples now, in one transaction (what a load's keeper gathered)."""
        ...

    def live_layers(self, run_id: str, rows: list[LayerRowDoc]) -> None:
        """Replace the run's in-progress per-layer table."""
        ...


class SweepStore(RunSink, Protocol):
    """A sink that keeps sweeps: what `run_sweep` needs to register, resume and reread."""

    def begin_sweep(
        self, sweep_id: str, name: str, knobs: dict[str, list[str]], spec: SweepSpecDoc
    ) -> bool:
        """Register a sweep; False when it exists already."""
        ...

    def sweep_run_ids(self, sweep_id: str, status: str | None = "finished") -> list[str]:
        """Ids of a sweep's runs, oldest first."""
        ...

    def get(self, run_id: str) -> RunResult:
        """A stored run, samples included."""
        ...


class StoredSweeps(Protocol):
    """What rebuilding a stored sweep's document reads."""

    def sweep(self, sweep_id: str) -> SweepDoc:
        """A sweep's row (id, name, knobs, created, spec), by id or unique prefix."""
        ...

    def sweep_run_ids(self, sweep_id: str, status: str | None = "finished") -> list[str]:
        """Ids of a sweep's runs, oldest first."""
        ...

    def get(self, run_id: str) -> RunResult:
        """A stored run, samples included."""
        ...
