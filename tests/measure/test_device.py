import pytest
import torch

from infermeter.errors import UserError
from infermeter.measure.device import describe_device, resolve_device, resolve_dtype


def test_auto_and_cpu():
    assert resolve_device("cpu").type == "cpu"
    import torch

    expected = "cuda" if torch.cuda.is_available() else "cpu"
    if expected == "cpu" and torch.backends.mps.is_available():
        expected = "mps"
    assert resolve_device("auto").type == expected


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_missing_is_a_user_error():
    with pytest.raises(UserError, match="CUDA is not available"):
        resolve_device("cuda")


def test_bad_device_and_dtype_names():
    with pytest.raises(UserError, match="unknown device 'gpu9'"):
        resolve_device("gpu9")
    with pytest.raises(UserError, match="unknown dtype 'float8'"):
        resolve_dtype("float8", "cpu")


def test_dtype_aliases_and_auto():
    assert resolve_dtype("bf16", "cpu") is torch.bfloat16
    assert resolve_dtype("fp16", "cpu") is torch.float16
    assert resolve_dtype("auto", "cpu") is torch.float32


def test_describe_cpu():
    d = describe_device("cpu")
    assert d["type"] == "cpu" and d["name"] and d["cpu_count"] >= 1
