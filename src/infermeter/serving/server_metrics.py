"""A serving engine's own Prometheus metrics, scraped during a load (`load --metrics-url URL`).

Why: at an endpoint the client sees latencies, not the engine's state. vLLM, SGLang and TGI
publish theirs in the Prometheus text format (requests running and waiting, KV-cache use,
preemptions, tokens per step); reading them while the load runs puts the cause beside the
effect. The scrape runs on a thread every `interval_s`; the text is parsed by the official
`prometheus_client` parser, and every numeric sample is kept under the engine's own metric
name and labels (`vllm:num_requests_running{model_name="..."}`), as a time series on the run's
clock (ms from the first arrival). Histograms' buckets are left out (their `_sum` and `_count`
are kept): they are what the load itself measures per request. A scrape that fails is counted
with its reason, never a crash; a run whose every scrape failed says so. Each scrape is bounded
(`timeout_s` for the whole body, `MAX_BODY_BYTES`), user-info in the URL is sent as basic auth,
and the URL is stored and shown masked (util/urls.py).
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from infermeter.run.load_docs import SeriesDoc, ServerMetricsDoc, StateMetricDoc

from infermeter.errors import UserError
from infermeter.util.urls import masked_text, masked_url, without_credentials

#: the most a scrape reads: vLLM's /metrics is tens of KiB; an endless body stops here
MAX_BODY_BYTES = 8 << 20
#: most series kept (an engine with thousands of labelled series would swamp the run)
MAX_SERIES = 500
#: metric names that say the batch's state, per engine, for the printed line and the figure
STATE_METRICS = (
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
    "vllm:gpu_cache_usage_perc",
    "vllm:num_preemptions_total",
    "sglang:num_running_reqs",
    "sglang:num_queue_reqs",
    "sglang:token_usage",
    "tgi_queue_size",
    "tgi_batch_current_size",
)


def check_url(url: str) -> str:
    """The URL, or one line when it is not http(s)."""
    from urllib.parse import urlsplit

    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UserError(
            f"--metrics-url {masked_url(url)!r} is not an http(s) URL",
            "e.g. --metrics-url http://127.0.0.1:8000/metrics",
        )
    return url.strip()


def parse(text: str) -> list[tuple[str, dict[str, str], float]]:
    """(name, labels, value) of every numeric sample but histogram buckets."""
    from prometheus_client.parser import text_string_to_metric_families

    out = []
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name.endswith("_bucket"):
                continue
            out.append((s.name, dict(s.labels), float(s.value)))
    return out


class Scraper:
    """Reads `url` every `interval_s` on a thread between `start()` and `stop()`."""

    def __init__(self, url: str, interval_s: float = 1.0, timeout_s: float = 5.0) -> None:
        from infermeter.extras import require

        require("endpoint", "--metrics-url")
        self.url = check_url(url)
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.readings: list[tuple[float, list[tuple[str, dict[str, str], float]]]] = []
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def scrape(self) -> None:
        """One reading now (failures are counted, with their reason), in bounded time and bytes.

        The whole scrape has `timeout_s`, first byte to last, and at most `MAX_BODY_BYTES`:
        a metrics server streaming an endless body grew a load to 18.4 GB, and one trickling a
        byte a second kept it from ending (a timeout per read never fires).
        """
        import httpx

        t = time.perf_counter()
        url, auth = without_credentials(self.url)
        deadline = time.monotonic() + self.timeout_s
        try:
            body = bytearray()
            with httpx.stream("GET", url, auth=auth, timeout=self.timeout_s) as r:
                r.raise_for_status()
                for chunk in r.iter_bytes():
                    body += chunk
                    if len(body) > MAX_BODY_BYTES:
                        raise ValueError(f"the body passed {MAX_BODY_BYTES >> 20} MiB")
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"the body took over {self.timeout_s:g} s")
            self.readings.append((t, parse(body.decode("utf-8", "replace"))))
        except (httpx.HTTPError, OSError, ValueError) as exc:  # TimeoutError is an OSError
            self.failures.append(f"{type(exc).__name__}: {masked_text(str(exc))[:160]}")

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.scrape()

    def start(self) -> Scraper:
        """A first reading now, then one per interval."""
        self.scrape()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="infermeter-scrape")
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the thread and take a last reading."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.timeout_s + 1)
        self.scrape()

    def series(self, origin_s: float) -> ServerMetricsDoc:
        """{key: {name, labels, t_ms, values}} on the run's clock, at most MAX_SERIES keys."""
        out: dict[str, SeriesDoc] = {}
        dropped = 0
        for t, samples in self.readings:
            for name, labels, value in samples:
                key = name + (
                    "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"
                    if labels
                    else ""
                )
                if key not in out:
                    if len(out) >= MAX_SERIES:
                        dropped += 1
                        continue
                    out[key] = {"name": name, "labels": labels, "t_ms": [], "values": []}
                out[key]["t_ms"].append((t - origin_s) * 1e3)
                out[key]["values"].append(value)
        return {
            "url": masked_url(self.url),
            "interval_ms": self.interval_s * 1e3,
            "scrapes": len(self.readings),
            "failures": len(self.failures),
            "first_failure": self.failures[0] if self.failures else None,
            "series_dropped": dropped,
            "series": out,
        }


def state_summary(scraped: ServerMetricsDoc) -> list[StateMetricDoc]:
    """For each engine state metric present: its max and last value, summed over labels."""
    rows: list[StateMetricDoc] = []
    for name in STATE_METRICS:
        keyed = [s for s in scraped["series"].values() if s["name"] == name]
        if keyed:
            rows.append(
                {
                    "name": name,
                    "max": max(max(s["values"]) for s in keyed),
                    "last": sum(s["values"][-1] for s in keyed),
                }
            )
    return rows
