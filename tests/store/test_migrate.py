"""`infermeter db migrate`: SQLite runs copied into a real PostgreSQL server, nothing lost."""

from typer.testing import CliRunner

from infermeter import RunConfig, Store, profile
from infermeter.cli.app import app
from infermeter.run.sweep import SweepSpec, run_sweep

runner = CliRunner()


def test_sqlite_runs_sweeps_and_calibrations_move_to_postgresql(postgres, tiny_llama, tmp_path):
    src_path = tmp_path / "local.db"
    src = Store(src_path)
    deep = profile(
        RunConfig(new_tokens=3, samples=2, warmup=1, mode="deep", energy="off"),
        loaded=tiny_llama,
        sink=src,
    )
    sweep = run_sweep(
        SweepSpec(
            RunConfig(new_tokens=2, samples=1, warmup=0, energy="off"), {"new_tokens": ["2", "3"]}
        ),
        src,
        loaded=tiny_llama,
    )
    from infermeter.measure.ceilings import Ceilings

    src.save_ceilings(Ceilings("this cpu", {"float32": 1e11}, 2e10, "calibrate", kind="cpu"))
    url = postgres.new_database()

    r = runner.invoke(app, ["db", "migrate", "--db", str(src_path), "--to", url])
    assert r.exit_code == 0, r.output
    assert "copied 3 runs (5 samples), 1 sweeps, 1 calibrations" in r.output
    dst = Store(url, create=False)
    back = dst.get(deep.run_id)
    here = src.get(deep.run_id)
    assert back.samples == here.samples  # every field, every step time
    assert back.layers == here.layers and back.layers
    assert back.to_json() == here.to_json()
    assert back.trace == here.trace and back.trace is not None
    assert sorted(dst.sweep_run_ids(sweep.sweep_id)) == sorted(r.run_id for r in sweep.runs)
    assert dst.measured_ceilings("this cpu").flop_per_s == {"float32": 1e11}

    # again: nothing new to copy, nothing doubled
    r = runner.invoke(app, ["db", "migrate", "--db", str(src_path), "--to", url])
    assert r.exit_code == 0 and "copied 0 runs (0 samples), 0 sweeps, 0 calibrations" in r.output
    assert "3 runs were already there" in r.output
    assert len(dst.list_runs()) == 3


def test_migrating_into_itself_or_from_nothing_is_a_one_line_error(tmp_path):
    db = tmp_path / "a.db"
    Store(db)
    r = runner.invoke(app, ["db", "migrate", "--db", str(db), "--to", str(db)])
    assert r.exit_code != 0 and "--to is the database the runs come from" in r.output
    r = runner.invoke(app, ["db", "migrate", "--db", str(tmp_path / "none.db"), "--to", str(db)])
    assert r.exit_code != 0 and "no database at" in r.output
