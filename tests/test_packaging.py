"""The package users install: what the wheel holds, the extras, and a missing extra's message.

`make package` builds the sdist and wheel and runs `twine check --strict`; the test below builds
its own wheel (so `pytest` alone checks it too) and looks inside.
"""

import re
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
from typer.testing import CliRunner

from infermeter import UserError
from infermeter.cli.app import app
from infermeter.extras import EXTRAS, require
from infermeter.run import sweep_file  # its TOML reader: tomllib, or tomli on Python 3.10
from tests.helpers import assert_one_line_error

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = sweep_file.tomllib.loads((ROOT / "pyproject.toml").read_text())
runner = CliRunner()


def _dist_name(requirement: str) -> str:
    """`psycopg[binary]>=3.1` -> `psycopg`; `prometheus-client` -> `prometheus_client`."""
    return re.split(r"[\[<>=!~ ;]", requirement, maxsplit=1)[0].lower().replace("-", "_")


def test_the_extras_in_pyproject_are_the_ones_the_code_names():
    declared = PYPROJECT["project"]["optional-dependencies"]
    for extra, modules in EXTRAS.items():
        assert extra in declared, f"pyproject.toml has no [{extra}] extra"
        # a distribution is named as its module, dots as underscores (optimum-quanto)
        imports = sorted(m.replace(".", "_") for m in modules)
        assert sorted(_dist_name(r) for r in declared[extra]) == imports, extra
    dev = declared["dev"][0]
    assert dev.startswith("infermeter[") and set(dev[11:-1].split(",")) == set(EXTRAS)
    base = {_dist_name(r) for r in PYPROJECT["project"]["dependencies"]}
    assert not base & {m for mods in EXTRAS.values() for m in mods}, "an extra is mandatory"


@pytest.mark.slow
def test_the_wheel_holds_the_package_its_data_and_its_metadata(tmp_path):
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "build",
            "--no-isolation",
            "--wheel",
            "--outdir",
            str(tmp_path),
            str(ROOT),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    (wheel,) = tmp_path.glob("infermeter-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "infermeter/py.typed" in names
    assert any(n.startswith("infermeter/workloads/data/") for n in names)
    # the held-out errors every prediction's interval comes from
    assert "infermeter/analysis/data/prediction_errors.json" in names
    assert any(n.startswith("infermeter/dashboard/static/") for n in names)
    assert any(n.endswith("licenses/LICENSE") for n in names)
    assert not any(n.startswith("tests/") for n in names)
    meta_name = next(n for n in names if n.endswith(".dist-info/METADATA"))
    meta = Parser().parsestr(zipfile.ZipFile(wheel).read(meta_name).decode())
    import infermeter

    assert meta["Version"] == infermeter.__version__  # one version source
    assert set(EXTRAS) <= set(meta.get_all("Provides-Extra"))
    requires = meta.get_all("Requires-Dist")
    fastapi = [r for r in requires if r.startswith("fastapi")]
    assert fastapi and all('extra == "dashboard"' in r for r in fastapi)


def test_serve_without_the_dashboard_extra_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "fastapi", None)  # as if it were not installed
    r = runner.invoke(app, ["serve", "--port", "0"])
    assert_one_line_error(r, "infermeter serve", "fastapi", "pip install 'infermeter[dashboard]'")


def test_parquet_export_without_pyarrow_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    r = runner.invoke(
        app,
        [
            "export",
            "abc123",
            "--format",
            "parquet",
            "--out",
            str(tmp_path),
            "--db",
            str(tmp_path / "none.db"),
        ],
    )
    assert_one_line_error(r, "--format parquet", "pyarrow", "infermeter[parquet]")


def test_a_postgresql_url_without_psycopg_says_what_to_install(monkeypatch):
    from infermeter.store import Store

    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(UserError) as err:
        Store("postgresql+psycopg://me:secret@127.0.0.1:1/runs")
    text = str(err.value)
    assert "psycopg" in text and "infermeter[postgres]" in text and "secret" not in text


def test_require_is_silent_when_the_extra_is_there():
    require("dashboard", "the dashboard")  # installed by make install-dev
    with pytest.raises(KeyError):
        require("nonexistent", "nothing")
