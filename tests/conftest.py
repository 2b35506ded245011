"""Shared fixtures: offline hub, a private data folder per test, models loaded once."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest


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
def gemma3():
    from infermeter import load_model

    return load_model("gemma3-270m", device="cpu")


@pytest.fixture(scope="session")
def tiny_moe():
    from infermeter import load_model

    return load_model("tiny-qwen3-moe", device="cpu")


@pytest.fixture(scope="session")
def postgres():
    """A real PostgreSQL server for the session (tests/pg_server.py); skipped, with the reason,
    only where its binaries or the driver are missing."""
    from tests.pg_server import PostgresServer, missing_reason

    why = missing_reason()
    if why:
        pytest.skip(why)
    server = PostgresServer().start()
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path):
    """A fresh empty database: a SQLite file, then a database on the real PostgreSQL server."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'r.db'}"
    return request.getfixturevalue("postgres").new_database()


#: test files whose every test drives a real outside part, by the marker `make test-fast` leaves out
_MODULE_MARKS = {
    "test_browser.py": "browser",
    "test_ray_sweep.py": "ray",
    "test_tensor_parallel.py": "torchrun",
    "test_smollm2.py": "smollm2",
    "test_gemma3.py": "gemma3",
    "test_llama_server.py": "llama_server",
}


def pytest_collection_modifyitems(config, items):
    """Mark each test by the real parts it uses (postgres, browser, ray, torchrun, smollm2,
    gemma3, llama_server), so `make test-fast` (docs: README) can leave them out without a
    list kept by hand."""
    for item in items:
        mark = _MODULE_MARKS.get(item.path.name)
        if mark:
            item.add_marker(mark)
        params = getattr(getattr(item, "callspec", None), "params", {})
        if "postgres" in item.fixturenames or params.get("db_url") == "postgresql":
            item.add_marker("postgres")
        for model in ("smollm2", "gemma3"):
            if model in item.fixturenames:
                item.add_marker(model)


@pytest.fixture
def live_rapl(tmp_path, monkeypatch):
    """A live fake powercap tree drawing 20 W on the package and 2 W on DRAM, in real time
    (this machine has no RAPL), found through INFERMETER_POWERCAP."""
    from tests.fakes import LivePowercap

    root = tmp_path / "powercap"
    # wraps every ~2.5 s: a run wraps, and no thread stall (gc holds the GIL) spans a wrap
    with LivePowercap(root, watts=20.0, max_range_uj=50_000_000) as fake:
        monkeypatch.setenv("INFERMETER_POWERCAP", str(root))
        yield fake
