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
import time
from pathlib import Path

import pytest

from tests.helpers import cli

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
    db = tmp_path / "runs.db"
    r = cli(
        "profile",
        "--new-tokens",
        "4",
        "--samples",
        "2",
        "--mode",
        "standard",
        "--energy",
        "off",
        "--db",
        str(db),
        "--json",
    )
    assert r.returncode == 0, r.stderr
    r = cli(
        "sweep",
        "--knob",
        "prompt_tokens=8,16,32,64,128,256,512,1024,1536,2000",
        "--new-tokens",
        "2",
        "--samples",
        "3",
        "--warmup",
        "0",
        "--energy",
        "off",
        "--db",
        str(db),
    )
    assert r.returncode == 0, r.stderr
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
        page.screenshot(path=str(tmp_path / "runs.png"), full_page=True)

        page.locator("[data-testid=run-row] a").last.click()  # the oldest: the profile
        page.wait_for_selector("[data-testid=run-title]", timeout=20_000)
        assert page.inner_text("[data-testid=run-status]") == "finished"
        assert page.locator("[data-testid=samples] tr").count() == 3  # header + 2 samples
        assert page.locator(".chart svg rect").count() >= 8  # per-layer bars
        # the distribution of every sample, the parts of each block, steps of any sample
        assert page.locator("[data-testid=dist-ttft] circle").count() == 2
        assert page.locator("[data-testid=parts-prefill] rect").count() >= 4 * 3
        assert "median" in page.inner_text("[data-testid=card-ttft_ms]")
        assert "95% CI" in page.inner_text("[data-testid=card-ttft_ms]")
        page.select_option("[data-testid=step-pick]", index=0)
        assert page.locator("[data-testid=decode-steps] polyline").count() == 1
        page.wait_for_selector("[data-testid=roofline] td", timeout=30_000)
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
        assert page.locator("[data-testid=overlay-ttft_ms] circle").count() == 4
        assert _fits(page, 1280)
        page.screenshot(path=str(tmp_path / "compare.png"), full_page=True)

        # the sweep page: medians with whiskers, labels that do not overprint
        page.goto(url + "/")
        page.click("a[href^='#/sweep/']")
        page.wait_for_selector("[data-testid=sweep-chart]", timeout=30_000)
        assert page.locator("[data-testid=sweep-chart] .whisker").count() == 10
        boxes = [
            page.locator("[data-testid=sweep-chart] > text[transform]").nth(i).bounding_box()
            for i in range(10)
        ]
        pairs = zip(boxes, boxes[1:], strict=False)
        assert all(a["x"] + a["width"] <= b["x"] + b["width"] for a, b in pairs)
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
        assert _fits(phone, 390), "the run page overflows a phone's width"
        phone.screenshot(path=str(tmp_path / "run-phone.png"), full_page=True)
        phone.close()

        page.goto(url + "/#/live")
        page.wait_for_selector("[data-testid=live-waiting]", timeout=20_000)
        profile = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "infermeter",
                "profile",
                "--new-tokens",
                "300",  # samples of about 2 s: long enough to stream their steps
                "--samples",
                "3",
                "--mode",
                "standard",
                "--energy",
                "off",
                "--db",
                str(db),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            # the profile shows from its start: loading, then warm-up and samples
            page.wait_for_selector("[data-testid=live-progress]", timeout=120_000)
            assert "tokens in finished samples" in page.inner_text("[data-testid=live-progress]")
            # inside a sample, its decode steps as they happen
            page.wait_for_selector("[data-testid=live-running-steps] polyline", timeout=120_000)
            assert "token " in page.inner_text("[data-testid=live-progress]")
            page.screenshot(path=str(tmp_path / "live-running.png"), full_page=True)
            page.wait_for_selector("[data-testid=live-sample]", timeout=120_000)
            seen_while_running = profile.poll() is None
            page.wait_for_selector("[data-testid=live-layers] svg rect", timeout=120_000)
            page.wait_for_selector("[data-testid=live-steps] polyline", timeout=120_000)
            page.screenshot(path=str(tmp_path / "live.png"), full_page=True)
        finally:
            assert profile.wait(timeout=300) == 0, profile.stderr.read()
        assert seen_while_running, "the sample appeared only after the profile ended"
        page.wait_for_selector("[data-testid=live-idle]", timeout=30_000)  # its line went
        assert "tiny-llama" in page.inner_text("[data-testid=live-samples]")
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
                page.wait_for_selector("[data-testid=history-chart]", timeout=20_000)
                assert "tiny-llama" in page.inner_text("[data-testid=history-title]")
                assert page.locator("[data-testid=history-chart] circle").count() == 14
                assert page.locator("[data-testid=history-change]").count() == 1
                assert "+25" in page.text_content("[data-testid=history-change]")
                assert _fits(page, width), f"the history page overflows {width} px"
                page.screenshot(path=str(tmp_path / f"history-{width}.png"), full_page=True)
                page.select_option("[data-testid=history-metric]", "ttft_ms")
                page.wait_for_selector("[data-metric=ttft_ms]", timeout=20_000)
                assert page.locator("[data-testid=history-change]").count() == 0  # TTFT flat
                page.close()
            browser.close()
        assert errors == []
    finally:
        next(served, None)
