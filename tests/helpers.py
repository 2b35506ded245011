"""Helpers shared by test modules (test modules never import each other)."""

from __future__ import annotations

import os
import subprocess
import sys


def cli(*args, env=None, timeout=600):
    """Run `python -m infermeter ARGS` in a real process."""
    return subprocess.run(
        [sys.executable, "-m", "infermeter", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def cli_here(*args, env=None):
    """`infermeter ARGS` through the CLI in this process, as `cli` returns it.

    The same parsing, work, output and exit code without a new interpreter's 10 s of torch
    and transformers imports. `cli` stays for what only a real process shows: signals, the
    interpreter's own exit, what libraries print to stdout or stderr as they are imported.
    (The libraries are not quieted here: that changes this process's warning filters and
    logging for the tests after; conftest turns the weights' loading bar off as the CLI does.)
    """
    from typer.testing import CliRunner

    from infermeter.cli.app import app, typer_argv

    argv, _ = typer_argv(["infermeter", *map(str, args)])
    r = CliRunner().invoke(app, argv[1:], env=env)
    return subprocess.CompletedProcess(list(args), r.exit_code, r.stdout, r.stderr)


def assert_one_line_error(result, *needles, code=2):
    """The CLI's error contract: exit `code`, one line 'error: ...' naming each needle."""
    stderr = result.stderr if hasattr(result, "stderr") else result.output
    assert result.returncode == code if hasattr(result, "returncode") else result.exit_code == code
    assert "Traceback" not in stderr
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error: ")
    for n in needles:
        assert n in lines[0], lines[0]


def history_run(
    i, tpot_ms, rng, *, new_tokens=9, device="cpu-x", prompt=16, model="tiny-llama", **settings
):
    """A finished run of 5 samples whose decode steps take `tpot_ms` (2% noise each)."""
    from infermeter import RunConfig, RunResult, SampleResult

    config = RunConfig(
        model=model, prompt_tokens=prompt, new_tokens=new_tokens, **{"samples": 5, **settings}
    )
    samples = [
        SampleResult(
            index=k,
            warmup=False,
            batch_size=1,
            prompt_tokens=prompt,
            new_tokens=new_tokens,
            vision_tokens=0,
            start_ms=100.0 * k,
            ttft_ms=20.0 * rng.normal(1, 0.02),
            step_ms=tuple(tpot_ms * rng.normal(1, 0.02, new_tokens - 1)),
            memory={},
        )
        for k in range(5)
    ]
    return RunResult(
        run_id=None,
        config=config.to_dict(),
        knobs=config.knob_values(),
        model_info={"spec": model},
        device={"name": device, "type": "cpu"},
        versions={"torch": "2.13.0", "git": {"commit": f"{i:040x}", "dirty": i % 7 == 0}},
        created=f"2026-11-{1 + i // 24:02d}T{i % 24:02d}:00:00+00:00",
        samples=samples,
        status="finished",
    )


def history_store(tmp_path, series, **kw):
    """A store in `tmp_path` with one synthetic run per TPOT in `series`, oldest first."""
    import numpy as np

    from infermeter import Store

    rng = np.random.default_rng(7)
    store = Store(tmp_path / "runs.db")
    ids = [store.save(history_run(i, t, rng, **kw)) for i, t in enumerate(series)]
    return store, ids


def interruptible() -> None:
    """A `preexec_fn`: the child takes SIGINT as a terminal's Ctrl-C, however the suite started.

    A non-interactive shell's `&` starts its job with SIGINT ignored, a child inherits that,
    and Python started so never raises KeyboardInterrupt: a suite launched in the background
    failed every Ctrl-C test for a reason that was not the product's.
    """
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def doc_keys(doc_type: type) -> set[str]:
    """A TypedDict's keys, its bases' included, without evaluating their types."""
    return set(doc_type.__required_keys__ | doc_type.__optional_keys__)  # type: ignore[attr-defined]


def assert_rows_are(rows, doc_type: type) -> None:
    """Every row holds its document's required keys and no key the document does not name."""
    required = set(doc_type.__required_keys__)  # type: ignore[attr-defined]
    for row in rows:
        assert required <= set(row) <= doc_keys(doc_type), (doc_type.__name__, sorted(row))


def assert_load_doc(doc) -> None:
    """A load's document (`run_load`'s, or `load --json`'s) and each part it has, key by key."""
    from infermeter.run.load_docs import (
        SeriesDoc,
        ServerMetricsDoc,
        StepCacheDoc,
        StepRowDoc,
        StepStateDoc,
        TimelineRowDoc,
    )
    from infermeter.serving.rows import (
        EndpointMetaDoc,
        LoadDoc,
        LoadMetaDoc,
        ReferenceDoc,
        RequestRowDoc,
        StackCostRowDoc,
    )

    assert_rows_are([doc], LoadDoc)
    meta = doc["meta"]
    assert_rows_are([meta], LoadMetaDoc)
    assert_load_summary(doc["summary"])
    assert_rows_are(doc["timeline"], TimelineRowDoc)
    assert_rows_are(doc["all_samples"] + doc.get("warmup_samples", []), RequestRowDoc)
    assert_rows_are(doc.get("steps", []), StepRowDoc)
    if meta.get("workload") is not None:
        _assert_workload(meta["workload"])
    if "step_state" in meta:
        assert_rows_are([meta["step_state"]], StepStateDoc)
        assert_rows_are([meta["step_state"]["cache"]], StepCacheDoc)
    if "endpoint" in meta:
        assert_rows_are([meta["endpoint"]], EndpointMetaDoc)
    if "server_metrics" in doc:
        assert_rows_are([doc["server_metrics"]], ServerMetricsDoc)
        assert_rows_are(doc["server_metrics"]["series"].values(), SeriesDoc)
    if "reference" in doc:
        assert_rows_are([doc["reference"]], ReferenceDoc)
        assert_load_summary(doc["reference"]["summary"])
        assert_rows_are(doc["reference"]["stack_cost"], StackCostRowDoc)


def assert_load_summary(s) -> None:
    """A load's summary and its client, drift, batch, energy, metrics and token parts."""
    from infermeter.run.load_docs import (
        AddedDoc,
        BatchDoc,
        ClientDoc,
        ClientVerdictDoc,
        DriftDoc,
        LoadEnergyDoc,
        SelfCheckDoc,
        ServerMetricsSummaryDoc,
        StateMetricDoc,
    )
    from infermeter.run.results import LoadSummaryDoc, TokenCountsDoc

    assert_rows_are([s], LoadSummaryDoc)
    if "client" in s:
        assert_rows_are([s["client"]], ClientDoc)
        if s["client"]["selfcheck"] is not None:
            assert_rows_are([s["client"]["selfcheck"]], SelfCheckDoc)
            assert_rows_are(s["client"]["selfcheck"]["added"], AddedDoc)
            assert set(s["client"]["verdict"]) == doc_keys(ClientVerdictDoc)
    if s.get("drift") is not None:
        assert set(s["drift"]) == doc_keys(DriftDoc)
    for key, doc_type in (("batch", BatchDoc), ("energy", LoadEnergyDoc)):
        if key in s:
            assert_rows_are([s[key]], doc_type)
    if "server_metrics" in s:
        assert_rows_are([s["server_metrics"]], ServerMetricsSummaryDoc)
        assert_rows_are(s["server_metrics"]["state"], StateMetricDoc)
    if "tokens" in s:
        assert set(s["tokens"]) == doc_keys(TokenCountsDoc)


def assert_load_check(load) -> None:
    """A stored load run's `checks["load"]`: every key, and each part as its writer typed it."""
    from infermeter.run.load_docs import (
        FailedRequestDoc,
        ServerMetricsDoc,
        StepRowDoc,
        StepStateDoc,
        TimelineRowDoc,
    )
    from infermeter.run.results import LoadCheckDoc

    assert set(load) == doc_keys(LoadCheckDoc)
    assert_load_summary(load["summary"])
    assert_rows_are(load["timeline"], TimelineRowDoc)
    assert_rows_are(load["failed"], FailedRequestDoc)
    assert_rows_are(load["steps"] or [], StepRowDoc)
    if load["workload"] is not None:
        _assert_workload(load["workload"])
    if load["step_state"] is not None:
        assert_rows_are([load["step_state"]], StepStateDoc)
    if load["server_metrics"] is not None:
        assert_rows_are([load["server_metrics"]], ServerMetricsDoc)


def _assert_workload(w) -> None:
    from infermeter.workloads.traffic import LengthsDoc, TrafficDoc

    assert_rows_are([w], TrafficDoc)
    assert_rows_are([w["prompt_tokens"], w["output_tokens"]], LengthsDoc)
