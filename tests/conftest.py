"""Shared fixtures: offline hub, a private data folder per test, models loaded once."""

from __future__ import annotations

import json
import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# as the CLI sets it (cli/quiet.py) before transformers reads it at import: tests that run
# the CLI in this process (tests/helpers.py `cli_here`) see its stderr as a user does
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
if os.environ.get("PYTEST_XDIST_WORKER"):
    # `make test` runs one worker per core: a worker's torch on every core (2 OpenMP threads
    # per worker on 2 cores) spun against the other's and made the suite slower, not faster.
    # Before torch is imported, so its thread pool is made at this size.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("MKL_NUM_THREADS", "1")

import pytest
import typer.testing

_build_command = typer.testing._get_command
_built: dict[int, object] = {}


def _command_once(app):
    """Click's command of a Typer app, built once per test process.

    `CliRunner.invoke` built it again on every call: 25 ms for infermeter's app here, and the
    suite invokes it in-process about a thousand times (tests/cli/test_numeric_options.py: 21 s
    before, 7 s after). A built command keeps no state between invocations: each parses into
    a new context, and its callbacks look up what they call when called.
    """
    if id(app) not in _built:
        _built[id(app)] = (app, _build_command(app))  # the app kept: its id stays its own
    return _built[id(app)][1]


typer.testing._get_command = _command_once


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


#: each test's recorded seconds on a 2-core machine (tools/test_durations.py writes them)
_RECORDED_S: dict[str, float] = json.loads(
    Path(__file__).with_name("durations.json").read_text(encoding="utf-8")
)
#: over this, a test is marked `over_half_s` and `make test-fast` leaves it out
QUICK_S = 0.5
#: module fixtures whose cost a test's recorded time leaves out (it was paid by the first user)
_COSTLY_FIXTURES = {"calibrated": "a CPU calibration, about 40 s"}
#: seconds a file's first run in a new environment adds to its recorded (warm) time: what it
#: compiles into caches keyed by the venv's own path, so a fresh clone pays it on every run
#: (measured on a fresh clone here). Only the order uses it: recorded at 2.6 s, the
#: quantized-cache file was handed out among the last and kept one core busy alone for 40 s.
_FIRST_RUN_S = {
    "test_cache_forms.py": 40.0,  # optimum-quanto's CPU kernels (run/cache_probe.py)
    "test_compiled.py": 30.0,  # inductor's C++ kernels for the compiled tiny models
    "test_experiments.py": 17.0,  # the compile experiment's kernels
}


def pytest_collection_modifyitems(config, items):
    """Mark each test by the real parts it uses (postgres, browser, ray, torchrun, smollm2,
    gemma3, llama_server) and by its recorded time (`over_half_s`), so `make test-fast` (docs:
    README) can leave them out without a list kept by hand.

    Then the files longest first by their recorded times, each file's own order kept: `make
    test` hands whole files to its workers as they free up (`--dist loadfile`, so a file's
    module fixture, a server or a calibration, is made once), and a long file started last
    would keep one core busy alone at the end while the other sat idle. (`--no-loadscope-reorder`
    keeps this order: xdist otherwise sends the files with the most tests first, which started
    the Ray file, 6 tests and 2 minutes, at 87% of the run.)
    """
    file_s: dict[str, float] = {}
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
        recorded_s = _RECORDED_S.get(item.nodeid)
        costly = any(name in item.fixturenames for name in _COSTLY_FIXTURES)
        if costly or (recorded_s is not None and recorded_s > QUICK_S):
            item.add_marker("over_half_s")
        key = str(item.path)
        if key not in file_s:
            file_s[key] = _FIRST_RUN_S.get(item.path.name, 0.0)
        file_s[key] += 0.5 if recorded_s is None else recorded_s
    order = {id(item): i for i, item in enumerate(items)}
    items.sort(key=lambda it: (-file_s[str(it.path)], str(it.path), order[id(it)]))


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
