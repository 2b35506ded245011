"""SLOs on `profile`, `sweep` and `compare` (issue 18, item 2): attainment, goodput, exit 3."""

import json

import pytest
from typer.testing import CliRunner

from infermeter import RunConfig, profile
from infermeter.cli.app import app
from infermeter.errors import UserError
from tests.helpers import assert_one_line_error

runner = CliRunner()


def test_each_row_of_each_sample_is_a_request(tiny_llama):
    run = profile(
        RunConfig(
            prompt_tokens=16,
            new_tokens=3,
            batch_size=2,
            samples=3,
            energy="off",
            slos=(("e2e_ms", 1e6), ("tpot_ms", 1e-6)),
        ),
        loaded=tiny_llama,
    )
    report = run.slo_report()
    assert report["attainment_pct"] == {"e2e_ms": 100.0, "tpot_ms": 0.0}
    assert report["all_met_pct"] == 0.0 and report["missed"] == ["tpot_ms"]
    easy = run.slo_report((("e2e_ms", 1e6),))
    wall_s = sum(s.total_ms for s in run.measured) / 1e3
    assert easy["goodput_rps"] == pytest.approx(6 / wall_s)  # 3 samples x 2 rows, all met
    assert run.to_json()["summary"][0]["slo"] == report
    with pytest.raises(UserError, match="not an SLO"):
        RunConfig(slos=(("p99_ms", 5.0),)).validate()


def test_profile_and_compare_gate_on_slos(tmp_path):
    db = str(tmp_path / "r.db")
    base = ["profile", "--samples", "2", "--new-tokens", "3", "--prompt-tokens", "8", "--db", db]
    r = runner.invoke(app, [*base, "--slo", "ttft_ms=0.001", "--fail-if-slo-missed"])
    assert r.exit_code == 3 and "SLO missed: ttft_ms <= 0.001 met by 0.0%" in r.output
    assert "SLO attainment ttft_ms <= 0.001: 0.0%" in r.output
    r = runner.invoke(app, [*base, "--fail-if-slo-missed"])
    assert_one_line_error(r, "needs an --slo")
    ids = []
    for _ in range(2):
        r = runner.invoke(app, [*base, "--json"])
        assert r.exit_code == 0, r.output
        ids.append(json.loads(r.stdout)["meta"]["run_id"])
    r = runner.invoke(
        app, ["compare", *ids, "--db", db, "--slo", "e2e_ms=100000", "--fail-if-slo-missed"]
    )
    assert r.exit_code == 0, r.output
    assert "variant: SLO attainment e2e_ms <= 100000: 100.0%" in r.output
    r = runner.invoke(
        app, ["compare", *ids, "--db", db, "--slo", "tpot_ms=0.0001", "--fail-if-slo-missed"]
    )
    assert r.exit_code == 3 and "SLO missed by the variant: tpot_ms" in r.output


def test_sweep_points_carry_their_slo_attainment(tmp_path):
    r = runner.invoke(
        app,
        [
            "sweep",
            "--knob",
            "new_tokens=2,3",
            "--samples",
            "1",
            "--prompt-tokens",
            "8",
            "--slo",
            "e2e_ms=100000",
            "--db",
            str(tmp_path / "r.db"),
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)["summary"]
    assert [row["slo"]["all_met_pct"] for row in rows] == [100.0, 100.0]


def test_the_report_has_the_slos(tmp_path):
    db = str(tmp_path / "r.db")
    r = runner.invoke(
        app,
        [
            "profile",
            "--samples",
            "2",
            "--new-tokens",
            "3",
            "--prompt-tokens",
            "8",
            "--db",
            db,
            "--slo",
            "e2e_ms=100000",
            "--json",
        ],
    )
    run_id = json.loads(r.stdout)["meta"]["run_id"]
    r = runner.invoke(app, ["report", run_id, "--db", db, "--out", str(tmp_path / "rep")])
    assert r.exit_code == 0, r.output
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "## Service-level objectives" in md and "| e2e_ms <= 100000 | 100 |" in md
    assert (tmp_path / "rep" / "slo.csv").read_text().startswith("slo,attainment_pct")
