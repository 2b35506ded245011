"""Arrival processes (constant, Poisson, gamma), runs bounded by duration, and warm-up requests
left out of the statistics (issue 54, item 4)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from infermeter.cli.app import app
from infermeter.serving.load import arrival_offsets_s, parse_arrivals
from tests.helpers import assert_one_line_error

runner = CliRunner()


def _cv(offsets: list[float]) -> float:
    gaps = np.diff([0.0, *offsets])
    return float(gaps.std() / gaps.mean())


def test_each_process_keeps_the_rate_and_varies_as_it_should():
    n = 20_000
    for kind in ("poisson", "constant", "gamma:0.25", "gamma:4"):
        offsets = arrival_offsets_s(5.0, n, 0, kind)
        assert n / offsets[-1] == pytest.approx(5.0, rel=0.05), kind
    assert _cv(arrival_offsets_s(5.0, n, 0, "constant")) == pytest.approx(0, abs=1e-9)
    assert _cv(arrival_offsets_s(5.0, n, 0, "poisson")) == pytest.approx(1, rel=0.05)
    # a gamma process of shape k varies by 1/sqrt(k): bursty under 1, smoother above
    assert _cv(arrival_offsets_s(5.0, n, 0, "gamma:0.25")) == pytest.approx(2, rel=0.08)
    assert _cv(arrival_offsets_s(5.0, n, 0, "gamma:4")) == pytest.approx(0.5, rel=0.05)
    assert arrival_offsets_s(float("inf"), 3, 0, "gamma:2") == [0.0, 0.0, 0.0]
    assert parse_arrivals(" Gamma:1.5 ") == ("gamma", 1.5)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--arrivals", "bursty"], "is not an arrival process"),
        (["--arrivals", "gamma:0"], "is not an arrival process"),
        (["--duration", "5", "--concurrency", "2"], "--duration bounds an open loop"),
        (["--duration", "5", "--rate", "inf"], "--duration bounds an open loop"),
        (
            ["--duration", "-1"],
            "--duration -1 is out of range; use above 0, at most 1000000 seconds",
        ),
        (["--warmup-requests", "16"], "--warmup-requests must be within"),
    ],
)
def test_bad_arrival_options_are_one_line(args, needle):
    assert_one_line_error(runner.invoke(app, ["load", *args]), needle)


def test_a_run_bounded_by_duration_with_warm_up_left_out(tmp_path):
    from infermeter.serving.nullserver import NullSpec, null_server

    pytest.importorskip("openai")
    out = tmp_path / "o"
    with null_server(NullSpec(ttft_ms=2, itl_ms=1)) as s:
        r = runner.invoke(
            app,
            [
                "load",
                "--endpoint",
                s.url,
                "--rate",
                "20",
                "--arrivals",
                "constant",
                "--duration",
                "1",
                "--warmup-requests",
                "4",
                "--new-tokens",
                "4",
                "--prompt-tokens",
                "8",
                "--no-selfcheck",
                "--out",
                str(out),
                "--db",
                str(tmp_path / "r.db"),
            ],
        )
    assert r.exit_code == 0, r.output
    doc = json.loads((out / "load.json").read_text())
    # constant arrivals every 50 ms within 1 s: 20 requests, the first 4 a warm-up
    assert len(doc["warmup_samples"]) == 4 and doc["summary"]["requests"] == 16
    assert doc["summary"]["warmup_requests"] == 4
    assert min(x["arrival_ms"] for x in doc["all_samples"]) == 0
    assert all(x["arrival_ms"] < 0 for x in doc["warmup_samples"])
    gaps = np.diff(sorted(x["arrival_ms"] for x in doc["all_samples"]))
    assert gaps == pytest.approx(np.full(15, 50.0), abs=1e-6)
    from infermeter import Store

    (run,) = Store(str(tmp_path / "r.db")).list_runs()
    stored = Store(str(tmp_path / "r.db")).get(run["id"])
    assert sum(x.warmup for x in stored.samples) == 4 and len(stored.samples) == 20


def test_a_ramp_raises_the_rate_linearly_with_the_requests():
    offsets = arrival_offsets_s(1.0, 5, 0, "constant", ramp_to=5.0)
    gaps = np.diff([0.0, *offsets])
    assert gaps == pytest.approx([1.0, 1 / 2, 1 / 3, 1 / 4, 1 / 5])
    ramped = np.diff([0.0, *arrival_offsets_s(1.0, 4000, 0, "poisson", ramp_to=9.0)])
    flat = np.diff([0.0, *arrival_offsets_s(1.0, 4000, 0, "poisson")])
    # the first tenth arrives near 1.4/s, the last near 8.6/s; without the ramp both near 1/s
    early, late = 1 / ramped[:400].mean(), 1 / ramped[-400:].mean()
    # 400 exponential gaps: the rate's relative standard error is 1/sqrt(400) = 5%; 4 of them
    expected_early, expected_late = 1.0 + 8.0 * 0.05, 1.0 + 8.0 * 0.95
    assert abs(early / expected_early - 1) < 0.2 and abs(late / expected_late - 1) < 0.2, (
        early,
        late,
    )
    assert 0.85 < 1 / flat[-400:].mean() < 1.15
    r = runner.invoke(app, ["load", "run", "--ramp-up-to", "4", "--concurrency", "2"])
    assert_one_line_error(r, "--ramp-up-to")


def test_a_warm_up_by_time_leaves_out_the_requests_arriving_within_it(tmp_path):
    """Constant arrivals every 50 ms: --warmup-s 0.325 makes the seven arriving at 0-300 ms
    warm-up (a bound between two arrivals: one on an arrival is a float's coin toss); a
    warm-up longer than the run leaves nothing out and says so."""
    from infermeter.serving.nullserver import NullSpec, null_server

    pytest.importorskip("openai")

    def run(warm: str, out: Path) -> tuple[dict, str]:
        r = runner.invoke(
            app,
            ["load", "endpoint", s.url, "--rate", "20", "--arrivals", "constant"]
            + ["--requests", "12", "--warmup-s", warm, "--new-tokens", "4", "--prompt-tokens"]
            + ["8", "--no-selfcheck", "--out", str(out), "--db", str(tmp_path / "r.db")],
        )
        assert r.exit_code == 0, r.output
        return json.loads((out / "load.json").read_text()), r.output

    with null_server(NullSpec(ttft_ms=2, itl_ms=1)) as s:
        doc, _ = run("0.325", tmp_path / "a")
        assert doc["summary"]["warmup_requests"] == 7 and doc["summary"]["requests"] == 5
        assert doc["summary"]["warmup_note"] is None
        doc, out = run("5", tmp_path / "b")
    assert doc["summary"]["warmup_requests"] == 0 and doc["summary"]["requests"] == 12
    assert "covered all 12 requests: none were left out" in out
    r = runner.invoke(app, ["load", "endpoint", "http://127.0.0.1:9", "--warmup-s", "-1"])
    assert_one_line_error(r, "--warmup-s -1 is out of range; use 0..1000000 seconds")
