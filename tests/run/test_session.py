"""`session`: a run whose workload is the user's own code, with user regions (issue 36, item 5)."""

import json

import pytest
import torch

from infermeter import RunConfig, Store, analyze_run, compare_runs, profile, session
from infermeter.report.trace import chrome_trace
from tests.helpers import cli_here


def _config(**kw):
    base = dict(model="tiny-llama", prompt_tokens=16, new_tokens=4, samples=2, energy="off")
    return RunConfig(**{**base, **kw})


def _own_generate(s, n=4):
    inputs = s.tokenizer(["The bridge was gone by morning."], return_tensors="pt")
    with torch.inference_mode():
        s.model.generate(**inputs, max_new_tokens=n, min_new_tokens=n, do_sample=False)


def test_a_session_stores_user_regions_beside_the_layers_and_in_the_trace(tmp_path, tiny_llama):
    store = Store(tmp_path / "runs.db")
    with session(_config(mode="standard"), sink=store, loaded=tiny_llama) as s:
        assert s.run_id is not None  # registered before the block runs
        with s.section("own generate"):
            for _ in range(3):
                with s.section("one call"):  # nested and repeated
                    _own_generate(s)
        with s.section("configured samples"):
            done = s.run_samples()
    assert len(done) == 3 and s.result.status == "finished"  # 1 warm-up + 2 measured
    run = store.get(s.run_id)
    rows = run.layers["sections"]
    assert [r["name"] for r in rows] == ["own generate"] + ["one call"] * 3 + ["configured samples"]
    assert [r["depth"] for r in rows] == [0, 1, 1, 1, 0]
    outer, *calls, samples = rows
    assert sum(r["ms"] for r in calls) <= outer["ms"]
    assert all(outer["start_ms"] <= r["start_ms"] for r in calls)
    # one timeline: the regions come after the load, the samples inside their region
    assert outer["start_ms"] >= run.phases["load_ms"]
    for smp in run.samples:
        assert samples["start_ms"] <= smp.start_ms <= samples["start_ms"] + samples["ms"]
    # the hooks saw the user's own forwards too: 3 own prefills + 2 measured samples
    prefill = [r for r in run.layers["parts"] if r["phase"] == "prefill" and r["part"] == "forward"]
    assert prefill[0]["calls"] == 5
    assert any("the user's own code" in n for n in run.notes)
    events = [e for e in chrome_trace(run)["traceEvents"] if e.get("tid") == 4 and e["ph"] == "X"]
    assert [e["name"] for e in events][:2] == ["own generate", "one call"]


def test_runs_show_lists_the_sections_and_keeps_the_parts_honest(tmp_path, tiny_llama):
    db = tmp_path / "runs.db"
    with session(_config(mode="standard"), sink=Store(db), loaded=tiny_llama) as s:
        with s.section("own generate"):
            _own_generate(s)
        s.run_samples()
    shown = cli_here("runs", "show", s.run_id, "--db", str(db))
    assert shown.returncode == 0, shown.stderr
    assert "user sections (ms)" in shown.stdout and "own generate" in shown.stdout
    # the samples' wall time does not cover the user's forwards: no "generate call" split
    assert "generate call" not in shown.stdout


def test_a_minimal_session_times_sections_without_hooks(tmp_path, tiny_llama):
    with session(_config(mode="minimal"), loaded=tiny_llama) as s, s.section("tokenize"):
        s.tokenizer(["hello"], return_tensors="pt")
    run = s.result
    assert run.run_id is None and run.status == "finished" and run.samples == []
    assert [r["name"] for r in run.layers["sections"]] == ["tokenize"]
    assert set(run.layers) == {"sections"}


def test_a_block_that_raises_is_stored_as_failed_and_the_error_comes_back(tmp_path, tiny_llama):
    store = Store(tmp_path / "runs.db")
    with (
        pytest.raises(ValueError, match="bad post-processing"),
        session(_config(), sink=store, loaded=tiny_llama) as s,
    ):
        with s.section("first"):
            s.run_samples(1)
        raise ValueError("bad post-processing")
    run = store.get(s.run_id)
    assert run.status == "failed" and "bad post-processing" in run.error
    assert len(run.samples) == 1 and [r["name"] for r in run.layers["sections"]] == ["first"]


def test_a_bad_config_fails_before_anything_is_stored(tmp_path, tiny_llama):
    from infermeter import UserError

    store = Store(tmp_path / "runs.db")
    with (
        pytest.raises(UserError, match="samples"),
        session(_config(samples=0), sink=store, loaded=tiny_llama),
    ):
        pytest.fail("the block must not run")
    assert store.list_runs() == []


def test_results_come_back_as_frames_with_short_reprs(tmp_path, tiny_llama):
    a = profile(_config(), loaded=tiny_llama)
    b = profile(_config(prompt_tokens=48), loaded=tiny_llama)
    frame = a.to_frame()
    assert len(frame) == len(a.samples) and {"ttft_ms", "tpot_ms", "warmup"} <= set(frame)
    assert "\n" not in repr(a) and "ttft_ms_median=" in repr(a) and len(repr(a)) < 400
    assert "<table" in a._repr_html_()
    doc = analyze_run(a)
    roof = doc.to_frame()
    assert len(roof) == len(doc["roofline"]["rows"]) > 0
    assert json.loads(json.dumps(doc))["run_id"] == doc["run_id"]  # still a plain document
    assert repr(doc).startswith("Analysis(") and "roofline.rows:" in repr(doc)
    cmp = compare_runs(a, b)
    assert list(cmp.to_frame()["phase"]) == ["prefill", "decode"]
    assert cmp.to_frame("layers").shape[0] == len(cmp["layers"])
    assert "Comparison(" in repr(cmp) and "total_verdict=" in repr(cmp)
