"""`infermeter compare`: per-phase and per-layer speedup, prediction, and the CI gate."""

import json

import pytest
from typer.testing import CliRunner

from infermeter import RunConfig, Store, UserError, profile
from infermeter.cli.app import app
from infermeter.knobs import KNOBS

runner = CliRunner()


def test_compare_top_k_runs_and_fail_if_slower(tiny_moe, tmp_path):
    db = str(tmp_path / "r.db")
    store = Store(db)
    cfg = RunConfig(
        model="tiny-qwen3-moe",
        prompt_tokens=256,
        new_tokens=6,
        samples=5,  # a rank test of 3 against 3 samples can never reach p < 0.05
        mode="standard",
        energy="off",
    )
    ids = {}
    for k in (8, 1):
        with KNOBS["top_k"].apply(tiny_moe, k):
            ids[k] = profile(cfg, loaded=tiny_moe, sink=store, knobs={"top_k": k}).run_id
    r = runner.invoke(app, ["compare", ids[8], ids[1], "--db", db, "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["changed"] == {"top_k": [8, 1]}
    prefill = next(p for p in doc["phases"] if p["phase"] == "prefill")
    # the cost model predicts the gain; what was measured on a shared machine is judged, not
    # assumed (a burst of load during one run can hide it, and then compare must say so)
    assert prefill["predicted_speedup"] > 1
    base = Store(db).get(ids[8])
    assert prefill["baseline_ms"] == base.summary()["ttft_ms"].median
    assert prefill["ci95_low"] <= prefill["speedup"] <= prefill["ci95_high"]
    detected = prefill["p_value"] < 0.05 and not (prefill["ci95_low"] <= 1 <= prefill["ci95_high"])
    if detected:
        assert prefill["verdict"] == ("faster" if prefill["speedup"] > 1 else "slower")
    else:  # undecided: "the same" only when the interval rules out more than 5% either way
        within = prefill["ci95_low"] >= 1 / 1.05 and prefill["ci95_high"] <= 1.05
        said = "no detectable difference" if within else "too few samples to tell"
        assert prefill["verdict"].startswith(said), prefill
    assert doc["statistic"].startswith("ratio of medians")
    assert prefill["prediction_error_pct"] == pytest.approx(
        100 * (prefill["predicted_speedup"] - prefill["speedup"]) / prefill["speedup"]
    )
    assert any(r["kind"] == "moe" for r in doc["where"])
    # layers are judged on their per-sample totals, with an interval, like the phases
    for row in doc["layers"]:
        assert row["statistic"] == "ratio of medians of per-sample totals"
        assert row["ci95_low"] <= row["speedup"] <= row["ci95_high"]
        assert row["verdict"] in ("faster", "slower", "no detectable difference") or row[
            "verdict"
        ].startswith("too few samples to tell")
    # the CI gate fails exactly on a significant slowdown beyond the 5% tolerance, judged per
    # phase and on the total, and names each phase that failed
    for a, b in ((ids[1], ids[8]), (ids[8], ids[1])):
        d = json.loads(runner.invoke(app, ["compare", a, b, "--db", db, "--json"]).stdout)
        rows = [*d["phases"], {"phase": "total", **d["total"]}]
        failed = [p["phase"] for p in rows if p["verdict"] == "slower" and p["speedup"] < 1 / 1.05]
        r = runner.invoke(app, ["compare", a, b, "--db", db, "--fail-if-slower"])
        assert r.exit_code == (1 if failed else 0), r.output
        assert ("variant is slower" in r.output) == bool(failed)
        for phase in failed:
            assert f"{phase} " in r.output.split("variant is slower", 1)[1]


def _row(phase, speedup, verdict, p=0.5):
    return {
        "phase": phase,
        "speedup": speedup,
        "verdict": verdict,
        "p_value": p,
        "ci95_low": speedup * 0.9,
        "ci95_high": speedup * 1.1,
    }


def test_the_gate_judges_each_phase_not_only_the_total():
    """A significant prefill slowdown (0.686x, p = 0.008) passed when only the total was judged."""
    from infermeter.analysis.compare import parse_gate_phases, slower_rows

    doc = {
        "phases": [
            _row("prefill", 0.686, "slower", 0.008),
            _row("decode", 1.01, "no detectable difference"),
        ],
        "total": _row("total", 0.97, "no detectable difference"),
    }
    assert [r["phase"] for r in slower_rows(doc, 0.05)] == ["prefill"]
    assert slower_rows(doc, 0.05, parse_gate_phases("total")) == []  # narrowed on purpose
    assert slower_rows(doc, 0.5) == []  # within a 50% tolerance
    doc["total"] = _row("total", 0.9, "slower", 0.01)
    assert [r["phase"] for r in slower_rows(doc, 0.05)] == ["prefill", "total"]
    assert parse_gate_phases("all") == ("prefill", "decode", "total")
    assert parse_gate_phases(" Decode,total ,decode") == ("decode", "total")
    for bad in ("ttft", ","):
        with pytest.raises(UserError):
            parse_gate_phases(bad)


def test_a_bad_phases_value_is_one_line(tmp_path):
    db = str(tmp_path / "r.db")
    Store(db)
    args = ["compare", "a", "b", "--db", db, "--fail-if-slower", "--phases", "ttft"]
    r = runner.invoke(app, args)
    assert r.exit_code == 2 and r.output.startswith("error: unknown phase 'ttft'"), r.output


class JitterClock:
    """A mock clock whose every mark moves time on by a seeded random step (0.9-1.1 ms, or 14x
    that from mark `slow_from` for `slow_marks` marks): runs of one configuration draw their
    timings from one distribution, deterministically, and a slow sample can be injected."""

    name = "mock"

    def __init__(self, seed, slow_from=None, slow_marks=0):
        import random

        self.rng, self.t_ms, self.marks = random.Random(seed), 0.0, 0
        self.slow = range(slow_from, slow_from + slow_marks) if slow_from is not None else ()

    def mark(self):
        t = self.t_ms
        step = self.rng.uniform(0.9, 1.1)
        self.t_ms += step * (14 if self.marks in self.slow else 1)
        self.marks += 1
        return t

    def elapsed_ms(self, start, end):
        return end - start

    def now_ms(self):
        return self.t_ms


def _run_on(clock, monkeypatch, loaded, db, samples=12):
    import sys

    monkeypatch.setattr(sys.modules["infermeter.run.profiling"], "clock_for", lambda d: clock)
    cfg = RunConfig(
        model="tiny-llama", prompt_tokens=16, new_tokens=4, samples=samples, energy="off"
    )
    return profile(cfg, loaded=loaded, sink=Store(db)).run_id


def test_a_run_against_itself_and_two_runs_of_one_configuration_show_no_difference(
    tiny_llama, tmp_path, monkeypatch
):
    db = str(tmp_path / "r.db")
    first = _run_on(JitterClock(seed=1), monkeypatch, tiny_llama, db)
    second = _run_on(JitterClock(seed=2), monkeypatch, tiny_llama, db)
    for a, b in ((first, first), (first, second)):
        r = runner.invoke(app, ["compare", a, b, "--db", db], terminal_width=130)
        assert r.exit_code == 0, r.output
        doc = json.loads(runner.invoke(app, ["compare", a, b, "--db", db, "--json"]).stdout)
        verdicts = [p["verdict"] for p in doc["phases"]] + [doc["total"]["verdict"]]
        if a == b:  # the same samples: the same, whatever their spread
            assert verdicts == ["no detectable difference"] * 3, verdicts
        else:  # no claim either way; "the same" only where the interval shows it
            assert not {"faster", "slower"} & set(verdicts), verdicts
        assert "medians over measured samples" in r.output
        r = runner.invoke(app, ["compare", a, b, "--db", db, "--fail-if-slower"])
        assert r.exit_code == 0, r.output


def test_one_injected_slow_sample_is_marked_and_does_not_move_the_headline(
    tiny_llama, tmp_path, monkeypatch
):
    db = str(tmp_path / "r.db")
    calm = _run_on(JitterClock(seed=3), monkeypatch, tiny_llama, db)
    # a slow stretch of marks inside one of the measured samples
    spiky = _run_on(JitterClock(seed=3, slow_from=60, slow_marks=4), monkeypatch, tiny_llama, db)
    run = Store(db).get(spiky)
    marked = {k: v.outliers for k, v in run.summary().items() if v.outliers}
    assert marked, "the slow sample is not marked"
    assert "total_ms" in marked and len(marked["total_ms"]) == 1
    doc = json.loads(runner.invoke(app, ["compare", calm, spiky, "--db", db, "--json"]).stdout)
    assert doc["total_verdict"] not in ("faster", "slower")
    # the mean is dragged by the one sample; the median, the headline, is not
    s = run.summary()["total_ms"]
    assert s.mean > s.median * 1.1


def test_where_the_difference_comes_from_nests_parts_under_their_block():
    from infermeter.analysis.compare import _where

    rows = [
        {"name": "model.layers.0", "phase": "prefill", "delta_ms": 5.0},
        {"name": "model.layers.0.self_attn", "phase": "prefill", "delta_ms": 3.0},
        {"name": "model.layers.1", "phase": "prefill", "delta_ms": 4.0},
        {"name": "model.layers.0.mlp", "phase": "decode", "delta_ms": -6.0},
        {"name": "lm_head", "phase": "prefill", "delta_ms": 1.0},
        {"name": "model.layers.2", "phase": "prefill", "delta_ms": 0.5},  # not in the top 5
    ]
    got = [(r["depth"], r["phase"], r["name"]) for r in _where(rows)]
    assert got == [
        (0, "decode", "model.layers.0.mlp"),
        (0, "prefill", "model.layers.0"),
        (1, "prefill", "model.layers.0.self_attn"),
        (0, "prefill", "model.layers.1"),
        (0, "prefill", "lm_head"),
    ]


class DriftClock(JitterClock):
    """A JitterClock on a machine that slows down steadily: by mark m every step takes
    (1 + m / 100) times as long (a minimal-mode sample of 4 tokens makes a handful of marks, so
    a second run of 11 samples is about twice as slow as the first)."""

    def mark(self):
        t = self.t_ms
        self.t_ms += self.rng.uniform(0.9, 1.1) * (1 + self.marks / 100)
        self.marks += 1
        return t


def test_a_drifting_machine_fools_sequential_runs_but_not_interleaved_ones(
    tiny_llama, tmp_path, monkeypatch
):
    import sys

    from infermeter.run.interleave import Arm, profile_interleaved

    db = str(tmp_path / "r.db")
    cfg = RunConfig(model="tiny-llama", prompt_tokens=16, new_tokens=4, samples=10, energy="off")
    clock = DriftClock(seed=5)
    monkeypatch.setattr(sys.modules["infermeter.run.profiling"], "clock_for", lambda d: clock)
    store = Store(db)
    first, second = (profile(cfg, loaded=tiny_llama, sink=store).run_id for _ in range(2))
    r = runner.invoke(app, ["compare", first, second, "--db", db], terminal_width=130)
    assert "slower" in r.output and "--interleave" in r.output  # the drift, with the caveat
    arms = [Arm(cfg, {"copy": "a"}), Arm(cfg, {"copy": "b"})]
    a, b = (run.run_id for run in profile_interleaved(arms, tiny_llama, sink=store))
    r = runner.invoke(app, ["compare", a, b, "--db", db], terminal_width=130)
    assert r.exit_code == 0, r.output
    assert r.output.count("no detectable difference") == 3, r.output  # prefill, decode, total
    assert "samples interleaved (group" in r.output and "--interleave" not in r.output
    d = json.loads(runner.invoke(app, ["compare", a, b, "--db", db, "--json"]).stdout)
    assert d["paired"] and d["total"]["statistic"] == "median of per-round ratios (paired)"


def test_sweep_interleave_from_the_cli(tmp_path):
    db = str(tmp_path / "r.db")
    args = [
        "sweep",
        "--model",
        "tiny-llama",
        "--knob",
        "prompt_tokens=16,24",
        "--samples",
        "3",
        "--new-tokens",
        "2",
        "--energy",
        "off",
        "--interleave",
        "--db",
        db,
    ]
    r = runner.invoke(app, args, terminal_width=130)
    assert r.exit_code == 0, r.output
    assert "interleaved" in r.output and "infermeter compare" in r.output
    ids = r.output.split("infermeter compare ")[1].split()[:2]
    d = json.loads(runner.invoke(app, ["compare", *ids, "--db", db, "--json"]).stdout)
    assert d["paired"] and d["changed"] == {"prompt_tokens": [16, 24]}
    r = runner.invoke(app, [*args[:-2], "--knob", "dtype=float32,bfloat16", "--db", db])
    assert r.exit_code == 2 and "share one loaded model" in r.output


def test_where_names_the_part_that_carried_each_blocks_change():
    """Blocks with near-equal deltas used to fill the top five and hide the MoE inside them."""
    from infermeter.analysis.compare import _where

    layers = []
    for i in range(6):
        layers.append(
            {
                "name": f"model.layers.{i}",
                "phase": "prefill",
                "kind": "block",
                "delta_ms": -2.7 + 0.01 * i,
            }
        )
        layers.append(
            {
                "name": f"model.layers.{i}.mlp",
                "phase": "prefill",
                "kind": "moe",
                "delta_ms": -2.5 + 0.01 * i,
            }
        )
        layers.append(
            {
                "name": f"model.layers.{i}.self_attn",
                "phase": "prefill",
                "kind": "attention",
                "delta_ms": -0.1,
            }
        )
    where = _where(layers)
    blocks = [w for w in where if w["kind"] == "block"]
    assert len(blocks) == 5 and all(w["depth"] == 0 for w in blocks)
    moe = [w for w in where if w["kind"] == "moe"]
    assert len(moe) == 5 and all(w["depth"] == 1 for w in moe)
    assert not any(w["kind"] == "attention" for w in where)  # 0.1 of 2.7: not the cause
