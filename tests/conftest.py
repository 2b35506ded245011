"""Shared fixtures: offline hub, a private data folder per test, models loaded once."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _private_home(tmp_path, monkeypatch):
    """Every test gets its own default database folder; the model cache is shared."""
    monkeypatch.setenv("INFERMETER_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("INFERMETER_DB", raising=False)


@pytest.fixture(scope="session")
def tiny_llama():
    from infermeter import load_model

    return load_model("tiny-llama", device="cpu")


@pytest.fixture(scope="session")
def smollm2():
    from infermeter import load_model

    return load_model("smollm2-135m", device="cpu")


@pytest.fixture(scope="session")
def tiny_moe():
    from infermeter import load_model

    return load_model("tiny-qwen3-moe", device="cpu")
