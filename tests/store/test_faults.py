"""Fault tests on real processes (short variants; `benchmarks/faults.py` runs the long ones)."""

import pytest

from tests.faults_kit import kill_trials, writers_and_reader


@pytest.mark.slow
def test_sigkill_at_random_moments_loses_no_committed_sample(tmp_path):
    report = kill_trials(tmp_path, trials=3, seed=1, max_delay_s=6.0)
    assert report.trials == 3 and not report.problems, report.problems
    assert report.samples_lost == 0
    assert report.killed >= 1  # at least one trial really died mid-run


@pytest.mark.slow
def test_four_writers_and_the_dashboard_at_once(tmp_path, db_url):
    """On SQLite and on a real PostgreSQL server: no sample lost, no failed request.

    2.5 s of writing: alone here four writers began 273 runs in it on SQLite (581 in 5 s), far
    past the contention the test needs; the writers' loops are CPU the suite pays for."""
    report = writers_and_reader(tmp_path, writers=4, duration_s=2.5, samples=2, db=db_url)
    assert not report.problems, report.problems
    assert report.failed_requests == 0 and report.requests > 0
    assert report.samples_stored == report.samples_expected > 0
    assert report.runs >= 4 * 4  # each writer wrote several runs while the others wrote theirs
