"""Each run states what its instruments cost it (issue 57, item 2): timed windows counted per
step of each phase, priced by the wrapper's cost measured on this host, stored and printed.

Counted, not timed: the windows a run reports are held against the records its own tables
hold; the price is held against the benchmark (`benchmarks/overhead.py` prints each run's
estimate beside the measured ratio), never against a wall-clock bound here."""

import json
import math

import pytest

from infermeter.instrument.cost import estimate, window_cost_us
from infermeter.run import RunConfig, profile
from infermeter.store import Store
from tests.helpers import cli_here

NEW = 7  # tokens: 6 decode steps a sample


def _decode_windows(run) -> float:
    """Decode windows per decode step, from the run's own tables: every timed row's calls, and
    the root forward's window (the step itself, not a row of the layer table)."""
    rows = [r for r in run.layers["layers"] if r["phase"] == "decode"]
    return sum(r["calls"] for r in rows) / (NEW - 1) + 1


@pytest.fixture(scope="module")
def every_step():
    config = RunConfig(
        model="tiny-llama",
        mode="standard",
        new_tokens=NEW,
        prompt_tokens=16,
        samples=1,
        warmup=0,
        energy="off",
    )
    return profile(config)


def test_a_run_counts_its_timed_windows_and_prices_them(every_step):
    cost = every_step.instrument_cost
    blocks = every_step.model_info["layers"]
    # every block and its parts, the root forward and generate's own parts: more than a window
    # a block, and exactly what the run's own tables recorded
    assert cost.windows_per_decode_step > blocks + 1
    assert cost.windows_per_decode_step == pytest.approx(_decode_windows(every_step))
    assert cost.windows_per_prefill > blocks
    assert cost.us_per_window > 0
    # standard mode probes block statistics on 1 decode step in 4 (indices 0 and 4 of 6)
    assert cost.probed_decode_share == pytest.approx(2 / 6)
    assert cost.us_per_probed_step > 0
    windows_us = cost.windows_per_decode_step * cost.us_per_window
    stats_us = cost.us_per_probed_step * cost.probed_decode_share
    assert cost.us_per_decode_step == pytest.approx(windows_us + stats_us)
    tpot = every_step.summary()["tpot_ms"].p50
    assert cost.decode_share == pytest.approx(cost.us_per_decode_step / 1e3 / tpot)
    assert not cost.probes  # every instrument of standard mode is priced
    assert cost.line().startswith("instruments cost about ")
    assert "statistics" in cost.line()


def test_sampling_every_other_step_halves_the_decode_windows(every_step, tmp_path):
    """--sample-every 2 times 3 of the 6 decode steps: half the windows an average step pays,
    said by the CLI, kept by the store."""
    db = tmp_path / "r.db"
    r = cli_here(
        "profile",
        "-m",
        "tiny-llama",
        "--mode",
        "standard",
        "--sample-every",
        "2",
        "--new-tokens",
        NEW,
        "--prompt-tokens",
        16,
        "--samples",
        1,
        "--warmup",
        0,
        "--energy",
        "off",
        "--db",
        db,
        "--json",
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    half = doc["meta"]["instrument_cost"]
    full = every_step.instrument_cost.to_dict()
    # the timed steps pay what every step paid before; the untimed ones pay nothing
    assert half["windows_per_decode_step"] == pytest.approx(full["windows_per_decode_step"] / 2)
    assert half["windows_per_prefill"] == full["windows_per_prefill"]
    assert half["probed_decode_share"] == pytest.approx(2 / 6)  # indices 0 and 4: both timed
    stored = Store(str(db)).get(doc["meta"]["run_id"])
    assert stored.instrument_cost.to_dict() == half
    shown = cli_here("runs", "show", doc["meta"]["run_id"], "--db", db)
    assert shown.returncode == 0, shown.stderr
    assert "instruments cost about" in shown.stdout
    assert "TPOT +3%" not in shown.stdout  # the canned figure gives way to the run's own


def test_a_deep_run_says_its_estimate_is_a_lower_bound():
    run = profile(
        RunConfig(model="tiny-llama", mode="deep", new_tokens=3, samples=1, warmup=0, energy="off")
    )
    cost = run.instrument_cost
    assert cost.probes and cost.line().startswith("instruments cost at least ")
    assert "not priced" in cost.line()


def test_a_minimal_run_has_no_windows_to_price(tmp_path):
    run = profile(
        RunConfig(
            model="tiny-llama", mode="minimal", new_tokens=3, samples=1, warmup=0, energy="off"
        )
    )
    assert run.instrument_cost is None


def test_the_estimate_is_the_windows_times_their_price():
    cost = estimate(2.0, {"prefill": 10.0, "decode": 12.0}, ttft_ms=4.0, tpot_ms=1.2, probes=False)
    assert cost.us_per_decode_step == 24.0 and cost.us_per_prefill == 20.0
    assert cost.decode_share == pytest.approx(0.02) and cost.prefill_share == pytest.approx(0.005)
    assert cost.line().startswith("instruments cost about 2.0% of decode (24 us a step: 12 timed")
    assert "probed steps" not in cost.line()
    nothing = estimate(2.0, {}, ttft_ms=0.0, tpot_ms=0.0, probes=False)
    assert nothing.windows_per_decode_step == 0 and math.isnan(nothing.decode_share)


def test_the_window_price_is_measured_once_a_process():
    import torch

    from infermeter.instrument import cost as module
    from infermeter.measure.clock import clock_for

    clock = clock_for(torch.device("cpu"))
    first = window_cost_us(clock)
    assert first >= 0 and type(clock).__name__ in module._CACHE
    assert window_cost_us(clock) is first  # cached: a sweep's points do not pay it again
