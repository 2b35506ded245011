"""A null OpenAI-compatible server: canned tokens at known times, for measuring the client.

Why: a load client adds its own latency (parsing events, counting tokens, its event loop) and
has a ceiling of its own; the field's clients have mis-measured by 6.6x without saying so. A
server whose every delay is known, on 127.0.0.1, measures both: what the client sees minus
what the server says it did is what the client (and loopback HTTP) added.

It answers `/health`, `/v1/models`, and streamed `/v1/completions` and
`/v1/chat/completions`: `ttft_ms` after a request arrives its first token, then one token
every `itl_ms`, `max_tokens` of them (at most `tokens` when that is set), each chunk one
`piece` of text. Its last chunk carries llama.cpp's `timings` (the delays it really slept,
measured) and, when asked, `usage`. A request's body may set its own delays
(`null_ttft_ms`, `null_itl_ms`), or answer with only an EOS (`null_eos_only`); every
`bad_every`-th request streams a chunk that is not JSON (`bad_chunk="shape"`: JSON whose
`choices` is not a list). `slow_after` requests in, it
multiplies its delays by `slow_factor`: a server that changes speed mid-run, for the drift
verdict's test.

Run it as `python -m infermeter.serving.nullserver --port 0` (it prints `listening on PORT`);
`null_server(...)` does so in a subprocess, so its work never shares the client's core.

Built on asyncio's streams and h11 (the HTTP/1.1 protocol library under httpx): each chunk is
written and drained the moment it is due. A starlette app under uvicorn was tried first and
dropped: with two requests in flight it held a stream's chunks back and sent them together,
35 ms late (measured here with a plain httpx client, which an asyncio-and-h11 server
answered on time), an error the null server exists to rule out.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

#: the bad chunks a null server can send: one that is not JSON, one of the wrong shape
BAD_CHUNKS = {
    "json": b"{not json",
    "shape": b'{"object": "text_completion", "choices": "not a list"}',
}


@dataclass(frozen=True)
class NullSpec:
    """The null server's behaviour."""

    ttft_ms: float = 0.0
    itl_ms: float = 0.0
    #: the most tokens a request gets (0: as many as it asks)
    tokens: int = 0
    #: the text of each streamed token (one token under the client's tokenizer)
    piece: str = " the"
    #: after this many requests (0: never), every delay is multiplied by `slow_factor`
    slow_after: int = 0
    slow_factor: float = 1.0
    model: str = "null"
    #: every this-many-th request (0: none) streams a bad chunk, then stops
    bad_every: int = 0
    #: what that chunk is: "json" (not JSON at all) or "shape" (JSON of the wrong shape)
    bad_chunk: str = "json"
    #: after this many requests on one kept-alive connection (0: never), the next request on
    #: it is answered by closing it, unanswered: the race a server that caps its keep-alive
    #: (llama.cpp's) sets a client that reuses connections
    drop_after: int = 0

    def args(self) -> list[str]:
        """The command-line arguments that give this spec."""
        return [
            f"--ttft-ms={self.ttft_ms}",
            f"--itl-ms={self.itl_ms}",
            f"--tokens={self.tokens}",
            f"--piece={self.piece}",
            f"--slow-after={self.slow_after}",
            f"--slow-factor={self.slow_factor}",
            f"--model={self.model}",
            f"--bad-every={self.bad_every}",
            f"--bad-chunk={self.bad_chunk}",
            f"--drop-after={self.drop_after}",
        ]


def _chunk(api: str, model: str, piece: str | None, finish: str | None) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": 0, "finish_reason": finish}
    if api == "chat":
        choice["delta"] = {"content": piece} if piece is not None else {}
        kind = "chat.completion.chunk"
    else:
        choice["text"] = piece or ""
        kind = "text_completion"
    return {"id": "null", "object": kind, "created": 0, "model": model, "choices": [choice]}


class _Counter:
    """Requests seen so far (the slowdown starts after `slow_after` of them)."""

    def __init__(self) -> None:
        self.requests = 0


def _events(spec: NullSpec, body: dict[str, Any], api: str, slow: float) -> list[Any]:
    """The stream's plan: (seconds to wait, event bytes) for each token, in order."""
    asked = int(body.get("max_tokens") or 16)
    n = min(asked, spec.tokens) if spec.tokens else asked
    if body.get("null_eos_only"):  # the model's first token is its EOS: no text at all
        n = 0
    ttft_s = float(body.get("null_ttft_ms", spec.ttft_ms)) * slow / 1e3
    itl_s = float(body.get("null_itl_ms", spec.itl_ms)) * slow / 1e3
    token = f"data: {json.dumps(_chunk(api, spec.model, spec.piece, None))}\n\n".encode()
    return [(ttft_s if i == 0 else itl_s, token) for i in range(n)]


def _tail(
    spec: NullSpec, body: dict[str, Any], api: str, n: int, t_in: float, t_first: float
) -> bytes:
    """The last chunk (llama.cpp's `timings`, measured), usage when asked, and [DONE]."""
    t_end = time.perf_counter()
    prompt = body.get("prompt") or json.dumps(body.get("messages"))
    eos = bool(body.get("null_eos_only"))
    last = _chunk(api, spec.model, None, "stop" if eos else "length")
    decode_ms = (t_end - t_first) * 1e3
    last["timings"] = {
        "prompt_n": len(str(prompt).split()),
        "prompt_ms": (t_first - t_in) * 1e3,
        "predicted_n": n,
        "predicted_ms": decode_ms,
        "predicted_per_token_ms": decode_ms / (n - 1) if n > 1 else 0.0,
    }
    out = f"data: {json.dumps(last)}\n\n"
    if (body.get("stream_options") or {}).get("include_usage"):
        tail = {**_chunk(api, spec.model, None, None), "choices": []}
        tail["usage"] = {
            "prompt_tokens": len(str(prompt).split()),
            "completion_tokens": 1 if eos else n,
            "total_tokens": 1 if eos else n,
        }
        out += f"data: {json.dumps(tail)}\n\n"
    return (out + "data: [DONE]\n\n").encode()


async def _respond(
    conn: Any, writer: Any, spec: NullSpec, seen: _Counter, target: str, body: bytes
) -> None:
    """Answer one request: JSON for the listing and health, a timed stream for completions."""
    import asyncio

    import h11

    def send(event: Any) -> None:
        data = conn.send(event)
        if data:
            writer.write(data)

    path = target.split("?")[0]
    if path not in ("/v1/completions", "/v1/chat/completions"):
        known = path in ("/health", "/v1/models")
        payload = (
            {"status": "ok"}
            if path == "/health"
            else {"object": "list", "data": [{"id": spec.model, "object": "model"}]}
        )
        raw = json.dumps(payload).encode() if known else b""
        headers = [("content-type", "application/json"), ("content-length", str(len(raw)))]
        send(h11.Response(status_code=200 if known else 404, headers=headers))
        send(h11.Data(data=raw))
        send(h11.EndOfMessage())
        await writer.drain()
        return
    t_in = time.perf_counter()
    request = json.loads(body or b"{}")
    api = "chat" if path.endswith("/chat/completions") else "completions"
    seen.requests += 1
    slow = spec.slow_factor if spec.slow_after and seen.requests > spec.slow_after else 1.0
    plan = _events(spec, request, api, slow)
    send(h11.Response(status_code=200, headers=[("content-type", "text/event-stream")]))
    await writer.drain()
    t_first = t_in
    if spec.bad_every and seen.requests % spec.bad_every == 0:
        bad = BAD_CHUNKS[spec.bad_chunk]
        plan = plan[:1] + [(0.0, b"data: " + bad + b"\n\n")]
    for i, (wait_s, data) in enumerate(plan):
        await asyncio.sleep(wait_s)
        if i == 0:
            t_first = time.perf_counter()
        send(h11.Data(data=data))
        await writer.drain()
    send(h11.Data(data=_tail(spec, request, api, len(plan), t_in, t_first)))
    send(h11.EndOfMessage())
    await writer.drain()


async def _connection(reader: Any, writer: Any, spec: NullSpec, seen: _Counter) -> None:
    """One keep-alive connection: h11 parses, each chunk is written the moment it is due."""
    import h11

    conn = h11.Connection(h11.SERVER)
    answered = 0
    try:
        while True:
            target, body = "", b""
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    data = await reader.read(65536)
                    if not data:
                        return
                    conn.receive_data(data)
                    continue
                if isinstance(event, h11.Request):
                    target = event.target.decode()
                elif isinstance(event, h11.Data):
                    body += event.data
                elif isinstance(event, h11.EndOfMessage):
                    break
                elif isinstance(event, h11.ConnectionClosed):
                    return
            if spec.drop_after and answered >= spec.drop_after:
                return  # closed unanswered (the finally closes the socket)
            await _respond(conn, writer, spec, seen, target, body)
            answered += 1
            if conn.our_state is h11.MUST_CLOSE:
                return
            conn.start_next_cycle()
    except (h11.ProtocolError, ConnectionError, ValueError):
        return
    finally:
        writer.close()


def serve(spec: NullSpec, port: int = 0) -> None:
    """Serve on 127.0.0.1:`port` (0: a free one) until killed; print the port first."""
    import asyncio

    async def main() -> None:
        seen = _Counter()
        server = await asyncio.start_server(
            lambda r, w: _connection(r, w, spec, seen), "127.0.0.1", port
        )
        print(f"listening on {server.sockets[0].getsockname()[1]}", flush=True)
        async with server:
            await server.serve_forever()

    asyncio.run(main())


@dataclass(frozen=True)
class Running:
    """A started null server: its base URL and process id."""

    url: str
    pid: int


@contextmanager
def null_server(spec: NullSpec, start_timeout_s: float = 30.0) -> Iterator[Running]:
    """The null server in a subprocess on a free port of 127.0.0.1; stopped on exit."""
    from infermeter.extras import require

    require("endpoint", "the client's self-check")
    proc = subprocess.Popen(
        [sys.executable, "-m", "infermeter.serving.nullserver", "--port", "0", *spec.args()],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        port = _wait_port(proc, start_timeout_s)
        yield Running(f"http://127.0.0.1:{port}", proc.pid)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def _wait_port(proc: subprocess.Popen[str], timeout_s: float) -> int:
    """The port the server printed, once it accepts connections."""
    from infermeter.errors import UserError

    assert proc.stdout is not None
    line = proc.stdout.readline()  # the server prints it before it serves, or exits
    if not line.startswith("listening on "):
        err = proc.stderr.read()[-400:] if proc.stderr is not None else ""
        raise UserError(
            f"the null server for the client's self-check did not start: {err.strip()[:200]}",
            "reinstall the endpoint extra (pip install 'infermeter[endpoint]'), or --no-selfcheck",
        )
    port = int(line.split()[-1])
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return port
        except OSError:
            time.sleep(0.02)
    raise UserError("the null server did not accept connections", "retry, or --no-selfcheck")


def main(argv: list[str] | None = None) -> None:
    """`python -m infermeter.serving.nullserver`: serve until killed."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--ttft-ms", type=float, default=0.0)
    p.add_argument("--itl-ms", type=float, default=0.0)
    p.add_argument("--tokens", type=int, default=0)
    p.add_argument("--piece", default=" the")
    p.add_argument("--slow-after", type=int, default=0)
    p.add_argument("--slow-factor", type=float, default=1.0)
    p.add_argument("--model", default="null")
    p.add_argument("--bad-every", type=int, default=0)
    p.add_argument("--bad-chunk", choices=sorted(BAD_CHUNKS), default="json")
    p.add_argument("--drop-after", type=int, default=0)
    a = p.parse_args(argv)
    spec = NullSpec(
        a.ttft_ms,
        a.itl_ms,
        a.tokens,
        a.piece,
        a.slow_after,
        a.slow_factor,
        a.model,
        a.bad_every,
        a.bad_chunk,
        a.drop_after,
    )
    serve(spec, a.port)


if __name__ == "__main__":
    main()
