"""Vision-language layouts beyond LLaVA: Gemma 3 (pooled SigLIP) and Idefics3 / SmolVLM."""

import pytest

from infermeter import RunConfig, load_model, profile
from infermeter.analysis.analyze import analyze_run
from infermeter.errors import UserError
from infermeter.knobs import KNOBS


@pytest.mark.parametrize("name", ["tiny-gemma3-vlm", "tiny-smolvlm"])
def test_vlm_is_profiled_with_its_image_and_parts_timed_apart(name):
    lm = load_model(name, device="cpu")
    run = profile(
        RunConfig(
            model=name, prompt_tokens=16, new_tokens=3, samples=1, mode="standard", energy="off"
        ),
        loaded=lm,
    )
    assert [s.vision_tokens for s in run.samples] == [16, 16]  # warm-up and measured
    assert not any("text-only" in n for n in run.notes)
    kinds = {(r["phase"], r["kind"]) for r in run.layers["layers"]}
    assert {("vision", "vision_tower"), ("vision", "projector"), ("prefill", "block")} <= kinds
    roof = analyze_run(run)["roofline"]
    family = lm.info.vision.family
    assert any(family in why for why in roof["approximate"])


def test_vision_tokens_knob_is_refused_on_a_tower_with_its_own_token_count():
    lm = load_model("tiny-smolvlm", device="cpu")
    with pytest.raises(UserError) as e:
        KNOBS["vision_tokens"].check(36, lm)
    assert "idefics3_vision tower" in e.value.problem and "tiny-llava" in e.value.fix
