"""`infermeter load endpoint URL`: the same requests, sent to an OpenAI-compatible server.

Why: the stacks people serve with (vLLM, SGLang, TGI, llama.cpp's server, Ollama, `transformers
serve`) are reached over HTTP; what a client sees (time to the first streamed token, every gap
between tokens, the whole request) is the latency their users get. The requests are the ones
an in-process `load` makes (the same seeded prompts from the built-in corpus, decoded to text
with `--model`'s tokenizer, the same arrivals), so the two can be set side by side.

How: the official `openai` client (httpx underneath; it parses the server-sent events, and
hands each chunk over as the JSON object the server sent), one streamed `/v1/completions`
call per request (or `/v1/chat/completions` with `api="chat"`: a
session's messages, or the prompt as one user message, in the server's own chat template),
greedy, with `stream_options.include_usage` so the server's own token counts come back. A
chunk can carry several tokens: each chunk's text is counted with the model's tokenizer and its
tokens are taken to arrive together (their gaps are 0); the run says how many chunks did. A
whole-request deadline (`--timeout`), a response over 16 MiB of text, an HTTP error, a refused
connection, a chunk that is not JSON or of the wrong shape, or a stream that ends before its
last chunk is that request's failure with its reason, never the run's. Nagle's algorithm is
off (the null server caught a request's body waiting on a delayed ACK), and httpcore's trace
gives each request's HTTP phases. The API key is read from the environment variable
`--api-key-env` names, never stored or printed.
"""

from __future__ import annotations

import asyncio
import math
import os
import time
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from infermeter.errors import UserError
from infermeter.serving.rows import HttpPhasesDoc, RequestRowDoc
from infermeter.util.settings import Range, check_ranges, setting
from infermeter.util.urls import masked_text, masked_url

#: the environment variable an endpoint's API key is read from, unless --api-key-env names one
DEFAULT_KEY_ENV = "OPENAI_API_KEY"
#: seconds a whole request may take, first byte to last, before it fails ("timed out")
DEFAULT_TIMEOUT_S = 300.0
#: the two OpenAI APIs a load can use
APIS = ("completions", "chat")


@dataclass(frozen=True)
class ServerTiming:
    """A request's own times as the server reports them (llama.cpp's `timings`), in ms.

    Why: what the client measures mixes the server's work with the network, the client and
    the server's queue; the server's own prefill and decode times are the service time, the
    figure that says whether the server itself changed speed during a run (serving/drift.py).
    """

    prefill_ms: float
    decode_ms: float
    decode_tokens: int
    decode_ms_per_token: float


def base_url(endpoint: str) -> str:
    """The client's base URL: the endpoint with `/v1` (added when missing)."""
    from urllib.parse import urlsplit

    parts = urlsplit(endpoint.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UserError(
            f"--endpoint {masked_url(endpoint)!r} is not an http(s) URL",
            "e.g. --endpoint http://127.0.0.1:8000 (an OpenAI-compatible server)",
        )
    path = parts.path.rstrip("/")
    return f"{parts.scheme}://{parts.netloc}{path if path.endswith('/v1') else path + '/v1'}"


async def served_model(client: Any, endpoint: str) -> str:
    """The first model the server lists (`--endpoint-model` picks another)."""
    import openai

    try:
        page = await client.models.list()
    except openai.OpenAIError as exc:
        raise UserError(
            f"cannot list the models of {masked_url(endpoint)}: {_reason(exc)}",
            "check the server is up, or name the model with --endpoint-model",
        ) from None
    ids = [m.id for m in page.data]
    if not ids:
        raise UserError(f"{masked_url(endpoint)} serves no model", "start it with a model loaded")
    return str(ids[0])


def _server_said(body: object) -> str | None:
    """The server's own words in an error body, where it gave any.

    FastAPI's `detail` (transformers serve, vLLM's 422s), OpenAI's `error.message`, or a bare
    `message`: the openai client's own message for a streamed request is only "Error code:
    422", which names no field (transformers serve refuses `ignore_eos` that way).
    """
    if not isinstance(body, dict):
        return None
    for got in (body.get("detail"), (body.get("error") or {}), body.get("message")):
        if isinstance(got, dict):
            got = got.get("message")
        if isinstance(got, (str, list)) and got:
            return str(got)
    return None


def _closed_unanswered(exc: BaseException) -> bool:
    """Whether a connection failure is a kept-alive connection closed before any answer.

    httpx says "Server disconnected without sending a response": the request was not served,
    so it is safe to send again.
    """
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return False
        if "without sending a response" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _reason(exc: BaseException) -> str:
    """A failed request's reason, in one line, URLs in it masked (util/urls.py)."""
    return masked_text(_reason_text(exc))


def _reason_text(exc: BaseException) -> str:
    import openai

    if isinstance(exc, openai.APITimeoutError):
        return "timed out"
    if isinstance(exc, openai.APIStatusError):
        said = _server_said(exc.body)
        text = said or str(exc.message)
        return f"HTTP {exc.status_code}: {(text.splitlines() or [''])[0][:160]}"
    if isinstance(exc, openai.APIConnectionError):
        return f"connection failed: {str(exc.__cause__ or exc).splitlines()[0][:160]}"
    return f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"


async def _open_stream(
    client: Any,
    model: str,
    request: Any,
    text: str,
    api: str,
    ignore_eos: bool = False,
    extra_body: Mapping[str, object] | None = None,
) -> Any:
    """The streamed response of one request: its chunks as the JSON objects the server sent.

    Through the SDK's own `post` with `cast_to=object`: its HTTP, server-sent events, `[DONE]`,
    error events and status errors as before, without building a pydantic object of every
    chunk (35% of the client's CPU against the null server, profiled: 1.2 of 3.4 s for 200
    requests of 16 tokens) or transforming the parameters.
    """
    import openai

    body: dict[str, object] = {
        "model": model,
        "max_tokens": request.new_tokens,
        "temperature": 0.0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if api == "chat":
        body["messages"] = getattr(request, "messages", None) or [{"role": "user", "content": text}]
    else:
        body["prompt"] = text
    if ignore_eos:  # vLLM, SGLang and llama.cpp's server know it; others may refuse (HTTP 4xx)
        body["ignore_eos"] = True
    body.update(extra_body or {})
    path = "/chat/completions" if api == "chat" else "/completions"
    return await client.post(
        path, body=body, cast_to=object, stream=True, stream_cls=openai.AsyncStream[object]
    )


def _piece(choice: Mapping[str, Any]) -> str | None:
    """A streamed choice's text: `text` (completions) or `delta.content` (chat)."""
    delta = choice.get("delta")
    piece = delta.get("content") if isinstance(delta, Mapping) else choice.get("text")
    if piece is not None and not isinstance(piece, str):
        raise TypeError(f"a choice's text is {type(piece).__name__}, not text")
    return piece


def _count(tokenizer: Any, piece: str) -> int:
    """Tokens in one streamed piece of text (at least 1: a chunk that carried text)."""
    return max(1, len(tokenizer.encode(piece, add_special_tokens=False)))


def _timings(chunk: Mapping[str, Any]) -> ServerTiming | None:
    """The server's own times for the request, where it streams them (llama.cpp's `timings`)."""
    raw = chunk.get("timings")
    if not isinstance(raw, dict):
        return None
    try:
        prompt_ms = float(raw["prompt_ms"])
        decode_ms = float(raw.get("predicted_ms", math.nan))
        n = int(raw.get("predicted_n", 0))
    except (KeyError, TypeError, ValueError):
        return None
    per_token = float(raw.get("predicted_per_token_ms", decode_ms / n if n else math.nan))
    if not (math.isfinite(prompt_ms) and prompt_ms >= 0):
        return None
    return ServerTiming(prompt_ms, decode_ms, n, per_token)


#: what a stream can throw at the client besides the client's own errors: a chunk that is
#: not JSON (ValueError), or JSON of the wrong shape (pydantic's ValidationError is a
#: ValueError; an attribute or item missing): that request fails with its reason, not the run
STREAM_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    ValueError,
    TypeError,
    AttributeError,
    KeyError,
    IndexError,
)


#: text a response may stream before it is cut off as a failed request (characters)
MAX_RESPONSE_CHARS = 16 * 2**20


class _Stream:
    """One response as it streams: its chunks' tokens, multi-token chunks, how it ended."""

    def __init__(self) -> None:
        self.multi = 0
        self.chars = 0
        self.finished = self.stopped = False


async def _read(stream: Any, request: Any, tokenizer: Any, state: _Stream, max_chars: int) -> None:
    async for chunk in stream:
        # when the bytes that completed this chunk were read, not when the SDK had decoded
        # them (`_stamping`); the time now where nothing stamped them
        now = request.read_s if request.read_s > request.sent_s else time.perf_counter()
        if not isinstance(chunk, Mapping):
            raise TypeError(f"a chunk is {type(chunk).__name__}, not a JSON object")
        usage = chunk.get("usage")
        if isinstance(usage, Mapping):
            request.server_tokens = usage.get("completion_tokens")
            request.server_prompt_tokens = usage.get("prompt_tokens")
        timing = _timings(chunk)
        if timing is not None:
            request.server_timing = timing
        for choice in chunk.get("choices") or []:
            if math.isnan(request.first_event_s):
                request.first_event_s = now
            piece = _piece(choice)
            if piece:
                state.chars += len(piece)
                if state.chars > max_chars:
                    raise _TooLong(max_chars)
                n = _count(tokenizer, piece)
                state.multi += n > 1
                request.token_s.extend([now] * n)
            finish = choice.get("finish_reason")
            state.finished = state.finished or finish is not None
            state.stopped = state.stopped or finish == "stop"


class _TooLong(Exception):
    """A response longer than the client keeps (an endless or a hostile stream)."""

    def __init__(self, chars: int) -> None:
        super().__init__(f"the response passed {chars / 2**20:g} MiB of text; cut off")


async def send(
    client: Any,
    model: str,
    request: Any,
    text: str,
    tokenizer: Any,
    api: str = "completions",
    ignore_eos: bool = False,
    extra_body: Mapping[str, object] | None = None,
    deadline_s: float | None = None,
    max_chars: int = MAX_RESPONSE_CHARS,
) -> int:
    """Stream one request's completion into `request` (its token times, end, error).

    A completion that is only the end of sequence (HTTP 200, no text, `finish_reason` "stop"
    or a server count of 1 or more) is a completed request with zero text tokens: its first
    token time is when that chunk came. The whole request, first byte to last, must end
    within `deadline_s` (the HTTP client's own timeout is per read: a stream trickling a byte
    a second never trips it), and stream at most `max_chars` of text; past either it fails
    with the reason, keeping the tokens that came. Returns how many of its chunks carried more
    than one token.
    """
    import openai

    request.start_s = request.sent_s = time.perf_counter()
    state = _Stream()
    traced = _CURRENT.set(request)

    async def whole() -> None:
        try:
            stream = await _open_stream(client, model, request, text, api, ignore_eos, extra_body)
        except openai.APIConnectionError as exc:
            if not _closed_unanswered(exc):
                raise
            # the server closed the kept-alive connection this request went out on, unanswered
            # (llama.cpp's closes one after a few requests): nothing of it was served, so it
            # goes again, once, on a new connection; its clock still runs from its arrival
            request.sent_s = time.perf_counter()
            stream = await _open_stream(client, model, request, text, api, ignore_eos, extra_body)
        await _read(stream, request, tokenizer, state, max_chars)

    try:
        await asyncio.wait_for(whole(), timeout=deadline_s)
        if not state.finished:
            request.error = "the stream ended before its last chunk"
        elif not request.token_s and not (state.stopped or (request.server_tokens or 0) >= 1):
            request.error = "the server returned no token"
    except asyncio.TimeoutError:
        request.error = f"timed out: the whole request passed {deadline_s:g} s (--timeout)"
    except _TooLong as exc:
        request.error = str(exc)
    except openai.OpenAIError as exc:
        request.error = _reason(exc)
    except STREAM_ERRORS as exc:
        request.error = f"a bad chunk: {_reason(exc)}"
    finally:
        _CURRENT.reset(traced)
    request.end_s = time.perf_counter()
    return state.multi


@dataclass(frozen=True)
class Endpoint:
    """An OpenAI-compatible server to load instead of the in-process model, and how to call it.

    Each field's help, option and range are the CLI's (`util/settings.py`).
    """

    url: str
    model: str | None = setting(
        None,
        option="--endpoint-model",
        help="The model name the server knows (default: the first it lists).",
    )
    key_env: str = setting(
        DEFAULT_KEY_ENV,
        option="--api-key-env",
        help="Environment variable holding the endpoint's API key (never stored).",
    )
    timeout_s: float = setting(
        DEFAULT_TIMEOUT_S,
        option="--timeout",
        help="Seconds a whole endpoint request may take, first byte to last, before it fails "
        "(a response is also cut off past 16 MiB of text).",
        within=Range(0, 86_400, open_low=True, unit="seconds"),
    )
    api: str = setting(
        "completions",
        option="--endpoint-api",
        help="completions (/v1/completions) or chat (/v1/chat/completions: sessions' "
        "messages, the server's chat template).",
    )
    ignore_eos: bool = setting(
        False,
        option="--ignore-eos",
        help="Ask the endpoint to generate every asked token (vLLM, SGLang, llama.cpp; "
        "transformers serve refuses it); otherwise requests stop at its EOS.",
    )
    extra_body: Mapping[str, object] = setting(
        option="--extra-body",
        help="At an endpoint: a JSON object merged into every request's body, e.g. "
        "'{\"min_tokens\": 64}' (llama.cpp's server ignores ignore_eos but honours "
        "min_tokens).",
        factory=dict,
    )
    headers: Mapping[str, str] = setting(
        option="--header",
        help="At an endpoint: 'Name: value', sent with every request (repeat it); values are "
        "never stored or printed.",
        factory=dict,
    )
    selfcheck: bool = setting(
        True,
        option="--selfcheck",
        help="At an endpoint: measure the client first against a null server on 127.0.0.1 "
        "(its ceiling and the latency it adds, about 2 s) and hold the run against it.",
    )
    #: more servers of the same model: requests go round robin over `url` and these
    more_urls: tuple[str, ...] = ()
    max_error_rate: float | None = setting(
        None,
        option="--max-error-rate",
        help="Stop sending once more than this share of finished requests failed (judged "
        "from 8 on); the rest are kept as not sent, with the reason.",
        within=Range(0, 1, open_high=True),
    )

    def validate(self) -> Endpoint:
        """Every setting in range and every URL an http(s) one, before anything starts."""
        check_ranges(self)
        if self.api not in APIS:
            raise UserError(f"--endpoint-api {self.api!r} is not an API", "use completions or chat")
        for url in self.urls:
            base_url(url)  # a malformed URL is one line before anything starts
        return self

    @property
    def urls(self) -> tuple[str, ...]:
        """Every server the requests go to, `url` first."""
        return (self.url, *self.more_urls)


@dataclass(frozen=True)
class Served:
    """What a run at an endpoint learnt besides its requests' times."""

    model: str
    #: streamed chunks that carried several tokens (their gaps are 0)
    multi_token_chunks: int
    #: this process's CPU seconds (every thread) while requests were in flight, and that wall
    client_cpu_s: float
    wall_s: float
    #: why the run stopped sending (--max-error-rate), None when it sent every request
    aborted: str | None = None

    @property
    def client_cores(self) -> float:
        """Cores the client used while it measured: its CPU seconds over the wall time."""
        return self.client_cpu_s / self.wall_s if self.wall_s > 0 else math.nan


#: the request whose HTTP exchange is under way in this task (its phases are traced into it)
_CURRENT: ContextVar[Any] = ContextVar("infermeter_request", default=None)


async def _trace(event: str, info: Any) -> None:
    """The trace callback httpcore calls: each phase's start and end, on the run's clock."""
    r = _CURRENT.get()
    if r is not None:
        r.http_events.append((event, time.perf_counter()))


async def _traced(request: Any) -> None:
    """An httpx request hook: trace this exchange's phases (connect, send, wait for headers)."""
    request.extensions["trace"] = _trace


def _stamping(http: Any) -> Any:
    """An httpx response hook that stamps when each read of the body returned.

    Why: a token's time was taken when the openai SDK yielded its chunk, after it had split
    the server-sent events and decoded each (then also built a pydantic object of it): 0.14 ms
    a chunk (completions) and 0.19 (chat) on an idle machine, more on a busy one, on every TTFT
    and gap. The SDK reads no further than the event it yields, so the last read's time is
    when the bytes that completed that event arrived.
    """

    class Stamped(http.AsyncByteStream):  # type: ignore[misc]
        def __init__(self, inner: Any, request: Any) -> None:
            self.inner, self.request = inner, request

        async def __aiter__(self) -> Any:
            async for part in self.inner:
                self.request.read_s = time.perf_counter()
                yield part

        async def aclose(self) -> None:
            await self.inner.aclose()

    async def hook(response: Any) -> None:
        r = _CURRENT.get()
        if r is not None:
            response.stream = Stamped(response.stream, r)

    return hook


def http_phases(events: list[tuple[str, float]], sent_s: float) -> HttpPhasesDoc:
    """A request's HTTP phases in ms from its traced events.

    `http_build_ms` (the client's own work from the send to its first header write: the
    openai client building the request, 2-3 ms here), `http_connect_ms` (0 on a reused
    connection), `http_send_ms` (headers and body written), `http_wait_ms` (the body sent to
    the response's headers: the server's queue and the start of its work, as the network sees
    it). NaN where an event is missing. GuideLLM starts its TTFT clock at the first header
    write: a TTFT less `http_build_ms` is measured as it measures.
    """
    at: dict[str, float] = {}
    for name, t in events:
        at.setdefault(name, t)

    def span(a: str, b: str) -> float:
        return (at[b] - at[a]) * 1e3 if a in at and b in at else math.nan

    connect = span("connection.connect_tcp.started", "connection.connect_tcp.complete")
    first_write = at.get("http11.send_request_headers.started")
    return {
        "http_build_ms": (first_write - sent_s) * 1e3 if first_write is not None else math.nan,
        "http_connect_ms": 0.0 if math.isnan(connect) and at else connect,
        "http_send_ms": span(
            "http11.send_request_headers.started", "http11.send_request_body.complete"
        ),
        "http_wait_ms": span(
            "http11.send_request_body.complete", "http11.receive_response_headers.complete"
        ),
    }


def _client(endpoint: Endpoint, url: str) -> Any:
    from infermeter.extras import require

    require("endpoint", "--endpoint")
    import importlib
    import socket

    import openai

    # the HTTP library this openai release is built on (httpx, or httpx2 from openai 3)
    http = importlib.import_module(openai.DefaultAsyncHttpxClient.__mro__[1].__module__)
    key = os.environ.get(endpoint.key_env) or "none"  # servers without keys accept any
    # Nagle's algorithm off: with it, a request's body waited for the server's delayed ACK of
    # its headers, up to 40 ms of TTFT the self-check measured at two requests in flight
    nodelay = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
    transport = http.AsyncHTTPTransport(socket_options=nodelay)
    return openai.AsyncOpenAI(
        base_url=base_url(url),
        api_key=key,
        timeout=endpoint.timeout_s,
        max_retries=0,
        default_headers=dict(endpoint.headers) or None,
        http_client=openai.DefaultAsyncHttpxClient(
            transport=transport,
            event_hooks={"request": [_traced], "response": [_stamping(http)]},
        ),
    )


#: finished requests before --max-error-rate is judged (one early failure is not a trend)
ABORT_AFTER = 8


class _Abort:
    """`--max-error-rate`: stops sending once that share of finished requests has failed."""

    def __init__(self, share: float | None) -> None:
        self.share, self.done, self.failed = share, 0, 0
        self.reason: str | None = None

    def finished(self, r: Any) -> None:
        self.done += 1
        self.failed += r.error is not None
        if (
            self.share is not None
            and self.reason is None
            and self.done >= ABORT_AFTER
            and self.failed > self.share * self.done
        ):
            self.reason = (
                f"{self.failed} of {self.done} finished requests failed, over "
                f"--max-error-rate {self.share:g}"
            )

    def refuse(self, r: Any) -> bool:
        """Mark `r` not sent when the run was stopped; True if so."""
        if self.reason is None:
            return False
        r.start_s = r.sent_s = r.end_s = time.perf_counter()
        r.error = f"not sent: the run stopped ({self.reason})"
        return True


def serve_endpoint(
    requests: list[Any],
    texts: list[str],
    offsets_s: list[float],
    concurrency: int | None,
    endpoint: Endpoint,
    tokenizer: Any,
    on_finished: Any = None,
) -> Served:
    """Send every request at its arrival (open loop) or as slots free (closed loop).

    A request that `follows` another (a session's later turn) is sent when that one ends.
    A request's `arrival_s` is when it was meant to be sent (its scheduled time, open loop)
    and its `start_s` when it was: both are kept, so latency is measured from either
    (coordinated omission: a late client must not hide a slow server). With several URLs
    the requests go round robin (`request.server_index`). Past `max_error_rate`, the rest
    are not sent (each kept as a failed request with the reason).
    """
    # Long because the closures share the run's state (slots, turns, clients, the abort)

    async def main() -> Served:
        clients = [_client(endpoint, url) for url in endpoint.urls]
        try:
            name = endpoint.model or await served_model(clients[0], endpoint.url)
            slots = asyncio.Semaphore(concurrency) if concurrency else None
            t0 = time.perf_counter()
            cpu0 = time.process_time()
            multi = 0
            abort = _Abort(endpoint.max_error_rate)
            next_turn = {
                r.follows: i
                for i, r in enumerate(requests)
                if getattr(r, "follows", None) is not None
            }

            async def call(r: Any, i: int) -> int:
                if abort.refuse(r):
                    return 0
                r.server_index = i % len(clients)
                return await send(
                    clients[r.server_index],
                    name,
                    r,
                    texts[i],
                    tokenizer,
                    endpoint.api,
                    endpoint.ignore_eos,
                    endpoint.extra_body,
                    endpoint.timeout_s,
                )

            async def one(i: int, after_s: float | None = None) -> None:
                nonlocal multi
                r = requests[i]
                if slots is not None:
                    async with slots:
                        r.arrival_s = time.perf_counter()
                        multi += await call(r, i)
                else:
                    r.arrival_s = t0 + offsets_s[i] if after_s is None else after_s
                    await asyncio.sleep(max(0.0, r.arrival_s - time.perf_counter()))
                    multi += await call(r, i)
                abort.finished(r)
                if on_finished is not None:
                    on_finished(r)
                if i in next_turn:  # a session's next turn: sent once this answer is in
                    await one(next_turn[i], time.perf_counter())

            roots = [i for i, r in enumerate(requests) if getattr(r, "follows", None) is None]
            await asyncio.gather(*(one(i) for i in roots))
            cpu = time.process_time() - cpu0
            return Served(name, multi, cpu, time.perf_counter() - t0, abort.reason)
        finally:
            for c in clients:
                await c.close()

    return asyncio.run(main())


def failed_latencies(row: RequestRowDoc) -> RequestRowDoc:
    """A failed request's row: no latency figures (they would mix into the percentiles)."""
    if row.get("error") is None:
        return row
    out = row.copy()
    out["ttft_ms"] = out["tpot_ms"] = out["e2e_ms"] = math.nan
    out["itl_ms"] = []
    return out
