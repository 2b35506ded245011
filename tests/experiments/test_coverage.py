"""Architecture coverage: a fast subset of transformers' decoder architectures, built tiny.

The whole matrix runs in benchmarks/architectures.py (docs/architectures.md); here one of each
kind the product must handle: dense, Conv1D, parallel blocks, multi-query, sliding windows,
MoE with and without shared experts, latent attention, ALiBi, and a state-space hybrid.
"""

import pytest

from infermeter.experiments.coverage import (
    FAST_SUBSET,
    LLAMA2_7B,
    causal_lm_types,
    check_architecture,
)

#: the state-space hybrid: its Mamba scan is fitted to torch's counts, so its decode is labelled
HYBRIDS = {"jamba"}


def test_the_subset_is_wide_and_installed():
    assert len(FAST_SUBSET) >= 12
    assert set(FAST_SUBSET) <= set(causal_lm_types())


@pytest.mark.parametrize("model_type", FAST_SUBSET)
def test_architecture_builds_generates_is_found_and_costed(model_type):
    cov = check_architecture(model_type)
    assert cov.error is None, cov.error
    assert cov.builds and cov.generates and cov.blocks_found and cov.deep_works
    assert cov.flop_ratio == pytest.approx(1.0, rel=0.01)
    if model_type in HYBRIDS:
        # the mixer layers' scan is fitted: exact for prompts, and decode is labelled
        assert cov.approximate == [
            "layers 0, 2: FLOPs beyond the census fitted to torch's counts of prompts "
            "(exact for prompts; decode steps extrapolated from the per-token terms)"
        ]
    else:
        assert cov.approximate == []


def test_encoder_decoders_are_skipped_with_the_reason():
    cov = check_architecture("bart")
    assert cov.skipped == "encoder-decoder" and not cov.builds


def test_a_llama_2_7b_config_is_costed_from_the_meta_device():
    """The figure calflops publishes for a 128-token forward, with no weights built."""
    from transformers import LlamaConfig

    from infermeter.analysis.costs import forward_costs, total
    from infermeter.models.shape import shape_of

    config = LlamaConfig(**LLAMA2_7B)
    flops = total(forward_costs(shape_of(config), tokens=128)).flop_count
    assert f"{flops:.3e}" == "1.700e+12"
