"""`profile --tp 2` on tiny-llama: two real torchrun processes (gloo), the same greedy tokens as
one process, and every collective counted exactly; analyze adds the communication roofline."""

import json

import pytest
from typer.testing import CliRunner

from infermeter import Store
from infermeter.analysis.communication import ring_seconds
from infermeter.cli.app import app
from infermeter.instrument.collectives import CollectiveRowDoc, CommunicationRowDoc
from tests.helpers import assert_one_line_error, assert_rows_are, interruptible

runner = CliRunner()
ARGS = [
    "-m",
    "tiny-llama",
    "--prompt-tokens",
    "16",
    "--new-tokens",
    "6",
    "--samples",
    "2",
    "--warmup",
    "1",
    "--energy",
    "off",
    "--batch-size",
    "2",
    "--json",
]
HIDDEN, LAYERS, FLOAT32 = 256, 4, 4


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    db = str(tmp_path_factory.mktemp("tp") / "tp.db")
    one = runner.invoke(app, ["profile", *ARGS, "--db", db])
    assert one.exit_code == 0, one.output
    two = runner.invoke(app, ["profile", *ARGS, "--tp", "2", "--db", db])
    assert two.exit_code == 0, two.output
    store = Store(db)
    ids = [json.loads(r.stdout)["meta"]["run_id"] for r in (one, two)]
    return db, store.get(ids[0]), store.get(ids[1])


def test_two_processes_give_the_same_greedy_tokens_as_one(runs):
    _, one, two = runs
    assert two.knobs["tp"] == 2 and two.model_info["spec"] == "tiny-llama"
    assert [s.output_text for s in two.samples] == [s.output_text for s in one.samples]
    assert "gloo" in " ".join(two.notes)


def test_two_all_reduces_per_block_per_forward_with_the_exact_bytes(runs):
    _, _, two = runs
    rows = two.layers["collectives"]
    assert_rows_are(rows, CollectiveRowDoc)
    assert_rows_are(two.layers["communication"], CommunicationRowDoc)
    assert {r["op"] for r in rows} == {"all_reduce"}  # the plan keeps the LM head whole
    assert sorted({r["layer"] for r in rows}) == list(range(LAYERS))
    for r in rows:
        assert r["count_per_forward"] == 2.0  # attention output and MLP down projection
    for r in rows:  # each call: batch x new positions of its forward x hidden x float32
        assert r["bytes_per_position"] == HIDDEN * FLOAT32
    phases = {p["phase"]: p for p in two.layers["communication"]}
    dec = phases["decode"]
    assert dec["collectives"] == 2 * LAYERS * dec["forwards"]
    assert dec["bytes"] == 2 * LAYERS * dec["positions"] * HIDDEN * FLOAT32
    pre = phases["prefill"]  # prompt forwards move batch x their positions x hidden each
    assert pre["bytes"] == 2 * LAYERS * pre["positions"] * HIDDEN * FLOAT32
    for p in phases.values():
        assert 0 < p["comm_share"] < 1 and p["comm_ms"] + p["compute_ms"] == pytest.approx(
            p["forward_ms"]
        )


def test_analyze_shows_the_communication_roofline(runs):
    db, _, two = runs
    r = runner.invoke(app, ["analyze", two.run_id, "--db", db, "--json"])
    assert r.exit_code == 0, r.output
    comm = json.loads(r.stdout)["communication"]
    assert comm["processes"] == 2
    dec = next(p for p in comm["phases"] if p["phase"] == "decode")
    calls = [r for r in two.layers["collectives"] if r["phase"] == "decode"]
    forwards = next(p["forwards"] for p in two.layers["communication"] if p["phase"] == "decode")
    # ring over 2 processes: 2 (N-1)/N = 1 x the bytes, at 32 GB/s, + 10 us per call
    want = sum(r["count"] * (r["bytes_per_call"] / 32e9 + 10e-6) for r in calls) / forwards * 1e3
    assert dec["modelled_comm_ms_per_forward"]["pcie4-x16"] == pytest.approx(want)
    links = dec["modelled_comm_ms_per_forward"]
    assert links["nvlink4"] <= links["nvlink3"] <= links["pcie5-x16"] <= links["pcie4-x16"]
    r = runner.invoke(app, ["analyze", two.run_id, "--db", db], terminal_width=250)
    assert "communication over 2 processes" in r.stdout


def test_the_ring_model_by_hand():
    assert ring_seconds("all_reduce", 1e9, 4, 100e9) == pytest.approx(1.5 * 1e9 / 100e9 + 10e-6)
    assert ring_seconds("all_gather", 1e9, 4, 100e9) == pytest.approx(0.75 * 1e9 / 100e9 + 10e-6)
    assert ring_seconds("all_reduce", 1e9, 1, 100e9) == 0.0


def test_models_without_a_plan_or_heads_that_do_not_split_are_refused(tmp_path):
    db = str(tmp_path / "r.db")
    r = runner.invoke(app, ["profile", "-m", "tiny-gpt2", "--tp", "2", "--db", db])
    assert_one_line_error(r, "no tensor-parallel plan", "without --tp")
    r = runner.invoke(app, ["profile", "-m", "tiny-llama", "--tp", "3", "--db", db])
    assert_one_line_error(r, "--tp 3 does not divide", "attention heads")


def _tp_processes(job_marker: str) -> list:
    import psutil

    out = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if any(job_marker in part for part in (p.info["cmdline"] or [])):
                out.append(p)
        except psutil.Error:
            continue
    return out


@pytest.mark.parametrize("sig", ["SIGINT", "SIGKILL"])
def test_no_process_outlives_an_interrupted_or_killed_profile(tmp_path, sig):
    """`profile --tp 2` orphaned its launcher and ranks (they kept writing; the run stayed
    running; the temporary folder stayed) on SIGINT or SIGKILL of the parent (issue 35)."""
    import signal
    import subprocess
    import sys
    import tempfile
    import time
    from pathlib import Path

    from infermeter import Store
    from infermeter.experiments.tensor_parallel import TMP_PREFIX, remove_orphaned_folders

    db = tmp_path / "r.db"
    before = set(Path(tempfile.gettempdir()).glob(f"{TMP_PREFIX}*"))
    parent = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "infermeter",
            "profile",
            "-m",
            "tiny-llama",
            "--tp",
            "2",
            "--prompt-tokens",
            "16",
            "--new-tokens",
            "8",
            "--samples",
            "400",
            "--warmup",
            "0",
            "--db",
            str(db),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=interruptible,
    )
    deadline = time.monotonic() + 180
    folder = None
    while time.monotonic() < deadline:  # until the ranks are measuring
        time.sleep(0.5)
        new = set(Path(tempfile.gettempdir()).glob(f"{TMP_PREFIX}*")) - before
        if new and db.exists() and any(r["status"] == "running" for r in Store(db).list_runs()):
            folder = new.pop()
            break
    assert folder is not None, parent.stderr.read() if parent.poll() is not None else "no run"
    marker = str(folder / "job.json")
    assert len(_tp_processes(marker)) >= 3  # torchrun and two ranks
    parent.send_signal(getattr(signal, sig))
    parent.wait(60)
    deadline = time.monotonic() + 60
    while _tp_processes(marker) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _tp_processes(marker) == []  # every child ended with its parent
    if sig == "SIGINT":
        assert parent.returncode == 130
        assert not folder.exists()
    else:
        assert str(folder) in remove_orphaned_folders()  # the next --tp run cleans it up
        assert not folder.exists()
    # rank 0 stored what it measured (terminated), or the next open marks it crashed
    (run,) = Store(db).list_runs()
    assert run["status"] in ("terminated", "crashed"), run
