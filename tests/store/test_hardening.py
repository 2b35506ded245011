"""Issue 35: the shared store under concurrent first opens, and secrets never shown."""

import subprocess
import sys

import pytest
from typer.testing import CliRunner

from infermeter import UserError
from infermeter.cli.app import app
from infermeter.store import Store
from infermeter.store.engine import shown_url

runner = CliRunner()

#: imports first, says so, then opens the store on a line from stdin: all open at one instant
OPEN = (
    "import sys; from infermeter.store import Store; import sqlalchemy, psycopg\n"
    "print('ready', flush=True); sys.stdin.readline(); Store(sys.argv[1]); print('ok')"
)


def test_processes_opening_a_new_postgresql_database_at_once_all_succeed(postgres):
    """What Ray workers do on a new shared store: failed 20 of 20 trials with two processes
    (PostgreSQL's concurrent CREATE TABLE raises a duplicate key on pg_type, not "already
    exists", and the retry let it through as "not an infermeter database")."""
    for _trial in range(4):
        url = postgres.new_database()
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", OPEN, url],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(3)
        ]
        for p in procs:
            assert p.stdout.readline().strip() == "ready"
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        for p in procs:
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0 and out.strip() == "ok", err[-1500:]
        assert Store(url).list_runs() == []


def test_a_password_is_never_shown():
    url = "postgresql+psycopg://me:S3cret-pw@127.0.0.1:1/nothing"
    assert "S3cret" not in shown_url(url) and "***" in shown_url(url)
    assert shown_url("not a url but:pw@host") == "host"
    with pytest.raises(UserError) as e:  # nothing listens on port 1: a connection error
        Store(url, timeout_s=2)
    assert "S3cret" not in e.value.problem + e.value.fix
    assert "me:***@127.0.0.1:1/nothing" in e.value.problem
    r = runner.invoke(app, ["runs", "list", "--db", url])
    assert r.exit_code == 2 and "S3cret" not in r.output and "***" in r.output


def test_the_profile_card_and_runs_show_hide_the_password(postgres, tiny_llama):
    """Trust authentication accepts any password: the URL carries one, as a user's would."""
    user_url = postgres.new_database()
    scheme, rest = user_url.split("://", 1)
    user, host = rest.split("@", 1)
    url = f"{scheme}://{user}:S3cret-pw@{host}"
    args = [
        "profile",
        "-m",
        "tiny-llama",
        "--prompt-tokens",
        "8",
        "--new-tokens",
        "2",
        "--samples",
        "1",
        "--db",
        url,
    ]
    r = runner.invoke(app, args, terminal_width=200)
    assert r.exit_code == 0, r.output
    assert "S3cret" not in r.output and f"{user}:***@" in r.output
    store = Store(url)
    assert store.where.count("***") == 1 and "S3cret" not in store.where


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_schema_step_another_process_did_first_is_retried_not_refused(
    backend, tmp_path, monkeypatch, request
):
    """The error PostgreSQL raises when a concurrent CREATE TABLE wins (psycopg's
    UniqueViolation on pg_type), once: the open retries and succeeds; before, it read
    "not an infermeter database"."""
    from sqlalchemy.exc import IntegrityError

    from infermeter.store.schema import Base

    class UniqueViolation(Exception):  # psycopg.errors.UniqueViolation's name and message
        pass

    url = (
        f"sqlite:///{tmp_path / 'r.db'}"
        if backend == "sqlite"
        else request.getfixturevalue("postgres").new_database()
    )
    real, calls = Base.metadata.create_all, []

    def create_all(*args, **kwargs):
        calls.append(1)
        real(*args, **kwargs)
        if len(calls) == 1:
            raise IntegrityError(
                "CREATE TABLE runs (...)",
                {},
                UniqueViolation(
                    'duplicate key value violates unique constraint "pg_type_typname_nsp_index"'
                ),
            )

    monkeypatch.setattr(Base.metadata, "create_all", create_all)
    assert Store(url).list_runs() == [] and len(calls) == 2


def test_a_run_in_progress_is_kept_from_delete_and_cleanup_unless_forced(tiny_llama, db_url):
    """`runs delete ID` and `runs cleanup --max-age-days 0 --yes` deleted a running run (exit
    0), and the profile then lost every sample; on SQLite and the real PostgreSQL server."""
    from infermeter import RunConfig, profile

    store = Store(db_url)
    done = store.save(
        profile(RunConfig(prompt_tokens=8, new_tokens=2, samples=1), loaded=tiny_llama)
    )
    live = store.begin_run(store.get(done))  # this process is alive: a run in flight
    from infermeter.store.schema import RunRow

    with store.session() as s:  # both a day old, so cleanup --max-age-days 0 reaches them
        for rid in (done, live):
            s.get(RunRow, rid).created = "2026-01-01T00:00:00+00:00"
    r = runner.invoke(app, ["runs", "delete", live[:8], "--db", db_url])
    assert r.exit_code == 2 and f"run {live} is still running (pid " in r.output, r.output
    assert "--force" in r.output and Store(db_url).get(live).status == "running"
    r = runner.invoke(app, ["runs", "cleanup", "--max-age-days", "0", "--yes", "--db", db_url])
    assert r.exit_code == 0, r.output
    assert "1 run still in progress is kept" in r.output and "deleted 1 run;" in r.output
    assert [x["id"] for x in Store(db_url).list_runs()] == [live]
    with pytest.raises(UserError, match="still running"):
        Store(db_url).delete_many([live])
    r = runner.invoke(app, ["runs", "delete", live, "--db", db_url, "--force"])
    assert r.exit_code == 0 and Store(db_url).list_runs() == []


def _sqlite_state(path) -> tuple[bytes, str, bool]:
    """A SQLite file's bytes, journal mode (read without changing it) and whether a WAL exists."""
    import sqlite3

    data = path.read_bytes()
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    mode = con.execute("PRAGMA journal_mode").fetchone()[0]
    con.close()
    return data, mode, path.with_name(path.name + "-wal").exists()


def test_a_foreign_sqlite_file_is_refused_untouched(tmp_path):
    """It was switched to WAL before the refusal (issue 35, item 4)."""
    import sqlite3

    path = tmp_path / "theirs.db"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    con.execute("INSERT INTO users (name) VALUES ('ada')")
    con.commit()
    con.close()
    before = _sqlite_state(path)
    assert before[1] == "delete"
    r = runner.invoke(app, ["runs", "list", "--db", str(path)])
    assert r.exit_code == 2 and "not infermeter's (users)" in r.output
    with pytest.raises(UserError):
        Store(path)
    assert _sqlite_state(path) == before


@pytest.mark.parametrize("db_url", ["sqlite", "postgresql"], indirect=True)
def test_a_newer_schema_is_refused_before_any_table_is_created(db_url):
    from sqlalchemy import create_engine, inspect, text

    from infermeter.store.schema import SCHEMA_VERSION

    Store(db_url)
    engine = create_engine(db_url)
    with engine.begin() as c:
        c.execute(text("DROP TABLE predictions"))
        c.execute(
            text("UPDATE meta SET value = :v WHERE key = 'schema_version'"),
            {"v": str(SCHEMA_VERSION + 1)},
        )
    r = runner.invoke(app, ["runs", "list", "--db", db_url])
    assert r.exit_code == 2 and "newer than this infermeter" in r.output
    with pytest.raises(UserError, match="newer"):
        Store(db_url)
    assert "predictions" not in inspect(engine).get_table_names()
    engine.dispose()


@pytest.mark.parametrize("db_url", ["sqlite", "postgresql"], indirect=True)
def test_reading_an_empty_database_creates_nothing(db_url, tmp_path):
    """`runs list` on an empty PostgreSQL database created the whole schema."""
    from sqlalchemy import create_engine, inspect

    if db_url.startswith("sqlite"):
        (tmp_path / "r.db").write_bytes(b"")  # an empty file: SQLite's empty database
    r = runner.invoke(app, ["runs", "list", "--db", db_url])
    assert r.exit_code == 2 and "holds no infermeter runs" in r.output, r.output
    engine = create_engine(db_url)
    assert inspect(engine).get_table_names() == []
    engine.dispose()
    if db_url.startswith("sqlite"):
        assert (tmp_path / "r.db").read_bytes() == b""
    assert Store(db_url).list_runs() == []  # a command that writes still makes it ours


def test_a_database_opened_read_only_can_be_listed(tmp_path):
    """A read-only database could not even be listed (the open wrote WAL mode and the
    schema check). SQLite's read-only URI opens it as one a user may not change."""
    path = tmp_path / "r.db"
    r = runner.invoke(
        app,
        [
            "profile",
            "-m",
            "tiny-llama",
            "--new-tokens",
            "2",
            "--samples",
            "1",
            "--warmup",
            "0",
            "--db",
            str(path),
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    run_id = Store(path).list_runs()[0]["id"]
    before = path.read_bytes()
    url = f"sqlite:///file:{path}?mode=ro&uri=true"
    r = runner.invoke(app, ["runs", "list", "--db", url], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert run_id[:8] in r.output
    assert path.read_bytes() == before


#: writes a progress line (the live page's "in progress"), says so, then waits to be killed
PROGRESS = (
    "import sys, time; from infermeter.store import Store\n"
    "Store(sys.argv[1]).progress('k-' + sys.argv[2], {'model': 'm', 'stage': 'sample', "
    "'done': 1, 'total': 3, 'tokens': 4})\n"
    "print('written', flush=True); time.sleep(600)"
)


@pytest.mark.parametrize("db_url", ["sqlite", "postgresql"], indirect=True)
def test_a_killed_profile_leaves_no_in_progress_line(db_url):
    """SIGKILL, a double SIGTERM, disk full: 23 stale lines pushed to the live page after 24
    kills (issue 35, item 7). A line names its process; one whose process is gone is not
    shown, and the next open on its host deletes it."""
    import signal

    from sqlalchemy import create_engine, text

    Store(db_url)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", PROGRESS, db_url, str(i)], stdout=subprocess.PIPE, text=True
        )
        for i in range(2)
    ]
    for p in procs:
        assert p.stdout.readline().strip() == "written"
    store = Store(db_url)
    assert sorted(r["key"] for r in store.progress_rows()) == ["k-0", "k-1"]  # both alive
    procs[0].send_signal(signal.SIGKILL)
    procs[0].wait(30)
    assert [r["key"] for r in store.progress_rows()] == ["k-1"]  # not shown at once
    Store(db_url)  # the next open deletes the dead line, keeps the live one
    engine = create_engine(db_url)
    with engine.connect() as c:
        keys = [k for (k,) in c.execute(text("SELECT key FROM progress"))]
    engine.dispose()
    assert keys == ["k-1"]
    procs[1].kill()
    procs[1].wait(30)
    assert store.progress_rows() == []


def test_cleanup_never_claims_more_than_the_database_held(tmp_path):
    """`cleanup` said "129.2 MiB given back" from a 67.6 MB file: it counted from after the
    delete, whose own WAL growth the vacuum then truncated (issue 35, item 12)."""
    import re

    db = tmp_path / "r.db"
    for _ in range(3):
        r = runner.invoke(
            app,
            [
                "profile",
                "-m",
                "tiny-llama",
                "--new-tokens",
                "4",
                "--samples",
                "2",
                "--mode",
                "standard",
                "--db",
                str(db),
            ],
        )
        assert r.exit_code == 0, r.output
    wal = db.with_name(db.name + "-wal")
    held = db.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
    r = runner.invoke(app, ["runs", "cleanup", "--max-age-days", "0", "--yes", "--db", str(db)])
    assert r.exit_code == 0, r.output
    freed_mib = float(re.search(r"([\d.]+) MiB given back", r.output).group(1))
    assert 0 < freed_mib * 2**20 <= held - db.stat().st_size + 0.05 * 2**20, (freed_mib, held)
    assert not wal.exists() or wal.stat().st_size == 0  # the log, checkpointed


def test_delete_says_the_log_apart_from_the_data(tmp_path):
    """Issue 59: `runs delete` said "3.3 MiB given back" of a 0.9 MiB database: it counted
    the write-ahead log's truncation as data given back."""
    import re
    import sqlite3

    db = tmp_path / "r.db"
    r = runner.invoke(app, ["profile", "--new-tokens", "2", "--samples", "1", "--db", str(db)])
    assert r.exit_code == 0, r.output
    run_id = Store(db).list_runs()[0]["id"]
    raw = sqlite3.connect(db)  # another writer leaves 4 MiB of log behind, not checkpointed
    raw.execute("PRAGMA wal_autocheckpoint=0")
    raw.execute("CREATE TABLE filler (b BLOB)")
    raw.executemany("INSERT INTO filler VALUES (?)", [(b"x" * 4096,) for _ in range(1024)])
    raw.execute("DROP TABLE filler")
    raw.commit()
    raw.close()
    wal = db.with_name(db.name + "-wal")
    log_held, held = wal.stat().st_size, db.stat().st_size + wal.stat().st_size
    r = runner.invoke(app, ["runs", "delete", run_id, "--db", str(db)])
    assert r.exit_code == 0, r.output
    data = float(re.search(r"([\d.]+) MiB given back", r.output).group(1))
    log = float(re.search(r"and ([\d.]+) MiB of write-ahead log", r.output).group(1))
    assert log * 2**20 == pytest.approx(log_held, abs=0.05 * 2**20), r.output
    # the data given back is what the file shed once the log's pages were in it: never more
    # than the disk got back, the log said apart (the old message gave only their sum)
    assert 0 < data * 2**20 <= held - db.stat().st_size + 0.05 * 2**20, r.output


def test_cleanup_and_since_compare_to_the_millisecond(tmp_path, monkeypatch):
    """`created` is kept to the millisecond; the cutoff was cut to the second, so
    `cleanup --max-age-days 0` kept every run made in its own second (a fast profile's)."""
    import datetime as real_dt

    import numpy as np

    import infermeter.cli.runs_cmd as runs_cmd
    from infermeter import Store
    from tests.helpers import history_run

    now = real_dt.datetime(2026, 11, 29, 12, 0, 1, 900_000, tzinfo=real_dt.timezone.utc)

    class FrozenDatetime(real_dt.datetime):
        @classmethod
        def now(cls, tz=None):
            return now

    monkeypatch.setattr(runs_cmd.dt, "datetime", FrozenDatetime)
    db = tmp_path / "r.db"
    store = Store(db)
    rng = np.random.default_rng(0)
    for i, created in enumerate(("2026-11-29T12:00:00+00:00", "2026-11-29T12:00:01.400+00:00")):
        run = history_run(i, 10.0, rng)
        run.created = created
        store.save(run)
    assert runs_cmd.parse_since("1m") == "2026-11-29T11:59:01.900+00:00"
    for since, listed in (("2026-11-29T12:00:01.5", "0 runs"), ("2026-11-29T12:00:01.3", "1 run")):
        r = runner.invoke(app, ["runs", "list", "--since", since, "--db", str(db)])
        assert r.exit_code == 0 and r.output.startswith(listed + ":"), (since, r.output)
    r = runner.invoke(app, ["runs", "cleanup", "--max-age-days", "0", "--yes", "--db", str(db)])
    assert r.exit_code == 0, r.output
    assert "deleted 2 runs" in r.output, r.output  # the one made in the cutoff's second too
    assert Store(db).list_runs() == []
