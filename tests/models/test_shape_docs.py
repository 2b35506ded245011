"""The stored shape, census, mixers, vision and git documents name every field they are made of.

A TypedDict cannot be derived from a dataclass for a type checker, so each is written beside
its dataclass: these tests hold the two together, and a real model's shape (a hybrid with a
state-space mixer, and a vision-language one) round-trips through the stored form.
"""

from dataclasses import fields

import torch
from transformers import AutoModelForCausalLM

from infermeter.experiments.coverage import tiny_config
from infermeter.models.census import Census, CensusDoc, LayerCensus, LayerCensusDoc, census_of
from infermeter.models.info import VisionInfo, VisionInfoDoc
from infermeter.models.mixers import MixerShape, MixerShapeDoc
from infermeter.models.shape import Shape, ShapeDoc, VisionShape, VisionShapeDoc
from infermeter.run.environment import GitDoc, git_state
from tests.helpers import assert_rows_are, doc_keys


def test_each_document_names_exactly_its_dataclasses_fields():
    for cls, doc in [
        (Shape, ShapeDoc),
        (VisionShape, VisionShapeDoc),
        (Census, CensusDoc),
        (LayerCensus, LayerCensusDoc),
        (MixerShape, MixerShapeDoc),
        (VisionInfo, VisionInfoDoc),
    ]:
        assert {f.name for f in fields(cls)} == doc_keys(doc), cls.__name__


def test_a_hybrid_models_census_round_trips_through_its_stored_form():
    config, _ = tiny_config("mamba2")
    torch.manual_seed(0)
    census = census_of(AutoModelForCausalLM.from_config(config).eval())
    stored = census.to_dict()
    assert_rows_are([stored], CensusDoc)
    assert_rows_are(stored["layers"], LayerCensusDoc)
    mixers = [m for layer in stored["layers"] for m in layer["mixers"]]
    assert mixers and all(set(m) == doc_keys(MixerShapeDoc) for m in mixers)
    assert Census.from_dict(stored) == census
    shape = Shape("mamba2", 2, 64, 4, 4, 16, 128, True, 256, census=census)
    assert_rows_are([shape.to_dict()], ShapeDoc)
    assert Shape.from_dict(shape.to_dict()) == shape


def test_the_git_state_of_this_work_tree_is_its_document():
    got = git_state()
    if got is not None:  # a source tree without .git (an sdist) has none
        assert set(got) == doc_keys(GitDoc) and len(got["commit"]) == 40
