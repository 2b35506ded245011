"""Fakes of hardware this machine lacks: a powercap tree, and one that draws power live."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path


class FakePowercap:
    """A powercap folder whose counters the test advances by known true energy."""

    def __init__(self, root: Path, max_range_uj: int = 1_000_000, dram: bool = True):
        self.root = root
        self.max_range_uj = max_range_uj
        self.raw: dict[str, int] = {}
        self.truth_uj: dict[str, int] = {}
        self._zone(root / "intel-rapl:0", "package-0", "package-0")
        if dram:
            self._zone(root / "intel-rapl:0" / "intel-rapl:0:0", "dram", "dram-0")
        core = root / "intel-rapl:0" / "intel-rapl:0:1"  # core zone: ignored
        core.mkdir(parents=True)
        (core / "name").write_text("core\n")

    def _zone(self, path: Path, name: str, label: str) -> None:
        path.mkdir(parents=True, exist_ok=True)
        (path / "name").write_text(name + "\n")
        (path / "max_energy_range_uj").write_text(f"{self.max_range_uj}\n")
        self.raw[label] = 123_456
        self.truth_uj[label] = 0
        self._paths = getattr(self, "_paths", {})
        self._paths[label] = path
        self._write(label)

    def _write(self, label: str) -> None:
        tmp = self._paths[label] / "energy_uj.tmp"
        tmp.write_text(f"{self.raw[label]}\n")
        os.replace(tmp, self._paths[label] / "energy_uj")  # readers never see a half write

    def add(self, label: str, uj: int) -> None:
        """Spend `uj` microjoules in a zone; the counter wraps like the hardware's."""
        self.truth_uj[label] += uj
        self.raw[label] = (self.raw[label] + uj) % (self.max_range_uj + 1)
        self._write(label)


class LivePowercap(FakePowercap):
    """A fake powercap tree whose counters another *process* advances at `watts` in real time.

    Used to run the whole profile path (sampler, attribution, store) on a machine without RAPL:
    the package draws `watts` and DRAM a tenth of it, so any window's true energy is 1.1 x
    `watts` x its length. A process, not a thread, like the hardware: our GIL (a long gc pass)
    never delays the counters, only our readings of them.
    """

    def __init__(self, root: Path, watts: float = 20.0, period_s: float = 0.001, **kw) -> None:
        super().__init__(root, **kw)
        self.watts = watts
        self.period_s = period_s
        self._proc: subprocess.Popen | None = None

    def __enter__(self) -> LivePowercap:
        zones = {label: str(path / "energy_uj") for label, path in self._paths.items()}
        script = f"""
import os, time
zones, start = {zones!r}, {dict(self.raw)!r}
scale = {{"package-0": 1.0, "dram-0": 0.1}}
t0, top = time.perf_counter(), {self.max_range_uj} + 1
while True:
    time.sleep({self.period_s})
    dt = time.perf_counter() - t0
    for label, path in zones.items():
        raw = int(start[label] + {self.watts} * scale[label] * dt * 1e6) % top
        with open(path + ".tmp", "w") as f:
            f.write(f"{{raw}}\\n")
        os.replace(path + ".tmp", path)
"""
        self._proc = subprocess.Popen([sys.executable, "-c", script])
        time.sleep(0.2)  # let it start writing
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._proc is not None
        self._proc.kill()
        self._proc.wait()
