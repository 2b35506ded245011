"""torch's counts of a forward, and the fit of what the module census cannot cost."""

import math

import pytest
import torch

from infermeter.analysis.costs import approximate, forward_costs, total
from infermeter.models.flopcount import (
    OUTSIDE,
    chunk_size,
    count_forward_flops,
    fit_residual,
    flop_check,
    residual_flop_count,
)
from infermeter.models.shape import shape_of


def _tiny(model_type):
    from transformers import AutoModelForCausalLM

    from infermeter.experiments.coverage import tiny_config

    config, _ = tiny_config(model_type)
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(config).eval()


def test_a_polynomial_residual_is_fitted_exactly_and_predicts_longer_prompts():
    cost = {n: 5 + 7 * n + 3 * n * n for n in (8, 16, 24, 32)}
    fit = fit_residual(cost, None)
    assert fit["exact"] and fit["chunk"] is None
    assert residual_flop_count(fit, 500, 500, cached=False) == pytest.approx(5 + 3500 + 750000)
    # a cached step: only the per-token terms, with every key seen
    assert residual_flop_count(fit, 1, 600, cached=True) == pytest.approx(7 + 3 * 600)


def test_a_chunked_residual_needs_lengths_in_three_chunks():
    def chunked(n):
        m = math.ceil(n / 64)
        return 11 * n + 1000 * m + 50 * m * m

    lengths = (8, 16, 24, 32, 72, 88, 136)
    fit = fit_residual({n: chunked(n) for n in lengths}, 64)
    assert fit["exact"]
    assert residual_flop_count(fit, 300, 300, cached=False) == pytest.approx(chunked(300))
    # with lengths in one chunk only, the chunk terms are not determined: not exact
    assert not fit_residual({n: chunked(n) for n in (8, 16, 24, 32)}, 64)["exact"]


def test_a_kernel_that_counts_one_chunk_more_at_whole_multiples_is_fitted_too():
    """xLSTM's kernel runs n // chunk + 1 chunks: 128 tokens of 64 are three chunks, not two."""

    def chunked(n):
        return 5 * n + 700 * (n // 64 + 1)

    lengths = (8, 16, 24, 32, 64, 72, 88, 128, 136)
    fit = fit_residual({n: chunked(n) for n in lengths}, 64)
    assert fit["exact"] and fit["chunk_rule"] == "floor+1"
    assert residual_flop_count(fit, 256, 256, cached=False) == pytest.approx(chunked(256))


def test_counts_that_follow_no_polynomial_are_not_called_exact():
    assert not fit_residual({n: 2**n for n in (8, 16, 24, 32)}, None)["exact"]
    # as many lengths as terms leaves nothing to check the fit with
    assert not fit_residual({8: 1, 16: 2, 24: 9}, None)["exact"]


def test_the_chunk_size_of_a_mamba2_mixer_and_of_a_gated_delta_rule_is_found():
    assert chunk_size(_tiny("bamba").model.layers[0]) == 256
    # Qwen3-Next keeps it as the default of the kernel function its forward calls
    assert chunk_size(_tiny("qwen3_next").model.layers[0]) == 64
    assert chunk_size(_tiny("llama").model.layers[0]) is None


def test_a_mamba_model_is_costed_by_formula_with_nothing_fitted():
    model = _tiny("mamba")
    check = flop_check(model)
    assert check["fits"] == {} and check["approximate"] == []
    shape = shape_of(model, flop_check=check)
    analytic = total(forward_costs(shape, tokens=100)).flop_count
    assert analytic == pytest.approx(count_forward_flops(model, tokens=100), rel=1e-9)
    assert approximate(shape) == []


def test_a_mixer_without_a_formula_is_fitted_and_labelled_for_decode():
    """ZAYA's convolutions (beside its attention, in no mixer of ours) are fitted, and said so."""
    model = _tiny("zaya")
    check = flop_check(model)
    assert set(check["fits"]) == {"0", "1"} and all(f["exact"] for f in check["fits"].values())
    shape = shape_of(model, flop_check=check)
    analytic = total(forward_costs(shape, tokens=100)).flop_count
    assert analytic == pytest.approx(count_forward_flops(model, tokens=100), rel=1e-9)
    assert approximate(shape) == [
        "layers 0-1: FLOPs beyond the census fitted to torch's counts of prompts "
        "(exact for prompts; decode steps extrapolated from the per-token terms)"
    ]


def test_a_model_the_census_costs_exactly_needs_no_fit_and_no_label():
    model = _tiny("llama")
    check = flop_check(model)
    assert check["fits"] == {} and check["approximate"] == []
    assert approximate(shape_of(model, flop_check=check)) == []


def test_work_outside_the_blocks_is_fitted_too():
    """BigBird's pooler runs on the first position only: a constant, not a per-token cost."""
    model = _tiny("big_bird")
    check = flop_check(model)
    assert OUTSIDE in check["fits"] and check["fits"][OUTSIDE]["exact"]
    shape = shape_of(model, flop_check=check)
    analytic = total(forward_costs(shape, tokens=64)).flop_count
    assert analytic == pytest.approx(count_forward_flops(model, tokens=64), rel=1e-9)
