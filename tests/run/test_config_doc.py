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
