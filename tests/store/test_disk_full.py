"""A full disk (issue 35, item 11), on a real tmpfs of a few hundred KB mounted by the test
(root only: skipped with the reason elsewhere). Files appear whole or not at all, every error is
one line naming the file and the fix, and what was stored before stays readable."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from infermeter.cli.app import app
from infermeter.store import Store
from tests.helpers import assert_one_line_error

runner = CliRunner()


def _mount(tmp_path: Path, size: str) -> Path:
    mnt = tmp_path / f"disk-{uuid.uuid4().hex[:6]}"
    mnt.mkdir()
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)],
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {r.stderr.strip()[:120]}")
    return mnt


@pytest.fixture
def small_disk(tmp_path):
    """A 512 KiB tmpfs, unmounted afterwards."""
    mnt = _mount(tmp_path, "512k")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


@pytest.fixture
def disk_4m(tmp_path):
    """A 4 MiB tmpfs (room for a database and its log), unmounted afterwards."""
    mnt = _mount(tmp_path, "4m")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def _fill(disk: Path, leave_bytes: int) -> Path:
    """Fill the disk but `leave_bytes`; return the filler file."""
    import os

    filler = disk / "filler"
    st = os.statvfs(disk)
    free = st.f_bavail * st.f_frsize
    filler.write_bytes(b"\0" * max(0, free - leave_bytes))
    return filler


def _no_partial_files(folder: Path) -> None:
    for f in folder.rglob("*"):
        if f.is_file():
            assert ".tmp" not in f.name, f
            assert f.stat().st_size > 0, f


def _profile(db, new_tokens: int, samples: int, mode: str = "minimal"):
    """`infermeter profile` of tiny-llama into `db`, in this process."""
    return runner.invoke(
        app,
        ["profile", "-m", "tiny-llama", "--new-tokens", str(new_tokens), "--samples", str(samples)]
        + ["--mode", mode, "--db", str(db)],
    )


@pytest.fixture(scope="module")
def stored_run(tmp_path_factory):
    db = tmp_path_factory.mktemp("db") / "r.db"
    r = _profile(db, 4, 2, "standard")
    assert r.exit_code == 0, r.output
    return str(db), Store(db).list_runs()[0]["id"]


def test_report_and_export_to_a_full_disk_are_one_line_and_leave_no_partial_file(
    small_disk, stored_run
):
    db, run_id = stored_run
    out = small_disk / "out"
    out.mkdir()
    filler = _fill(small_disk, 20_000)  # room for a small file, not for the figures
    r = runner.invoke(app, ["report", run_id, "--out", str(out), "--db", db])
    assert_one_line_error(r, "no space left on the device", str(out), "--out")
    _no_partial_files(out)
    for fmt in ("csv", "json", "chrome-trace"):
        filler.write_bytes(b"")
        _fill(small_disk, 0)
        r = runner.invoke(app, ["export", run_id, "--format", fmt, "--out", str(out), "--db", db])
        assert_one_line_error(r, "no space left on the device", "--out")
        _no_partial_files(out)
    filler.unlink()
    r = runner.invoke(app, ["export", run_id, "--format", "json", "--out", str(out), "--db", db])
    assert r.exit_code == 0, r.output  # with room again it works


def test_a_profile_whose_database_fills_the_disk_is_one_line_and_the_store_stays_readable(
    small_disk,
):
    db = small_disk / "r.db"
    r = _profile(db, 2, 1)
    assert r.exit_code == 0, r.output
    filler = _fill(small_disk, 0)
    r = _profile(db, 4, 3, "standard")
    assert r.exit_code != 0 and "Traceback" not in r.output
    assert "internal error" not in r.output, r.output
    assert "full" in r.output.strip().splitlines()[-1], r.output
    r = runner.invoke(app, ["runs", "list", "--db", str(db)])  # the disk is still full
    assert r.exit_code == 0, r.output
    filler.unlink()
    runs = Store(db).list_runs()
    assert runs[-1]["status"] == "finished"  # the run stored before is whole
    assert all(x["status"] != "running" for x in runs), runs  # none left "running"


def test_a_run_cut_short_by_a_full_disk_is_marked_failed_once_there_is_room(disk_4m):
    """Issue 58: a run whose sample writes found the disk full stayed `running` for as long
    as its process lived (the "process is gone" check never fires for a notebook, a sweep
    or the dashboard). The next open with room marks it failed, naming the disk; the
    samples stored before the disk filled are kept."""
    from infermeter.store.writes import CUT_BY_FULL_DISK

    db = disk_4m / "r.db"
    assert _profile(db, 2, 1).exit_code == 0
    filler = _fill(disk_4m, 150_000)  # room for the run and a sample or two, not 40 deep ones
    r = _profile(db, 8, 40, "deep")
    assert r.exit_code == 2 and "is full" in r.output.strip().splitlines()[-1], r.output
    Store(db)  # no room yet: the mark waits, and the open still works
    filler.unlink()
    cut = [x for x in Store(db).list_runs() if x["status"] != "finished"]
    assert len(cut) == 1, cut  # this process is alive: only the disk's mark ends the run
    run = Store(db).get(cut[0]["id"])
    assert run.status == "failed" and run.error == CUT_BY_FULL_DISK
    assert run.samples  # what was stored before the disk filled is kept
