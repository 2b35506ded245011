import json

import pytest
from typer.testing import CliRunner

from infermeter.cli.app import app
from infermeter.run import RunConfig, profile
from infermeter.store import Store

runner = CliRunner()


def _nested_ok(events, tolerance_us=0.5):
    """Complete events on one track must nest: each ends inside any event it starts in."""
    stack = []
    for e in sorted(events, key=lambda e: (e["ts"], -e["dur"])):
        end = e["ts"] + e["dur"]
        while stack and e["ts"] >= stack[-1] - tolerance_us:
            stack.pop()
        if stack and end > stack[-1] + tolerance_us:
            return False
        stack.append(end)
    return True


@pytest.fixture(scope="module")
def stored_run(tiny_llama, tmp_path_factory):
    db = tmp_path_factory.mktemp("db") / "r.db"
    store = Store(db)
    cfg = RunConfig(prompt_tokens=16, new_tokens=5, samples=2, warmup=1, mode="standard")
    run = profile(cfg, loaded=tiny_llama, sink=store)
    return db, run


def test_chrome_trace_export_is_nested_and_complete(stored_run, tmp_path):
    db, run = stored_run
    r = runner.invoke(
        app,
        ["export", run.run_id, "--format", "chrome-trace", "--db", str(db), "--out", str(tmp_path)],
    )
    assert r.exit_code == 0, r.output
    doc = json.loads((tmp_path / f"run-{run.run_id}.trace.json").read_text())
    events = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    by_tid = {}
    for e in events:
        by_tid.setdefault(e["tid"], []).append(e)
        assert e["dur"] >= 0 and e["pid"] == 1
    assert {e["name"] for e in by_tid[1]} == {"load", "move to device"}
    tokens = [e for e in by_tid[2] if e["name"].startswith("token ")]
    assert len(tokens) == 3 * 4  # 3 samples (warm-up included) x 4 tokens after the first
    model = by_tid[3]
    forwards = [e for e in model if e["name"] == "forward"]
    assert len(forwards) == 2 * 5  # measured samples x (prefill + 4 decode steps)
    assert len([e for e in model if e["name"].endswith(" block")]) == 2 * 5 * 4
    assert not [e for e in model if e["name"].startswith("L") and e["name"].endswith(" norm")]
    assert len([e for e in model if e["name"].endswith(" attn")]) == 2 * 5 * 4
    for tid in (2, 3):
        assert _nested_ok(by_tid[tid]), tid  # under 1 us: a slice 1 us over its neighbour fails
    ends = [e["ts"] + e["dur"] for e in tokens]
    assert all(t["ts"] >= end for t, end in zip(tokens[1:], ends, strict=False) if t["ts"] > 0)
    named = {e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name"}
    assert named == {"run phases", "samples", "model"}  # no empty "user sections" track
    # model events sit inside their sample on the common timeline
    samples = [e for e in by_tid[2] if e["name"].startswith("sample") and "warm" not in e["name"]]
    for f in forwards:
        assert any(
            s["ts"] - 2 <= f["ts"] and f["ts"] + f["dur"] <= s["ts"] + s["dur"] + 2 for s in samples
        )


def test_full_detail_includes_norms_and_blocks_detail_only_blocks(stored_run):
    from infermeter.report.trace import chrome_trace

    _, run = stored_run
    full = [e["name"] for e in chrome_trace(run, "full")["traceEvents"] if e.get("tid") == 3]
    blocks = [e["name"] for e in chrome_trace(run, "blocks")["traceEvents"] if e.get("tid") == 3]
    # 2 norms x 4 blocks x 5 forwards x 2 samples, plus the final norm of each forward
    assert sum(n.startswith("L") and n.endswith(" norm") for n in full) == 2 * 4 * 5 * 2
    assert sum(n == "final norm" for n in full) == 5 * 2
    assert not any(n.endswith(" attn") for n in blocks) and len(blocks) < len(full)


def test_packed_trace_round_trips_through_the_store(stored_run):
    db, run = stored_run
    back = Store(db).get(run.run_id)
    assert back.trace["records"] == run.trace["records"]
    assert back.trace["modules"] == run.trace["modules"]
    n = back.trace["count"]
    assert len(back.trace["records"]) < 10 * n  # packed and compressed: under 10 bytes a call


def test_pack_round_trip_exact_to_the_microsecond():
    from infermeter.instrument.packing import pack, unpack

    mids = [0, 1, 2, 1, 0, 3]
    starts = [0.0, 0.0101, 1.5, 2.25, 3000.0, 2999.5]  # ms; not monotonic (parents first)
    durs = [5.0, 0.001, 0.25, 1.0, 12.5, 0.4]
    tag, blob = pack(mids, starts, durs)
    rec = unpack(tag, blob)
    assert rec["mid"].tolist() == mids
    assert rec["start_us"].tolist() == [round(s * 1000) for s in starts]
    assert rec["dur_us"].tolist() == pytest.approx([d * 1000 for d in durs], rel=1e-6)
    assert unpack(*pack([], [], [])).size == 0


def test_json_export_and_bad_format(stored_run, tmp_path):
    db, run = stored_run
    r = runner.invoke(
        app, ["export", run.run_id[:5], "--format", "json", "--db", str(db), "--out", str(tmp_path)]
    )
    assert r.exit_code == 0, r.output
    doc = json.loads((tmp_path / f"run-{run.run_id}.json").read_text())
    assert doc["meta"]["run_id"] == run.run_id and "layers" in doc
    bad = runner.invoke(app, ["export", run.run_id, "--format", "xml", "--db", str(db)])
    assert bad.exit_code == 2 and "unknown format 'xml'" in bad.output
