"""NVML source on a mocked NVML (autospec of pynvml): counters, integration, device mapping."""

from unittest import mock

import pynvml
import pytest

from infermeter.measure.energy import NvmlSource, visible_physical_indices


class FakeGpus:
    """Physical GPUs with a power trace (W per second) and a matching energy counter (mJ)."""

    def __init__(self, watts: list[list[float]], counter: list[bool], uuids: list[str]):
        self.watts, self.counter, self.uuids = watts, counter, uuids
        self.t = 0.0  # seconds
        nvml = mock.create_autospec(pynvml, instance=False)
        nvml.NVMLError = pynvml.NVMLError
        nvml.nvmlDeviceGetCount.side_effect = lambda: len(watts)
        nvml.nvmlDeviceGetHandleByIndex.side_effect = lambda i: i
        nvml.nvmlDeviceGetUUID.side_effect = lambda h: uuids[h].encode()
        nvml.nvmlDeviceGetPowerUsage.side_effect = lambda h: int(self.power(h) * 1000)
        nvml.nvmlDeviceGetTotalEnergyConsumption.side_effect = self.energy_mj
        self.nvml = nvml

    def power(self, h: int) -> float:
        """Linear between whole seconds, like `true_j` assumes."""
        trace = self.watts[h]
        i, frac = int(self.t), self.t - int(self.t)
        a, b = trace[min(i, len(trace) - 1)], trace[min(i + 1, len(trace) - 1)]
        return a + (b - a) * frac

    def true_j(self, h: int, t: float) -> float:
        """Exact integral of the (piecewise-linear between whole seconds) power trace."""
        total, s = 0.0, 0.0
        trace = self.watts[h]
        while s < t:
            step = min(1.0, t - s)
            i = int(s)
            a, b = trace[min(i, len(trace) - 1)], trace[min(i + 1, len(trace) - 1)]
            total += step * (a + (a + (b - a) * step)) / 2
            s += step
        return total

    def energy_mj(self, h: int) -> int:
        if not self.counter[h]:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return int(round(5_000_000 + self.true_j(h, self.t) * 1000))


def test_counter_and_integration_agree_and_not_supported_is_per_device():
    trace = [100, 150, 300, 300, 250, 120, 100, 100, 180, 220, 200]
    gpus = FakeGpus([trace, trace], counter=[True, False], uuids=["GPU-a", "GPU-b"])
    src = NvmlSource(gpus.nvml, now=lambda: gpus.t, visible="0,1")
    assert src.methods() == {"gpu-0": "counter", "gpu-1": "power-integration"}
    assert src.method == "mixed"
    for _ in range(100):  # poll every 0.1 s, as the sampler does
        gpus.t += 0.1
        got = src.read_j()
    truth = gpus.true_j(0, gpus.t)
    assert got["gpu-0"] == pytest.approx(truth, rel=1e-3)
    assert got["gpu-1"] == pytest.approx(got["gpu-0"], rel=0.01)  # within 1%


def test_cuda_visible_devices_maps_cuda_order_to_physical_gpus():
    gpus = FakeGpus(
        [[10], [20], [30], [40]], [True] * 4, ["GPU-11aa", "GPU-22bb", "GPU-33cc", "GPU-44dd"]
    )
    nvml = gpus.nvml
    assert visible_physical_indices(nvml, "") == []
    assert visible_physical_indices(nvml, "2,0") == [2, 0]
    assert visible_physical_indices(nvml, "3,9,1") == [3]  # CUDA stops at an invalid entry
    assert visible_physical_indices(nvml, "GPU-33,GPU-11aa") == [2, 0]  # UUID prefixes
    src = NvmlSource(nvml, now=lambda: gpus.t, visible="3,1")
    assert src.physical == [3, 1] and src.domains() == ["gpu-0", "gpu-1"]
    gpus.t = 2.0
    got = src.read_j()
    assert got["gpu-0"] == pytest.approx(80.0)  # cuda:0 is physical 3 at 40 W for 2 s
    assert got["gpu-1"] == pytest.approx(40.0)
    src.close()
    nvml.nvmlShutdown.assert_called_once()


def test_all_devices_when_cuda_visible_devices_is_unset(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    gpus = FakeGpus([[10], [20]], [True, True], ["GPU-a", "GPU-b"])
    assert visible_physical_indices(gpus.nvml) == [0, 1]


def test_cuda_uuids_decide_the_mapping_whatever_the_order():
    """CUDA's fastest-first order put physical GPU 3 at cuda:0: the UUIDs say so."""
    flat = [[100.0] * 4] * 4
    gpus = FakeGpus(flat, counter=[True] * 4, uuids=["GPU-a", "GPU-b", "GPU-c", "GPU-d"])
    src = NvmlSource(gpus.nvml, visible="1,3", uuids=["GPU-d", "GPU-b"])
    assert src.physical == [3, 1] and src.domains() == ["gpu-0", "gpu-1"]
    unknown = NvmlSource(gpus.nvml, visible="1,3", uuids=["GPU-d", "GPU-zz"])
    assert unknown.physical == [1, 3]  # a UUID NVML does not know: back to the positions
