"""A store that stays tidy: deleted space given back, nobody else's database touched, and
commands that only read never create a database."""

import copy
import sqlite3

import pytest
from typer.testing import CliRunner

from infermeter import RunConfig, Store, profile
from infermeter.cli.app import app
from tests.helpers import assert_one_line_error

runner = CliRunner()


@pytest.mark.parametrize(
    "args",
    [
        ["runs", "list"],
        ["runs", "show", "abc123"],
        ["runs", "delete", "abc123"],
        ["runs", "cleanup", "--max-age-days", "1", "--yes"],
        ["sweeps", "list"],
        ["analyze", "abc123"],
        ["compare", "abc123", "abc124"],
        ["report", "abc123"],
        ["db", "vacuum"],
    ],
)
def test_commands_that_only_read_never_create_a_database(args, tmp_path):
    db = tmp_path / "missing" / "runs.db"
    r = runner.invoke(app, [*args, "--db", str(db)])
    assert_one_line_error(r, "no database at", "infermeter profile")
    assert not db.parent.exists()


def test_somebody_elses_database_is_refused_unless_adopted(tmp_path):
    db = tmp_path / "theirs.db"
    with sqlite3.connect(db) as c:
        c.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
        c.execute("INSERT INTO invoices (total) VALUES (12.5)")
    r = runner.invoke(app, ["runs", "list", "--db", str(db)])
    assert_one_line_error(r, "holds tables that are not infermeter's (invoices)", "db adopt")
    with sqlite3.connect(db) as c:  # untouched
        assert [t for (t,) in c.execute("SELECT name FROM sqlite_master WHERE type='table'")] == [
            "invoices"
        ]
    r = runner.invoke(app, ["db", "adopt", "--db", str(db)])
    assert r.exit_code == 0, r.output
    assert runner.invoke(app, ["runs", "list", "--db", str(db)]).exit_code == 0
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT total FROM invoices").fetchone() == (12.5,)  # their data kept


@pytest.fixture(scope="module")
def three_runs(tiny_llama):
    """Three standard-mode profiles (a few hundred KiB each), measured once for the module."""
    config = RunConfig(prompt_tokens=16, new_tokens=64, samples=6, mode="standard", energy="off")
    return [profile(config, loaded=tiny_llama) for _ in range(3)]


def _stored(store, runs):
    """Each run saved afresh into `store` (its own id there); their ids."""
    return [store.save(copy.deepcopy(r)) for r in runs]


def test_cleanup_gives_the_space_back(three_runs, tmp_path):
    db = tmp_path / "r.db"
    store = Store(db)
    _stored(store, three_runs)
    store.vacuum()  # start from a compact file
    before = db.stat().st_size
    r = runner.invoke(app, ["runs", "cleanup", "--max-age-days", "0", "--yes", "--db", str(db)])
    assert r.exit_code == 0, r.output
    assert "deleted 3 runs" in r.output and "MiB given back" in r.output
    after = db.stat().st_size
    assert after < before / 2, (before, after)
    with sqlite3.connect(db) as c:
        assert c.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert c.execute("PRAGMA freelist_count").fetchone() == (0,)


def test_a_new_database_frees_deleted_runs_in_place(three_runs, tmp_path):
    """Incremental auto-vacuum: `runs delete` shrinks the file without rewriting it; an older
    file (no auto-vacuum) is switched over by its first VACUUM."""
    db = tmp_path / "r.db"
    store = Store(db)
    ids = _stored(store, three_runs)
    with sqlite3.connect(db) as c:
        assert c.execute("PRAGMA auto_vacuum").fetchone() == (2,)  # incremental
        c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    before = db.stat().st_size
    for rid in ids[:2]:
        r = runner.invoke(app, ["runs", "delete", rid, "--db", str(db)])
        assert r.exit_code == 0, r.output
    assert "MiB given back" in r.output
    after = db.stat().st_size
    assert after < before * 0.75, (before, after)
    with sqlite3.connect(db) as c:
        assert c.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert c.execute("PRAGMA freelist_count").fetchone() == (0,)
    assert Store(db).get(ids[2]).status == "finished"  # the run kept is whole
    old = tmp_path / "old.db"
    with sqlite3.connect(old) as c:  # a file made before: no auto-vacuum
        c.execute("CREATE TABLE mine (x)")
    old_store = Store(old, adopt=True)
    with sqlite3.connect(old) as c:
        assert c.execute("PRAGMA auto_vacuum").fetchone() == (0,)
    old_store.vacuum()
    with sqlite3.connect(old) as c:
        assert c.execute("PRAGMA auto_vacuum").fetchone() == (2,)


def test_a_version_row_written_first_by_another_process_is_a_race_not_damage():
    """A reader opening a SQLite file the moment a `load` process created it read "UNIQUE
    constraint failed: meta.key" and called the database unreadable (a fresh-clone CI run)."""
    import sqlite3

    from sqlalchemy.exc import IntegrityError

    from infermeter.store.repository import _raced

    clash = sqlite3.IntegrityError("UNIQUE constraint failed: meta.key")
    assert _raced(IntegrityError("INSERT INTO meta", {}, clash))
    other = sqlite3.IntegrityError("UNIQUE constraint failed: samples.run_id")
    assert not _raced(IntegrityError("INSERT INTO samples", {}, other))
