"""`bench attention`: every kind computes dense attention under its mask; sparsity and FLOPs
are counted from the mask itself; the CLI and the report work as a user runs them."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from infermeter.bench.attention import (
    AttentionSpec,
    available_sdpa_backends,
    dense_mask,
    expand_kinds,
    run_benchmark,
    run_point,
)
from infermeter.cli.app import app
from infermeter.errors import UserError
from tests.helpers import assert_one_line_error

runner = CliRunner()
SMALL = AttentionSpec(
    seq_lens=(192,),
    heads=4,
    kv_heads=2,
    head_dim=32,
    window=40,
    block_size=32,
    density=0.3,
    warmup=1,
    samples=2,
    flex_compile="off",
)


@pytest.mark.parametrize(
    "kind", ["eager", "sdpa-math", "sdpa-flash", "flex-causal", "sliding-window", "block-sparse"]
)
def test_every_kind_agrees_with_dense_attention_under_its_mask(kind):
    point = run_point(kind, SMALL, 192)
    assert point.max_abs_diff_vs_dense < 1e-5
    assert len(point.latency_ms) == 2 and all(ms > 0 for ms in point.latency_ms)
    assert point.peak_memory_mib and point.peak_memory_mib[0] > 0


def test_grouped_query_heads_pair_as_transformers_does():
    """Query head h reads kv head h // groups (repeat_interleave), the reference included."""
    import torch
    import torch.nn.functional as F

    from infermeter.bench.attention import make_qkv, reference_attention

    q, k, v = make_qkv(SMALL, 64)
    ref = reference_attention(q, k, v, dense_mask("eager", SMALL, 64))
    for h in range(4):
        g = slice(h // 2, h // 2 + 1)
        expected = F.scaled_dot_product_attention(q[:, h : h + 1], k[:, g], v[:, g], is_causal=True)
        assert torch.allclose(ref[:, h : h + 1], expected, atol=1e-5)
    wrong = F.scaled_dot_product_attention(q[:, 1:2], k[:, 1:2], v[:, 1:2], is_causal=True)
    assert not torch.allclose(ref[:, 1:2], wrong, atol=1e-3)  # the pairing matters here
    assert run_point("eager", SMALL, 64).max_abs_diff_vs_dense < 1e-5


def test_block_sparse_sparsity_is_the_masks():
    spec = SMALL
    n, bs = 192, spec.block_size
    # the pattern, rebuilt here independently: seeded keep table, diagonal kept, causal
    import torch

    keep = torch.rand(n // bs, n // bs, generator=torch.Generator().manual_seed(spec.seed))
    keep = (keep < spec.density).numpy() | np.eye(n // bs, dtype=bool)
    q, k = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    expected = keep[q // bs, k // bs] & (q >= k)
    assert (dense_mask("block-sparse", spec, n).numpy() == expected).all()
    point = run_point("block-sparse", spec, n)
    assert point.mask_sparsity == pytest.approx(1 - expected.mean())
    assert point.useful_flop_count == 4 * 32 * 4 * expected.sum()  # 4 x head_dim x heads
    assert point.executed_flop_count == 4 * 32 * 4 * n * n  # uncompiled: every score


def test_sliding_window_and_causal_masks():
    causal = dense_mask("flex-causal", SMALL, 8).numpy()
    assert (causal == np.tril(np.ones((8, 8), dtype=bool))).all()
    window = dense_mask("sliding-window", AttentionSpec(window=3), 8).numpy()
    assert window[7].tolist() == [False] * 5 + [True] * 3


@pytest.mark.slow
def test_compiled_flex_skips_the_tiles_the_mask_drops():
    spec = AttentionSpec(**{**SMALL.to_dict(), "flex_compile": "on"})
    point = run_point("block-sparse", spec, 128)
    assert point.max_abs_diff_vs_dense < 1e-5
    assert point.compile_ms and point.compile_ms > 0
    # executed = kept 32x32 tiles; at least the useful entries, at most the full square
    assert point.useful_flop_count <= point.executed_flop_count < 4 * 32 * 4 * 128 * 128
    assert point.skipped_fraction > 0.3


def test_sdpa_expands_to_the_backends_that_run_here():
    backends = available_sdpa_backends("cpu")
    assert "math" in backends
    kinds = expand_kinds(["eager", "sdpa"], __import__("torch").device("cpu"))
    assert kinds == ["eager", *(f"sdpa-{b}" for b in backends)]
    with pytest.raises(UserError, match="unknown attention kind 'dense2'"):
        expand_kinds(["dense2"], "cpu")


def test_document_shape_and_samples():
    doc = run_benchmark(
        AttentionSpec(**{**SMALL.to_dict(), "seq_lens": (32, 64), "kinds": ("eager", "sdpa-math")})
    )
    assert doc["meta"]["kind"] == "bench-attention"
    assert [(r["kind"], r["seq_len"]) for r in doc["summary"]] == [
        ("eager", 32),
        ("sdpa-math", 32),
        ("eager", 64),
        ("sdpa-math", 64),
    ]
    assert len(doc["all_samples"]) == 8
    row = doc["summary"][0]
    assert row["latency_ms"]["median_ci95_low"] <= row["latency_ms"]["p50"]
    assert row["achieved_flop_per_s"] > 0


def test_cli_table_json_out_and_report(tmp_path):
    args = [
        "bench",
        "attention",
        "--seq-lens",
        "32,64",
        "--kinds",
        "eager,block-sparse",
        "--heads",
        "2",
        "--head-dim",
        "32",
        "--block-size",
        "16",
        "--samples",
        "2",
        "--flex-compile",
        "off",
    ]
    r = runner.invoke(app, [*args, "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert {row["kind"] for row in doc["summary"]} == {"eager", "block-sparse"}
    r = runner.invoke(app, [*args, "--out", str(tmp_path / "b")], terminal_width=140)
    assert r.exit_code == 0, r.output
    assert "block-sparse" in r.output and "max |diff|" in r.output
    files = (
        "bench_attention.json",
        "attention_latency.png",
        "attention_memory.png",
        "attention_efficiency.png",
        "summary.csv",
        "report.md",
        "report.html",
    )
    for name in files:
        assert (tmp_path / "b" / name).stat().st_size > 0, name
    r = runner.invoke(
        app, ["report", str(tmp_path / "b" / "bench_attention.json"), "--out", str(tmp_path / "r")]
    )
    assert r.exit_code == 0, r.output
    md = (tmp_path / "r" / "report.md").read_text()
    assert "| block-sparse | 64 |" in md and "attention_latency.png" in md
    assert "data:image/png;base64," in (tmp_path / "r" / "report.html").read_text()


def test_space_separated_lists_as_in_the_reference_scripts():
    from tests.helpers import cli_here

    r = cli_here(
        "bench",
        "attention",
        "--seq-lens",
        "16",
        "32",
        "--kinds",
        "eager",
        "sdpa-math",
        "--samples",
        "1",
        "--json",
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [(x["kind"], x["seq_len"]) for x in doc["summary"]] == [
        ("eager", 16),
        ("sdpa-math", 16),
        ("eager", 32),
        ("sdpa-math", 32),
    ]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--kinds", "dense2"], "unknown attention kind"),
        (["--heads", "6", "--kv-heads", "4"], "multiple of --kv-heads"),
        (["--density", "0"], "--density"),
        (["--seq-lens", "abc"], "not a whole number"),
        (["--seq-lens", "60000"], "GiB of scores"),
        (["--flex-compile", "maybe"], "--flex-compile"),
    ],
)
def test_bad_options_are_one_line(args, needle):
    r = runner.invoke(app, ["bench", "attention", *args])
    assert_one_line_error(r, needle)
