"""`infermeter load --endpoint URL`: the same requests, sent to an OpenAI-compatible server.

Why: the stacks people serve with (vLLM, SGLang, TGI, llama.cpp's server, Ollama, `transformers
serve`) are reached over HTTP; what a client sees (time to the first streamed token, every gap
between tokens, the whole request) is the latency their users get. The requests are the ones
an in-process `load` makes (the same seeded prompts from the built-in corpus, decoded to text
with `--model`'s tokenizer, the same arrivals), so the two can be set side by side.

How: the official `openai` client (httpx underneath; it parses the server-sent events), one
streamed `/v1/completions` call per request (or `/v1/chat/completions` with `api="chat"`: a
session's messages, or the prompt as one user message, in the server's own chat template),
greedy, with `stream_options.include_usage` so the server's own token counts come back. A
chunk can carry several tokens: each chunk's text is counted with the model's tokenizer and its
tokens are taken to arrive together (their gaps are 0); the run says how many chunks did. A
timeout, an HTTP error, a refused connection or a stream that ends before its last chunk is a
failed request with its reason, never a crash. The API key is read from the environment
variable `--api-key-env` names, never stored or printed.
"""

from __future__ import annotations

import asyncio
import math
import os
import time
from typing import Any

from infermeter.errors import UserError

#: the environment variable an endpoint's API key is read from, unless --api-key-env names one
DEFAULT_KEY_ENV = "OPENAI_API_KEY"
#: seconds a request may take before it is a failed request ("timed out")
DEFAULT_TIMEOUT_S = 300.0


def base_url(endpoint: str) -> str:
    """The client's base URL: the endpoint with `/v1` (added when missing)."""
    from urllib.parse import urlsplit

    parts = urlsplit(endpoint.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UserError(
            f"--endpoint {endpoint!r} is not an http(s) URL",
            "e.g. --endpoint http://127.0.0.1:8000 (an OpenAI-compatible server)",
        )
    path = parts.path.rstrip("/")
    return f"{parts.scheme}://{parts.netloc}{path if path.endswith('/v1') else path + '/v1'}"


def _client(endpoint: str, key_env: str, timeout_s: float) -> Any:
    from infermeter.extras import require

    require("endpoint", "--endpoint")
    import openai

    key = os.environ.get(key_env) or "none"  # servers without keys accept any
    return openai.AsyncOpenAI(
        base_url=base_url(endpoint), api_key=key, timeout=timeout_s, max_retries=0
    )


async def served_model(client: Any, endpoint: str) -> str:
    """The first model the server lists (`--endpoint-model` picks another)."""
    import openai

    try:
        page = await client.models.list()
    except openai.OpenAIError as exc:
        raise UserError(
            f"cannot list the models of {endpoint}: {_reason(exc)}",
            "check the server is up, or name the model with --endpoint-model",
        ) from None
    ids = [m.id for m in page.data]
    if not ids:
        raise UserError(f"{endpoint} serves no model", "start it with a model loaded")
    return str(ids[0])


def _reason(exc: BaseException) -> str:
    """A failed request's reason, in one line (never the API key: the client does not echo it)."""
    import openai

    if isinstance(exc, openai.APITimeoutError):
        return "timed out"
    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code}: {str(exc.message).splitlines()[0][:160]}"
    if isinstance(exc, openai.APIConnectionError):
        return f"connection failed: {str(exc.__cause__ or exc).splitlines()[0][:160]}"
    return f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"


async def _open_stream(
    client: Any, model: str, request: Any, text: str, api: str, ignore_eos: bool = False
) -> Any:
    common: dict[str, Any] = {
        "model": model,
        "max_tokens": request.new_tokens,
        "temperature": 0.0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if ignore_eos:  # vLLM, SGLang and llama.cpp's server know it; others may refuse (HTTP 4xx)
        common["extra_body"] = {"ignore_eos": True}
    if api == "chat":
        messages = getattr(request, "messages", None) or [{"role": "user", "content": text}]
        return await client.chat.completions.create(messages=messages, **common)
    return await client.completions.create(prompt=text, **common)


def _piece(choice: Any) -> str | None:
    """A streamed choice's text: `text` (completions) or `delta.content` (chat)."""
    delta = getattr(choice, "delta", None)
    return delta.content if delta is not None else getattr(choice, "text", None)


async def send(
    client: Any,
    model: str,
    request: Any,
    text: str,
    tokenizer: Any,
    api: str = "completions",
    ignore_eos: bool = False,
) -> int:
    """Stream one request's completion into `request` (its token times, end, error).

    Returns how many of its chunks carried more than one token.
    """
    import openai

    request.start_s = time.perf_counter()
    multi = 0
    finished = False
    try:
        stream = await _open_stream(client, model, request, text, api, ignore_eos)
        async for chunk in stream:
            now = time.perf_counter()
            if getattr(chunk, "usage", None) is not None:
                request.server_tokens = chunk.usage.completion_tokens
            for choice in chunk.choices or []:
                piece = _piece(choice)
                if piece:
                    n = max(1, len(tokenizer.encode(piece, add_special_tokens=False)))
                    multi += n > 1
                    request.token_s.extend([now] * n)
                finished = finished or choice.finish_reason is not None
        if not finished:
            request.error = "the stream ended before its last chunk"
        elif not request.token_s:
            request.error = "the server returned no token"
    except (openai.OpenAIError, OSError) as exc:
        request.error = _reason(exc)
    request.end_s = time.perf_counter()
    return multi


def serve_endpoint(
    requests: list[Any],
    texts: list[str],
    offsets_s: list[float],
    concurrency: int | None,
    endpoint: str,
    model: str | None,
    tokenizer: Any,
    key_env: str = DEFAULT_KEY_ENV,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    on_finished: Any = None,
    api: str = "completions",
    ignore_eos: bool = False,
) -> dict[str, Any]:
    """Send every request at its arrival (open loop) or as slots free (closed loop).

    A request that `follows` another (a session's later turn) is sent when that one ends.

    Returns {"model": the served model, "multi_token_chunks": chunks that carried several}.
    """

    async def main() -> dict[str, Any]:
        client = _client(endpoint, key_env, timeout_s)
        async with client:
            name = model or await served_model(client, endpoint)
            slots = asyncio.Semaphore(concurrency) if concurrency else None
            t0 = time.perf_counter()
            multi = 0
            next_turn = {
                r.follows: i
                for i, r in enumerate(requests)
                if getattr(r, "follows", None) is not None
            }

            async def one(i: int, after_s: float | None = None) -> None:
                nonlocal multi
                r = requests[i]
                if slots is not None:
                    async with slots:
                        r.arrival_s = time.perf_counter()
                        multi += await send(client, name, r, texts[i], tokenizer, api, ignore_eos)
                else:
                    r.arrival_s = t0 + offsets_s[i] if after_s is None else after_s
                    await asyncio.sleep(max(0.0, r.arrival_s - time.perf_counter()))
                    multi += await send(client, name, r, texts[i], tokenizer, api, ignore_eos)
                if on_finished is not None:
                    on_finished(len(r.token_s))
                if i in next_turn:  # a session's next turn: sent once this answer is in
                    await one(next_turn[i], time.perf_counter())

            roots = [i for i, r in enumerate(requests) if getattr(r, "follows", None) is None]
            await asyncio.gather(*(one(i) for i in roots))
        return {"model": name, "multi_token_chunks": multi}

    return asyncio.run(main())


def failed_latencies(row: dict[str, Any]) -> dict[str, Any]:
    """A failed request's row: no latency figures (they would mix into the percentiles)."""
    if row.get("error") is None:
        return row
    return {**row, **{k: math.nan for k in ("ttft_ms", "tpot_ms", "e2e_ms")}, "itl_ms": []}
