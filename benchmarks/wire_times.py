"""Each streamed request's times as the loopback interface saw them: a reference no client wrote.

Why: `transformers serve` reports no timings of its own, so two clients' TTFT and TPOT against
it could only be compared raw, and on a 2-core host the server's speed moves between runs by
more than the clients differ (docs/serving.md). The kernel's packet capture is a third witness
that neither client wrote: tcpdump stamps each packet as it passes the loopback device, tshark
decodes the capture, and this module cuts each TCP connection into requests (a client payload
after a server response starts the next request on a kept-alive connection) and each response
into server-sent events. A request's wire TTFT runs from its last request packet to the packet
that completed its first event carrying text; its wire TPOT is the span from the first to the
last such event over the text events less one. A client's TTFT over the wire's is then what
that client adds, as TTFT over llama.cpp's own prefill time is where the server reports it.

Needs tcpdump (root or CAP_NET_RAW) and tshark: `apt-get install tcpdump tshark`.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Packet:
    """One TCP segment with a payload, as captured."""

    time_s: float
    src_port: int
    dst_port: int
    payload: bytes


@dataclass(frozen=True)
class WireRequest:
    """One request's times on the wire (seconds since the epoch) and its text events."""

    client_port: int
    sent_s: float
    first_text_s: float
    last_text_s: float
    text_events: int

    @property
    def ttft_ms(self) -> float:
        """From the last request segment to the one that completed the first text event."""
        return (self.first_text_s - self.sent_s) * 1e3

    @property
    def tpot_ms(self) -> float | None:
        """The first to the last text event over the events less one; None below two."""
        if self.text_events < 2:
            return None
        return (self.last_text_s - self.first_text_s) * 1e3 / (self.text_events - 1)


def missing_tools() -> str | None:
    """Why no capture can run here, or None."""
    absent = [t for t in ("tcpdump", "tshark") if shutil.which(t) is None]
    if absent:
        return f"{' and '.join(absent)} not installed (apt-get install tcpdump tshark)"
    return None


@contextmanager
def capture(port: int, path: Path) -> Iterator[Path]:
    """Run tcpdump on the loopback device, TCP port `port`, into `path` while the block runs."""
    cmd = ["tcpdump", "-i", "lo", "-U", "-w", str(path), f"tcp port {port}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 10
    while not path.exists() and time.monotonic() < deadline:  # it opens the file once listening
        if proc.poll() is not None:
            err = proc.stderr.read().decode() if proc.stderr else ""
            raise RuntimeError(f"tcpdump failed: {err.strip()[-300:]}")
        time.sleep(0.05)
    time.sleep(0.2)
    try:
        yield path
    finally:
        time.sleep(0.2)  # the last segments reach the file (-U writes each packet)
        proc.terminate()
        proc.wait(10)


def read_packets(path: Path) -> list[Packet]:
    """The capture's segments that carry a payload, in capture order (tshark decodes)."""
    out = subprocess.run(
        ["tshark", "-r", str(path), "-Y", "tcp.len > 0", "-T", "fields"]
        + ["-e", "frame.time_epoch", "-e", "tcp.srcport", "-e", "tcp.dstport"]
        + ["-e", "tcp.payload"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rows = []
    for line in out.splitlines():
        t, src, dst, hexed = line.split("\t")
        rows.append(Packet(float(t), int(src), int(dst), bytes.fromhex(hexed.replace(":", ""))))
    return rows


def _has_text(block: bytes) -> bool:
    """Whether one server-sent event carries generated text (chat delta or completion)."""
    for line in block.split(b"\n"):
        line = line.strip()
        if not line.startswith(b"data:"):
            continue
        try:
            doc = json.loads(line[5:])
        except ValueError:
            return False  # "[DONE]" or a fragment
        choices = doc.get("choices") if isinstance(doc, dict) else None
        if not choices or not isinstance(choices[0], dict):
            return False
        first = choices[0]
        delta = first.get("delta")
        text = delta.get("content") if isinstance(delta, dict) else first.get("text")
        return bool(text)
    return False


@dataclass
class _Open:
    sent_s: float
    buffer: bytes = b""
    answered: bool = False
    first_text_s: float | None = None
    last_text_s: float | None = None
    text_events: int = 0


def _close(port: int, r: _Open | None, out: list[WireRequest]) -> None:
    if r is not None and r.first_text_s is not None and r.last_text_s is not None:
        out.append(WireRequest(port, r.sent_s, r.first_text_s, r.last_text_s, r.text_events))


def wire_requests(packets: list[Packet], server_port: int) -> list[WireRequest]:
    """Requests cut from the packets of every connection to `server_port`, in send order.

    A client segment after the server has answered opens the next request on that connection;
    client segments before any answer extend the request (its sent time is the last of them).
    Events are split on the blank line that ends each one, so an event split across segments
    is stamped with the segment that completed it. Requests without a text event are left out.
    """
    done: list[WireRequest] = []
    open_: dict[int, _Open] = {}
    for p in sorted(packets, key=lambda p: p.time_s):
        if p.dst_port == server_port:  # the client sends
            r = open_.get(p.src_port)
            if r is None or r.answered:
                _close(p.src_port, r, done)
                open_[p.src_port] = _Open(sent_s=p.time_s)
            else:
                r.sent_s = p.time_s
        elif p.src_port == server_port and p.dst_port in open_:
            r = open_[p.dst_port]
            r.answered = True
            r.buffer += p.payload.replace(b"\r\n", b"\n")
            *blocks, r.buffer = r.buffer.split(b"\n\n")
            for block in blocks:
                if _has_text(block):
                    r.first_text_s = r.first_text_s or p.time_s
                    r.last_text_s = p.time_s
                    r.text_events += 1
    for port, r in open_.items():
        _close(port, r, done)
    return sorted(done, key=lambda w: w.sent_s)
