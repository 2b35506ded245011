"""Which physical GPU cuda:N is: by NVML UUID, else by CUDA_VISIBLE_DEVICES, said in the header."""

from __future__ import annotations

from types import SimpleNamespace
from unittest import mock

import pynvml
import pytest

from infermeter.measure.gpu_identity import _pci_bus_id, gpu_identity, identity_label


def fake_nvml(uuids: list[str]):
    nvml = mock.create_autospec(pynvml, instance=False)
    nvml.NVMLError = pynvml.NVMLError
    nvml.nvmlDeviceGetCount.side_effect = lambda: len(uuids)
    nvml.nvmlDeviceGetHandleByIndex.side_effect = lambda i: i
    nvml.nvmlDeviceGetUUID.side_effect = lambda h: uuids[h].encode()
    return nvml


UUIDS = [f"GPU-{i}aaa-0000" for i in range(8)]


def test_nvml_uuid_wins_over_the_position_in_cuda_visible_devices():
    """CUDA orders fastest first: cuda:0 may be the second entry's GPU; the UUID says which."""
    got = gpu_identity(0, UUIDS[5], nvml=fake_nvml(UUIDS), env={"CUDA_VISIBLE_DEVICES": "3,5"})
    assert got["physical_index"] == 5 and got["found_by"] == "NVML UUID"
    label = identity_label({"type": "cuda", "identity": got})
    assert label == "cuda:0 = GPU 5 of 8 (CUDA_VISIBLE_DEVICES=3,5)"


def test_nvml_without_a_uuid_maps_through_cuda_visible_devices():
    nvml = fake_nvml(UUIDS)
    got = gpu_identity(1, None, nvml=nvml, env={"CUDA_VISIBLE_DEVICES": "6,GPU-2aaa"})
    assert got["physical_index"] == 2 and got["found_by"] == "NVML and CUDA_VISIBLE_DEVICES"
    got = gpu_identity(3, None, nvml=nvml, env={})
    assert got["physical_index"] == 3 and got["cuda_visible_devices"] is None
    assert identity_label({"type": "cuda", "identity": got}) == "cuda:3 = GPU 3 of 8"


def test_without_nvml_the_environment_is_read_and_the_caveat_given():
    got = gpu_identity(1, None, env={"CUDA_VISIBLE_DEVICES": "4, 7"})
    assert got["physical_index"] == 7 and got["found_by"] == "CUDA_VISIBLE_DEVICES"
    assert "CUDA_DEVICE_ORDER=PCI_BUS_ID" in got["note"]
    ordered = gpu_identity(
        1, None, env={"CUDA_VISIBLE_DEVICES": "4,7", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    )
    assert ordered["physical_index"] == 7 and "note" not in ordered
    by_uuid = gpu_identity(0, None, env={"CUDA_VISIBLE_DEVICES": "GPU-9abc"})
    assert by_uuid["physical_index"] is None and by_uuid["uuid"] == "GPU-9abc"
    assert identity_label({"type": "cuda", "identity": by_uuid}) == (
        "cuda:0 = GPU-9abc (CUDA_VISIBLE_DEVICES=GPU-9abc)"
    )


def test_cpu_runs_and_old_records_have_no_label():
    assert identity_label({"type": "cpu", "name": "x"}) == ""
    assert identity_label({"type": "cuda", "name": "H100"}) == ""  # stored before identities


def test_pci_bus_id_is_spelt_as_nvml_does():
    props = SimpleNamespace(pci_bus_id=0x65, pci_domain_id=0, pci_device_id=0)
    assert _pci_bus_id(props) == "00000000:65:00.0"
    assert _pci_bus_id(SimpleNamespace()) is None


def test_the_run_header_names_the_physical_gpu_the_mode_and_nvtx():
    from infermeter.cli.render import run_header
    from infermeter.run.results import RunResult

    ident = gpu_identity(0, UUIDS[5], nvml=fake_nvml(UUIDS), env={"CUDA_VISIBLE_DEVICES": "5"})
    run = RunResult(
        run_id="abc",
        config={
            "new_tokens": 4,
            "batch_size": 1,
            "mode": "minimal",
            "compile": "reduce-overhead",
            "nvtx": True,
        },
        knobs={},
        model_info={"spec": "llama-3.2-1b", "layers": 16, "params": 1.2e9, "dtype": "bfloat16"},
        device={"type": "cuda", "name": "NVIDIA H100 80GB HBM3", "identity": ident},
        versions={},
        created="2026-11-24T00:00:00",
    )
    text = run_header(run).plain
    assert "NVIDIA H100 80GB HBM3 [cuda:0 = GPU 5 of 8 (CUDA_VISIBLE_DEVICES=5)]" in text
    assert "compiled (reduce-overhead) · NVTX ranges" in text


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="this machine has a driver")
def test_cuda_identity_reads_torch_properties_and_falls_back_without_a_driver(monkeypatch):
    from infermeter.measure.gpu_identity import cuda_identity

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2")
    props = SimpleNamespace(uuid="1bd9-77", pci_bus_id=0xA5, pci_domain_id=0, pci_device_id=0)
    got = cuda_identity(props, 0)  # this machine has no NVIDIA driver: NVML does not start
    assert got["uuid"] == "GPU-1bd9-77" and got["pci_bus_id"] == "00000000:A5:00.0"
    assert got["physical_index"] == 2 and got["found_by"] == "CUDA_VISIBLE_DEVICES"
