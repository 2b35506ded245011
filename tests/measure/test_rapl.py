"""RAPL on a fake powercap tree: counters, wraps, a missing DRAM zone, unreadable files."""

from pathlib import Path

import pytest

from infermeter.measure.energy import RaplSource, Unavailable, probe_rapl
from tests.fakes import FakePowercap


@pytest.fixture
def fake(tmp_path):
    return FakePowercap(tmp_path / "powercap")


def test_steady_counter(fake):
    src = RaplSource(fake.root)
    assert src.domains() == ["package-0", "dram-0"]
    for _ in range(5):
        fake.add("package-0", 50_000)
        fake.add("dram-0", 7_000)
        got = src.read_j()
    assert got == {"package-0": pytest.approx(0.25), "dram-0": pytest.approx(0.035)}
    assert src.wraps == {"package-0": 0, "dram-0": 0}


@pytest.mark.parametrize("wraps", [1, 3])
def test_wraps_are_added_and_energy_stays_monotonic(fake, wraps):
    src = RaplSource(fake.root)
    seen = []
    step = 400_000  # 0.4 of the range a read: a wrap every 2-3 reads
    reads = 0
    while src.wraps["package-0"] < wraps:
        fake.add("package-0", step)
        seen.append(src.read_j()["package-0"])
        reads += 1
    assert src.wraps["package-0"] == wraps
    assert seen == sorted(seen)  # never goes backwards
    assert seen[-1] == pytest.approx(fake.truth_uj["package-0"] / 1e6)
    assert seen[-1] == pytest.approx(reads * step / 1e6)


def test_missing_dram_domain(tmp_path):
    fake = FakePowercap(tmp_path / "pc", dram=False)
    src = RaplSource(fake.root)
    assert src.domains() == ["package-0"]
    fake.add("package-0", 1_000)
    assert src.read_j() == {"package-0": pytest.approx(0.001)}


def test_unreadable_counter_explains_how_to_grant_access(fake, monkeypatch):
    real = Path.read_text

    def guarded(self, *a, **k):
        if self.name == "energy_uj":
            raise PermissionError(13, "Permission denied", str(self))
        return real(self, *a, **k)

    monkeypatch.setattr(Path, "read_text", guarded)
    got = probe_rapl(fake.root)
    assert isinstance(got, Unavailable) and "not readable" in got.reason
    assert "chmod" in got.fix and "Linux 5.10" in got.fix
    mode = (fake.root / "intel-rapl:0" / "energy_uj").stat().st_mode
    assert mode & 0o777 == 0o644  # we explain; we never change permissions


def test_no_powercap_at_all(tmp_path):
    got = probe_rapl(tmp_path / "nothing")
    assert isinstance(got, Unavailable) and got.name == "rapl" and "no RAPL zones" in got.reason
    assert isinstance(probe_rapl(FakePowercap(tmp_path / "pc").root), RaplSource)
