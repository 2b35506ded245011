"""`energy probe` on this machine (no RAPL, no NVML) and with NVML mocked."""

import json
import sys
from unittest import mock

import pynvml
from typer.testing import CliRunner

from infermeter.cli.app import app
from infermeter.measure.energy import probe as probe_mod


def test_nvml_library_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import raises ImportError
    r = probe_mod.probe_nvml()
    assert not r.available and "not installed" in r.detail and "nvidia-ml-py" in r.fix


def test_nvml_without_driver(monkeypatch):
    init = mock.create_autospec(
        pynvml.nvmlInit, side_effect=pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    )
    monkeypatch.setattr(pynvml, "nvmlInit", init)
    r = probe_mod.probe_nvml()
    assert not r.available and "no NVIDIA driver" in r.detail


def test_nvml_counter_on_one_gpu_polling_on_the_other(monkeypatch):
    for name in ("nvmlInit", "nvmlShutdown"):
        monkeypatch.setattr(pynvml, name, mock.create_autospec(getattr(pynvml, name)))
    monkeypatch.setattr(
        pynvml,
        "nvmlDeviceGetCount",
        mock.create_autospec(pynvml.nvmlDeviceGetCount, return_value=2),
    )
    monkeypatch.setattr(
        pynvml,
        "nvmlDeviceGetHandleByIndex",
        mock.create_autospec(pynvml.nvmlDeviceGetHandleByIndex, side_effect=lambda i: f"h{i}"),
    )
    monkeypatch.setattr(
        pynvml,
        "nvmlDeviceGetName",
        mock.create_autospec(
            pynvml.nvmlDeviceGetName,
            side_effect=lambda h: b"NVIDIA H100" if h == "h0" else "Tesla T4",
        ),
    )

    def energy(handle):
        if handle == "h1":
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return 123456

    monkeypatch.setattr(
        pynvml,
        "nvmlDeviceGetTotalEnergyConsumption",
        mock.create_autospec(pynvml.nvmlDeviceGetTotalEnergyConsumption, side_effect=energy),
    )
    r = probe_mod.probe_nvml()
    assert r.available
    assert "GPU 0 NVIDIA H100: energy counter" in r.detail
    assert "GPU 1 Tesla T4: power polling" in r.detail  # NotSupported affects that device only


def test_energy_probe_cli_is_honest_here():
    r = CliRunner().invoke(app, ["energy", "probe", "--json"])
    assert r.exit_code == 0, r.output
    sources = {s["source"]: s for s in json.loads(r.stdout)["sources"]}
    assert set(sources) == {"rapl", "nvml", "powermetrics"}
    for s in sources.values():
        assert s["available"] or s["detail"]  # every missing source says why
    if sys.platform != "darwin":
        assert "macOS only" in sources["powermetrics"]["detail"]
