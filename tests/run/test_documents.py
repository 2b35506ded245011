"""A run's documents are the types their signatures name, and the public API names no `Any`.

Each typed document is held to what the code writes: a field added to `SampleResult`, a metric
added to `METRICS` or a key added to the run's JSON fails here until its type says so.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import fields

import numpy as np

import infermeter
from infermeter.instrument.config import ProfilingConfig, ProfilingConfigDoc
from infermeter.measure.stats import Summary, SummaryDoc, summarize
from infermeter.run.results import (
    METRICS,
    MetricsDoc,
    RunJsonDoc,
    RunMetaDoc,
    RunSummaryRowDoc,
    SampleDoc,
    SampleResult,
    SampleRowDoc,
)
from tests.helpers import history_run

#: public signatures that still take or give `Any`: none (each stored document and table row is
#: a TypedDict; the tests beside each producer hold its keys)
STILL_ANY: dict[str, set[str]] = {}


def _keys(doc_type: type) -> set[str]:
    """A TypedDict's keys, its bases' included, without evaluating their types."""
    return set(doc_type.__required_keys__ | doc_type.__optional_keys__)


def test_the_run_document_is_its_type_key_by_key() -> None:
    run = history_run(0, 5.0, np.random.default_rng(0))
    doc = run.to_json()
    assert set(doc) == {"meta", "summary", "all_samples"}  # no layers or power: a minimal run
    assert set(doc["meta"]) == _keys(RunMetaDoc)
    assert set(doc["summary"][0]) == _keys(RunSummaryRowDoc)
    assert set(doc["all_samples"][0]) == _keys(SampleRowDoc)
    assert set(run.samples[0].metrics()) == _keys(MetricsDoc) == set(METRICS)
    assert set(doc["summary"][0]["ttft_ms"]) == _keys(SummaryDoc)
    assert set(run.sample_dicts()[0]) == _keys(SampleDoc) == {f.name for f in fields(SampleResult)}
    assert _keys(RunJsonDoc) == {"meta", "summary", "all_samples", "layers", "power"}


def test_a_runs_checks_name_every_knob() -> None:
    """A sweep files each knob's evidence under the knob's name: ChecksDoc names them all."""
    from infermeter.knobs.registry import KNOBS
    from infermeter.run.results import ChecksDoc

    assert _keys(ChecksDoc) == set(KNOBS) | {"load", "speculation"}


def test_a_summary_and_a_profiling_config_are_their_documents() -> None:
    assert set(summarize([1.0, 2.0]).to_dict()) == _keys(SummaryDoc)
    assert {f.name for f in fields(Summary)} <= _keys(SummaryDoc)
    doc = ProfilingConfig.standard().to_dict()
    assert set(doc) == _keys(ProfilingConfigDoc) == {f.name for f in fields(ProfilingConfig)}
    assert isinstance(ProfilingConfig(layers=(0, 2)).to_dict()["layers"], list)
    # a sample's memory document names every field a reading writes (and the page faults)
    from infermeter.measure.memory import MemoryReading, SampleMemoryDoc

    reading = {f.name for f in fields(MemoryReading)}
    assert _keys(SampleMemoryDoc) == reading | {"page_faults_prefill", "page_faults_decode"}


def _public_callables() -> dict[str, object]:
    out: dict[str, object] = {}
    for name in infermeter.__all__:
        obj = getattr(infermeter, name)
        if inspect.isfunction(obj):
            out[name] = obj
        elif inspect.isclass(obj):  # its own methods and those of its bases here (the
            # store's are in its read, write and live-feed mixins)
            for klass in reversed(obj.__mro__):
                if klass.__module__.split(".")[0] != "infermeter":
                    continue
                for attr, value in vars(klass).items():
                    if attr.startswith("_") and attr != "__init__":
                        continue
                    if isinstance(value, staticmethod | classmethod):
                        value = value.__func__
                    if isinstance(value, property):
                        value = value.fget
                    if inspect.isfunction(value):
                        out[f"{name}.{attr}"] = value
    return out


def test_no_public_signature_takes_or_gives_any() -> None:
    """The annotations as written (strings under `from __future__ import annotations`)."""
    found: dict[str, set[str]] = {}
    callables = _public_callables()
    for qualname, fn in callables.items():
        annotations = getattr(fn, "__annotations__", {})
        anys = {k for k, v in annotations.items() if re.search(r"\bAny\b", str(v))}
        if anys:
            found[qualname] = anys
    assert len(callables) > 130  # the check reads the whole API, not a corner of it
    assert found == STILL_ANY


def test_the_stores_run_rows_are_their_documents(tmp_path) -> None:
    from infermeter import Store
    from infermeter.analysis.history import HistoryRowDoc
    from infermeter.run.config import RunConfig
    from infermeter.run.document import LoadPrediction, Prediction
    from infermeter.run.progress import LiveProgress
    from infermeter.run.sink import SweepDoc
    from infermeter.run.sweep_spec import SweepSpec, SweepSpecDoc
    from infermeter.store.live import LiveSampleDoc, ProgressRowDoc
    from infermeter.store.queries import PredictionRowDoc, RunRowDoc, RunStatusDoc, SweepRowDoc

    store = Store(tmp_path / "r.db")
    store.save(history_run(0, 5.0, np.random.default_rng(0)))
    (row,) = store.list_runs()
    assert set(row) == _keys(RunRowDoc) and row["samples"] == 5
    (past,) = store.history("tiny-llama")
    assert set(past) == _keys(HistoryRowDoc) and len(past["values"]["tpot_ms"]) == 5
    (status,) = store.run_statuses()
    assert set(status) == _keys(RunStatusDoc)
    live = store.samples_after(0)
    assert len(live) == 5 and set(live[0]) == _keys(LiveSampleDoc)
    spec = SweepSpec(RunConfig(model="tiny-llama"), {"batch_size": ["1", "2"]}, interleave=True)
    store.begin_sweep(spec.sweep_id, spec.name, spec.knobs, spec.to_dict())
    (swept,) = store.list_sweeps()
    assert set(swept) == _keys(SweepRowDoc) and swept["runs"] == 0
    assert set(store.sweep(spec.sweep_id)) == _keys(SweepDoc)
    assert set(store.sweep(spec.sweep_id)["spec"]) == _keys(SweepSpecDoc)
    pid = store.save_prediction(
        Prediction({"model": "tiny-llama", "hardware": {"key": "h100-sxm"}, "stack": "hf"})
    )
    (predicted,) = store.list_predictions()
    assert set(predicted) == _keys(PredictionRowDoc) and predicted["kind"] == "forward"
    # a stored prediction comes back as the document it was, by its kind, with its table
    assert type(store.prediction(pid)) is Prediction
    load_pid = store.save_prediction(
        LoadPrediction({"kind": "infermeter-predict-load", "model": "m", "points": [{"rate": 1}]})
    )
    assert store.prediction(load_pid).to_frame()["rate"].tolist() == [1]
    progress = LiveProgress(store, "tiny-llama")
    progress("sample", 1, 3)
    (where,) = store.progress_rows()
    assert set(where) == _keys(ProgressRowDoc) and (where["done"], where["total"]) == (1, 3)
