"""Apple silicon CPU, GPU and ANE energy through macOS `powermetrics` (needs root).

`powermetrics --samplers cpu_power,gpu_power,ane_power -f plist -i MS` writes one XML plist per
interval, separated by NUL bytes. Each has `elapsed_ns` (the interval it covers) and a
`processor` dict with `cpu_energy`, `gpu_energy`, `ane_energy` in millijoules (energy over the
interval) and `cpu_power`, `gpu_power`, `ane_power`, `combined_power` in milliwatts. Energy is
used when present; otherwise power x elapsed. The tool only reports at the end of each interval,
so the cumulative value moves in steps of one interval: `update_period_s` is the interval, and
windows shorter than it are estimates (the sampler labels them).

Without root, powermetrics exits at once with "must be invoked as the superuser"; we run it via
`sudo -n` so it never prompts, and turn that into a message saying how to allow it.
"""

from __future__ import annotations

import plistlib
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import IO, Any

from infermeter.measure.energy.base import Unavailable

DOMAINS = ("cpu", "gpu", "ane")
_SUPERUSER = (
    "run infermeter with sudo, or allow it without a password: add "
    "`USER ALL=(root) NOPASSWD: /usr/bin/powermetrics` with visudo"
)


def parse_sample(blob: bytes) -> dict[str, float]:
    """Joules per domain (cpu, gpu, ane) in one powermetrics plist sample.

    Raises:
        ValueError: not a powermetrics plist sample.
    """
    try:
        doc = plistlib.loads(blob.strip(b"\0\n\r\t "))
    except Exception as exc:  # plistlib raises several types for broken XML
        raise ValueError(f"not a plist: {exc}") from exc
    if not isinstance(doc, dict) or "processor" not in doc:
        raise ValueError("plist has no 'processor' section (was cpu_power sampled?)")
    proc: dict[str, Any] = doc["processor"]
    gpu: dict[str, Any] = doc.get("gpu") or {}
    elapsed_s = float(doc.get("elapsed_ns", 0)) / 1e9
    out = {}
    for domain in DOMAINS:
        energy_mj = proc.get(f"{domain}_energy", gpu.get(f"{domain}_energy"))
        if energy_mj is not None:
            out[domain] = float(energy_mj) / 1e3
            continue
        power_mw = proc.get(f"{domain}_power", gpu.get(f"{domain}_power"))
        if power_mw is not None:
            out[domain] = float(power_mw) / 1e3 * elapsed_s
    if not out:
        raise ValueError("plist sample has neither energy nor power fields")
    return out


def split_stream(stream: IO[bytes], chunk: int = 4096) -> Iterator[bytes]:
    """NUL-separated plist documents from powermetrics' stdout, as they arrive."""
    buf = b""
    while True:
        data = stream.read1(chunk) if hasattr(stream, "read1") else stream.read(chunk)
        if not data:
            if buf.strip(b"\0\n "):
                yield buf
            return
        buf += data
        while b"\0" in buf:
            doc, buf = buf.split(b"\0", 1)
            if doc.strip():
                yield doc


def command(interval_ms: int) -> list[str]:
    """The powermetrics command line, run through `sudo -n` so it never prompts."""
    return [
        "sudo",
        "-n",
        "powermetrics",
        "--samplers",
        "cpu_power,gpu_power,ane_power",
        "-f",
        "plist",
        "-i",
        str(int(interval_ms)),
    ]


class PowermetricsSource:
    """Cumulative CPU/GPU/ANE joules from a running powermetrics process.

    Args:
        interval_ms: powermetrics' sampling interval (its reports are this coarse).
        argv: the command to run (tests pass a script that prints recorded plists).
        popen: process factory (tests).
        startup_timeout_s: how long to wait for the first sample before giving up.

    Raises:
        PermissionError: powermetrics refused to run without root.
        RuntimeError: it exited or produced no sample in time.
    """

    name = "powermetrics"
    method = "power-integration"

    def __init__(
        self,
        interval_ms: int = 100,
        argv: Sequence[str] | None = None,
        popen: Callable[..., Any] = subprocess.Popen,
        startup_timeout_s: float = 5.0,
    ) -> None:
        self.update_period_s = interval_ms / 1e3
        self._lock = threading.Lock()
        self._totals = dict.fromkeys(DOMAINS, 0.0)
        self._count = 0
        self._first = threading.Event()
        self._proc = popen(
            list(argv or command(interval_ms)), stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        self._reader = threading.Thread(target=self._read, daemon=True, name="powermetrics")
        self._reader.start()
        deadline = time.monotonic() + startup_timeout_s
        while not self._first.wait(0.05):
            if self._proc.poll() is not None or time.monotonic() > deadline:
                self._fail()

    def _fail(self) -> None:
        err = b""
        if self._proc.poll() is None:
            self._proc.kill()
        else:
            err = self._proc.stderr.read() if self._proc.stderr else b""
        text = err.decode(errors="replace").strip()
        if "superuser" in text or "password" in text or "not allowed" in text:
            raise PermissionError(f"powermetrics needs root: {text.splitlines()[0]}")
        raise RuntimeError(f"powermetrics produced no sample: {text or 'timed out'}")

    def _read(self) -> None:
        for doc in split_stream(self._proc.stdout):
            try:
                joules = parse_sample(doc)
            except ValueError:
                continue
            with self._lock:
                for k, v in joules.items():
                    self._totals[k] += v
                self._count += 1
            self._first.set()

    def domains(self) -> list[str]:
        """cpu, gpu, ane."""
        return list(DOMAINS)

    def read_j(self) -> dict[str, float]:
        """Joules per domain over the intervals powermetrics has reported so far."""
        with self._lock:
            return dict(self._totals)

    @property
    def reports(self) -> int:
        """How many interval reports have arrived."""
        return self._count

    def close(self) -> None:
        """Stop powermetrics."""
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                self._proc.kill()
        self._reader.join(timeout=2)


def probe_powermetrics_source(interval_ms: int = 100) -> PowermetricsSource | Unavailable:
    """A running powermetrics source, or why there is none."""
    import shutil
    import sys

    if sys.platform != "darwin":
        return Unavailable("powermetrics", f"macOS only (this is {sys.platform})")
    if shutil.which("powermetrics") is None:
        return Unavailable("powermetrics", "the powermetrics tool is not on PATH")
    try:
        return PowermetricsSource(interval_ms)
    except PermissionError as exc:
        return Unavailable("powermetrics", str(exc), _SUPERUSER)
    except (OSError, RuntimeError) as exc:
        return Unavailable("powermetrics", f"powermetrics could not start: {exc}")
