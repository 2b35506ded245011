"""The dashboard in a real browser (Debian's chromium driven by Playwright).

A real `infermeter serve` process on 127.0.0.1, a real SQLite file, a real `infermeter profile`
in another process: the run list and a run page render, and a sample of the profile appears on
the live page while it runs. Screenshots go to the test's temp folder.
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from infermeter.cli.app import app

runner = CliRunner()

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
playwright = pytest.importorskip("playwright.sync_api", reason="the playwright package is missing")
if not os.path.exists(CHROMIUM):
    pytest.skip(
        "chromium is not installed (make test installs it with apt-get where it can)",
        allow_module_level=True,
    )

ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-dev-shm-usage",
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def server(tmp_path):
    """A profile and a 10-point sweep stored through the CLI in this process (a subprocess
    would add 10 s of imports each), then the dashboard on them in its own process."""
    db = tmp_path / "runs.db"
    common = ["--energy", "off", "--db", str(db)]
    r = runner.invoke(
        app,
        ["profile", "--new-tokens", "4", "--samples", "2", "--mode", "standard", *common],
    )
    assert r.exit_code == 0, r.output
    r = runner.invoke(
        app,
        [
            "sweep",
            "--knob",
            "prompt_tokens=8,16,32,64,128,256,512,1024,1536,2000",
            "--new-tokens",
            "2",
            "--samples",
            "3",
            "--warmup",
            "0",
            *common,
        ],
    )
    assert r.exit_code == 0, r.output
    yield from _serve(db)


def _serve(db):
    """`infermeter serve` on `db` in its own process: yields (url, db), stops it after."""
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "infermeter",
            "serve",
            "--port",
            str(port),
            "--db",
            str(db),
            "--poll-ms",
            "200",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            assert proc.poll() is None, proc.stderr.read()
            time.sleep(0.2)
    yield f"http://127.0.0.1:{port}", db
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail("infermeter serve did not stop on SIGTERM within 15 s")


def _fits(page, width: int) -> bool:
    """No horizontal scrollbar on the page itself."""
    return page.evaluate("document.documentElement.scrollWidth") <= width


def _plot(page, testid: str) -> dict:
    """What plotly drew in the chart `testid`: its traces' data and the axes it laid out."""
    # polled from here: wait_for_function evaluates a string, which the page's CSP forbids
    deadline = time.monotonic() + 30
    drawn = "(t) => document.querySelector(`[data-testid=${t}]`)?._fullLayout !== undefined"
    while not page.evaluate(drawn, testid):
        assert time.monotonic() < deadline, f"no chart {testid} was drawn within 30 s"
        page.wait_for_timeout(100)
    return page.evaluate(
        """(t) => {
          const el = document.querySelector(`[data-testid=${t}]`);
          const axis = (a) => ({ type: a.type, title: a.title && a.title.text });
          return {
            traces: el.data.map((d) => ({ type: d.type, name: d.name, x: d.x, y: d.y,
              z: d.z || null, error_high: d.error_y ? d.error_y.array : null })),
            xaxis: axis(el._fullLayout.xaxis), yaxis: axis(el._fullLayout.yaxis),
            shapes: (el.layout.shapes || []).length,
            annotations: (el.layout.annotations || []).map((a) => a.text),
          };
        }""",
        testid,
    )


def _overlapping_tick_labels(page) -> list[str]:
    """Tick labels of any chart on the page whose drawn boxes overlap another's on that axis."""
    return page.evaluate(
        """() => {
          const bad = [];
          for (const el of document.querySelectorAll('.js-plotly-plot')) {
            for (const sel of ['.xtick text', '.ytick text']) {
              const boxes = [...el.querySelectorAll(sel)].filter((t) => t.textContent)
                .map((t) => [t.textContent, t.getBoundingClientRect()]);
              for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
                const [a, r] = boxes[i], [b, q] = boxes[j];
                const apart = (u, v) => u.left >= v.right - 1 || u.top >= v.bottom - 1;
                if (!apart(r, q) && !apart(q, r))
                  bad.push(`${el.dataset.testid}: ${a} / ${b}`);
              }
            }
          }
          return bad;
        }"""
    )


def _toolbar_over_cells(page, testid: str) -> float:
    """Pixels of plotly's toolbar, shown as on hover, inside the chart's plot area."""
    page.hover(f"[data-testid={testid}] .nsewdrag")
    return page.evaluate(
        """(t) => {
          const el = document.querySelector(`[data-testid=${t}]`);
          const bar = el.querySelector('.modebar').getBoundingClientRect();
          const cells = el.querySelector('.nsewdrag').getBoundingClientRect();
          const w = Math.min(bar.right, cells.right) - Math.max(bar.left, cells.left);
          const h = Math.min(bar.bottom, cells.bottom) - Math.max(bar.top, cells.top);
          return Math.max(0, w) * Math.max(0, h);
        }""",
        testid,
    )


def _csv(page, testid: str) -> list[dict]:
    """The CSV a chart offers, downloaded by clicking its link as a person would."""
    import csv
    import io

    with page.expect_download() as download:
        page.click(f"[data-testid=csv-{testid}]")
    return list(csv.DictReader(io.StringIO(Path(download.value.path()).read_text())))


def test_run_list_run_page_and_a_live_sample(server, tmp_path):
    url, db = server
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(url + "/")
        page.wait_for_selector("[data-testid=run-row]", timeout=20_000)
        assert "tiny-llama" in page.inner_text("[data-testid=runs]")
        page.wait_for_selector("[data-testid=connection]:has-text('live')", timeout=20_000)
        # every column in view at 1280 px (issue 59: the TPOT column was cut behind a scroll)
        assert page.evaluate(
            "(() => { const t = document.querySelector('[data-testid=runs]');"
            " return t.scrollWidth <= t.parentElement.clientWidth; })()"
        )
        page.screenshot(path=str(tmp_path / "runs.png"), full_page=True)

        page.locator("[data-testid=run-row] a").last.click()  # the oldest: the profile
        page.wait_for_selector("[data-testid=run-title]", timeout=20_000)
        assert page.inner_text("[data-testid=run-status]") == "finished"
        assert page.locator("[data-testid=samples] tr").count() == 3  # header + 2 samples
        # per-layer bars: tiny-llama's 4 blocks, prefill and decode, as plotly drew them
        layers = _plot(page, "layers")
        assert [t["name"] for t in layers["traces"]] == ["prefill", "decode"]
        assert layers["traces"][0]["x"] == ["0", "1", "2", "3"]
        assert all(v > 0 for t in layers["traces"] for v in t["y"])
        rows = _csv(page, "layers")  # the CSV is the rows the chart was drawn from
        assert len(rows) == 8 and {"layer", "phase", "mean_ms"} <= set(rows[0])
        assert sorted(float(r["mean_ms"]) for r in rows if r["phase"] == "prefill") == sorted(
            layers["traces"][0]["y"]
        )
        # the distribution of every sample, the parts of each block, steps of any sample
        dist = _plot(page, "dist-ttft")
        assert len(dist["traces"][0]["x"]) == 2 and dist["traces"][-1]["name"] == "median"
        parts = _plot(page, "parts-prefill")
        assert len(parts["traces"]) >= 3 and parts["traces"][-1]["name"] == "rest of the block"
        timeline = _plot(page, "timeline")
        assert {"load", "prefill", "decode"} <= {t["name"] for t in timeline["traces"]}
        assert "median" in page.inner_text("[data-testid=card-ttft_ms]")
        assert "95% CI" in page.inner_text("[data-testid=card-ttft_ms]")
        assert "peak RSS" in page.inner_text("[data-testid=card-rss_peak_mib]")  # measured here
        page.select_option("[data-testid=step-pick]", index=0)
        steps = _plot(page, "decode-steps")
        assert steps["traces"][0]["x"] == [2, 3, 4]  # 4 new tokens: 3 steps after the first
        page.wait_for_selector("[data-testid=roofline] td", timeout=30_000)
        roof = _plot(page, "roofline-chart")
        assert roof["xaxis"]["type"] == "log" and roof["yaxis"]["type"] == "log"
        assert {t["name"] for t in roof["traces"]} >= {"prefill", "decode"}
        assert _overlapping_tick_labels(page) == []
        assert "prefill" in page.inner_text("[data-testid=roofline]")
        assert page.locator("[data-testid=findings]").count() == 1
        with page.expect_download() as download:
            page.click("[data-testid=trace-link]")
        trace = json.loads(Path(download.value.path()).read_text())
        assert any(e.get("name") == "prefill (TTFT)" for e in trace["traceEvents"])
        assert _fits(page, 1280), "the run page overflows 1280 px"
        page.screenshot(path=str(tmp_path / "run.png"), full_page=True)

        # the compare page: a run against itself has no detectable difference
        run_id = page.inner_text("[data-testid=run-title]").split()[1]
        page.fill("[data-testid=compare-input]", run_id)
        page.click("#cmp button")
        page.wait_for_selector("[data-testid=verdicts] td", timeout=30_000)
        assert page.inner_text("[data-testid=verdicts]").count("no detectable difference") == 3
        overlay = _plot(page, "overlay-ttft_ms")
        assert sum(len(t["x"]) for t in overlay["traces"] if t["name"] != "median") == 4
        assert _fits(page, 1280)
        page.screenshot(path=str(tmp_path / "compare.png"), full_page=True)

        # the sweep page: prompt lengths 8 to 2000 span decades, so medians are lines over a
        # log axis, each with its interval; a switch puts the times on a log axis too
        page.goto(url + "/")
        page.click("a[href^='#/sweep/']")
        sweep = _plot(page, "sweep-chart")
        assert sweep["xaxis"]["type"] == "log" and sweep["xaxis"]["title"] == "prompt_tokens"
        total = sweep["traces"][0]
        assert total["name"] == "total" and total["x"] == sorted(total["x"])
        assert len(total["x"]) == 10 and len(total["error_high"]) == 10
        page.click("[data-testid=log-sweep-chart]")
        assert _plot(page, "sweep-chart")["yaxis"]["type"] == "log"
        assert _overlapping_tick_labels(page) == []
        assert _fits(page, 1280)
        page.screenshot(path=str(tmp_path / "sweep.png"), full_page=True)
        page.click("[data-testid=sweep-compare]")
        page.wait_for_selector("[data-testid=verdicts] td", timeout=30_000)
        assert page.locator("[data-testid=verdicts]").count() == 7  # 8 points at most
        assert page.locator("[data-testid=verdicts]").first.inner_text().count("\n") >= 3

        # a phone: the page is as wide as the screen (wide tables scroll inside their box)
        phone = browser.new_page(viewport={"width": 390, "height": 844})
        phone.on("pageerror", lambda e: errors.append(str(e)))
        phone.goto(url + f"/#/run/{run_id}")
        phone.wait_for_selector("[data-testid=roofline] td", timeout=30_000)
        _plot(phone, "roofline-chart")
        assert _fits(phone, 390), "the run page overflows a phone's width"
        assert _overlapping_tick_labels(phone) == []
        phone.screenshot(path=str(tmp_path / "run-phone.png"), full_page=True)
        for name, hash_ in (("runs", "#/"), ("compare", f"#/compare/{run_id},{run_id}")):
            phone.goto(url + "/" + hash_)
            phone.wait_for_selector("[data-testid=runs], [data-testid=verdicts]", timeout=30_000)
            if name == "compare":
                _plot(phone, "overlay-ttft_ms")
            assert _fits(phone, 390), f"the {name} page overflows a phone's width"
            phone.screenshot(path=str(tmp_path / f"{name}-phone.png"), full_page=True)
        phone.goto(url + "/")
        phone.click("a[href^='#/sweep/']")
        _plot(phone, "sweep-chart")
        assert _fits(phone, 390) and _overlapping_tick_labels(phone) == []
        phone.screenshot(path=str(tmp_path / "sweep-phone.png"), full_page=True)
        phone.close()

        page.goto(url + "/#/live")
        page.wait_for_selector("[data-testid=live-waiting]", timeout=20_000)
        # a profile writing to the same database from a thread of this process (the
        # dashboard reads only the database; a subprocess added 10 s of imports)
        failures: list[BaseException] = []

        def measure() -> None:
            from infermeter import RunConfig, Store, profile

            config = RunConfig(new_tokens=300, samples=3, mode="standard", energy="off")
            try:  # samples of about 2 s: long enough to stream their steps
                profile(config, sink=Store(db))
            except BaseException as exc:  # handed to the test's thread
                failures.append(exc)

        profiling = threading.Thread(target=measure, daemon=True)
        profiling.start()
        try:
            # the profile shows from its start: loading, then warm-up and samples
            page.wait_for_selector("[data-testid=live-progress]", timeout=120_000)
            assert "tokens in finished samples" in page.inner_text("[data-testid=live-progress]")
            # inside a sample, its decode steps as they happen
            page.wait_for_selector(
                "[data-testid=live-running-steps] .scatterlayer path", timeout=120_000
            )
            assert "token " in page.inner_text("[data-testid=live-progress]")
            page.screenshot(path=str(tmp_path / "live-running.png"), full_page=True)
            page.wait_for_selector("[data-testid=live-sample]", timeout=120_000)
            seen_while_running = profiling.is_alive()
            page.wait_for_selector("[data-testid=live-layers] .barlayer path", timeout=120_000)
            page.wait_for_selector("[data-testid=live-steps] .scatterlayer path", timeout=120_000)
            page.screenshot(path=str(tmp_path / "live.png"), full_page=True)
        finally:
            profiling.join(timeout=300)
        assert not profiling.is_alive() and failures == [], failures
        assert seen_while_running, "the sample appeared only after the profile ended"
        page.wait_for_selector("[data-testid=live-idle]", timeout=30_000)  # its line went
        assert "tiny-llama" in page.inner_text("[data-testid=live-samples]")
        page.set_viewport_size({"width": 390, "height": 844})  # the same live page on a phone
        page.wait_for_timeout(500)  # plotly redraws its charts on the window's resize
        assert _fits(page, 390), "the live page overflows a phone's width"
        page.screenshot(path=str(tmp_path / "live-phone.png"), full_page=True)
        browser.close()
    assert not errors, errors
    assert (tmp_path / "live.png").stat().st_size > 10_000


def test_the_history_page_draws_runs_and_the_change_they_support(tmp_path):
    from tests.helpers import history_store

    store, ids = history_store(tmp_path, [10.0] * 8 + [12.5] * 6)
    served = _serve(store.where)
    url, _ = next(served)
    try:
        with playwright.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
            errors: list[str] = []
            for width in (1280, 390):
                page = browser.new_page(viewport={"width": width, "height": 900})
                page.on("pageerror", lambda e: errors.append(str(e)))
                page.goto(url + f"/#/run/{ids[-1]}")
                page.click("[data-testid=history-link]", timeout=20_000)
                drawn = _plot(page, "history-chart")
                assert "tiny-llama" in page.inner_text("[data-testid=history-title]")
                assert drawn["xaxis"]["type"] == "date"
                assert len(drawn["traces"][0]["y"]) == 14
                assert drawn["traces"][0]["y"][8] > 1.2 * drawn["traces"][0]["y"][7]
                assert drawn["shapes"] == 1 and drawn["annotations"][0].startswith("+25")
                assert page.locator("[data-testid=history-change]").count() == 1
                assert "+25" in page.text_content("[data-testid=history-change]")
                assert _overlapping_tick_labels(page) == []
                assert _fits(page, width), f"the history page overflows {width} px"
                page.screenshot(path=str(tmp_path / f"history-{width}.png"), full_page=True)
                page.select_option("[data-testid=history-metric]", "ttft_ms")
                page.wait_for_selector("[data-metric=ttft_ms]", timeout=20_000)
                assert _plot(page, "history-chart")["shapes"] == 0  # TTFT flat
                assert page.locator("[data-testid=history-change]").count() == 0
                page.close()
            browser.close()
        assert errors == []
    finally:
        next(served, None)


def test_a_deep_moe_run_and_a_load_run_show_every_figure_they_have(tmp_path):
    """Deep mode's per-block statistics and tokens per expert; a load's SLOs and its batch."""
    db = tmp_path / "runs.db"
    common = ["--new-tokens", "3", "--energy", "off", "--db", str(db), "--json"]
    # stored through the CLI in this process: two subprocesses would add 20 s of imports
    deep = ["profile", "-m", "tiny-qwen3-moe", "--mode", "deep", "--samples", "2", *common]
    r = runner.invoke(app, deep)
    assert r.exit_code == 0, r.output
    deep_id = json.loads(r.stdout)["meta"]["run_id"]
    r = runner.invoke(
        app,
        [
            "load",
            "--requests",
            "6",
            "--rate",
            "inf",
            "--prompt-tokens",
            "8",
            "--slo",
            "ttft_ms=100000",
            "--slo",
            "e2e_ms=0.001",
            *common,
        ],
    )
    assert r.exit_code == 0, r.output
    load_doc = json.loads(r.stdout)
    load_id = load_doc["meta"]["run_id"]
    served = _serve(db)
    url, _ = next(served)
    try:
        with playwright.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
            errors: list[str] = []
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(url + f"/#/run/{deep_id}")
            for stat in ("entropy", "sparsity", "kill_ratio", "imbalance"):
                drawn = _plot(page, f"stat-{stat}")
                assert [t["name"] for t in drawn["traces"]] == ["prefill", "decode"]
                assert drawn["traces"][0]["x"] == [0, 1, 2, 3]  # tiny-qwen3-moe's 4 blocks
            entropy = _plot(page, "head-entropy")["traces"][0]
            assert len(entropy["z"]) == 4 and len(entropy["z"][0]) == 4  # blocks x heads
            for heat in ("head-entropy", "head-sparsity", "experts"):
                assert _toolbar_over_cells(page, heat) == 0, heat  # issue 59: it hid a row
            assert len(_csv(page, "head-entropy")) == 16
            experts = _plot(page, "experts")["traces"][0]
            assert len(experts["z"]) == 4 and len(experts["z"][0]) == 16  # blocks x experts
            for row in experts["z"]:
                assert abs(sum(row) - 1.0) < 1e-6  # shares of each block's assignments
            rows = _csv(page, "experts")
            assert len(rows) <= 4 * 16 and {"layer", "expert", "tokens", "share"} <= set(rows[0])
            page.wait_for_selector("[data-testid=findings]", timeout=30_000)
            # the findings come before the figures: a person reads the headline first
            order = page.evaluate("[...document.querySelectorAll('h2')].map((h) => h.textContent)")
            assert order.index("Findings") < order.index("Timeline") < order.index("Samples")
            assert _overlapping_tick_labels(page) == []
            page.screenshot(path=str(tmp_path / "run-deep.png"), full_page=True)

            page.goto(url + f"/#/run/{load_id}")
            slo = _plot(page, "slo-chart")
            # the throughput card: what the run delivered, not the median request's own rate
            card = page.inner_text("[data-testid=card-tokens_per_s]")
            delivered = load_doc["summary"]["output_tokens_per_s"]
            assert "delivered" in card and f"{delivered:,.1f}" in card, (card, delivered)
            assert slo["traces"][0]["y"] == [100.0, 0.0, 0.0]  # ttft met, e2e missed, all met
            batch = _plot(page, "batch-requests")
            assert {t["name"] for t in batch["traces"]} >= {"running", "waiting"}
            assert max(batch["traces"][0]["y"]) >= 1
            assert _overlapping_tick_labels(page) == []
            page.screenshot(path=str(tmp_path / "run-load.png"), full_page=True)

            # a stored prediction: its page draws each figure with its 90% interval
            r = runner.invoke(
                app,
                ["predict", "-m", "tiny-llama", "--hardware", "h100-sxm", "--batch", "1,8",
                 "--db", str(db), "--json"],
            )  # fmt: skip
            assert r.exit_code == 0, r.output
            pid = json.loads(r.stdout)["id"]
            page.goto(url + "/#/predictions")
            page.wait_for_selector("[data-testid=prediction-row]", timeout=20_000)
            page.click(f"text={pid}")
            drawn = _plot(page, "prediction-chart")
            assert [t["x"] for t in drawn["traces"]] == [[1, 8], [1, 8]]
            assert all(t["error_high"] and min(t["error_high"]) > 0 for t in drawn["traces"])
            assert "held-out errors" in page.inner_text("[data-testid=prediction-band]")
            # each batch's memory with its interval, and where that interval comes from
            table = page.inner_text("[data-testid=prediction-rows]")
            assert "memory GB (90%)" in table and table.count("(") >= 2 * 3, table
            said = page.inner_text("[data-testid=prediction-memory-band]")
            assert "published peak-memory sources" in said
            page.screenshot(path=str(tmp_path / "prediction.png"), full_page=True)

            # the deep run's report.html, as a person opens it: the headline and findings
            # first, every table inside the page at 1280 px and on a phone
            out = tmp_path / "report"
            r = runner.invoke(app, ["report", deep_id, "--db", str(db), "--out", str(out)])
            assert r.exit_code == 0, r.output
            for width in (1280, 390):
                page.set_viewport_size({"width": width, "height": 900})
                page.goto((out / "report.html").as_uri())
                alts = page.evaluate("[...document.images].map((i) => i.alt)")
                deep_figures = {"block_statistics", "attention_heads", "experts"}
                assert {"timeline", "layers", "decode_steps"} | deep_figures <= set(alts)
                assert _fits(page, width), f"the report overflows {width} px"
                name = "report.png" if width == 1280 else "report-phone.png"
                page.screenshot(path=str(tmp_path / name), full_page=True)
            browser.close()
        assert errors == []
    finally:
        next(served, None)
