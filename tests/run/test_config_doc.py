"""A run's stored `config` is the RunConfigDoc its type says: its keys, and what a run adds."""

from __future__ import annotations

from dataclasses import fields
from typing import get_type_hints

from infermeter.run.config import RunConfig, RunConfigDoc


def test_the_document_names_every_setting_and_nothing_the_config_lacks() -> None:
    """to_dict's keys are the document's, less what other runs add; a new field must be typed."""
    doc = RunConfig(model="tiny-llama", prompts=("a", "b"), slos=(("ttft_ms", 50.0),)).to_dict()
    declared = set(get_type_hints(RunConfigDoc))
    settings = {f.name for f in fields(RunConfig)} - {"prompts"} | {"prompts_count"}
    assert set(doc) == settings
    assert declared - settings == {"interleaved", "load"}
    assert doc["prompts_count"] == 2
    assert doc["slos"] == [["ttft_ms", 50.0]]


def test_a_load_runs_config_is_a_document_of_the_same_type() -> None:
    """A load run has no RunConfig: its config names model, mode, SLOs and spec, all declared."""
    from infermeter.serving.load import LoadSpec, _config_of, spec_document

    config = _config_of(spec_document(LoadSpec(model="tiny-llama", slos=(("ttft_ms", 100.0),))))
    assert set(config) <= set(get_type_hints(RunConfigDoc))
    assert config["mode"] == "load" and config["slos"] == [["ttft_ms", 100.0]]
    assert config["load"]["model"] == "tiny-llama"


def test_a_stored_config_is_the_run_config_it_was_made_from() -> None:
    """`RunResult.run_config()`: the stored document back as a RunConfig (issue 56, item 4);
    prompts are stored by count only, a load run has none, an old run's missing settings
    take their defaults."""
    import json
    from dataclasses import replace

    from infermeter.run.results import RunResult

    cfg = RunConfig(
        model="tiny-llama",
        prompt_tokens=32,
        layers=(0, 2),
        slos=(("ttft_ms", 50.0),),
        prompts=("one", "two"),
        compile="max-autotune",
    )
    stored = json.loads(json.dumps(cfg.to_dict()))  # as the store keeps it
    assert RunConfig.from_doc(stored) == replace(cfg, prompts=None)
    run = RunResult(None, stored, {}, {"spec": "tiny-llama"}, {}, {}, "2026-11-29T00:00:00")
    assert run.run_config() == replace(cfg, prompts=None)
    assert RunConfig.from_doc({"model": "m"}) == RunConfig(model="m")
    from infermeter.serving.load import LoadSpec, _config_of, spec_document

    load = _config_of(spec_document(LoadSpec(model="tiny-llama")))
    assert RunConfig.from_doc(load) is None
