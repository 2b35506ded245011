"""`load --workload` (issue 33, item 4): ShareGPT, multi-turn chat, Azure/BurstGPT and Mooncake
files read into the requests they describe, checked against the files themselves."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from infermeter.cli.app import app
from infermeter.errors import UserError
from infermeter.serving.load import LoadSpec, run_load
from infermeter.workloads.traffic import (
    MOONCAKE_BLOCK_TOKENS,
    load_traffic,
    prefix_reuse,
    resolve,
)
from tests.helpers import assert_load_check, assert_load_doc, assert_one_line_error

runner = CliRunner()


def _path(sample: str) -> Path:
    return resolve(sample)[1]


def _ntok(tok, text: str) -> int:
    return len(tok(text, add_special_tokens=False)["input_ids"])


def test_sharegpt_is_one_request_per_conversation_with_its_reply_length(tiny_llama):
    tok = tiny_llama.tokenizer
    records = json.loads(_path("sharegpt-sample").read_text())
    t = load_traffic("sharegpt-sample", tok, 4096, 100, seed=3)
    assert len(t.turns) == len(records) and t.describe()["multi_turn_sessions"] == 0
    by_question = {r["conversations"][0]["value"]: r["conversations"][1]["value"] for r in records}
    for turn in t.turns:  # the first human turn is the prompt; its reply's length the output
        text = tok.decode(turn.prompt_ids)
        question = next(q for q in by_question if q in text)
        assert turn.new_tokens == _ntok(tok, by_question[question])
    assert load_traffic("sharegpt-sample", tok, 4096, 5, seed=3).turns == t.turns[:5]


def test_chat_sessions_send_each_turn_with_its_history(tiny_llama):
    tok = tiny_llama.tokenizer
    lines = [json.loads(x) for x in _path("chat-sample").read_text().splitlines()]
    t = load_traffic("chat-sample", tok, 4096, 1000)
    users = sum(m["role"] == "user" for x in lines for m in x["messages"])
    assert len(t.turns) == users and t.describe()["sessions"] == len(lines)
    for prev, turn in zip(t.turns, t.turns[1:], strict=False):
        if turn.turn == 0:
            continue
        assert turn.session == prev.session and turn.turn == prev.turn + 1
        # the history: the previous prompt, then the recorded answer, then this user turn
        assert turn.prompt_ids[: len(prev.prompt_ids)] == prev.prompt_ids
    d = t.describe()
    assert d["multi_turn_sessions"] == len(lines) and 0.2 < d["prefix_reuse"] < 1


def test_an_azure_trace_arrives_at_its_own_times_and_lengths(tiny_llama):
    tok = tiny_llama.tokenizer
    frame = pd.read_csv(_path("azure-sample"))
    stamps = pd.to_datetime(frame["TIMESTAMP"])
    expected = (stamps - stamps.iloc[0]).dt.total_seconds().tolist()
    t = load_traffic("azure-sample", tok, 4096, 100)
    assert [x.offset_s for x in t.turns] == pytest.approx(expected)
    assert [len(x.prompt_ids) for x in t.turns] == frame["ContextTokens"].tolist()
    assert [x.new_tokens for x in t.turns] == frame["GeneratedTokens"].tolist()
    fast = load_traffic("azure-sample", tok, 4096, 100, speed=2.0)
    assert [x.offset_s for x in fast.turns] == pytest.approx([e / 2 for e in expected])
    assert t.describe()["prefix_reuse"] == 0  # its rows share no text
    short = load_traffic("azure-sample", tok, 200, 100)  # rows over the context are left out
    over = int((frame["ContextTokens"] + frame["GeneratedTokens"] > 200).sum())
    assert len(short.turns) == len(frame) - over > 0
    assert short.skipped == {"rows over the context of 200 positions": over}


def test_a_burstgpt_csv_reads_too(tiny_llama, tmp_path):
    f = tmp_path / "burst.csv"
    f.write_text(
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
        "5.0,ChatGPT,40,12,52,Conversation log\n"
        "7.5,GPT-4,80,20,100,API log\n"
    )
    t = load_traffic(str(f), tiny_llama.tokenizer, 4096, 10)
    assert [(x.offset_s, len(x.prompt_ids), x.new_tokens) for x in t.turns] == [
        (0.0, 40, 12),
        (2.5, 80, 20),
    ]


def test_mooncake_hash_ids_are_shared_prefixes(tiny_llama):
    tok = tiny_llama.tokenizer
    records = [json.loads(x) for x in _path("mooncake-sample").read_text().splitlines()]
    t = load_traffic("mooncake-sample", tok, 8192, 100)
    assert [len(x.prompt_ids) for x in t.turns] == [r["input_length"] for r in records]
    assert [x.offset_s for x in t.turns] == pytest.approx(
        [(r["timestamp"] - records[0]["timestamp"]) / 1e3 for r in records]
    )
    head = len(tok("a")["input_ids"]) - _ntok(tok, "a")  # BOS in front of every prompt
    for a, ra in zip(t.turns, records, strict=True):
        for b, rb in zip(t.turns, records, strict=True):
            shared = 0
            while shared < min(len(ra["hash_ids"]), len(rb["hash_ids"])) and (
                ra["hash_ids"][shared] == rb["hash_ids"][shared]
            ):
                shared += 1
            n = head + shared * MOONCAKE_BLOCK_TOKENS
            n = min(n, len(a.prompt_ids), len(b.prompt_ids))
            assert a.prompt_ids[:n] == b.prompt_ids[:n]
            if shared < min(len(ra["hash_ids"]), len(rb["hash_ids"])):  # then they differ
                assert a.prompt_ids[n : n + 16] != b.prompt_ids[n : n + 16]

    # the reuse figure against the trace's own blocks: per request, the most tokens of its
    # leading hash ids an earlier request sent (a last block can be partial)
    def shared_tokens(a: dict, b: dict) -> int:
        k = 0
        while k < min(len(a["hash_ids"]), len(b["hash_ids"])) and (
            a["hash_ids"][k] == b["hash_ids"][k]
        ):
            k += 1
        return min(k * MOONCAKE_BLOCK_TOKENS, a["input_length"], b["input_length"])

    reused = sum(
        max([shared_tokens(r, p) for p in records[:i]] or [0]) for i, r in enumerate(records)
    )
    total = sum(r["input_length"] for r in records)
    assert t.describe()["prefix_reuse"] == pytest.approx(reused / total, abs=16 * 16 / total)


def test_prefix_reuse_counts_only_whole_leading_blocks():
    a = list(range(64))
    assert prefix_reuse([a, a]) == 0.5
    assert prefix_reuse([a, a[:32] + [999] * 32]) == pytest.approx(32 / 128)
    assert prefix_reuse([a, [999] * 16 + a[16:]]) == 0  # same blocks after a different start
    assert prefix_reuse([]) == 0


@pytest.mark.parametrize(("server", "requests"), [("static", 6), ("continuous", 4)])
def test_a_multi_turn_load_sends_each_turn_after_the_one_before(
    server, requests, tiny_llama, tmp_path
):
    sessions = tmp_path / "chat.jsonl"
    turns = [
        {"role": "user", "content": "Name a colour."},
        {"role": "assistant", "content": "Blue."},
        {"role": "user", "content": "Another?"},
        {"role": "assistant", "content": "Green, then red."},
        {"role": "user", "content": "And?"},
        {"role": "assistant", "content": "Yellow."},
    ]
    sessions.write_text("".join(json.dumps({"messages": turns}) + "\n" for _ in range(2)))
    doc = run_load(
        LoadSpec(
            model="tiny-llama",
            rate=20.0,
            requests=requests,
            server=server,
            workload=f"chat:{sessions}",
        ),
        loaded=tiny_llama,
    )
    assert_load_doc(doc)
    rows = {r["sample_id"]: r for r in doc["all_samples"]}
    assert len(rows) == requests and doc["meta"]["workload"]["multi_turn_sessions"] >= 1
    later = [r for r in rows.values() if r["turn"] > 0]
    assert later
    for r in later:
        prev = next(
            p for p in rows.values() if p["session"] == r["session"] and p["turn"] == r["turn"] - 1
        )
        assert r["arrival_ms"] >= prev["arrival_ms"] + prev["e2e_ms"] - 1e-6
        assert r["output_tokens"] == r["new_tokens_asked"]


def test_a_trace_load_replays_its_arrival_times(tiny_llama, tmp_path):
    doc = run_load(
        LoadSpec(
            model="tiny-llama",
            requests=4,
            workload="azure-sample",
            trace_speed=4.0,
            server="static",
        ),
        loaded=tiny_llama,
    )
    trace = load_traffic("azure-sample", tiny_llama.tokenizer, 4096, 4, speed=4.0)
    arrivals = [r["arrival_ms"] for r in sorted(doc["all_samples"], key=lambda r: r["sample_id"])]
    assert arrivals == pytest.approx([t.offset_s * 1e3 for t in trace.turns])
    assert doc["meta"]["workload"]["speed"] == 4.0


def test_cli_prints_the_workload_and_stores_it(tmp_path):
    from infermeter import Store

    db = str(tmp_path / "r.db")
    r = runner.invoke(
        app,
        [
            "load",
            "--workload",
            "mooncake-sample",
            "--requests",
            "4",
            "--trace-speed",
            "8",
            "--server",
            "static",
            "--db",
            db,
        ],
        env={"COLUMNS": "250"},
    )
    assert r.exit_code == 0, r.output
    assert "workload mooncake" in r.output and "prefix reuse" in r.output
    (run,) = Store(db).list_runs()
    load = Store(db).get(run["id"]).checks["load"]
    assert_load_check(load)
    stored = load["workload"]
    assert stored["kind"] == "mooncake" and stored["requests"] == 4 and "mean_rate_rps" in stored


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--workload", "nope.json"], "no such file"),
        (["--workload", "chat-sample", "--new-tokens", "8"], "--new-tokens would be ignored"),
        (["--workload", "azure-sample", "--rate", "3"], "--rate would be ignored"),
        (["--workload", "chat-sample", "--trace-speed", "2"], "a chat workload has no times"),
        (["--trace-speed", "2"], "--trace-speed replays a trace"),
        (
            ["--workload", "azure-sample", "--trace-speed", "0"],
            "--trace-speed 0 is out of range; use above 0",
        ),
    ],
)
def test_bad_workload_options_are_one_line(args, needle, tmp_path):
    r = runner.invoke(app, ["load", *args, "--db", str(tmp_path / "r.db")])
    assert_one_line_error(r, needle)


def test_bad_workload_files_are_one_line(tiny_llama, tmp_path):
    bad_csv = tmp_path / "t.csv"
    bad_csv.write_text("a,b\n1,2\n")
    bad_json = tmp_path / "x.jsonl"
    bad_json.write_text('{"messages": []}\nnot json\n')
    odd = tmp_path / "odd.txt"
    odd.write_text("hello\n")
    for spec, needle in (
        (str(bad_csv), "neither Azure's nor BurstGPT's"),
        (f"chat:{bad_json}", "line 2 is not JSON"),
        (str(odd), "cannot tell its format"),
        ("mooncake-sample", "gives no request"),
    ):
        with pytest.raises(UserError, match=needle):
            load_traffic(spec, tiny_llama.tokenizer, 100 if "mooncake" in spec else 4096, 10)
    assert math.isfinite(
        load_traffic("chat-sample", tiny_llama.tokenizer, 4096, 1).describe()["prefix_reuse"]
    )


@pytest.mark.parametrize(
    ("record", "needle"),
    [
        (
            '{"timestamp": NaN, "input_length": 10, "output_length": 2}',
            "record 2 has timestamp nan",
        ),
        ('{"timestamp": Infinity, "input_length": 10, "output_length": 2}', "timestamp inf"),
        ('{"timestamp": -5, "input_length": 10, "output_length": 2}', "timestamp -0.005"),
        ('{"timestamp": 1e15, "input_length": 10, "output_length": 2}', "after the first"),
        ('{"timestamp": 9, "input_length": 200000000, "output_length": 2}', "200,000,000 prompt"),
    ],
)
def test_a_trace_record_out_of_range_is_refused_before_any_request(
    record, needle, tiny_llama, tmp_path
):
    """Issue 58: a NaN timestamp ran the load and then failed at the store, Infinity or a
    far-future time waited for ever, a 200M-token prompt allocated 4.7 GB at an endpoint."""
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 10, "output_length": 2}\n' + record + "\n")
    with pytest.raises(UserError, match=needle):
        load_traffic(f"mooncake:{trace}", tiny_llama.tokenizer, 4096, 10)


def test_a_burstgpt_row_without_a_token_count_is_named(tiny_llama, tmp_path):
    trace = tmp_path / "b.csv"
    trace.write_text("Timestamp,Request tokens,Response tokens\n1,10,3\n2,10,\n")
    with pytest.raises(UserError, match="record 2 has token counts 10 and nan"):
        load_traffic(f"azure:{trace}", tiny_llama.tokenizer, 4096, 10)
