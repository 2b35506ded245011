"""Fast where people wait: listings and help import no heavy library (issue 15)."""

import re
import subprocess
import sys

import pytest

HEAVY = ("torch", "transformers", "pandas", "matplotlib", "fastapi", "pyarrow", "scipy", "numpy")


def _imported(*args, tmp_path):
    """Top-level packages a real `python -X importtime -m infermeter ARGS` imported."""
    env = {"INFERMETER_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    r = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "infermeter", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    names = re.findall(r"^import time:\s+\d+ \|\s+\d+ \|( *)(\S+)$", r.stderr, re.M)
    return {name.split(".")[0] for _, name in names}


@pytest.mark.parametrize("args", [["--help"], ["knobs"], ["models"], ["runs", "list"]])
def test_help_and_listings_import_no_heavy_library(args, tmp_path):
    if args[0] == "runs":
        from infermeter import Store

        Store(tmp_path / "r.db")  # a real (empty) store to list
        args = [*args, "--db", str(tmp_path / "r.db")]
    imported = _imported(*args, tmp_path=tmp_path)
    assert "typer" in imported  # the parse saw the import log
    assert not imported & set(HEAVY), sorted(imported & set(HEAVY))


def test_the_package_and_its_api_load_lazily(tmp_path):
    code = (
        "import sys, infermeter, infermeter.run, infermeter.models, infermeter.store\n"
        "assert 'torch' not in sys.modules and 'sqlalchemy' not in sys.modules\n"
        "from infermeter import RunConfig, Store, profile\n"
        "assert 'sqlalchemy' in sys.modules and callable(profile)\n"
        "from infermeter.run import profile as p2\n"
        "assert p2 is profile, p2\n"
        "print(sorted(n for n in dir(infermeter) if not n.startswith('_'))[:3])\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "GenerationFailed" in r.stdout or "LoadedModel" in r.stdout


def test_the_modes_say_what_they_cost():
    """The figures in `profile --help` are the ones the run header prints (instrument/config)."""
    from typer.testing import CliRunner

    from infermeter.cli.app import app
    from infermeter.instrument.config import MODE_COST

    out = CliRunner().invoke(app, ["profile", "--help"], terminal_width=200).output
    text = " ".join(out.replace("│", " ").split())  # the help panel wraps lines in a box
    for mode in ("standard", "deep"):
        assert MODE_COST[mode].split(" (")[0].replace(",", "") in text.replace(",", ""), mode


def test_runs_list_at_80_columns_hides_no_model_mode_or_knob():
    """Issue 59: `runs list` cut the model cell with an ellipsis at 80 columns
    ("tiny-qwen3-moe…"), hiding the model's name, its mode and every knob."""
    from rich.console import Console

    from infermeter.cli.render import runs_table

    rows = [
        {"id": f"{i:012x}", "created": "2026-11-29T02:18:00", "status": "finished",
         "model": model, "mode": mode, "knobs": knobs, "label": None, "samples": 2,
         "ttft_ms": 336.03, "tpot_ms": 10.87, "tokens_per_s": 10.9}
        for i, (model, mode, knobs) in enumerate([
            ("tiny-qwen3-moe", "deep", {"prompt_tokens": 2048, "new_tokens": 4}),
            ("HuggingFaceTB/SmolLM2-135M", "standard", {"top_k": 2}),
            ("tiny-llama", "minimal", {}),
        ])
    ]  # fmt: skip
    console = Console(width=80, record=True)
    console.print(runs_table(rows, width=80))
    shown = console.export_text()
    assert "…" not in shown and max(len(line) for line in shown.splitlines()) <= 80
    flat = " ".join(shown.split())
    for needle in ("tiny-qwen3-moe", "deep, prompt_tokens=2048", "new_tokens=4",
                   "standard, top_k=2", "tiny-llama (minimal)"):  # fmt: skip
        assert needle in flat, (needle, shown)
    assert "SmolLM2-135M" in shown.replace("\n", "").replace(" ", "")
