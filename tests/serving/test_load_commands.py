"""`load run | endpoint | capacity | predict | selfcheck`: one command per mode with only its
options, the same runs as the old spelling, which still works with a one-line note."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from infermeter.cli.app import app
from infermeter.cli.load_options import LoadArgs
from tests.helpers import assert_one_line_error

runner = CliRunner()


def _options(*command: str) -> set[str]:
    """The long option names a command's --help lists."""
    import click
    import typer.main

    group = typer.main.get_command(app)
    ctx = click.Context(group)
    cmd = group
    for name in command:
        cmd = cmd.get_command(ctx, name)  # type: ignore[union-attr]
    return {o for p in cmd.params for o in [*p.opts, *p.secondary_opts] if o.startswith("--")}


def test_each_mode_has_only_its_options():
    run, endpoint = _options("load", "run"), _options("load", "endpoint")
    capacity, predict = _options("load", "capacity"), _options("load", "predict")
    assert {"--server", "--kv-blocks", "--energy"} <= run
    assert not run & {"--extra-body", "--header", "--endpoint", "--predict", "--hardware"}
    assert {"--extra-body", "--header", "--no-selfcheck", "--metrics-url"} <= endpoint
    assert not endpoint & {"--server", "--static-batch", "--kv-blocks", "--energy", "--hardware"}
    assert {"--start-rate", "--most-requests-per-rate", "--slo-target", "--endpoint"} <= capacity
    assert not capacity & {"--find-max-rate", "--max-requests-per-step", "--rate"}
    assert {"--hardware", "--stack", "--capacity"} <= predict
    assert not predict & {"--endpoint", "--energy", "--device", "--server"}
    # every option of every mode is a field of the one record they all fill
    fields = {f.replace("_", "-") for f in LoadArgs.__dataclass_fields__}
    renamed = {
        "--json": "json-out",
        "--no-selfcheck": "selfcheck",
        "--selfcheck": "selfcheck",
        "--start-rate": "rate",
        "--requests-per-rate": "requests",
        "--most-requests-per-rate": "max-requests-per-step",
        "--capacity": "find-max-rate",
    }
    for opt in run | endpoint | capacity | predict:
        if opt in ("--help",):
            continue
        name = renamed.get(opt, opt.removeprefix("--"))
        assert name in fields, opt


def test_load_run_is_the_old_spelling_without_the_note(tmp_path):
    common = ["--requests", "2", "--rate", "inf", "--prompt-tokens", "8", "--new-tokens", "2"]
    common += ["--energy", "off", "--db", str(tmp_path / "r.db"), "--json"]
    new = runner.invoke(app, ["load", "run", *common])
    assert new.exit_code == 0, new.output
    assert "note:" not in new.stderr
    old = runner.invoke(app, ["load", *common])
    assert old.exit_code == 0, old.output
    assert "note: `infermeter load --...` is now `infermeter load run`" in old.stderr
    a, b = json.loads(new.stdout), json.loads(old.stdout)
    assert a["meta"]["spec"] == b["meta"]["spec"]
    assert [r["output_tokens"] for r in a["all_samples"]] == [2, 2]


def test_load_predict_and_capacity_run_and_refuse_in_one_line(tmp_path):
    r = runner.invoke(
        app,
        [
            "load",
            "predict",
            "--rate",
            "1,2",
            "--requests",
            "4",
            "--new-tokens",
            "4",
            "--hardware",
            "h100-sxm",
            "--db",
            str(tmp_path / "r.db"),
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    assert [p["rate"] for p in json.loads(r.stdout)["points"]] == [1.0, 2.0]
    assert_one_line_error(runner.invoke(app, ["load", "capacity"]), "searches under SLOs")
    r = runner.invoke(app, ["load", "capacity", "--slo", "ttft_ms=1", "--slo-target", "2"])
    assert_one_line_error(r, "--slo-target")


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["load", "endpoint", "ftp://x"], "is not an http(s) URL"),
        (["load", "endpoint", "http://127.0.0.1:9", "--endpoint-api", "x"], "is not an API"),
        (["load", "run", "--rate", "0"], "is not a rate"),
    ],
)
def test_bad_values_in_the_new_spellings_are_one_line(args, needle):
    assert_one_line_error(runner.invoke(app, args), needle)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["capacity", "--slo", "e2e_ms=9", "--requests-per-rate", "0"], "--requests-per-rate 0 "),
        (["capacity", "--slo", "e2e_ms=9", "--most-requests-per-rate", "0"], "--most-requests-"),
        (["predict", "--capacity", "--slo", "e2e_ms=9", "--requests", "0"], "--requests 0 "),
        (["--find-max-rate", "--slo", "e2e_ms=9", "--max-requests-per-step", "0"], "-per-step 0"),
        (["capacity", "--slo", "e2e_ms=9", "--bisect", "21"], "--bisect 21 is out of range"),
        (["endpoint", "http://127.0.0.1:9", "--timeout", "0"], "--timeout 0 is out of range"),
        (["endpoint", "http://127.0.0.1:9", "--endpoint-api", "x"], "is not an API"),
        (["endpoint", "http://127.0.0.1:9", "ftp://x"], "is not an http(s) URL"),
    ],
)
def test_a_range_is_named_as_the_command_at_hand_spells_it(args, needle, tmp_path):
    """One range per setting (its spec field), named by this command's own option: `load
    capacity` runs --requests-per-rate requests a rate, `load predict --capacity` --requests."""
    r = runner.invoke(app, ["load", *args, "--db", str(tmp_path / "r.db")])
    assert_one_line_error(r, needle)
    assert not (tmp_path / "r.db").exists()  # refused before the store or the model opened


def test_a_load_run_lists_and_shows_what_the_server_delivered(tmp_path):
    """Issue 59: `runs list`, `runs show` and the dashboard's table showed a load run at 21.1
    tok/s (the median request's own rate) while it delivered 5.45 tok/s."""
    db = str(tmp_path / "r.db")
    common = ["--requests", "4", "--rate", "inf", "--prompt-tokens", "8", "--new-tokens", "3"]
    r = runner.invoke(
        app,
        [
            "load",
            "run",
            *common,
            "--server",
            "static",
            "--static-batch",
            "2",
            "--energy",
            "off",
            "--db",
            db,
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    delivered = doc["summary"]["output_tokens_per_s"]
    (row,) = json.loads(runner.invoke(app, ["runs", "list", "--db", db, "--json"]).stdout)["runs"]
    assert row["tokens_per_s"] == pytest.approx(delivered)
    shown = runner.invoke(app, ["runs", "show", row["id"], "--db", db], env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    line = next(ln for ln in shown.stdout.splitlines() if "delivered throughput" in ln)
    assert f"{delivered:.1f}" in line.replace(",", "")
    assert "throughput of one request" in shown.stdout
