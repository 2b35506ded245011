"""benchmarks/wire_times.py: requests and their text events cut from captured segments.

The capture itself needs tcpdump and root (the benchmark's `--wire`); here the cutting is held
to segments written as `transformers serve` and llama.cpp's server send them (chunked
server-sent events, one per segment, a kept-alive connection reused).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from wire_times import Packet, wire_requests

SERVER = 8000


def _chunk(doc: dict[str, object]) -> bytes:
    """One server-sent event in a chunked body, as uvicorn frames it."""
    body = b"data: " + json.dumps(doc).encode() + b"\n\n"
    return b"%x\r\n" % len(body) + body + b"\r\n"


def _chat(text: str | None) -> bytes:
    delta = {"role": "assistant"} if text is None else {"content": text}
    return _chunk({"choices": [{"delta": delta, "index": 0}]})


def test_requests_and_text_events_are_cut_from_the_segments():
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n"
    second = _chunk({"choices": [{"text": " b", "index": 0}]})
    packets = [
        Packet(1.000, 5001, SERVER, b"POST /v1/chat/completions HTTP/1.1\r\n\r\n"),
        Packet(1.002, 5001, SERVER, b'{"messages": []}'),  # the body: the request's sent time
        Packet(1.010, SERVER, 5001, head),
        Packet(1.011, SERVER, 5001, _chat(None)),  # the role alone: no text yet
        Packet(1.100, SERVER, 5001, _chat("Hello")),
        Packet(1.140, SERVER, 5001, _chat("!")[:20]),  # an event split across two segments
        Packet(1.150, SERVER, 5001, _chat("!")[20:]),
        Packet(1.190, SERVER, 5001, _chat(" How")),
        Packet(1.191, SERVER, 5001, _chunk({"choices": [{"delta": {}, "finish_reason": "x"}]})),
        Packet(1.192, SERVER, 5001, b"0\r\n\r\n"),
        # the same connection, kept alive: a completions request with one text event
        Packet(2.000, 5001, SERVER, b"POST /v1/completions HTTP/1.1\r\n\r\n{}"),
        Packet(2.050, SERVER, 5001, head + _chunk({"choices": [{"text": "a", "index": 0}]})),
        Packet(2.080, SERVER, 5001, second + b"data: [DONE]\n\n"),
        # another connection whose response never carried text: left out
        Packet(3.000, 5002, SERVER, b"POST /v1/completions HTTP/1.1\r\n\r\n{}"),
        Packet(3.010, SERVER, 5002, head + _chunk({"error": "overloaded"})),
    ]
    first, kept_alive = wire_requests(packets, SERVER)
    assert first.client_port == kept_alive.client_port == 5001
    assert first.sent_s == 1.002 and first.text_events == 3
    assert first.ttft_ms == pytest.approx(98.0)
    assert first.tpot_ms == pytest.approx((1.190 - 1.100) * 1e3 / 2)  # the split one at 1.150
    assert kept_alive.sent_s == 2.000 and kept_alive.text_events == 2
    assert kept_alive.ttft_ms == pytest.approx(50.0) and kept_alive.tpot_ms == pytest.approx(30.0)
