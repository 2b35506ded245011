"""Every recipe's figure (and the load, predict and history figures) is readable: no text
overprints another and no legend covers data, judged from matplotlib's own extents (issue 37)."""

from types import SimpleNamespace

import pytest

from infermeter.experiments.recipes import EXPERIMENTS
from infermeter.experiments.runner import draw
from infermeter.report import figure_check
from infermeter.report.figure_check import figure_problems

INFO = SimpleNamespace(
    max_positions=4096, experts=8, is_moe=True, layers=30, vision=None, spec="smollm2-135m"
)


@pytest.fixture
def problems(monkeypatch):
    found: dict[str, list[str]] = {}
    monkeypatch.setattr(
        figure_check, "FIGURE_HOOKS", [lambda fig, stem: found.update({stem: figure_problems(fig)})]
    )
    return found


def _sweep_doc(knobs):
    """A sweep document over a recipe's grid: latencies growing with the point's index."""
    (x, values), *_ = knobs.items()
    rows = []
    for i, v in enumerate(values):
        ttft, decode = 5.0 * (1.6**i), 40.0 * (1.3**i)
        stat = lambda m: {"p50": m, "median_ci95_low": 0.97 * m, "median_ci95_high": 1.03 * m}  # noqa: E731
        rows.append(
            {
                "config": {x: v},
                "ttft_ms": stat(ttft),
                "decode_ms": stat(decode),
                "total_ms": stat(ttft + decode),
                "tpot_ms": stat(decode / 8),
                "tokens_per_s": stat(1000 * 9 / (ttft + decode)),
                "samples": 5,
                "run_id": f"r{i}",
                "prefill_components_ms": {"attention": ttft * 0.3, "mlp": ttft * 0.5},
                "top1_agreement": 1.0 - 0.05 * i,
                "compile_first_call_ms": 900.0,
                "checks": {},
                "phases": {"compile_first_call_ms": 900.0},
            }
        )
    return {"meta": {"model": "smollm2-135m", "knobs": {x: values}}, "summary": rows}


@pytest.mark.parametrize("name", sorted(n for n, e in EXPERIMENTS.items() if not e.serving))
def test_every_recipes_figure_is_readable(name, tmp_path, problems):
    exp = EXPERIMENTS[name]
    doc = _sweep_doc(exp.grid(INFO, False, False))
    assert draw(exp, doc, tmp_path)
    assert problems and all(v == [] for v in problems.values()), problems


def test_the_checks_catch_overprinted_labels_and_a_legend_on_data():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(3, 2))
    labels = [f"shortcuts:frequency_threshold=0.{i}" for i in range(5)]
    ax.bar(labels, [1, 2, 3, 4, 5], label="latency")
    ax.plot([0, 4], [4.8, 4.8], label="line")
    ax.legend(loc="upper left")
    found = figure_problems(fig)
    assert any("overprints" in f for f in found)
    assert any("legend covers" in f for f in found)
    plt.close(fig)


def test_predict_load_and_history_figures_are_readable(tmp_path, problems):
    from infermeter import Store, predict
    from infermeter.report.history_figure import history_figure
    from infermeter.report.predict_figures import predict_figures

    doc = predict(
        "smollm2-135m", "h100-sxm", batches=(1, 4, 16, 64), store=Store(tmp_path / "r.db")
    )
    assert predict_figures(doc, tmp_path)
    points = [
        {"run_id": f"r{i}", "created": f"2026-11-{1 + i:02d}T10:00:00", "median": 10.0 + (i > 5),
         "ci95_low": 9.8, "ci95_high": 11.2, "samples": 5, "commit": None, "dirty": None}
        for i in range(12)
    ]  # fmt: skip
    change = {"index": 6, "change_pct": 10.0}
    hist = {"metric": "tpot_ms", "configurations": [
        {"label": "prompt_tokens=16 · minimal · cpu", "points": points, "change_points": [change]}
    ]}  # fmt: skip
    assert history_figure(hist, tmp_path)
    assert set(problems) >= {"history"} and all(v == [] for v in problems.values()), problems


def test_a_deep_moe_runs_figures_are_readable(tiny_moe, tmp_path, problems):
    """Every figure of a run that has them all: per-block statistics, heads, experts."""
    from infermeter import RunConfig, profile
    from infermeter.report.run_figures import RUN_FIGURES

    config = RunConfig(model="tiny-qwen3-moe", new_tokens=4, samples=2, mode="deep", energy="off")
    run = profile(config, loaded=tiny_moe)
    drawn = [p.name for fig in RUN_FIGURES for p in fig(run, tmp_path) if p.suffix == ".png"]
    assert {"block_statistics.png", "attention_heads.png", "experts.png"} <= set(drawn)
    heads = run.layers["attention_heads"]
    assert {r["head"] for r in heads} == {0, 1, 2, 3}  # tiny-qwen3-moe's 4 query heads
    assert set(problems) >= {"attention_heads", "experts"}
    assert all(v == [] for v in problems.values()), problems


@pytest.mark.parametrize(
    ("lo", "hi", "labelled"),
    [(1.0, 2.0, {"1", "2"}), (1.0, 1000.0, {"1", "10", "100", "1000"})],
)
def test_log_axes_are_labelled_in_plain_numbers(lo, hi, labelled):
    """Issue 59: capacity.png's log axis read "1" and "2x10^0" (within a decade matplotlib
    labels the minor ticks in scientific notation) and the load-prediction plot crowded
    "4x10^2" beside "10^3". Within a decade: plain minor labels; over decades: plain majors
    and no minor labels."""
    import matplotlib.pyplot as plt

    from infermeter.report.figures import plain_log_ticks

    fig, ax = plt.subplots()
    ax.plot([lo, hi], [1, 2])
    ax.set_xscale("log")
    ax.set_xlim(lo * 0.95, hi * 1.05)
    plain_log_ticks(ax, "x")
    fig.canvas.draw()
    left, right = ax.get_xlim()
    shown = {  # the labels of the ticks inside the axis (matplotlib keeps some beyond it)
        t.get_text()
        for t in [*ax.get_xticklabels(), *ax.get_xticklabels(minor=True)]
        if t.get_text() and left <= t.get_position()[0] <= right
    }
    plt.close(fig)
    assert shown >= labelled, shown
    assert not any("10^" in t or "times" in t or "$" in t for t in shown), shown
    if hi / lo >= 10:
        assert shown == labelled, shown  # no minor label crowds the majors


def test_the_check_catches_a_cut_marker_and_a_label_outside_its_axes():
    import matplotlib.pyplot as plt

    from infermeter.report.figure_check import clipped

    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([0, 1, 2], [1, 2, 3], marker="o", label="peak")
    ax.set_ylim(0, 3)  # the top point sits on the edge
    ax.annotate("400/s", (2, 2), textcoords="offset points", xytext=(4, 4))
    found = clipped(fig)
    plt.close(fig)
    assert any("'peak' marker is cut" in f for f in found), found
    assert any("'400/s' runs outside" in f for f in found), found


def test_memory_and_load_sweep_figures_are_readable(tmp_path, problems):
    """Issue 59: memory.png cut its top point; the latency-vs-throughput plot overprinted
    neighbouring rates' labels ("1/s" on "2/s") and ran the last one under the legend."""
    from infermeter.report.load_figures import load_sweep_figures
    from infermeter.report.run_figures import memory_figure

    samples = [
        SimpleNamespace(index=i, warmup=i == 0, rss_peak_mib=v, peak_allocated_mib=None)
        for i, v in enumerate([900, 1200, 1210, 1215, 1400])
    ]
    assert memory_figure(SimpleNamespace(samples=samples, model_info={"spec": "m"}), tmp_path)
    rates = [1, 2, 4, 8, 400]
    tput = [1.45, 0.73, 2.8, 5.2, 34.6]  # neighbours on top of each other, the last at the edge
    points = [
        {"rate": r, "throughput_rps": t, "ttft_ms_p99": 50.0, "ttft_ms_p50": 30.0,
         "e2e_ms_p99": 430.0 + i, "e2e_ms_p50": 410.0, "goodput_rps": None,
         "j_per_request_p50": 2.0 - 0.1 * i}
        for i, (r, t) in enumerate(zip(rates, tput, strict=True))
    ]  # fmt: skip
    doc = {"summary": points, "knee_rate": 400, "meta": {"model": "m", "spec": {"server": "x"}}}
    assert load_sweep_figures(doc, tmp_path)
    assert {"memory", "latency_vs_throughput", "energy_vs_latency"} <= set(problems)
    assert all(v == [] for v in problems.values()), problems


def test_a_rate_none_of_whose_requests_finished_is_drawn_without_it(tmp_path, problems):
    """Its percentiles are None: the curve's label at (throughput, None) raised a TypeError and
    the sweep lost its figures; the knee stops before it."""
    import math

    from infermeter.report.load_figures import load_sweep_figures
    from infermeter.serving.load import knee, summarize_load, sweep_point

    def rows(ms: float, failed: bool) -> list:
        return [
            {"sample_id": i, "arrival_ms": 0.0, "queue_ms": 1.0, "ttft_ms": math.nan if failed
             else ms, "tpot_ms": math.nan if failed else 5.0, "e2e_ms": math.nan if failed
             else 4 * ms, "ttst_ms": 5.0, "itl_ms": [] if failed else [5.0], "prompt_tokens": 8,
             "new_tokens_asked": 2, "output_tokens": 0 if failed else 2, "server_output_tokens":
             None, "error": "HTTP 500" if failed else None, "session": None, "turn": 0}
            for i in range(4)
        ]  # fmt: skip

    runs = [(1.0, rows(10.0, False)), (2.0, rows(12.0, False)), (4.0, rows(0.0, True))]
    points = [sweep_point(rate, summarize_load(r, 2.0)) for rate, r in runs]
    assert points[-1]["e2e_ms_p99"] is None and knee(points) == 2.0
    doc = {"summary": points, "knee_rate": 2.0, "meta": {"model": "m", "spec": {"server": "x"}}}
    assert load_sweep_figures(doc, tmp_path)
    assert problems["latency_vs_throughput"] == []
