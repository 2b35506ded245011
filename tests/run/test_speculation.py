"""Speculative decoding through `profile`: what it did, timed per token, and the greedy check."""

import pytest
from typer.testing import CliRunner

from infermeter import RunConfig, UserError, profile
from infermeter.analysis.analyze import speculation_findings
from infermeter.cli.app import app
from infermeter.knobs.registry import get_knob
from infermeter.run.speculation import SpeculationDoc, SpeculationSampleDoc
from infermeter.workloads.decoding import parse_decoding
from tests.helpers import assert_one_line_error, doc_keys

REPEAT = ("the cat sat on the mat and the dog sat on the log. " * 6).strip()


def _run(tiny_llama, decoding, **kw):
    config = RunConfig(
        decoding=decoding, new_tokens=24, samples=2, warmup=1, energy="off", prompts=(REPEAT,),
        **kw,
    )  # fmt: skip
    return profile(config, loaded=tiny_llama)


def test_prompt_lookup_accepts_tokens_and_keeps_the_greedy_output(tiny_llama):
    greedy = _run(tiny_llama, "greedy")
    run = _run(tiny_llama, "prompt_lookup:4")
    spec = run.checks["speculation"]
    assert set(spec) == doc_keys(SpeculationDoc) and set(spec["per_sample"][0]) == doc_keys(
        SpeculationSampleDoc
    )
    assert spec["kind"] == "prompt_lookup" and spec["matches_greedy"] is True
    assert [s.output_text for s in run.measured] == [s.output_text for s in greedy.measured]
    assert spec["tokens"] == 2 * 24 and spec["draft_forwards"] == 0
    assert spec["proposed"] > 0 and 0 < spec["accepted"] <= spec["proposed"]
    assert spec["target_forwards"] < spec["tokens"]  # fewer forwards than tokens: it paid
    assert spec["tokens_per_target_forward"] == pytest.approx(
        spec["tokens"] / spec["target_forwards"]
    )
    assert spec["acceptance_rate"] == pytest.approx(spec["accepted"] / spec["proposed"])
    # every token has its time; tokens accepted together arrive together (0 ms apart), so
    # the zeros are the accepted tokens (those the prefill's forward accepted are in its TTFT)
    for s in run.measured:
        assert s.new_tokens == 24 and len(s.step_ms) == 23
    zeros = sum(1 for s in run.measured for x in s.step_ms if x == 0.0)
    assert 0 < zeros <= spec["accepted"] == spec["tokens"] - spec["target_forwards"]
    verdict = get_knob("decoding").verify(tiny_llama, "prompt_lookup:4", run)
    assert verdict["target_forwards"] == spec["target_forwards"]


def test_a_draft_identical_to_the_target_has_every_proposal_accepted(tiny_llama):
    run = _run(tiny_llama, "assisted:tiny-llama")  # the same preset and seed: the same weights
    spec = run.checks["speculation"]
    assert spec["matches_greedy"] is True and spec["draft_forwards"] > 0
    assert spec["acceptance_rate"] == 1.0 and spec["draft_ms_per_step"] > 0
    assert run.phases["draft_load_ms"] > 0
    assert not [f for f in speculation_findings(run) if f.id.startswith("speculation")]


def test_self_speculation_from_the_first_blocks_keeps_the_greedy_output(tiny_llama):
    run = _run(tiny_llama, "early_exit:2")
    spec = run.checks["speculation"]
    assert spec["kind"] == "early_exit" and spec["draft_forwards"] > 0
    assert spec["matches_greedy"] is True
    # random weights: the first two blocks rarely agree with all four, and the run says so
    low = [f for f in speculation_findings(run) if f.id == "speculation-low-acceptance"]
    assert (spec["acceptance_rate"] < 0.3) == bool(low)


def test_a_changed_output_is_a_high_finding(tiny_llama):
    run = _run(tiny_llama, "prompt_lookup:2")
    run.checks["speculation"].update(matches_greedy=False, first_difference_at_token=7)
    (finding,) = [f for f in speculation_findings(run) if f.severity == "high"]
    assert finding.id == "speculation-changed-output" and "token 7" in finding.title


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("beam", "unknown decoding"),
        ("assisted:", "needs a draft model"),
        ("prompt_lookup:0", "whole number >= 1"),
        ("early_exit:x", "whole number >= 1"),
    ],
)
def test_bad_decoding_values_name_the_fix(value, problem):
    with pytest.raises(UserError, match=problem):
        parse_decoding(value)
    with pytest.raises(UserError, match=problem):
        RunConfig(decoding=value).validate()


def test_speculation_errors_from_the_cli_are_one_line(tmp_path):
    runner = CliRunner()
    base = ["profile", "--new-tokens", "4", "--samples", "1", "--energy", "off"]
    db = ["--db", str(tmp_path / "r.db")]
    r = runner.invoke(app, [*base, "--decoding", "early_exit:9", *db])  # tiny-llama: 4 blocks
    assert_one_line_error(r, "early_exit:9", "early_exit:1 to early_exit:3")
    r = runner.invoke(app, [*base, "--decoding", "prompt_lookup:3", "--batch-size", "2", *db])
    assert_one_line_error(r, "one sequence at a time", "--batch-size 1")
    r = runner.invoke(app, [*base, "--decoding", "assisted:no-such-model-here", *db])
    assert r.exit_code != 0 and "Traceback" not in r.output


@pytest.mark.parametrize("decoding", ["prompt_lookup:3"])  # early_exit: benchmarks/speculation
def test_speculation_on_a_real_model_keeps_its_greedy_output(smollm2, decoding):
    """SmolLM2-135M (trained, 30 blocks) in float32: speculation must not change its text."""
    config = RunConfig(
        model="smollm2-135m", decoding=decoding, new_tokens=20, samples=1, warmup=0,
        energy="off", prompt_kind="repetitive", prompt_tokens=64,
    )  # fmt: skip
    run = profile(config, loaded=smollm2)
    spec = run.checks["speculation"]
    assert spec["matches_greedy"] is True, spec
    assert spec["tokens"] == 20 and spec["target_forwards"] <= 20
    if decoding.startswith("early_exit"):
        assert spec["draft_forwards"] > 0 and spec["draft_ms_per_step"] > 0
