"""The live feed's cursor: nothing lost when ids commit out of order, nothing sent twice."""

from __future__ import annotations

from infermeter import RunConfig, Store, profile
from infermeter.dashboard.cursor import IdCursor
from infermeter.instrument.tables import LayerRowDoc
from infermeter.store.live import LiveLayersDoc
from infermeter.store.rows import sample_row
from infermeter.store.schema import SampleRow
from tests.helpers import assert_rows_are, doc_keys


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def ids(rows):
    return [r["id"] for r in rows]


def test_an_id_that_commits_late_is_still_sent_once():
    cur = IdCursor(4, gap_wait_s=10.0, clock=Clock())
    assert ids(cur.fresh([{"id": 6}])) == [6]  # 5 is taken but not committed yet
    assert cur.floor == 4  # the floor waits below the gap
    assert ids(cur.fresh([{"id": 6}, {"id": 7}])) == [7]  # 6 not sent again
    assert ids(cur.fresh([{"id": 5}, {"id": 6}, {"id": 7}])) == [5]
    assert cur.floor == 7


def test_a_gap_that_never_fills_is_given_up_after_the_wait():
    clock = Clock()
    cur = IdCursor(0, gap_wait_s=10.0, clock=clock)
    assert ids(cur.fresh([{"id": 1}, {"id": 3}, {"id": 5}])) == [1, 3, 5]
    assert cur.floor == 1
    clock.now = 9.0
    assert cur.fresh([{"id": 3}, {"id": 5}]) == [] and cur.floor == 1
    clock.now = 10.5  # id 2 rolled back: give it up, then wait for 4 afresh
    assert cur.fresh([{"id": 3}, {"id": 5}]) == [] and cur.floor == 3
    clock.now = 21.0
    assert cur.fresh([{"id": 5}]) == [] and cur.floor == 5
    assert ids(cur.fresh([{"id": 2}, {"id": 6}])) == [6]  # below the floor: given up for good


def test_postgresql_ids_committed_out_of_order_all_reach_the_feed(postgres, tiny_llama):
    """Two real transactions on a real server: the later id commits first, then the earlier."""
    store = Store(postgres.new_database())
    run = profile(
        RunConfig(new_tokens=2, samples=1, warmup=0, energy="off"), loaded=tiny_llama, sink=store
    )
    start, _ = store.cursors()
    cur = IdCursor(start)
    template = run.samples[0]
    with store._sessions() as slow, store._sessions() as fast:
        early = sample_row(template)
        early.run_id = run.run_id
        slow.add(early)
        slow.flush()  # takes the next id, not visible yet
        late = sample_row(template)
        late.run_id = run.run_id
        fast.add(late)
        fast.commit()
        assert late.id > early.id
        assert ids(cur.fresh(store.samples_after(cur.floor))) == [late.id]
        slow.commit()
    assert ids(cur.fresh(store.samples_after(cur.floor))) == [early.id]
    assert cur.fresh(store.samples_after(cur.floor)) == [] and cur.floor == late.id
    with store.session("read") as s:
        assert s.query(SampleRow).count() == 3


def test_a_finished_runs_final_layers_reach_the_feed(tmp_path, tiny_llama):
    """A run shorter than one poll never shows its in-progress table: its final one is sent."""
    store = Store(tmp_path / "r.db")
    _, start = store.cursors()
    run = profile(
        RunConfig(new_tokens=2, samples=1, warmup=0, energy="off", mode="standard"),
        loaded=tiny_llama,
        sink=store,
    )
    tables = store.live_layers_after(start)
    assert set(tables[0]) == doc_keys(LiveLayersDoc)
    assert_rows_are(tables[0]["rows"], LayerRowDoc)
    assert [t["run_id"] for t in tables] == [run.run_id]
    assert {r["kind"] for r in tables[0]["rows"]} >= {"block"}
