"""`infermeter report` on a stored run and a stored sweep: the files and the run's numbers."""

import csv
import re

from typer.testing import CliRunner

from infermeter import RunConfig, Store, profile
from infermeter.cli.app import app
from infermeter.instrument.probes import (
    ActivationRowDoc,
    AttentionHeadRowDoc,
    AttentionRowDoc,
    KillRowDoc,
    RoutingRowDoc,
)
from infermeter.instrument.tables import LayerRowDoc, MoeLoadRowDoc, PartRowDoc
from infermeter.run.sweep import SweepSpec, run_sweep
from tests.helpers import assert_one_line_error, assert_rows_are

#: the tables of a deep run of a MoE model (energy off), and their row documents
DEEP_MOE_TABLES = {
    "layers": LayerRowDoc,
    "parts": PartRowDoc,
    "activations": ActivationRowDoc,
    "attention": AttentionRowDoc,
    "attention_heads": AttentionHeadRowDoc,
    "mlp_kill": KillRowDoc,
    "moe_routing": RoutingRowDoc,
    "moe_load": MoeLoadRowDoc,
}

runner = CliRunner()


def test_run_report_files_hold_the_runs_numbers(tiny_llama, tmp_path):
    db = str(tmp_path / "r.db")
    run = profile(
        RunConfig(prompt_tokens=32, new_tokens=6, samples=2, mode="standard", energy="off"),
        loaded=tiny_llama,
        sink=Store(db),
    )
    calibrate = ["calibrate", "--quick", "--no-curves", "--device", "cpu", "--db", db]
    assert runner.invoke(app, calibrate).exit_code == 0
    out = tmp_path / "rep"
    r = runner.invoke(app, ["report", run.run_id[:7], "--out", str(out), "--db", db])
    assert r.exit_code == 0, r.output
    for name in (
        "report.md",
        "report.html",
        "summary.csv",
        "samples.csv",
        "timeline.png",
        "layers.png",
        "decode_steps.png",
        "roofline.png",
        "layers_parts.csv",
        "analysis.json",
        "run.json",
    ):
        assert (out / name).exists(), name
    summary = {row["metric"]: row for row in csv.DictReader((out / "summary.csv").open())}
    ttft = run.summary()["ttft_ms"].mean
    assert float(summary["ttft_ms"]["mean"]) == ttft
    # the page names the metrics and columns for people (issue 59: raw keys were shown); the
    # CSV keeps the keys a program reads
    md = (out / "report.md").read_text()
    assert "| metric | samples | median | 95% CI low | 95% CI high |" in md
    assert "| prefill (TTFT) (ms) |" in md and "median_ci95_low" not in md
    samples = list(csv.DictReader((out / "samples.csv").open()))
    assert [float(s["ttft_ms"]) for s in samples] == [s.ttft_ms for s in run.samples]
    page = (out / "report.html").read_text()
    # every figure written is in the page (memory only when it moved: flat is a sentence)
    pngs = list(out.glob("*.png"))
    assert len(pngs) >= 4 and page.count("data:image/png;base64,") == len(pngs)
    assert not re.search(r"(src|href)=['\"]https?://", page)  # opens offline
    assert page.count("<div class='scroll'><table>") == page.count("<table>")  # never off the page
    assert f"{ttft:,.4g}" in page and "memory-bound-decode" in page
    # a person reads the headline and the findings first, the long tables last
    heads = re.findall(r"<h2>([^<]+)</h2>", page)
    assert heads[0] == "Findings" and heads[-1] == "Samples"
    assert heads.index("Summary") < heads.index("Timeline") < heads.index("Roofline")
    med = run.summary()["ttft_ms"].p50
    assert page.index("class='headline'") < page.index("<h2>Findings")
    assert f"TTFT {med:,.4g} ms" in page
    md = (out / "report.md").read_text()
    assert "![timeline](timeline.png)" in md and f"{ttft:,.4g}" in md
    # a second report into the same folder needs --overwrite; nothing is touched without it
    (out / "report.md").write_text("kept")
    r = runner.invoke(app, ["report", run.run_id[:7], "--out", str(out), "--db", db])
    assert_one_line_error(r, "holds a previous report", "--overwrite")
    assert (out / "report.md").read_text() == "kept"
    r = runner.invoke(app, ["report", run.run_id, "--out", str(out), "--db", db, "--overwrite"])
    assert r.exit_code == 0 and (out / "report.md").read_text() != "kept"


def test_sweep_report_and_unknown_target(tiny_moe, tmp_path):
    db = str(tmp_path / "r.db")
    base = RunConfig(
        model="tiny-qwen3-moe", new_tokens=3, samples=1, warmup=0, energy="off", prompt_tokens=32
    )
    sweep = run_sweep(SweepSpec(base, {"top_k": ["1", "2"]}), Store(db), loaded=tiny_moe)
    out = tmp_path / "srep"
    r = runner.invoke(app, ["report", sweep.sweep_id, "--out", str(out), "--db", db])
    assert r.exit_code == 0, r.output
    rows = list(csv.DictReader((out / "summary.csv").open()))
    assert [int(r["top_k"]) for r in rows] == [1, 2]
    assert (out / "sweep-top_k.png").exists() and (out / "report.html").exists()
    r = runner.invoke(app, ["report", "abcdef", "--out", str(out), "--db", db])
    assert_one_line_error(r, "no run or sweep 'abcdef'")


def test_a_deep_moe_runs_report_draws_its_block_statistics_and_experts(tiny_moe, tmp_path):
    """Deep mode's tables are figures in the report too, readable (issue 37, item 2)."""
    import csv as _csv

    from infermeter.report import figure_check
    from infermeter.report.figure_check import figure_problems

    db = str(tmp_path / "r.db")
    run = profile(
        RunConfig(
            model="tiny-qwen3-moe", prompt_tokens=24, new_tokens=4, samples=2, mode="deep",
            energy="off",
        ),
        loaded=tiny_moe,
        sink=Store(db),
    )  # fmt: skip
    # every table is its row document, as measured and as stored
    for kept in (run, Store(db).get(run.run_id)):
        assert set(kept.layers) == set(DEEP_MOE_TABLES)
        for name, doc in DEEP_MOE_TABLES.items():
            assert_rows_are(kept.layers[name], doc)
    found: dict[str, list[str]] = {}
    hooks = [lambda fig, stem: found.update({stem: figure_problems(fig)})]
    saved, figure_check.FIGURE_HOOKS[:] = list(figure_check.FIGURE_HOOKS), hooks
    try:
        out = tmp_path / "rep"
        r = runner.invoke(app, ["report", run.run_id, "--out", str(out), "--db", db])
        assert r.exit_code == 0, r.output
    finally:
        figure_check.FIGURE_HOOKS[:] = saved
    assert {"block_statistics", "experts"} <= set(found)
    assert all(v == [] for v in found.values()), found
    stats = list(_csv.DictReader((out / "block_statistics.csv").open()))
    assert {s["statistic"] for s in stats} >= {"entropy", "kill_ratio", "imbalance"}
    experts = list(_csv.DictReader((out / "experts.csv").open()))
    layers = {e["layer"] for e in experts}
    for layer in layers:  # each block's shares add up to one
        total = sum(float(e["share"]) for e in experts if e["layer"] == layer)
        assert abs(total - 1.0) < 1e-6
    assert "![experts](experts.png)" in (out / "report.md").read_text()


def test_flat_memory_is_a_sentence_and_memory_that_moves_is_a_figure(tmp_path):
    """A full-width figure of a flat RSS line says less than one line of text does."""
    import dataclasses

    import numpy as np

    from infermeter.report.build import run_report
    from infermeter.report.run_figures import flat_memory, memory_figure
    from tests.helpers import history_run

    run = history_run(0, 5.0, np.random.default_rng(0))

    def with_rss(values):
        samples = [
            dataclasses.replace(s, memory={"rss_peak_mib": v})
            for s, v in zip(run.samples, values, strict=True)
        ]
        return dataclasses.replace(run, samples=samples)

    flat = with_rss([612.0, 612.4, 612.1, 613.0, 612.2])  # within 1 MiB of 613
    assert flat_memory(flat) == (
        "process RSS peak 613 MiB in every sample (within 1.0 MiB of each other)"
    )
    assert memory_figure(flat, tmp_path / "flat") == []
    files = run_report(flat, tmp_path / "flat")
    assert not any(f.name == "memory.png" for f in files)
    assert "process RSS peak 613 MiB in every sample" in (tmp_path / "flat/report.md").read_text()

    growing = with_rss([612.0, 640.0, 668.0, 700.0, 731.0])  # a leak: 19% over the run
    assert flat_memory(growing) is None
    pngs = [p.name for p in memory_figure(growing, tmp_path / "grows")]
    assert pngs == ["memory.png", "memory.csv"]
