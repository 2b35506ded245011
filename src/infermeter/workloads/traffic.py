"""Real traffic for `load --workload`: conversations, multi-turn sessions and timed traces.

Why: a load test with fixed synthetic lengths at Poisson arrivals says little about the traffic
a server gets. The serving benchmarks' users replay data sets and traces; this module reads the
formats they use into requests with token ids, output lengths, arrival times and session order:

- `sharegpt`: ShareGPT JSON (a list of {"conversations": [{"from": "human"|"gpt", "value"}]}).
  As vLLM's `bench serve --dataset-name sharegpt` does, one request per conversation: its first
  human turn as the prompt, the length of the reply that followed as the output length.
- `chat`: JSONL, one conversation per line ({"messages": [{"role", "content"}]} or ShareGPT's
  {"conversations": [...]}): a session, every user turn a request sent after the previous
  turn's answer, with the whole history before it (the recorded replies, so the prompts are the
  same in-process and at an endpoint) in the tokenizer's chat template (a plain "User: /
  Assistant:" transcript without one).
- `azure`: an Azure LLM inference trace CSV (TIMESTAMP, ContextTokens, GeneratedTokens), or a
  BurstGPT CSV (Timestamp in s, Request tokens, Response tokens): each row arrives at its own
  time from the first, divided by `speed`; prompts are corpus text of the row's length.
- `mooncake`: a Mooncake trace JSONL ({"timestamp" ms, "input_length", "output_length",
  "hash_ids"}): each hash id is a block of 512 tokens with text of its own, so requests that
  share hash ids share those prefixes, as the trace's requests did.

Every workload reports its length distributions and its prefix reuse: the share of prompt tokens
that begin with a 16-token block chain an earlier request already sent (what a prefix cache with
16-token blocks, vLLM's default, could reuse). Small files in each format ship with the package
(`sharegpt-sample`, `chat-sample`, `azure-sample`, `mooncake-sample`); users bring the real ones.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, TypedDict

from infermeter.errors import UserError

KINDS = ("sharegpt", "chat", "azure", "mooncake")
#: tokens per Mooncake hash id (the trace's own block size)
MOONCAKE_BLOCK_TOKENS = 512
#: block size of the prefix-reuse figure (vLLM's default KV block)
REUSE_BLOCK_TOKENS = 16
#: largest workload file read (a real ShareGPT is ~650 MB: sample it first)
MAX_FILE_BYTES = 2 * 2**30
#: a trace's records: the longest span after the first (a week) and the longest prompt or output
MAX_TRACE_SPAN_S = 7 * 24 * 3600.0
MAX_TRACE_TOKENS = 10_000_000
_SUFFIX = {"sharegpt": "json", "chat": "jsonl", "azure": "csv", "mooncake": "jsonl"}
#: the small files in each format that ship with the package (tests and the demo)
SAMPLES = {f"{k}-sample": f"data/{k}-sample.{_SUFFIX[k]}" for k in KINDS}


class LengthsDoc(TypedDict):
    """A distribution of token counts."""

    mean: float
    p50: float
    p90: float
    p99: float
    max: float


class _TrafficDoc(TypedDict):
    kind: str
    source: str
    requests: int
    sessions: int
    multi_turn_sessions: int
    #: requests left out, and why ({reason: count})
    skipped: dict[str, int]
    prompt_tokens: LengthsDoc
    output_tokens: LengthsDoc
    #: share of prompt tokens in leading blocks an earlier prompt already had (0..1)
    prefix_reuse: float


class TrafficDoc(_TrafficDoc, total=False):
    """A workload's description (`Traffic.describe`); a timed trace adds its speed and rate."""

    speed: float
    duration_s: float
    mean_rate_rps: float


@dataclass
class Turn:
    """One request of a workload."""

    prompt_ids: list[int]
    new_tokens: int
    #: arrival from the trace's start (s, speed applied); None: arrives by --rate, or after
    #: the previous turn of its session
    offset_s: float | None = None
    session: int = 0
    #: 0 for a session's first request; later turns follow the one before
    turn: int = 0
    #: the conversation up to this user turn (what a chat endpoint is sent)
    messages: list[dict[str, str]] | None = None


@dataclass
class Traffic:
    """A workload's requests, in the order they are sent, and what it is."""

    kind: str
    source: str
    turns: list[Turn] = field(default_factory=list)
    #: requests left out, and why ({reason: count})
    skipped: dict[str, int] = field(default_factory=dict)
    speed: float = 1.0

    @property
    def timed(self) -> bool:
        """True when requests arrive at the trace's own times."""
        return self.kind in ("azure", "mooncake")

    def describe(self) -> TrafficDoc:
        """Sessions, length distributions, prefix reuse and (a trace's) duration and rate."""
        import numpy as np

        def dist(values: list[int]) -> LengthsDoc:
            a = np.asarray(values or [0], dtype=float)
            return {
                "mean": float(a.mean()),
                "p50": float(np.percentile(a, 50)),
                "p90": float(np.percentile(a, 90)),
                "p99": float(np.percentile(a, 99)),
                "max": float(a.max()),
            }

        sessions = {t.session for t in self.turns}
        out: TrafficDoc = {
            "kind": self.kind,
            "source": self.source,
            "requests": len(self.turns),
            "sessions": len(sessions),
            "multi_turn_sessions": len({t.session for t in self.turns if t.turn > 0}),
            "skipped": dict(self.skipped),
            "prompt_tokens": dist([len(t.prompt_ids) for t in self.turns]),
            "output_tokens": dist([t.new_tokens for t in self.turns]),
            "prefix_reuse": prefix_reuse([t.prompt_ids for t in self.turns]),
        }
        if self.timed and self.turns:
            span = max(t.offset_s or 0.0 for t in self.turns)
            rate = (len(self.turns) - 1) / span if span > 0 else math.inf
            out["speed"], out["duration_s"], out["mean_rate_rps"] = self.speed, span, rate
        return out


def prefix_reuse(prompts: list[list[int]], block: int = REUSE_BLOCK_TOKENS) -> float:
    """Share of prompt tokens in leading blocks an earlier prompt already had (0..1).

    Blocks are hashed as a chain (each with every token before it), as a prefix cache keys
    them: a block counts only when the whole prefix up to it was seen.
    """
    seen: set[int] = set()
    reused = total = 0
    for ids in prompts:
        total += len(ids)
        h = 0
        hit = True
        for start in range(0, len(ids) - len(ids) % block, block):
            h = hash((h, tuple(ids[start : start + block])))
            if hit and h in seen:
                reused += block
            else:
                hit = False
            seen.add(h)
    return reused / total if total else 0.0


def resolve(spec: str) -> tuple[str, Path]:
    """(kind, path) of `--workload`: `KIND:PATH`, a shipped sample's name, or a path."""
    text = spec.strip()
    if text in SAMPLES:
        kind = text.rsplit("-", 1)[0]
        return kind, Path(str(resources.files("infermeter.workloads").joinpath(SAMPLES[text])))
    kind, _, rest = text.partition(":")
    if kind in KINDS and rest:
        path = Path(rest).expanduser()
    else:
        kind, path = "", Path(text).expanduser()
    if not path.is_file():
        raise UserError(
            f"--workload {spec!r}: no such file",
            f"give a file (KIND:PATH, KIND one of {', '.join(KINDS)}) or one of "
            f"{', '.join(SAMPLES)}",
        )
    if path.stat().st_size > MAX_FILE_BYTES:
        raise UserError(f"--workload {path} is over 2 GiB", "sample it into a smaller file")
    return kind or _guess_kind(path), path


def _guess_kind(path: Path) -> str:
    """The format a file is in, from its suffix and first record."""
    if path.suffix.lower() == ".csv":
        return "azure"
    with path.open("r", encoding="utf-8", errors="replace") as f:
        head = f.read(4096).lstrip()
    if head.startswith("["):
        return "sharegpt"
    if '"hash_ids"' in head.split("\n", 1)[0] or '"input_length"' in head.split("\n", 1)[0]:
        return "mooncake"
    if head.startswith("{"):
        return "chat"
    raise UserError(
        f"--workload {path}: cannot tell its format",
        f"name it: --workload KIND:{path} (KIND one of {', '.join(KINDS)})",
    )


def load_traffic(
    spec: str, tokenizer: Any, limit: int, requests: int, seed: int = 0, speed: float = 1.0
) -> Traffic:
    """At most `requests` requests of the workload `spec`, each fitting `limit` positions."""
    if not (speed > 0 and math.isfinite(speed)):
        raise UserError(f"--trace-speed {speed:g} is not a speed", "give a factor above 0")
    kind, path = resolve(spec)
    traffic = Traffic(kind, str(path), speed=speed)
    if kind in ("sharegpt", "chat"):
        conversations = _conversations(path, kind)
        _turns_of_conversations(traffic, conversations, tokenizer, limit, requests, seed)
    else:
        rows = _trace_rows(path, kind)
        _turns_of_trace(traffic, rows, tokenizer, limit, requests, seed)
    if not traffic.turns:
        reasons = ", ".join(f"{n} {why}" for why, n in traffic.skipped.items()) or "it is empty"
        raise UserError(
            f"--workload {path} gives no request ({reasons})",
            "check the file, or use a model with a longer context",
        )
    return traffic


def _skip(traffic: Traffic, why: str) -> None:
    traffic.skipped[why] = traffic.skipped.get(why, 0) + 1


# --- conversations -------------------------------------------------------------------------


def _read_json_lines(path: Path) -> list[Any]:
    out = []
    with path.open("r", encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise UserError(
                    f"--workload {path} line {n} is not JSON ({exc.msg})",
                    "write one JSON object per line",
                ) from None
    return out


def _messages(record: Any) -> list[dict[str, str]] | None:
    """[{role, content}] of one conversation record (ShareGPT's or OpenAI's), None if neither."""
    if not isinstance(record, dict):
        return None
    if isinstance(record.get("messages"), list):
        raw = [(m.get("role"), m.get("content")) for m in record["messages"] if isinstance(m, dict)]
    elif isinstance(record.get("conversations"), list):
        roles = {
            "human": "user",
            "user": "user",
            "gpt": "assistant",
            "assistant": "assistant",
            "chatgpt": "assistant",
            "bard": "assistant",
            "bing": "assistant",
            "system": "system",
        }
        raw = [
            (roles.get(str(m.get("from"))), m.get("value"))
            for m in record["conversations"]
            if isinstance(m, dict)
        ]
    else:
        return None
    return [{"role": r, "content": c} for r, c in raw if r and isinstance(c, str)]


def _conversations(path: Path, kind: str) -> list[list[dict[str, str]]]:
    try:
        records = (
            json.loads(path.read_text("utf-8")) if kind == "sharegpt" else (_read_json_lines(path))
        )
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UserError(
            f"--workload {path} is not {kind} JSON ({exc})",
            "give a ShareGPT JSON list, or chat:FILE for JSONL",
        ) from None
    if not isinstance(records, list):
        raise UserError(
            f"--workload {path} is not a list of conversations",
            "ShareGPT JSON is a list of {'conversations': [...]}",
        )
    out = [m for m in map(_messages, records) if m is not None]
    if not out and records:
        raise UserError(
            f"--workload {path} has no conversations",
            "records need 'conversations' (ShareGPT) or 'messages' (OpenAI)",
        )
    return out


def _render(tokenizer: Any, history: list[dict[str, str]]) -> list[int]:
    """Token ids of a conversation so far, ready for the assistant's next reply."""
    if getattr(tokenizer, "chat_template", None):
        try:
            ids = tokenizer.apply_chat_template(history, tokenize=True, add_generation_prompt=True)
            if isinstance(ids, dict) or hasattr(ids, "keys"):
                ids = ids["input_ids"]
            return [int(i) for i in ids]
        except Exception:  # a template that refuses roles: the plain transcript
            pass
    text = "".join(f"{m['role'].capitalize()}: {m['content']}\n" for m in history)
    return [int(i) for i in tokenizer(text + "Assistant:")["input_ids"]]


def _turns_of_conversations(
    traffic: Traffic,
    conversations: list[list[dict[str, str]]],
    tokenizer: Any,
    limit: int,
    requests: int,
    seed: int,
) -> None:
    import numpy as np

    order = np.random.default_rng(seed).permutation(len(conversations)).tolist()
    multi = traffic.kind == "chat"
    for session, index in enumerate(order):
        if len(traffic.turns) >= requests:
            break
        messages = conversations[index]
        turn = 0
        for i, m in enumerate(messages):
            if m["role"] != "user" or len(traffic.turns) >= requests:
                continue
            reply = messages[i + 1] if i + 1 < len(messages) else None
            if reply is None or reply["role"] != "assistant":
                _skip(traffic, "turns without a reply")
                break
            prompt = _render(tokenizer, messages[: i + 1])
            new = max(1, len(tokenizer(reply["content"], add_special_tokens=False)["input_ids"]))
            if len(prompt) + new > limit:
                _skip(traffic, f"turns over the context of {limit} positions")
                break  # later turns are longer still
            traffic.turns.append(Turn(prompt, new, None, session, turn, messages[: i + 1]))
            turn += 1
            if not multi:
                break


# --- traces --------------------------------------------------------------------------------


def _trace_rows(path: Path, kind: str) -> list[tuple[float, int, int, list[int] | None]]:
    """(seconds from the first, prompt tokens, output tokens, hash ids) per row, in time order."""
    rows: list[tuple[float, int, int, list[int] | None]] = []
    if kind == "mooncake":
        for r in _read_json_lines(path):
            try:
                hashes = [int(h) for h in r.get("hash_ids", [])]
                rows.append(
                    (
                        float(r["timestamp"]) / 1e3,
                        int(r["input_length"]),
                        int(r["output_length"]),
                        hashes,
                    )
                )
            except (KeyError, TypeError, ValueError, AttributeError):
                raise UserError(
                    f"--workload {path}: a record lacks timestamp, input_length or output_length",
                    "write Mooncake trace records",
                ) from None
    else:
        rows = _csv_rows(path)
    _check_trace_rows(path, rows)
    rows.sort(key=lambda r: r[0])
    t0 = rows[0][0] if rows else 0.0
    return [(t - t0, p, n, h) for t, p, n, h in rows]


def _check_trace_rows(path: Path, rows: list[tuple[float, int, int, list[int] | None]]) -> None:
    """Every record's time and lengths in range: one line naming the first that is not.

    Times are finite, non-negative and within `MAX_TRACE_SPAN_S` of the first; lengths within
    `MAX_TRACE_TOKENS`.

    Why: a Mooncake `"timestamp": NaN` ran the load and then failed at the store; `Infinity`
    or a far-future time waited for ever; `input_length: 200000000` at an endpoint allocated
    4.7 GB and did not end.
    """
    if not rows:
        return
    finite = [t for t, *_ in rows if math.isfinite(t)]
    first = min(finite) if finite else 0.0
    for i, (t, p, n, _) in enumerate(rows, start=1):
        if not math.isfinite(t) or t < 0:
            raise UserError(
                f"--workload {path}: record {i} has timestamp {t!r}",
                "a trace's timestamps are finite and non-negative",
            )
        if t - first > MAX_TRACE_SPAN_S:
            raise UserError(
                f"--workload {path}: record {i} arrives {t - first:,.0f} s after the first",
                f"a trace spans at most {MAX_TRACE_SPAN_S:,.0f} s (a week): check its unit",
            )
        if not (0 <= p <= MAX_TRACE_TOKENS and 0 <= n <= MAX_TRACE_TOKENS):
            raise UserError(
                f"--workload {path}: record {i} asks {p:,} prompt and {n:,} output tokens",
                f"a record's lengths are 0..{MAX_TRACE_TOKENS:,} tokens",
            )


def _csv_rows(path: Path) -> list[tuple[float, int, int, list[int] | None]]:
    import pandas as pd

    try:
        frame = pd.read_csv(path)
    except (ValueError, UnicodeDecodeError, pd.errors.ParserError) as exc:
        raise UserError(
            f"--workload {path} is not a CSV file ({exc})", "give an Azure or BurstGPT trace CSV"
        ) from None
    cols = {c.strip().lower(): c for c in frame.columns}
    if {"timestamp", "contexttokens", "generatedtokens"} <= cols.keys():  # Azure
        stamps = pd.to_datetime(frame[cols["timestamp"]], errors="coerce")
        seconds = (stamps - stamps.min()).dt.total_seconds()
        prompt, out = frame[cols["contexttokens"]], frame[cols["generatedtokens"]]
    elif {"timestamp", "request tokens", "response tokens"} <= cols.keys():  # BurstGPT
        seconds = pd.to_numeric(frame[cols["timestamp"]], errors="coerce")
        prompt, out = frame[cols["request tokens"]], frame[cols["response tokens"]]
    else:
        raise UserError(
            f"--workload {path}: columns {', '.join(map(str, frame.columns))} are neither "
            "Azure's nor BurstGPT's",
            "Azure: TIMESTAMP,ContextTokens,GeneratedTokens; BurstGPT: Timestamp,Request "
            "tokens,Response tokens",
        )
    if seconds.isna().any():
        raise UserError(
            f"--workload {path}: some timestamps cannot be read",
            "Azure: 2023-11-16 18:15:46.68; BurstGPT: seconds",
        )
    rows: list[tuple[float, int, int, list[int] | None]] = []
    for i, (t, p, n) in enumerate(zip(seconds, prompt, out, strict=True), start=1):
        try:
            rows.append((float(t), int(p), int(n), None))
        except (TypeError, ValueError):  # NaN or text token counts
            raise UserError(
                f"--workload {path}: record {i} has token counts {p!r} and {n!r}",
                "a trace's token counts are whole numbers",
            ) from None
    return rows


def _corpus_tokens(tokenizer: Any) -> list[list[int]]:
    from infermeter.workloads.corpus import builtin_texts

    return [tokenizer(t + "\n\n", add_special_tokens=False)["input_ids"] for t in builtin_texts()]


def _text_block(pieces: list[list[int]], key: tuple[int, ...], n: int) -> list[int]:
    """`n` tokens of corpus text in an order of its own for `key` (same key, same tokens)."""
    import numpy as np

    rng = np.random.default_rng(list(key))
    # a start of its own within the text too: two keys that draw the same first piece still
    # share no 16-token block (a prefix the trace did not have would count as reuse)
    skip = int(rng.integers(0, 64))
    out: list[int] = []
    while len(out) < n + skip:
        for i in rng.permutation(len(pieces)).tolist():
            out += pieces[i]
            if len(out) >= n + skip:
                break
    return [int(t) for t in out[skip : skip + n]]


def _turns_of_trace(
    traffic: Traffic,
    rows: list[tuple[float, int, int, list[int] | None]],
    tokenizer: Any,
    limit: int,
    requests: int,
    seed: int,
) -> None:
    from infermeter.workloads.prompts import _special_prefix

    pieces = _corpus_tokens(tokenizer)
    head = _special_prefix(tokenizer)
    blocks: dict[int, list[int]] = {}
    for i, (t, p, n, hashes) in enumerate(rows):
        if len(traffic.turns) >= requests:
            break
        if p < 1 or n < 1:
            _skip(traffic, "rows without prompt or output tokens")
            continue
        if p + n > limit:
            _skip(traffic, f"rows over the context of {limit} positions")
            continue
        if hashes:
            ids = list(head)
            for h in hashes:
                if h not in blocks:
                    blocks[h] = _text_block(pieces, (1, seed, h), MOONCAKE_BLOCK_TOKENS)
                ids += blocks[h]
            ids = ids[:p]
            if len(ids) < p:  # the trace's length beyond its blocks: text of the row's own
                ids += _text_block(pieces, (2, seed, i), p - len(ids))
        else:
            ids = head + _text_block(pieces, (2, seed, i), max(p - len(head), 1))
        traffic.turns.append(Turn(ids[:p], n, t / traffic.speed, i, 0))
