"""The endpoint client's self-check: its ceiling and the latency it adds, measured here.

Why: a load client is an instrument, and instruments cost something. vLLM's benchmark client
left its own queueing out of p99 (6.6x under), two well-known clients reported 52.8 and 15.6
ms TTFT for one server, and AIPerf slowed the server it measured 1.5-2x. None said so per run.

How: the same client code that loads a real server (`serving.endpoint.serve_endpoint`) loads
the null server (`serving.nullserver`), a subprocess on 127.0.0.1 whose every delay is
known and reported per request:
- **ceiling**: a closed loop of `CONCURRENCY` requests against a server with no delays; the
  requests per second it completes. The null server's own CPU share is beside it: near one
  core, the server (not the client) set the ceiling, which is then a lower bound.
- **added latency** at shares of that ceiling (open loop, constant arrivals) against a server
  with `TTFT_MS` and `ITL_MS`: per request, the TTFT the client measured from its send minus
  the server's own time to its first token, and the mean gap between tokens minus the
  server's own; medians and p90. That is what the client, its event loop and loopback HTTP
  add to every figure of a run.
`probe` is the short version run before each endpoint run (`--no-selfcheck` skips it);
`verdict` holds it against the run: the client's added latency as a share of the run's own
medians, the run's rate as a share of the ceiling, and the cores the client used.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, cast

from infermeter.util.settings import Range, check_ranges, setting

if TYPE_CHECKING:
    from infermeter.run.load_docs import AddedDoc, ClientVerdictDoc, SelfCheckDoc
    from infermeter.run.results import LoadSummaryDoc

#: requests in flight while the ceiling is measured
CONCURRENCY = 8
#: the null server's delays while the added latency is measured
TTFT_MS = 10.0
ITL_MS = 2.0
#: above this share of the ceiling a run's rate is warned about
SAFE_SHARE = 0.5
#: above this share of the run's own median TTFT or ITL the client's cost is flagged
ADDED_SHARE = 0.05


@dataclass(frozen=True)
class Added:
    """The latency the client added at one offered rate."""

    share_of_ceiling: float
    rate_rps: float
    requests: int
    ttft_ms_p50: float
    ttft_ms_p90: float
    itl_ms_p50: float
    itl_ms_p90: float
    #: how late the client sent its requests (p99, ms after their scheduled time)
    send_lag_ms_p99: float


@dataclass(frozen=True)
class SelfCheck:
    """The client's ceiling and added latency on this host, now."""

    tokens_per_request: int
    ceiling_rps: float
    ceiling_tokens_per_s: float
    client_cores_at_ceiling: float
    server_cores_at_ceiling: float
    added: tuple[Added, ...]

    @property
    def server_bound(self) -> bool:
        """The null server, not the client, set the ceiling (it used most of a core)."""
        return self.server_cores_at_ceiling > 0.8

    def typical(self) -> Added:
        """The added latency at the middle share measured."""
        return self.added[len(self.added) // 2]

    def line(self) -> str:
        """One line: the ceiling and the added latency."""
        bound = " (the null server used a core: a lower bound)" if self.server_bound else ""
        parts = [
            f"client ceiling {self.ceiling_rps:.3g} req/s ({self.ceiling_tokens_per_s:.3g} "
            f"tokens/s at {self.tokens_per_request} a request, {self.client_cores_at_ceiling:.2f} "
            f"cores){bound}"
        ]
        for a in self.added:
            parts.append(
                f"at {a.share_of_ceiling:.0%} of it ({a.rate_rps:.3g} req/s) the client adds "
                f"{a.ttft_ms_p50:.2f} ms to TTFT (p90 {a.ttft_ms_p90:.2f}) and "
                f"{a.itl_ms_p50:.3f} ms to each ITL (p90 {a.itl_ms_p90:.3f})"
            )
        return "self-check: " + "; ".join(parts)

    def to_doc(self) -> SelfCheckDoc:
        """As stored in a load's summary (`client.selfcheck`)."""
        return {
            "tokens_per_request": self.tokens_per_request,
            "ceiling_rps": self.ceiling_rps,
            "ceiling_tokens_per_s": self.ceiling_tokens_per_s,
            "client_cores_at_ceiling": self.client_cores_at_ceiling,
            "server_cores_at_ceiling": self.server_cores_at_ceiling,
            "added": [cast("AddedDoc", asdict(a)) for a in self.added],
        }


def single_token_piece(tokenizer: Any) -> str:
    """A short text the tokenizer counts as one token (each null chunk carries one)."""
    for piece in (" the", " a", " and", "the", "a", "."):
        if len(tokenizer.encode(piece, add_special_tokens=False)) == 1:
            return piece
    return " the"


def _requests(n: int, tokens: int) -> list[Any]:
    from infermeter.serving.load import Request

    return [Request(i, [0], tokens) for i in range(n)]


def _run(
    url: str,
    tokenizer: Any,
    n: int,
    tokens: int,
    offsets: list[float],
    conc: int | None,
    delays: tuple[float, float] = (0.0, 0.0),
) -> tuple[list[Any], Any]:
    from infermeter.serving.endpoint import Endpoint, serve_endpoint

    reqs = _requests(n, tokens)
    body = {"null_ttft_ms": delays[0], "null_itl_ms": delays[1]}
    target = Endpoint(url, timeout_s=60.0, extra_body=body)
    served = serve_endpoint(reqs, ["hello"] * n, offsets, conc, target, tokenizer)
    failed = [r.error for r in reqs if r.error]
    if failed:
        from infermeter.errors import UserError

        raise UserError(
            f"the client's self-check failed against its own null server: {failed[0]}",
            "run `infermeter load selfcheck` to see why, or pass --no-selfcheck",
        )
    return reqs, served


def _cpu_s(pid: int) -> float:
    import psutil

    t = psutil.Process(pid).cpu_times()
    return float(t.user + t.system)


def _ceiling(url: str, pid: int, tokenizer: Any, tokens: int, n: int) -> tuple[float, ...]:
    """(requests/s, client cores, null server cores) of a closed loop with no server delay."""
    _run(url, tokenizer, 2, tokens, [0.0, 0.0], 2)  # connections and imports warm
    before = _cpu_s(pid)
    _, served = _run(url, tokenizer, n, tokens, [0.0] * n, CONCURRENCY)
    wall = served.wall_s
    return n / wall, served.client_cores, (_cpu_s(pid) - before) / wall


def _added(url: str, tokenizer: Any, tokens: int, share: float, rate: float, n: int) -> Added:
    """The client's added TTFT and ITL at `rate`, open loop, constant arrivals.

    Per request: the TTFT measured from the client's send less the server's own time to its
    first token; the mean gap between tokens less the server's own. A negative ITL figure
    means the client read several tokens at once (it was busy when they came).
    """
    import numpy as np

    offsets = [i / rate for i in range(n)]
    reqs, _ = _run(url, tokenizer, n, tokens, offsets, None, (TTFT_MS, ITL_MS))
    ttft, itl, lag = [], [], []
    for r in reqs:
        t = r.server_timing
        if t is None or not r.token_s:
            continue
        ttft.append((r.token_s[0] - r.sent_s) * 1e3 - t.prefill_ms)
        if len(r.token_s) > 1:
            mean_gap = (r.token_s[-1] - r.token_s[0]) * 1e3 / (len(r.token_s) - 1)
            itl.append(mean_gap - t.decode_ms_per_token)
        lag.append((r.sent_s - r.arrival_s) * 1e3)

    def q(v: list[float], p: float) -> float:
        return float(np.percentile(v, p)) if v else math.nan

    return Added(
        share, rate, len(ttft), q(ttft, 50), q(ttft, 90), q(itl, 50), q(itl, 90), q(lag, 99)
    )


def _check(
    tokenizer: Any, tokens: int, n: int, shares: tuple[float, ...], rate: float | None
) -> SelfCheck:
    from infermeter.serving.nullserver import NullSpec, null_server

    with null_server(NullSpec(tokens=tokens, piece=single_token_piece(tokenizer))) as s:
        rps, client_cores, server_cores = _ceiling(s.url, s.pid, tokenizer, tokens, n)
        points = [(sh, sh * rps) for sh in shares]
        if rate is not None:  # the probe: the run's own rate, or a tenth of the ceiling
            at = rate if math.isfinite(rate) and 0.1 * rps < rate < 0.9 * rps else 0.1 * rps
            points = [(at / rps, at)]
        added = tuple(
            # about a second at each rate, at least a dozen requests
            _added(s.url, tokenizer, tokens, sh, r, max(12, min(4 * n, int(r))))
            for sh, r in points
        )
    return SelfCheck(tokens, rps, rps * tokens, client_cores, server_cores, added)


@dataclass(frozen=True)
class SelfCheckSpec:
    """`load selfcheck`'s settings; each field's help, option and range are the CLI's."""

    model: str = setting(
        "tiny-llama",
        option="--model",
        help="The tokenizer that counts streamed tokens.",
    )
    tokens: int = setting(16, option="--tokens", help="Tokens a request.", within=Range(1, 256))
    requests: int = setting(
        64, option="--requests", help="Requests for the ceiling.", within=Range(16, 2000)
    )

    def validate(self) -> SelfCheckSpec:
        """Every setting in range, in one line each, before the null server starts."""
        check_ranges(self)
        return self


def self_check(
    tokenizer: Any,
    tokens: int = 16,
    shares: tuple[float, ...] = (0.1, 0.5, 0.9),
    requests: int = 64,
) -> SelfCheck:
    """`infermeter load selfcheck`: the ceiling, then the added latency at `shares` of it."""
    return _check(tokenizer, max(1, min(int(tokens), 256)), requests, shares, None)


def probe(tokenizer: Any, tokens: int, rate: float) -> SelfCheck:
    """The short self-check before an endpoint run.

    The ceiling, and the added latency at the run's own rate (a tenth of the ceiling when the
    run's rate is below that, open-ended or a closed loop: it hardly moves at light load).
    """
    return _check(tokenizer, max(1, min(int(tokens), 64)), 24, (), rate)


@dataclass(frozen=True)
class ClientVerdict:
    """The client's cost during one run, held against that run."""

    cores: float
    offered_share_of_ceiling: float
    delivered_share_of_ceiling: float
    ttft_share: float
    itl_share: float
    flagged: tuple[str, ...]

    def line(self) -> str:
        """One line: what the client cost this run, and any warning."""
        head = (
            f"client: {self.cores:.2f} cores while measuring; it delivered "
            f"{self.delivered_share_of_ceiling:.1%} of its ceiling; its added latency is "
            f"{self.ttft_share:.1%} of this run's median TTFT and {self.itl_share:.1%} of its "
            "median ITL"
        )
        return head + ("; WARNING: " + "; ".join(self.flagged) if self.flagged else "")

    def to_doc(self) -> ClientVerdictDoc:
        """As stored in a load's summary (`client.verdict`)."""
        return cast("ClientVerdictDoc", asdict(self))


def verdict(check: SelfCheck, summary: LoadSummaryDoc, cores: float, rate: float) -> ClientVerdict:
    """`check` held against a run's summary: shares, and the warnings a user must see."""
    a = check.typical()
    ttft = summary["ttft_ms"]["p50"]
    itl = summary["itl_ms"]["p50"]
    ttft_share = abs(a.ttft_ms_p50) / ttft if ttft and math.isfinite(ttft) else math.nan
    itl_share = abs(a.itl_ms_p50) / itl if itl and math.isfinite(itl) else math.nan
    offered = rate / check.ceiling_rps if math.isfinite(rate) else math.nan
    delivered = summary["throughput_rps"] / check.ceiling_rps
    flagged = []
    if offered > SAFE_SHARE or delivered > SAFE_SHARE:
        flagged.append(
            f"the run asked {max(offered, delivered):.0%} of the client's ceiling (safe: "
            f"{SAFE_SHARE:.0%}); its latencies include the client's own queueing"
        )
    if ttft_share > ADDED_SHARE or itl_share > ADDED_SHARE:
        flagged.append(
            f"the client adds {a.ttft_ms_p50:.2f} ms to TTFT and {a.itl_ms_p50:.3f} ms to each "
            "ITL, over 5% of this run's figures: they over-state the server's latency by "
            "about that"
        )
    return ClientVerdict(cores, offered, delivered, ttft_share, itl_share, tuple(flagged))
