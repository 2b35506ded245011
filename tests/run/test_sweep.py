"""Sweeps: grid, stored points, resume after an interruption, JSON shape, bad values first."""

import pytest

from infermeter import RunConfig, Store
from infermeter.errors import UserError
from infermeter.knobs.evidence import KnobCheckDoc
from infermeter.run.sweep import SweepSpec, run_sweep, stored_sweep
from infermeter.run.sweep_file import parse_knob_option, read_sweep_file
from tests.helpers import doc_keys

BASE = RunConfig(model="tiny-qwen3-moe", new_tokens=3, samples=2, warmup=0, energy="off")


def _spec():
    return SweepSpec(BASE, {"top_k": ["1", "4"], "prompt_tokens": ["16", "32"]}, name="t")


def test_sweep_stores_every_point_with_evidence_and_writes_design_json(tiny_moe, tmp_path):
    store = Store(tmp_path / "s.db")
    result = run_sweep(_spec(), store, loaded=tiny_moe)
    assert len(result.runs) == 4 and result.skipped == 0
    doc = result.to_json()
    assert set(doc) == {"meta", "summary", "all_samples"}
    assert doc["meta"]["knobs"] == {"top_k": ["1", "4"], "prompt_tokens": ["16", "32"]}
    configs = [(r["config"]["top_k"], r["config"]["prompt_tokens"]) for r in doc["summary"]]
    assert sorted(configs) == [(1, 16), (1, 32), (4, 16), (4, 32)]
    for row in doc["summary"]:
        assert set(row["ttft_ms"]) >= {"mean", "std", "p50", "p90", "p99"}
        assert row["checks"]["top_k"] == {"experts_per_token": row["config"]["top_k"]}
        assert row["checks"]["prompt_tokens"]["prompt_tokens"] == row["config"]["prompt_tokens"]
        assert all(set(check) <= doc_keys(KnobCheckDoc) for check in row["checks"].values())
    assert len(doc["all_samples"]) == 8
    assert all("config" in s and "ttft_ms" in s for s in doc["all_samples"])
    again = stored_sweep(store, result.sweep_id[:6])  # rebuilt from the store, no rerun
    assert [r["run_id"] for r in again["summary"]] == [r["run_id"] for r in doc["summary"]]


def test_interrupted_sweep_resumes_and_skips_finished_points(tiny_moe, tmp_path):
    store = Store(tmp_path / "s.db")
    done = {"points": 0}

    def progress(i, total, label, skipped):
        done["points"] = i

    def hook(module, args, kwargs):  # Ctrl-C inside the third point's generation
        if done["points"] == 2 and kwargs.get("use_cache") is not False:
            raise KeyboardInterrupt

    handle = tiny_moe.model.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        with pytest.raises(KeyboardInterrupt):
            run_sweep(_spec(), store, loaded=tiny_moe, on_progress=progress)
    finally:
        handle.remove()
    sid = _spec().sweep_id
    assert len(store.sweep_run_ids(sid)) == 2
    stopped = store.sweep_run_ids(sid, status="terminated")
    assert len(stopped) == 1 and "interrupted" in store.get(stopped[0]).error
    result = run_sweep(_spec(), store, loaded=tiny_moe)
    assert result.skipped == 2 and len(result.runs) == 4
    assert len(store.sweep_run_ids(sid)) == 4


def test_bad_values_fail_before_anything_runs(tiny_moe, tmp_path):
    store = Store(tmp_path / "s.db")
    spec = SweepSpec(BASE, {"top_k": ["1", "99"]})
    with pytest.raises(UserError, match="top_k=99 is above"):
        run_sweep(spec, store, loaded=tiny_moe)
    assert store.list_sweeps() == [] and store.list_runs() == []
    with pytest.raises(UserError, match="unknown knob"):
        SweepSpec(BASE, {"topk": ["1"]}).points()


def test_sweep_id_is_stable_and_depends_on_the_grid():
    assert _spec().sweep_id == _spec().sweep_id
    other = SweepSpec(BASE, {"top_k": ["1", "2"], "prompt_tokens": ["16", "32"]})
    assert other.sweep_id != _spec().sweep_id


def test_sweep_files_are_validated(tmp_path):
    good = tmp_path / "s.yaml"
    good.write_text("model: tiny-mixtral\nsamples: 2\nknobs:\n  top_k: [1, 2]\n  compile: [true]\n")
    f = read_sweep_file(good)
    assert f.knob_texts() == {"top_k": ["1", "2"], "compile": ["on"]}
    assert f.settings() == {"model": "tiny-mixtral", "samples": 2}
    toml = tmp_path / "s.toml"
    toml.write_text('model = "tiny-llama"\n[knobs]\nnew_tokens = [1, 5]\n')
    assert read_sweep_file(toml).knob_texts() == {"new_tokens": ["1", "5"]}
    bad = tmp_path / "bad.yaml"
    bad.write_text("modle: tiny-llama\n")
    with pytest.raises(UserError, match="modle: Extra inputs are not permitted"):
        read_sweep_file(bad)
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text("samples: many\n")
    with pytest.raises(UserError, match="samples"):
        read_sweep_file(wrong)
    with pytest.raises(UserError, match="not NAME=V1,V2"):
        parse_knob_option("top_k")


def test_sweep_ids_survive_the_slo_field():
    """Ids are how reruns resume: a sweep without SLOs keeps the id it had before SLOs existed
    (this value was computed by the code of that time); one with SLOs is another sweep."""
    from dataclasses import replace

    from infermeter.run.config import RunConfig
    from infermeter.run.sweep import SweepSpec

    base = RunConfig(model="tiny-llama")
    assert SweepSpec(base, {"top_k": ["1", "2"]}).sweep_id == "182425994b3d"
    with_slo = replace(base, slos=(("ttft_ms", 500.0),))
    assert SweepSpec(with_slo, {"top_k": ["1", "2"]}).sweep_id != "182425994b3d"
    with_nvtx = replace(base, nvtx=True)  # added later still: the same rule
    assert SweepSpec(with_nvtx, {"top_k": ["1", "2"]}).sweep_id != "182425994b3d"
    from_dataset = replace(base, prompts=("a text",), prompts_source="dataset wikitext")
    assert SweepSpec(from_dataset, {"top_k": ["1", "2"]}).sweep_id != "182425994b3d"
