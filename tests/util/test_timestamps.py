"""Stored timestamps order runs made within one second."""

from __future__ import annotations

import time

import numpy as np

from infermeter import Store
from infermeter.util.timestamps import now_iso
from tests.helpers import history_run


def test_runs_made_in_one_second_list_newest_first(tmp_path):
    """A profile and a sweep point begun in the same second tied on `created` (kept to the
    second) and were listed in the order of their random ids."""
    store = Store(f"sqlite:///{tmp_path / 'r.db'}")
    rng = np.random.default_rng(0)
    ids = []
    for i in range(4):
        run = history_run(i, 5.0, rng)
        run.created = now_iso()
        ids.append(store.save(run))
        time.sleep(0.003)
    assert [r["id"] for r in store.list_runs()] == ids[::-1]


def test_an_older_row_kept_to_the_second_sorts_among_new_ones():
    old = "2026-11-29T08:40:01+00:00"
    assert "2026-11-29T08:40:00.999+00:00" < old < "2026-11-29T08:40:01.000+00:00"
