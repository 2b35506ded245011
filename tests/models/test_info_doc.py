"""The stored model document names every field of ModelInfo (the two are written apart: a
TypedDict cannot be derived from a dataclass for a type checker)."""

from dataclasses import fields

from infermeter.models.info import ModelInfo, ModelInfoDoc


def test_the_model_document_declares_every_model_info_field():
    declared = set(ModelInfoDoc.__annotations__)
    assert {f.name for f in fields(ModelInfo)} <= declared
    assert declared - {f.name for f in fields(ModelInfo)} == {"shape", "endpoint", "name"}
