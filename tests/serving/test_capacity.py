"""`load --find-max-rate` (issue 33, item 5): the search on a queue whose capacity queueing
theory gives, the exact attainment interval, and the command on a real tiny model."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from typer.testing import CliRunner

from infermeter.cli.app import app
from infermeter.run.slo import slo_report
from infermeter.serving.capacity import (
    CapacityDoc,
    CapacitySpec,
    CapacityStepDoc,
    answer_line,
    attainment_interval,
    find_capacity,
    saturated,
)
from tests.helpers import assert_one_line_error, assert_rows_are

runner = CliRunner()
SERVICE_S = 0.1  # one request at a time, 100 ms each: 10 requests/s at most


def _queue(rate: float, n: int, seed: int = 0, backlog_s: float = 0.0) -> dict:
    """A FIFO single server with a fixed service time, Poisson arrivals: a load document.

    `backlog_s` of work is queued before the first arrival (a queue already full)."""
    arrivals = np.cumsum(np.random.default_rng(seed).exponential(1 / rate, size=n))
    free = arrivals[0] + backlog_s
    rows = []
    for i, a in enumerate(arrivals):
        start = max(a, free)
        free = start + SERVICE_S
        rows.append(
            {
                "sample_id": i,
                "arrival_ms": a * 1e3,
                "queue_ms": (start - a) * 1e3,
                "ttft_ms": (start - a + SERVICE_S / 2) * 1e3,
                "e2e_ms": (free - a) * 1e3,
                "error": None,
            }
        )
    wall = free - arrivals[0]
    slo = slo_report(rows, (("e2e_ms", 300.0),), wall)
    return {"all_samples": rows, "summary": {"slo": slo, "wall_s": wall}}


def test_the_search_lands_below_the_queues_capacity_and_within_its_bisection():
    calls: list[tuple[float, int]] = []

    def measure(rate: float, n: int) -> dict:
        calls.append((rate, n))
        return _queue(rate, n, seed=len(calls))

    spec = CapacitySpec(target=0.9, start_rate=1.0, requests=200, max_requests=800, bisect=4)
    result = find_capacity(spec, measure)
    assert set(result) == set(CapacityDoc.__required_keys__) | {"runs"}
    assert_rows_are(result["steps"], CapacityStepDoc)
    best, worst = result["max_rate"], result["first_failing_rate"]
    assert result["found"] and best < worst <= best * 2 ** (1 / 2**4) * 1.0001
    assert best < 1 / SERVICE_S  # above it the queue grows without bound (rho >= 1)
    rows = {r["rate"]: r for r in result["steps"]}
    assert rows[best]["verdict"] == "pass" and rows[worst]["verdict"] == "fail"
    assert [r for r in result["steps"] if r["rate"] >= 16 and not r["saturated"]] == []
    assert "capacity:" in answer_line(result) and f"{best:.3g} req/s" in answer_line(result)
    # an undecided rate is run again with its counts pooled, never past the cap
    assert max(r["requests"] for r in result["steps"]) <= 800


def test_an_slo_missed_by_a_request_alone_stops_the_search():
    def measure(rate: float, n: int) -> dict:  # 100 ms each: a 50 ms SLO is never met
        doc = _queue(rate, n)
        doc["summary"]["slo"] = slo_report(
            doc["all_samples"], (("e2e_ms", 50.0),), doc["summary"]["wall_s"]
        )
        return doc

    result = find_capacity(CapacitySpec(target=0.9, start_rate=1.0, requests=50), measure)
    assert result["max_rate"] is None and result["missed_alone"]
    assert len(result["steps"]) == 1  # no halving: a lower rate cannot help
    assert "served alone" in answer_line(result)


def test_the_attainment_interval_is_clopper_pearsons():
    # all n met: the exact two-sided interval's low end is (alpha/2)^(1/n)
    assert attainment_interval(16, 16, 0.95)[0] == pytest.approx(0.025 ** (1 / 16))
    assert attainment_interval(0, 16, 0.95)[1] == pytest.approx(1 - 0.025 ** (1 / 16))
    low, high = attainment_interval(370, 370, 0.95)
    assert low > 0.99 > attainment_interval(300, 300, 0.95)[0] and high == 1


def test_a_queue_growing_to_the_end_is_saturation():
    assert saturated(_queue(20.0, 64)["all_samples"])  # twice the capacity
    assert not saturated(_queue(2.0, 64)["all_samples"])


def test_a_step_overloaded_from_its_first_quarter_is_saturation():
    """Issue 54: the most overloaded step, its queue already full in its first quarter, was
    not flagged (its last quarter's TTFT under twice its first's) while milder steps were."""
    import numpy as np

    full = _queue(15.0, 64, backlog_s=2.0)["all_samples"]  # 1.5x capacity, 2 s queued
    ttft = [r["ttft_ms"] for r in full]
    assert np.median(ttft[-16:]) < 2 * np.median(ttft[:16])  # the ratio alone misses it
    assert saturated(full)
    # the same backlog draining at half the capacity is no saturation, nor a few requests
    assert not saturated(_queue(5.0, 64, backlog_s=2.0)["all_samples"])
    assert saturated(_queue(20.0, 8)["all_samples"])
    assert not saturated(_queue(20.0, 5)["all_samples"])


def test_the_command_on_a_real_model(tmp_path):
    from infermeter import Store

    db = str(tmp_path / "r.db")
    r = runner.invoke(
        app,
        [
            "load",
            "--find-max-rate",
            "--slo",
            "e2e_ms=60000",
            "--slo-target",
            "0.8",
            "--requests",
            "16",
            "--max-requests-per-step",
            "16",
            "--bisect",
            "1",
            "--rate",
            "64",
            "--new-tokens",
            "4",
            "--server",
            "static",
            "--prompt-tokens",
            "16",
            "--out",
            str(tmp_path / "o"),
            "--db",
            db,
        ],
        env={"COLUMNS": "200"},
    )
    assert r.exit_code == 0, r.output
    result = json.loads((tmp_path / "o" / "capacity.json").read_text())
    # as `load capacity` keeps it: the runs' ids for the runs, with the search's meta
    assert set(result) == set(CapacityDoc.__required_keys__) | {"run_ids", "meta", "server_line"}
    assert result["steps"][0]["rate"] == 64 and "capacity:" in r.output
    assert (tmp_path / "o" / "capacity.png").stat().st_size > 10_000
    assert len(Store(db).list_runs()) == len(result["run_ids"]) >= len(result["steps"])
    # a bound no request can meet: one step, then the answer says why
    r = runner.invoke(
        app,
        [
            "load",
            "--find-max-rate",
            "--slo",
            "ttft_ms=0.001",
            "--requests",
            "8",
            "--rate",
            "8",
            "--new-tokens",
            "2",
            "--prompt-tokens",
            "16",
            "--server",
            "static",
            "--json",
            "--db",
            db,
        ],
    )
    assert r.exit_code == 0, r.output
    result = json.loads(r.stdout)
    assert result["max_rate"] is None and result["missed_alone"] and len(result["steps"]) == 1
    assert math.isfinite(result["steps"][0]["in_flight_mean"])


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--find-max-rate"], "searches under SLOs"),
        (["--find-max-rate", "--slo", "e2e_ms=9", "--concurrency", "2"], "closed loop"),
        (["--find-max-rate", "--slo", "e2e_ms=9", "--rate", "1,2"], "starts from one finite"),
        (
            ["--find-max-rate", "--slo", "e2e_ms=9", "--workload", "azure-sample"],
            "arrives at its own times",
        ),
        (
            ["--find-max-rate", "--slo", "e2e_ms=9", "--slo-target", "1.5"],
            "--slo-target 1.5 is out of range; use above 0, below 1",
        ),
    ],
)
def test_bad_capacity_options_are_one_line(args, needle, tmp_path):
    r = runner.invoke(app, ["load", *args, "--db", str(tmp_path / "r.db")])
    assert_one_line_error(r, needle)
