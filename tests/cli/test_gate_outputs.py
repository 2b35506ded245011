"""CI outputs of the gates: JUnit XML and a Markdown summary (issue 37, item 5)."""

import xml.etree.ElementTree as ET

from typer.testing import CliRunner

from infermeter import RunConfig, Store, profile
from infermeter.cli.app import app
from infermeter.report.gate_outputs import GateCase, junit_xml, summary_markdown
from tests.helpers import assert_one_line_error

runner = CliRunner()


def _cases(path):
    suite = ET.parse(path).getroot().find("testsuite")
    return suite, {
        c.get("name"): ("failure" if c.find("failure") is not None else "skipped")
        if c.find("failure") is not None or c.find("skipped") is not None
        else "passed"
        for c in suite.iter("testcase")
    }


def test_junit_and_markdown_say_which_check_failed_and_why():
    cases = [
        GateCase("prefill not slower", False, "0.50x [0.45, 0.55]: slower"),
        GateCase("decode not slower", True, "1.00x: no detectable difference"),
        GateCase("ttft_ms <= 500", True, "met by 100.0%", gated=False),
    ]
    root = ET.fromstring(junit_xml("compare", cases).split("\n", 1)[1])
    suite = root.find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("3", "1", "1")
    failure = root.find(".//testcase[@name='prefill not slower']/failure")
    assert failure.get("message") == "0.50x [0.45, 0.55]: slower"
    text = summary_markdown("title", cases, [("rows", [{"phase": "prefill", "speedup": 0.5}])])
    assert "**FAILED**: 1 of 2 checks" in text and "| phase | speedup |" in text
    assert "- not gated: ttft_ms <= 500" in text


def _two_runs(tmp_path, tiny_llama):
    db = str(tmp_path / "runs.db")
    store = Store(db)
    base = dict(model="tiny-llama", new_tokens=4, samples=6, warmup=1, energy="off")
    short = profile(RunConfig(prompt_tokens=16, **base), sink=store, loaded=tiny_llama)
    long = profile(RunConfig(prompt_tokens=384, **base), sink=store, loaded=tiny_llama)
    return db, short.run_id, long.run_id


def test_a_failed_compare_gate_writes_junit_summary_and_the_job_summary(
    tmp_path, tiny_llama, monkeypatch
):
    db, fast, slow = _two_runs(tmp_path, tiny_llama)
    github = tmp_path / "step-summary.md"
    github.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(github))
    junit, summary = tmp_path / "out" / "gate.xml", tmp_path / "out" / "gate.md"
    (tmp_path / "out").mkdir()
    args = ["compare", fast, slow, "--db", db, "--fail-if-slower", "--phases", "prefill"]
    r = runner.invoke(app, [*args, "--junit", str(junit), "--summary", str(summary)])
    assert r.exit_code == 1, r.output  # a 24x longer prompt: the prefill is slower
    suite, cases = _cases(junit)
    assert cases == {"prefill not slower by more than 5%": "failure"}
    assert suite.get("failures") == "1"
    text = summary.read_text()
    assert "**FAILED**: 1 of 1 checks" in text and "| prefill |" in text and "slower" in text
    assert github.read_text().startswith("earlier step\n") and "**FAILED**" in github.read_text()
    # the same pair without the gate: exit 0, the checks recorded as not gated
    r = runner.invoke(app, ["compare", fast, slow, "--db", db, "--junit", str(junit)])
    assert r.exit_code == 0, r.output
    _, cases = _cases(junit)
    assert set(cases.values()) == {"skipped"} and len(cases) == 3


def test_a_load_slo_gate_writes_its_checks(tmp_path, monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    junit, summary = tmp_path / "load.xml", tmp_path / "load.md"
    args = ["load", "--server", "static", "--requests", "3", "--rate", "inf"]
    args += ["--prompt-tokens", "8", "--new-tokens", "3", "--db", str(tmp_path / "r.db")]
    args += ["--slo", "ttft_ms=0.001", "--slo", "e2e_ms=100000", "--fail-if-slo-missed"]
    r = runner.invoke(app, [*args, "--junit", str(junit), "--summary", str(summary)])
    assert r.exit_code == 3, r.output
    _, cases = _cases(junit)
    assert cases == {"ttft_ms <= 0.001": "failure", "e2e_ms <= 100000": "passed"}
    assert "| rate/s | requests |" in summary.read_text()


def test_an_unwritable_junit_path_is_refused_before_any_work(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")  # (permissions do not stop root; a file in the way does)
    r = runner.invoke(app, ["compare", "a", "b", "--junit", str(blocker / "j.xml")])
    assert_one_line_error(r, "--junit", "not writable")
    r = runner.invoke(app, ["load", "--summary", str(tmp_path)])
    assert_one_line_error(r, "--summary", "is a folder")


def test_a_name_longer_than_the_file_system_allows_is_one_line(tmp_path):
    """A 300-character --junit name was 'internal error: OSError ... File name too long'."""
    from tests.helpers import assert_one_line_error

    long = tmp_path / ("j" * 300 + ".xml")
    r = runner.invoke(app, ["load", "run", "--junit", str(long), "--db", str(tmp_path / "r.db")])
    assert_one_line_error(r, "--junit name 'jjjj", "is 304 bytes long", "at most 255 bytes")
    r = runner.invoke(app, ["load", "run", "--out", str(tmp_path / ("o" * 300))])
    assert_one_line_error(r, "--out name", "is 300 bytes long")
