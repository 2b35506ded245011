"""Issue 35, item 10: inputs a user (or a hostile file) can give that used to crash, hang or be
taken silently: each is now one line naming the problem and the fix, before anything runs."""

from __future__ import annotations

import os
import tracemalloc

import pytest
from typer.testing import CliRunner

from infermeter.cli.app import app
from infermeter.errors import UserError
from infermeter.run.sweep_file import read_sweep_file
from tests.helpers import assert_one_line_error

runner = CliRunner()


def _sweep(tmp_path, name: str, text: str | bytes) -> list[str]:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return ["sweep", "--config", str(path), "--db", str(tmp_path / "r.db")]


def test_a_small_file_expanding_to_a_huge_grid_is_refused_at_once(tmp_path):
    """An 8 KB file expanding to 10^8 points ran out of memory after 49 s."""
    values = ", ".join(str(v) for v in range(1, 101))
    text = "model: tiny-llama\nknobs:\n" + "".join(
        f"  {k}: [{values}]\n" for k in ("prompt_tokens", "new_tokens", "batch_size", "top_k")
    )
    tracemalloc.start()
    try:
        r = runner.invoke(app, _sweep(tmp_path, "big.yaml", text))
        peak_bytes = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak_bytes < 64 * 2**20  # the grid was counted, never built (10^8 points: GBs)
    assert_one_line_error(r, "100,000,000 points", "at most 10,000")
    assert not (tmp_path / "r.db").exists()


def test_duplicate_keys_and_booleans_for_counts_are_refused(tmp_path):
    r = runner.invoke(app, _sweep(tmp_path, "dup.yaml", "samples: 3\nsamples: 5\n"))
    assert_one_line_error(r, "'samples' is given twice (line 2)")
    r = runner.invoke(app, _sweep(tmp_path, "bool.yaml", "samples: true\n"))
    assert_one_line_error(r, "samples")
    with pytest.raises(UserError, match="given twice"):
        read_sweep_file(tmp_path / "dup.yaml")


@pytest.mark.parametrize(
    ("name", "content", "needle"),
    [
        ("deep.yaml", "a: " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),
        ("deep.toml", "a = " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),
        ("latin1.yaml", b"name: caf\xe9\n", "not UTF-8"),
        ("long.yaml", "name: " + "x" * 300 + "\nknobs: {top_k: [1]}\n", "name"),
    ],
)
def test_malformed_files_are_one_line_errors(tmp_path, name, content, needle):
    r = runner.invoke(app, _sweep(tmp_path, name, content))
    assert_one_line_error(r, needle)


def test_a_fifo_is_not_a_missing_file(tmp_path):
    fifo = tmp_path / "sweep.yaml"
    os.mkfifo(fifo)
    r = runner.invoke(app, ["sweep", "--config", str(fifo), "--db", str(tmp_path / "r.db")])
    assert_one_line_error(r, "not a regular file")


def test_a_300_character_sweep_name_is_refused_on_every_database(tmp_path):
    """It worked on SQLite and failed on PostgreSQL (a 200-character column)."""
    r = runner.invoke(
        app,
        [
            "sweep",
            "-m",
            "tiny-llama",
            "--knob",
            "top_k=1",
            "--name",
            "n" * 300,
            "--db",
            str(tmp_path / "r.db"),
        ],
    )
    assert_one_line_error(r, "300 characters", "at most 200")


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["runs", "cleanup", "--max-age-days", "1e18"], "out of range"),
        (["runs", "cleanup", "--max-age-days", "nan"], "finite"),
        (["runs", "list", "--since", "99999999999d"], "too far back"),
        (["runs", "list", "--since", "99999999999m"], "too far back"),
    ],
)
def test_huge_ages_are_refused_not_overflowed(tmp_path, args, needle):
    from infermeter.store import Store

    db = str(tmp_path / "r.db")
    Store(db)
    r = runner.invoke(app, [*args, "--db", db])
    assert_one_line_error(r, needle)
