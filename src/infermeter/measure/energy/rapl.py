"""Linux RAPL through powercap sysfs: package and DRAM energy counters.

Layout: /sys/class/powercap/intel-rapl:N (a package, `name` = "package-N") with sub-zones
intel-rapl:N:M (`name` = "core", "uncore" or "dram"); each zone has `energy_uj` (a counter that
wraps at `max_energy_range_uj`) and the same files on AMD processors. The counter updates about
every millisecond.

Wrap-around: each read compares with the previous raw value of that zone; a smaller value means
the counter wrapped, and `max_energy_range_uj + 1` is added. One read can only see one wrap, so
reads must come at least once per wrap period (max range / peak power: a typical range of
262 kJ lasts ~22 minutes at 200 W; the sampler polls every 100 ms); several wraps over a long
window are all counted because every read in between sees its own.

Since Linux 5.10 `energy_uj` is readable by root only (CVE-2020-8694). We never change
permissions: the message says how an administrator can grant read access.
"""

from __future__ import annotations

from pathlib import Path

from infermeter.measure.energy.base import Unavailable

POWERCAP = Path("/sys/class/powercap")
_GRANT = (
    "RAPL counters are root-only since Linux 5.10; an administrator can grant read access with "
    "`sudo chmod a+r /sys/class/powercap/intel-rapl:*/energy_uj "
    "/sys/class/powercap/intel-rapl:*:*/energy_uj` (or run as root)"
)


class _Zone:
    def __init__(self, label: str, path: Path) -> None:
        self.label = label
        self.path = path
        self.max_range_uj = int((path / "max_energy_range_uj").read_text())
        self.last_raw = self._raw()
        self.total_uj = 0
        self.wraps = 0

    def _raw(self) -> int:
        return int((self.path / "energy_uj").read_text())

    def update(self) -> float:
        raw = self._raw()
        delta = raw - self.last_raw
        if delta < 0:  # wrapped since the last read
            delta += self.max_range_uj + 1
            self.wraps += 1
        self.total_uj += delta
        self.last_raw = raw
        return self.total_uj / 1e6


def _zones(root: Path) -> list[tuple[str, Path]]:
    """(label, folder) of package and DRAM zones, e.g. ("package-0", ...), ("dram-0", ...)."""
    out = []
    for pkg in sorted(root.glob("intel-rapl:*")):
        if pkg.name.count(":") != 1:
            continue
        name = (pkg / "name").read_text().strip() if (pkg / "name").exists() else pkg.name
        index = pkg.name.split(":")[1]
        out.append((name if name.startswith("package") else f"package-{index}", pkg))
        for sub in sorted(pkg.glob(f"{pkg.name}:*")):
            sub_name = (sub / "name").read_text().strip() if (sub / "name").exists() else ""
            if sub_name == "dram":
                out.append((f"dram-{index}", sub))
    return out


class RaplSource:
    """Package and DRAM energy from RAPL counters, wrap-corrected.

    Args:
        root: the powercap folder (a fake tree in tests).

    Raises:
        PermissionError, FileNotFoundError: use `probe_rapl` to get a reason instead.
    """

    name = "rapl"
    method = "counter"
    update_period_s = 0.001

    def __init__(self, root: Path = POWERCAP) -> None:
        self._zones = [_Zone(label, path) for label, path in _zones(Path(root))]
        if not self._zones:
            raise FileNotFoundError(f"no RAPL zones under {root}")

    def domains(self) -> list[str]:
        """Zone labels: package-N, and dram-N where the platform exposes DRAM."""
        return [z.label for z in self._zones]

    def read_j(self) -> dict[str, float]:
        """Joules per zone since creation."""
        return {z.label: z.update() for z in self._zones}

    @property
    def wraps(self) -> dict[str, int]:
        """How many wrap-arounds each zone's counter made (for tests and diagnostics)."""
        return {z.label: z.wraps for z in self._zones}


def probe_rapl(root: Path = POWERCAP) -> RaplSource | Unavailable:
    """A working RAPL source, or why there is none (missing, or not readable)."""
    root = Path(root)
    if not root.exists() or not any(root.glob("intel-rapl:*")):
        return Unavailable(
            "rapl",
            f"no RAPL zones under {root} (not Linux x86, or a VM/container that hides powercap)",
        )
    try:
        return RaplSource(root)
    except PermissionError:
        return Unavailable("rapl", "RAPL energy counters are not readable by this user", _GRANT)
    except (OSError, ValueError) as exc:
        return Unavailable("rapl", f"RAPL counters could not be read: {exc}")
