import sqlite3
import subprocess
import sys

import pytest

from infermeter import UserError
from infermeter.run import RunConfig, profile
from infermeter.store import Store
from infermeter.store.schema import SCHEMA_VERSION, RunRow


@pytest.fixture(scope="module")
def result(tiny_llama):
    return profile(
        RunConfig(prompt_tokens=16, new_tokens=5, samples=2, warmup=1), loaded=tiny_llama
    )


def test_round_trip_keeps_every_number(result, db_url):
    store = Store(db_url)
    rid = store.save(result)
    back = store.get(rid)
    assert back.status == "finished" and back.run_id == rid
    assert back.config == result.config and back.model_info == result.model_info
    assert back.phases == pytest.approx(result.phases)
    assert len(back.samples) == 3
    for a, b in zip(result.samples, back.samples, strict=True):
        assert a == b  # frozen dataclasses: every field, every step time, exactly
    assert back.to_json()["summary"] == result.to_json()["summary"]


def test_list_filter_delete_and_prefix(result, db_url):
    store = Store(db_url)
    ids = [store.save(result) for _ in range(2)]
    rows = store.list_runs()
    assert {r["id"] for r in rows} == set(ids)
    m = result.measured
    assert rows[0]["samples"] == 2
    assert rows[0]["ttft_ms"] == pytest.approx(sum(s.ttft_ms for s in m) / 2)
    assert rows[0]["tpot_ms"] == pytest.approx(sum(s.tpot_ms for s in m) / 2)
    assert store.list_runs(model="other") == []
    assert len(store.list_runs(status="finished")) == 2
    assert store.get(ids[0][:8]).run_id == ids[0]
    assert store.delete(ids[0]) == ids[0]
    assert [r["id"] for r in store.list_runs()] == [ids[1]]
    with pytest.raises(UserError, match="no run"):
        store.get(ids[0])
    with pytest.raises(UserError, match="not a run id"):
        store.get("../etc")
    assert len(store.runs_frame()) == 1


def test_run_left_running_by_a_dead_process_is_marked_crashed(result, db_url):
    db = db_url
    store = Store(db)
    rid = store.begin_run(result)
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    with store.session() as s:  # pretend that short-lived process owned the run
        s.get(RunRow, rid).pid = proc.pid
    alive = store.begin_run(result)  # this process is alive: must stay running
    Store(db)  # "the next start"
    again = Store(db)
    assert again.get(rid).status == "crashed"
    assert "ended without finishing" in again.get(rid).error
    assert again.get(alive).status == "running"


def test_locked_database_is_a_user_error(tmp_path, result):
    db = tmp_path / "r.db"
    Store(db)
    holder = sqlite3.connect(db)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(UserError, match="is locked by another process"):
            Store(db, timeout_s=0.2).save(result)
    finally:
        holder.rollback()
        holder.close()


def test_unreadable_and_newer_databases(tmp_path):
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(UserError, match="is unreadable"):
        Store(junk)
    db = tmp_path / "new.db"
    Store(db)
    with sqlite3.connect(db) as c:
        c.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    with pytest.raises(UserError, match="newer than this infermeter"):
        Store(db)


def test_a_write_that_breaks_a_constraint_is_a_bug_not_an_unreadable_file(tmp_path):
    """A progress row without its counts (a writer's mistake) was reported as "database is
    unreadable ... move the file aside (it is not an infermeter database)": bad advice about
    a good file. It surfaces as the bug it is; the file stays readable."""
    from sqlalchemy.exc import IntegrityError

    store = Store(tmp_path / "r.db")
    with pytest.raises(IntegrityError, match="NOT NULL"):
        store.progress("k", {"run_id": "x", "model": "tiny-llama", "stage": "sample"})
    assert store.list_runs() == []


def test_unwritable_database_folder(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(UserError, match="cannot create the database folder"):
        Store(blocker / "sub" / "r.db")


def test_wal_mode_and_default_location(tmp_path, monkeypatch):
    monkeypatch.setenv("INFERMETER_HOME", str(tmp_path / "home"))
    store = Store()
    assert store.where == str(tmp_path / "home" / "infermeter.db")
    with store.engine.connect() as c:
        assert c.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
    monkeypatch.setenv("INFERMETER_DB", f"sqlite:///{tmp_path / 'env.db'}")
    assert Store().where == str(tmp_path / "env.db")


def test_a_version_2_database_is_upgraded_in_place_with_its_ceilings(tmp_path):
    """v3 renamed the ceilings' columns to carry units; a v2 file keeps its measured rows."""
    import socket

    from infermeter.store.schema import SCHEMA_VERSION

    path = tmp_path / "v2.db"
    Store(path)  # current schema, then turned back into version 2's ceilings table
    with sqlite3.connect(path) as c:
        c.execute("DROP TABLE ceilings")
        c.execute(
            "CREATE TABLE ceilings (id INTEGER PRIMARY KEY, device VARCHAR(255), host "
            "VARCHAR(255), flops JSON, bandwidth FLOAT, source TEXT, details JSON, created "
            "VARCHAR(40))"
        )
        c.execute(
            "INSERT INTO ceilings (device, host, flops, bandwidth, source, details, created) "
            "VALUES ('cpu-x', ?, '{\"float32\": 2e11}', 3e10, 'measured', '{}', '2026')",
            (socket.gethostname(),),
        )
        c.execute("UPDATE meta SET value='2' WHERE key='schema_version'")
    got = Store(path).measured_ceilings("cpu-x")
    assert got.flop_per_s == {"float32": 2e11} and got.bandwidth_bytes_per_s == 3e10
    with sqlite3.connect(path) as c:
        cols = {r[1] for r in c.execute("PRAGMA table_info(ceilings)")}
        version = c.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0]
    assert {"flop_per_s", "bandwidth_bytes_per_s"} <= cols and "flops" not in cols
    assert version == str(SCHEMA_VERSION)


def test_a_version_7_database_reads_its_memory_under_the_mib_names(tmp_path):
    """v8 says MiB (`_mib`): v7's `_mb` columns are renamed, its JSON keys read renamed."""
    path = tmp_path / "v7.db"
    store = Store(path)
    run = profile(
        RunConfig(model="tiny-llama", prompt_tokens=8, new_tokens=2, samples=1, warmup=0),
        sink=store,
    )
    rss = run.samples[0].rss_peak_mib
    assert rss and run.model_info["weights_mib"] > 0
    with sqlite3.connect(path) as c:  # written as version 7 wrote it
        c.execute("ALTER TABLE samples RENAME COLUMN rss_peak_mib TO rss_peak_mb")
        c.execute("ALTER TABLE samples RENAME COLUMN peak_allocated_mib TO peak_allocated_mb")
        for table, column in (("samples", "memory"), ("runs", "model_info")):
            for rowid, text in c.execute(f"SELECT rowid, {column} FROM {table}").fetchall():
                old = text.replace("_mib", "_mb")
                c.execute(f"UPDATE {table} SET {column} = ? WHERE rowid = ?", (old, rowid))
        c.execute("UPDATE meta SET value='7' WHERE key='schema_version'")
        assert '"rss_peak_mb"' in c.execute("SELECT memory FROM samples").fetchone()[0]
    again = Store(path).get(run.run_id)
    assert again.samples[0].rss_peak_mib == rss and again.summary()["rss_peak_mib"].n == 1
    assert again.model_info["weights_mib"] == run.model_info["weights_mib"]
    assert "weights_mb" not in again.model_info
    with sqlite3.connect(path) as c:
        cols = {r[1] for r in c.execute("PRAGMA table_info(samples)")}
        version = c.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0]
    assert {"rss_peak_mib", "peak_allocated_mib"} <= cols and "rss_peak_mb" not in cols
    assert version == str(SCHEMA_VERSION) == "9"


def _version_3_database(path):
    """A database as schema 3 left it: no progress table."""
    Store(path)
    with sqlite3.connect(path) as c:
        c.execute("DROP TABLE progress")
        c.execute("UPDATE meta SET value='3' WHERE key='schema_version'")
    return path


def test_a_version_3_database_gets_the_progress_table(tmp_path):
    path = _version_3_database(tmp_path / "v3.db")
    store = Store(path)
    store.progress("k1", {"model": "m", "stage": "load", "done": 0, "total": 1, "tokens": 0})
    assert [r["stage"] for r in store.progress_rows()] == ["load"]


def test_progress_of_a_profile_from_its_load_to_its_end(db_url, monkeypatch):
    """The live line exists while the model loads (no run yet), then names the run and counts
    tokens sample by sample, and is gone when the profile ends."""
    from infermeter.run.progress import LiveProgress

    monkeypatch.setattr(LiveProgress, "MIN_INTERVAL_S", 0.0)  # every change written
    store = Store(db_url)
    seen = []

    def look(stage, done, total):
        seen.append((stage, done, total, [dict(r) for r in store.progress_rows()]))

    profile(
        RunConfig(model="tiny-llama", prompt_tokens=8, new_tokens=3, samples=2, warmup=1),
        sink=store,
        on_progress=look,
    )
    # at "load done" the line written at "load started" is there: no run yet
    ((loading,),) = [rows for stage, done, _, rows in seen if stage == "load" and done == 1]
    assert (loading["stage"], loading["done"], loading["run_id"]) == ("load", 0, None)
    samples = [(done, rows) for stage, done, _, rows in seen if stage == "sample"]
    assert [d for d, _ in samples] == [1, 2]
    second = samples[1][1]
    assert len(second) == 1 and second[0]["run_id"] is not None
    assert second[0]["stage"] == "sample" and second[0]["done"] == 1  # the callback runs first
    assert second[0]["tokens"] == 3 * 2  # the warm-up and the first sample, 3 tokens each
    assert store.progress_rows() == []


def test_nan_and_infinities_round_trip_through_the_store_and_out_as_strict_json(result, db_url):
    """A sensor that returned NaN or a step that overflowed must not break storing or export."""
    import json
    import math
    from dataclasses import replace

    from infermeter.util.jsonio import to_json_text

    odd = replace(
        result.samples[-1],
        step_ms=(1.5, math.nan, math.inf),
        memory={**result.samples[-1].memory, "rss_peak_mib": math.nan},
    )
    run = replace(result, samples=[*result.samples[:-1], odd], phases={"load_ms": math.inf})
    store = Store(db_url)
    back = store.get(store.save(run))
    steps = back.samples[-1].step_ms
    assert steps[0] == 1.5 and math.isnan(steps[1]) and steps[2] == math.inf  # packed exactly
    text = to_json_text(back.to_json())
    doc = json.loads(text)  # strict: no NaN or Infinity tokens
    assert "NaN" not in text and "Infinity" not in text
    assert doc["all_samples"][-1]["step_ms"] == [1.5, None, None]
    assert doc["meta"]["phases"]["load_ms"] is None


def test_two_processes_opening_an_old_database_at_once_both_succeed(tmp_path):
    """The upgrade runs once; neither process fails on the other's half-done work."""
    path = _version_3_database(tmp_path / "old.db")
    code = (
        "import sys, time; from infermeter.store import Store; "
        "time.sleep(max(0.0, float(sys.argv[2]) - time.time())); "
        "Store(sys.argv[1]); print('ok')"
    )
    import time

    start = str(time.time() + 3.0)  # both start their open at the same moment
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(path), start],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, [err for _, err in outs]
    with sqlite3.connect(path) as c:
        version = c.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        assert version == (str(SCHEMA_VERSION),)
        assert c.execute("SELECT count(*) FROM sqlite_master WHERE name='progress'").fetchone()[0]
        columns = [r[1] for r in c.execute("PRAGMA table_info(progress)")]
        assert "steps" in columns  # schema 5


def test_progress_writes_are_throttled_but_the_end_always_lands():
    """At most one write per interval (each is a commit), except registration and the end."""
    from infermeter.run.progress import LiveProgress

    class Recorder:  # a ProgressSink that keeps what it was given
        def __init__(self):
            self.writes = []

        def progress(self, key, state):
            self.writes.append(state)

    sink = Recorder()
    live = LiveProgress(sink, "tiny-llama")
    for i in range(50):  # 50 quick changes
        live("sample", i + 1, 50)
    live.registered("abc")
    live.end()
    assert 2 <= len(sink.writes) <= 4  # the first change, registration, the end
    assert sink.writes[-2]["run_id"] == "abc" and sink.writes[-1] is None


def test_a_version_4_database_gains_the_live_steps_column(tmp_path):
    path = tmp_path / "v4.db"
    Store(path).progress("k", {"model": "m", "stage": "load", "done": 0, "total": 1, "tokens": 0})
    with sqlite3.connect(path) as c:
        c.execute("ALTER TABLE progress DROP COLUMN steps")
        c.execute("UPDATE meta SET value='4' WHERE key='schema_version'")
    store = Store(path)
    steps = {"tokens": 3, "of": 8, "ttft_ms": 10.0, "step_ms": [3.0, 4.0], "first_step": 0}
    store.progress(
        "k", {"model": "m", "stage": "sample", "done": 1, "total": 2, "tokens": 3, "steps": steps}
    )
    assert [r["steps"] for r in store.progress_rows()] == [steps]
    with sqlite3.connect(path) as c:
        version = c.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        assert version == (str(SCHEMA_VERSION),)


def test_an_old_postgresql_database_is_upgraded_in_place(postgres, result):
    """The upgrade path on PostgreSQL: renamed and added columns, a missing table, the version.

    A version-2 shaped database (ceilings' old column names, no progress.steps, no predictions
    table) with a run in it opens, keeps the run, and gains what it lacks.
    """
    from sqlalchemy import create_engine, inspect, text

    url = postgres.new_database()
    rid = Store(url).save(result)
    engine = create_engine(url)
    with engine.begin() as c:
        c.execute(text("ALTER TABLE ceilings RENAME COLUMN flop_per_s TO flops"))
        c.execute(text("ALTER TABLE ceilings RENAME COLUMN bandwidth_bytes_per_s TO bandwidth"))
        c.execute(text("ALTER TABLE progress DROP COLUMN steps"))
        c.execute(text("DROP TABLE predictions"))
        c.execute(text("UPDATE meta SET value='2' WHERE key='schema_version'"))
    store = Store(url)
    assert store.get(rid).run_id == rid
    insp = inspect(engine)
    ceiling_columns = {c["name"] for c in insp.get_columns("ceilings")}
    assert {"flop_per_s", "bandwidth_bytes_per_s"} <= ceiling_columns
    assert "steps" in {c["name"] for c in insp.get_columns("progress")}
    assert "predictions" in insp.get_table_names()
    with engine.connect() as c:
        version = c.execute(text("SELECT value FROM meta WHERE key='schema_version'")).scalar()
    assert version == str(SCHEMA_VERSION)
    engine.dispose()


def test_a_damaged_infermeter_database_is_called_damaged_with_the_way_to_recover(tmp_path):
    """Issue 59: a damaged infermeter database was called "not an infermeter database" with
    the advice to move it aside; SQLite says its pages are malformed, and `.recover` gets back
    what it can. The file is left as it was."""
    import os

    db = tmp_path / "r.db"
    Store(db)
    with sqlite3.connect(db) as con:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    size = os.path.getsize(db)
    with open(db, "r+b") as f:  # every page after the schema's: the tables' roots included
        f.seek(8192)
        f.write(b"\xff" * (size - 8192))
    before = db.read_bytes()
    with pytest.raises(UserError, match="is damaged .*malformed.*\\.recover") as caught:
        Store(db).list_runs()
    assert "not an infermeter database" not in str(caught.value)
    assert db.read_bytes() == before
