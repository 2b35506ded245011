"""The CLI as users run it: real processes for the main paths, CliRunner for the many errors."""

import json
import sqlite3

import pytest
from typer.testing import CliRunner

from infermeter.cli.app import app
from tests.helpers import assert_one_line_error, cli, cli_here

runner = CliRunner()


def test_profile_json_is_one_document_and_stored(tmp_path):
    db = tmp_path / "runs.db"
    out = tmp_path / "out"
    r = cli(
        "profile",
        "--model",
        "tiny-mistral",
        "--prompt-tokens",
        "24",
        "--new-tokens",
        "5",
        "--samples",
        "2",
        "--warmup",
        "1",
        "--db",
        str(db),
        "--out",
        str(out),
        "--json",
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)  # exactly one JSON document: anything else fails to parse
    assert set(doc) == {"meta", "summary", "all_samples"}
    assert doc["meta"]["model"] == "tiny-mistral" and doc["meta"]["status"] == "finished"
    assert doc["meta"]["versions"]["torch"] and doc["meta"]["device"]["type"] == "cpu"
    assert doc["summary"][0]["samples"] == 2 and len(doc["all_samples"]) == 3
    assert doc["summary"][0]["ttft_ms"]["mean"] > 0
    assert all(len(s["step_ms"]) == 4 for s in doc["all_samples"])
    rid = doc["meta"]["run_id"]
    assert json.loads((out / f"run-{rid}.json").read_text()) == doc
    listed = cli_here("runs", "list", "--db", str(db), "--json")
    assert [r["id"] for r in json.loads(listed.stdout)["runs"]] == [rid]
    shown = cli_here("runs", "show", rid[:6], "--db", str(db), "--json")
    assert json.loads(shown.stdout)["summary"] == doc["summary"]


def test_profile_table_for_people(tmp_path):
    r = runner.invoke(
        app,
        [
            "profile",
            "--model",
            "tiny-qwen3-moe",
            "--prompt-tokens",
            "16",
            "--new-tokens",
            "4",
            "--samples",
            "2",
            "--db",
            str(tmp_path / "r.db"),
            "--show-text",
        ],
    )
    assert r.exit_code == 0, r.output
    for needle in (
        "prefill (TTFT)",
        "decode per token (TPOT)",
        "throughput",
        "peak RSS",
        "16 experts top-4",
        "output:",
        "stored in",
    ):
        assert needle in r.stdout


def test_runs_list_show_delete(tmp_path):
    db = str(tmp_path / "r.db")
    r = runner.invoke(
        app,
        [
            "profile",
            "--prompt-tokens",
            "8",
            "--new-tokens",
            "3",
            "--samples",
            "1",
            "--db",
            db,
            "--json",
        ],
    )
    rid = json.loads(r.stdout)["meta"]["run_id"]
    listed = runner.invoke(
        app, ["runs", "list", "--db", db, "--status", "finished", "--since", "1d"]
    )
    assert rid in listed.stdout and "tiny-llama" in listed.stdout
    assert runner.invoke(app, ["runs", "show", rid, "--db", db]).exit_code == 0
    assert runner.invoke(app, ["runs", "delete", rid, "--db", db]).exit_code == 0
    gone = runner.invoke(app, ["runs", "show", rid, "--db", db])
    assert_one_line_error(gone, "no run")


def test_models_lists_presets_with_parameters():
    r = runner.invoke(app, ["models", "--json"])
    rows = {m["name"]: m for m in json.loads(r.stdout)["models"]}
    assert rows["llama-3.1-8b"]["params"] == 8_030_261_248
    assert rows["smollm2-135m"]["kind"] == "trained"
    assert {"tiny-llava", "mixtral-8x7b", "qwen3-30b-a3b"} <= set(rows)


@pytest.mark.parametrize(
    "args,needles",
    [
        (["--model", "nobody/nothing"], ["unknown model 'nobody/nothing'", "infermeter models"]),
        (["--dtype", "float8"], ["unknown dtype 'float8'"]),
        (["--device", "cuda"], ["CUDA is not available", "--device cpu"]),
        (["--device", "tpu0"], ["unknown device 'tpu0'"]),
        (["--prompt-tokens", "4090", "--new-tokens", "64"], ["exceed the context", "4096"]),
        (["--batch-size", "0"], ["--batch-size 0 is out of range; use 1..65536"]),
        (["--model", "mixtral-8x7b", "--dtype", "float32"], ["needs about", "GiB"]),
        (["--prompts", "/nonexistent/p.txt"], ["does not exist"]),
        (["--nvtx"], ["--nvtx needs a CUDA device", "drop --nvtx"]),
        (["--compile-mode", "fast"], ["unknown torch.compile mode 'fast'", "reduce-overhead"]),
    ],
)
def test_user_errors_are_one_line_exit_2(tmp_path, args, needles):
    import torch

    if ("cuda" in args or "--nvtx" in args) and torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    defaults = ["--new-tokens", "2", "--samples", "1", "--db", str(tmp_path / "r.db")]
    r = runner.invoke(app, ["profile", *defaults, *args])  # later options win
    assert_one_line_error(r, *needles)


def test_unwritable_out_folder_fails_before_running(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    r = runner.invoke(
        app, ["profile", "--out", str(blocker / "sub"), "--db", str(tmp_path / "r.db")]
    )
    assert_one_line_error(r, "cannot write to output folder")
    assert not (tmp_path / "r.db").exists()  # nothing ran, nothing stored


def test_locked_database(tmp_path):
    db = tmp_path / "r.db"
    from infermeter import Store

    Store(db)  # create it
    holder = sqlite3.connect(db)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        r = cli_here(
            "profile",
            "--new-tokens",
            "2",
            "--samples",
            "1",
            "--db",
            str(db),
            env={"INFERMETER_DB_TIMEOUT_S": "0.3"},
        )
    finally:
        holder.rollback()
        holder.close()
    assert_one_line_error(r, "is locked by another process", "another --db")


def test_unreadable_database(tmp_path):
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"definitely not sqlite" * 64)
    r = runner.invoke(app, ["runs", "list", "--db", str(junk)])
    assert_one_line_error(r, "is unreadable")
    assert junk.read_bytes() == b"definitely not sqlite" * 64  # no lost data


@pytest.mark.smollm2
def test_smollm2_profile_speaks_english(tmp_path):
    r = cli_here(
        "profile",
        "--model",
        "smollm2-135m",
        "--prompt-tokens",
        "128",
        "--new-tokens",
        "32",
        "--samples",
        "1",
        "--warmup",
        "0",
        "--db",
        str(tmp_path / "r.db"),
        "--json",
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["meta"]["model_info"]["layers"] == 30
    sample = doc["all_samples"][0]
    assert sample["prefill_tokens"] == 128 and len(sample["step_ms"]) == 31
    text = sample["output_text"][0]
    words = text.split()
    assert len(words) >= 12
    common = {
        "the",
        "a",
        "of",
        "and",
        "to",
        "in",
        "is",
        "that",
        "it",
        "this",
        "for",
        "with",
        "as",
        "on",
        "are",
        "be",
        "by",
        "you",
        "can",
        "i",
    }
    assert sum(w.lower().strip(".,;:!?\"'") in common for w in words) >= 3, text
    letters = sum(c.isalpha() or c.isspace() or c in ".,;:!?'\"-()" for c in text)
    assert letters / len(text) > 0.9, text


def test_runs_show_prints_per_layer_tables(tmp_path):
    db = str(tmp_path / "r.db")
    r = runner.invoke(
        app,
        [
            "profile",
            "--model",
            "tiny-mixtral",
            "--prompt-tokens",
            "16",
            "--new-tokens",
            "4",
            "--samples",
            "1",
            "--mode",
            "deep",
            "--db",
            db,
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert {"parts", "attention", "moe_routing"} <= set(doc["layers"])
    shown = runner.invoke(
        app, ["runs", "show", doc["meta"]["run_id"], "--db", db], env={"COLUMNS": "80"}
    )
    for needle in (
        "where the time goes",
        "per block: mean ms per call",
        "attn entropy",
        "MoE imbalance",
        "deep mode: attention ran through",
    ):
        assert needle in shown.stdout
    # prose lines (notes, the header, where it is stored, a busy machine's noise or outlier
    # warnings) soft-wrap; the tables must fit
    prose = ("note:", "run ", "stored in ", "⚠", "instruments cost")
    table_lines = [ln for ln in shown.stdout.splitlines() if not ln.startswith(prose)]
    assert max(len(line) for line in table_lines) <= 80, [ln for ln in table_lines if len(ln) > 80]


def test_bad_mode_and_sample_every(tmp_path):
    r = runner.invoke(app, ["profile", "--mode", "fast", "--db", str(tmp_path / "r.db")])
    assert_one_line_error(r, "unknown mode 'fast'")
    r = runner.invoke(app, ["profile", "--sample-every", "0", "--db", str(tmp_path / "r.db")])
    assert_one_line_error(r, "--sample-every 0 is out of range")


def test_custom_layers_from_the_cli(tmp_path):
    db = str(tmp_path / "r.db")
    r = runner.invoke(
        app,
        [
            "profile",
            "--prompt-tokens",
            "8",
            "--new-tokens",
            "3",
            "--samples",
            "1",
            "--mode",
            "standard",
            "--layers",
            "1,3",
            "--db",
            db,
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    blocks = {
        row["layer"] for row in json.loads(r.stdout)["layers"]["layers"] if row["kind"] == "block"
    }
    assert blocks == {1, 3}
    bad = runner.invoke(app, ["profile", "--mode", "standard", "--layers", "9", "--db", db])
    assert_one_line_error(bad, "out of range", "0..3")
    listed = runner.invoke(app, ["runs", "list", "--db", db, "--json"])
    assert len(json.loads(listed.stdout)["runs"]) == 1  # the refused run was never stored
    words = runner.invoke(app, ["profile", "--mode", "standard", "--layers", "a,b", "--db", db])
    assert_one_line_error(words, "is not a list of block numbers")
    minimal = runner.invoke(app, ["profile", "--layers", "1", "--db", db])
    assert_one_line_error(minimal, "needs --mode standard or deep")


def test_runs_cleanup_counts_asks_and_deletes(tmp_path):
    import datetime as dt

    db = str(tmp_path / "r.db")
    for _ in range(2):
        r = runner.invoke(
            app,
            [
                "profile",
                "--new-tokens",
                "2",
                "--samples",
                "1",
                "--energy",
                "off",
                "--db",
                db,
                "--json",
            ],
        )
        assert r.exit_code == 0, r.output
    con = sqlite3.connect(db)  # age one of them by 40 days
    old = (dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=40)).isoformat()
    con.execute("UPDATE runs SET created=? WHERE id=(SELECT id FROM runs LIMIT 1)", (old,))
    con.commit()
    con.close()
    r = runner.invoke(app, ["runs", "cleanup", "--max-age-days", "30", "--db", db], input="n\n")
    assert r.exit_code == 1 and "delete 1 run older than 30 days" in r.output
    assert "nothing deleted" in r.output
    r = runner.invoke(app, ["runs", "cleanup", "--max-age-days", "30", "--db", db, "--yes"])
    assert r.exit_code == 0 and "deleted 1 run;" in r.output
    rows = json.loads(runner.invoke(app, ["runs", "list", "--db", db, "--json"]).stdout)["runs"]
    assert len(rows) == 1
    # the deleted run took its samples (warm-up + measured) with it
    assert sqlite3.connect(db).execute("SELECT count(*) FROM samples").fetchone()[0] == 2
    r = runner.invoke(app, ["runs", "cleanup", "--max-age-days", "-1", "--db", db])
    assert_one_line_error(r, "is negative")


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_export_samples_as_csv_and_parquet(tmp_path, fmt):
    import pandas as pd

    db = str(tmp_path / "r.db")
    doc = json.loads(
        runner.invoke(
            app,
            [
                "profile",
                "--new-tokens",
                "3",
                "--samples",
                "2",
                "--energy",
                "off",
                "--db",
                db,
                "--json",
            ],
        ).stdout
    )
    rid = doc["meta"]["run_id"]
    r = runner.invoke(app, ["export", rid, "--format", fmt, "--out", str(tmp_path), "--db", db])
    assert r.exit_code == 0, r.output
    path = tmp_path / f"run-{rid}.{fmt}"
    # a run id is hex: all digits now and then, which pandas would read as a number
    frame = pd.read_csv(path, dtype={"run_id": str}) if fmt == "csv" else pd.read_parquet(path)
    assert len(frame) == 3  # warm-up included, flagged
    assert list(frame["ttft_ms"]) == [s["ttft_ms"] for s in doc["all_samples"]]
    assert (frame["knob_new_tokens"] == 3).all() and (frame["run_id"] == rid).all()


def test_runs_show_of_a_knob_point_says_what_it_ran_with(tiny_moe, tmp_path):
    """A top_k=1 point of a sweep is not shown as the config's top-4."""
    from infermeter import RunConfig, Store, profile
    from infermeter.knobs import KNOBS

    db = str(tmp_path / "r.db")
    cfg = RunConfig(model="tiny-qwen3-moe", prompt_tokens=16, new_tokens=2, samples=1)
    with KNOBS["top_k"].apply(tiny_moe, 1):
        run_id = profile(cfg, loaded=tiny_moe, sink=Store(db), knobs={"top_k": 1}).run_id
    r = runner.invoke(app, ["runs", "show", run_id, "--db", db], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert "16 experts top-1" in r.stdout and "knobs top_k=1" in r.stdout
    assert "mode minimal" in r.stdout
    listed = json.loads(runner.invoke(app, ["runs", "list", "--db", db, "--json"]).stdout)
    (row,) = listed["runs"]
    assert row["knobs"] == {"top_k": 1} and row["mode"] == "minimal"
    assert row["statistic"] == "median"
    assert row["ttft_ms"] == Store(db).get(run_id).summary()["ttft_ms"].median
    r = runner.invoke(app, ["runs", "list", "--db", db], env={"COLUMNS": "120"})
    assert "tiny-qwen3-moe (minimal, top_k=1 prompt_tokens=16" in r.stdout
    # in 80 columns the row still fits: the model cell is cut, never the id or the numbers
    r = runner.invoke(app, ["runs", "list", "--db", db], env={"COLUMNS": "80"})
    assert max(len(line) for line in r.stdout.splitlines()) <= 80
    assert run_id in r.stdout


def test_where_the_time_goes_starts_at_the_generate_call(tiny_llama):
    """TTFT and decode time = forward + generate's own work; shares add to 100% per level."""
    from infermeter import RunConfig, profile
    from infermeter.run.components import with_generate_calls

    run = profile(
        RunConfig(prompt_tokens=16, new_tokens=4, samples=2, mode="standard", energy="off"),
        loaded=tiny_llama,
    )
    rows = with_generate_calls(run, run.layers["parts"])
    for phase, wall in (
        ("prefill", sum(s.ttft_ms for s in run.measured)),
        ("decode", sum(s.decode_ms for s in run.measured)),
    ):
        mine = {r["part"]: r for r in rows if r["phase"] == phase}
        assert mine["generate call"]["total_ms"] == pytest.approx(wall)
        assert mine["forward"]["parent"] == "generate call"
        kids = [r for r in rows if r["phase"] == phase and r["parent"] == "generate call"]
        assert sum(r["pct_parent"] for r in kids) == pytest.approx(100.0)
        assert mine["outside forward"]["total_ms"] >= 0
        # generate's own work, split by the token marks: choosing each token after its
        # forward, preparing each decode step; decode adds up exactly, prefill keeps a rest
        # (generate's set-up before the first forward)
        outside = [r for r in rows if r["phase"] == phase and r["parent"] == "outside forward"]
        assert sum(r["pct_parent"] for r in outside) == pytest.approx(100.0)
        assert sum(r["total_ms"] for r in outside) == pytest.approx(
            mine["outside forward"]["total_ms"]
        )
        assert mine["choose_token"]["calls"] == (2 if phase == "prefill" else 6)
        assert mine["choose_token"]["total_ms"] > 0
        if phase == "decode":
            assert mine["prepare_step"]["calls"] == 6 and "rest of generate" not in mine
        else:
            assert "prepare_step" not in mine and mine["rest of generate"]["total_ms"] > 0


def test_counts_are_said_in_the_singular_when_there_is_one():
    """Issue 59: a header said "1 samples"."""
    from infermeter.util.fmt import plural

    assert plural(1, "sample") == "1 sample" and plural(2, "sample") == "2 samples"
    assert plural(0, "run") == "0 runs" and plural(1200, "request") == "1,200 requests"


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["profile", "--bogus"], "no such option: --bogus"),
        (["profile", "--samples", "abc"], "invalid value for '--samples'"),
        (["nosuch"], "no such command 'nosuch'"),
        (["runs", "show"], "missing argument"),
    ],
)
def test_a_usage_error_is_one_line_as_every_other_error(args, needle):
    """Click's usage errors came as five lines in a box titled "Error" while every other error
    is one line `error: ...` (issue 59): now one line, with where to look, exit 2."""
    r = runner.invoke(app, args)
    assert_one_line_error(r, needle, "--help`")
    assert "╭" not in r.output and "Usage:" not in r.output


def test_help_for_no_arguments_is_still_help():
    r = runner.invoke(app, ["runs"])
    assert r.exit_code == 2 and "Usage:" in r.output and "error:" not in r.output
