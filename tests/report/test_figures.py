"""Sweep figures carry their uncertainty: whiskers, and a mark where neighbours overlap."""

import csv

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from infermeter.report.figures import _draw_intervals, breakdown_figure


def _row(top_k, ttft, decode, total, lo, hi):
    stat = {"p50": total, "median_ci95_low": lo, "median_ci95_high": hi}
    return {
        "config": {"top_k": top_k},
        "ttft_ms": {"p50": ttft},
        "decode_ms": {"p50": decode},
        "total_ms": stat,
        "samples": 5,
        "run_id": f"r{top_k}",
    }


DOC = {
    "meta": {"model": "tiny", "knobs": {"top_k": [1, 2, 4]}},
    "summary": [
        _row(1, 10.0, 20.0, 30.0, 29.0, 31.0),
        _row(2, 10.5, 20.0, 30.5, 29.5, 32.0),  # overlaps top_k=1: not distinguishable
        _row(4, 15.0, 25.0, 40.0, 39.0, 41.0),
    ],
}


def test_neighbours_whose_intervals_overlap_are_marked_and_others_are_not():
    fig, ax = plt.subplots()
    series = {"prefill": [10.0, 10.5, 15.0], "decode": [20.0, 20.0, 25.0]}
    assert _draw_intervals(ax, DOC["summary"], series, "total_ms") == [1]
    marks = [t.get_text() for t in ax.texts]
    assert marks == ["≈"]
    # the whiskers span each median's interval around the bar's top
    (bars,) = [c for c in ax.containers if hasattr(c, "lines")]
    segments = bars.lines[2][0].get_segments()
    assert [tuple(seg[:, 1]) for seg in segments] == [(29.0, 31.0), (29.5, 32.0), (39.0, 41.0)]
    plt.close(fig)


def test_the_figure_csv_holds_the_intervals_it_draws(tmp_path):
    files = breakdown_figure(DOC, "top_k", tmp_path, "topk")
    with open(tmp_path / "topk.csv") as f:
        rows = list(csv.DictReader(f))
    assert [r["total_ms_ci95_low"] for r in rows] == ["29.0", "29.5", "39.0"]
    # each number once: the stacked phases are the medians' columns (issue 59: the CSV held
    # both `prefill (TTFT)_ms` and `ttft_ms`)
    assert "ttft_ms" in rows[0] and not any("(TTFT)" in k for k in rows[0])
    assert (tmp_path / "topk.png") in files and (tmp_path / "topk.png").stat().st_size > 10_000


def test_a_figure_per_group_is_named_by_the_other_knobs_values():
    """Issue 59: `plot` named the figures of a two-knob sweep by panel index ("-1", "-2");
    each is now named by the values it holds, in characters every file system takes."""
    from infermeter.report.figures import MAX_SUFFIX_CHARS, _group_suffix

    assert _group_suffix("top_k=2", 0) == "-top_k=2"
    assert _group_suffix("top_k=2, batch_size=4", 1) == "-top_k=2-batch_size=4"
    assert _group_suffix("decoding=prompt_lookup:3, model=org/name", 0) == (
        "-decoding=prompt_lookup_3-model=org_name"
    )
    long = _group_suffix(", ".join(f"knob{i}={i}" for i in range(40)), 6)
    assert len(long) <= MAX_SUFFIX_CHARS + 4 and long.endswith("-7")
    assert _group_suffix("", 2) == "-3"


def test_a_panel_holding_next_to_nothing_says_so():
    """Issue 59: the sparsity panel was all zeros without a word, and the entropy heatmap's
    colours spanned 4.255-4.259 nats, making noise look like structure."""
    import math

    from infermeter.report.run_figures import _flat_note

    assert _flat_note([[0.0, 0.0], [0.0, math.nan]], "sparsity") == (
        "0 in every head: no weight near 0"
    )
    assert _flat_note([[0.0, 0.2]], "sparsity") is None
    flat = _flat_note([[4.255, 4.259], [4.257, 4.256]], "entropy")
    assert flat == "every head 4.255-4.259 nats (within 1%): drawn from 0"
    assert _flat_note([[1.0, 3.0]], "entropy") is None
    assert _flat_note([[math.nan]], "entropy") is None
